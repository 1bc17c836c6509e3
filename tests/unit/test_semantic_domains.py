"""The leave-one-domain-out corpus (tests/data/semantic_pairs.domains.jsonl): written for
measuring how the semantic cache's decision generalizes to domains nothing was tuned on,
so each domain must hold every paraphrase style and every near-miss kind it is scored on."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from embedq.bench.threshold import (
    BLIND,
    BLIND2,
    DOMAINS,
    FRESH,
    HELDOUT,
    KINDS,
    STYLES,
    TUNE,
    Pair,
    load_pairs,
)
from embedq.errors import BadInputFile

# The near-miss kinds each domain must hold (the older splits' kinds stay valid elsewhere).
DOMAIN_KINDS = ("swap", "scope", "tense", "qualifier", "attribute", "quantity", "antonym",
                "entity", "number", "negation", "date", "unit", "amount", "conditional")


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    return load_pairs(DOMAINS)


def test_the_corpus_is_big_and_spread_over_many_domains(pairs: list[Pair]) -> None:
    assert len(pairs) >= 1000
    by_domain = Counter(p.domain for p in pairs)
    assert len(by_domain) >= 20 and "" not in by_domain
    paraphrases = sum(p.label == "paraphrase" for p in pairs)
    assert abs(paraphrases - (len(pairs) - paraphrases)) <= len(pairs) // 10
    assert set(DOMAIN_KINDS) <= set(KINDS)


def test_every_domain_holds_each_style_and_each_kind(pairs: list[Pair]) -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        seen[p.domain].add(p.style if p.label == "paraphrase" else p.kind)
    for domain, got in seen.items():
        missing = set(STYLES) | set(DOMAIN_KINDS)
        assert missing - got == set(), domain


def test_every_paraphrase_names_its_style(pairs: list[Pair]) -> None:
    assert all((p.style in STYLES) == (p.label == "paraphrase") for p in pairs)


def test_each_stored_query_has_a_paraphrase_and_a_near_miss(pairs: list[Pair]) -> None:
    labels: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        labels[p.stored].add(p.label)
    assert all(got == {"paraphrase", "near_miss"} for got in labels.values())


def test_no_duplicate_pair_and_no_text_shared_with_the_other_splits(
        pairs: list[Pair]) -> None:
    assert len({(p.stored, p.query) for p in pairs}) == len(pairs)
    assert all(p.stored != p.query for p in pairs)
    texts = {t.casefold() for p in pairs for t in (p.stored, p.query)}
    for split in (TUNE, HELDOUT, FRESH, BLIND, BLIND2):
        other = {t.casefold() for p in load_pairs(split) for t in (p.stored, p.query)}
        assert texts & other == set(), split.name


def test_a_style_on_a_near_miss_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"stored": "a b", "query": "a c", "label": "near_miss", '
                    '"kind": "entity", "style": "typo"}\n', encoding="utf-8")
    with pytest.raises(BadInputFile, match="only a paraphrase has one"):
        load_pairs(path)
