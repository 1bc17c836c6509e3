"""`embedq bench threshold --lodo`'s path with the REAL default model, on a small subset of
tests/data/semantic_pairs.domains.jsonl (three domains, a few stored queries each): each
domain is scored at the threshold the bench's rule picks on the other domains alone, and
the figures add up to the decisions `is_hit` makes (the cache's own test, see
test_semantic_precision.py)."""

from __future__ import annotations

from typing import Any

import pytest

from embedq.bench.crowded import crowded
from embedq.bench.lodo import choose_on, lodo_report
from embedq.bench.threshold import (
    BLIND,
    DOMAINS,
    FRESH,
    GRID,
    _mode,
    is_hit,
    load_pairs,
    score_pairs,
)
from embedq.semantic.verify import Verifier

pytestmark = [pytest.mark.integration, pytest.mark.model]

SUBSET = ("kubernetes_docker", "pets", "tenancy_law")


@pytest.fixture(scope="module")
def subset() -> list[Any]:
    pairs = [p for p in load_pairs(DOMAINS) if p.domain in SUBSET]
    stored = sorted({p.stored for p in pairs})
    keep = {s for d in SUBSET for s in sorted({p.stored for p in pairs if p.domain == d})[:4]}
    assert len(stored) > len(keep)
    return [p for p in pairs if p.stored in keep]


def test_each_domain_is_scored_at_the_threshold_chosen_without_it(
        model_client: Any, subset: list[Any]) -> None:
    fresh = load_pairs(FRESH)[:10]
    known = model_client.semantic.verifier.known
    report = lodo_report(subset, {"fresh": fresh}, model_client.embed,
                         default=model_client.semantic.settings.semantic.threshold,
                         known=known)
    scored = score_pairs(subset, model_client.embed, Verifier(model_client.embed,
                                                              known=known))
    assert [row["domain"] for row in report["per_domain"]] == sorted(SUBSET)
    found = served = 0
    for row in report["per_domain"]:
        others = [s for s in scored if s.pair.domain != row["domain"]]
        assert (row["threshold"], row["safe"]) == choose_on(others)
        assert row["threshold"] in GRID
        inside = [s for s in scored if s.pair.domain == row["domain"]]
        hits = [s for s in inside if is_hit(s, row["threshold"], *_mode("verifier_on"))]
        assert row["found"]["k"] == sum(s.pair.label == "paraphrase" for s in hits)
        assert row["served"]["k"] == sum(s.pair.label == "near_miss" for s in hits)
        found += row["found"]["k"]
        served += row["served"]["k"]
    lodo = report["lodo"]
    assert (lodo["paraphrases_found"]["k"], lodo["near_misses_served"]["k"]) == (found,
                                                                                 served)
    assert sum(r["n"] for r in lodo["by_style"].values()) == lodo["paraphrases_found"]["n"]
    assert sum(r["n"] for r in lodo["by_kind"].values()) == lodo["near_misses_served"]["n"]
    for row in (*lodo["by_style"].values(), *lodo["by_kind"].values()):
        assert row["low"] <= row["rate"] <= row["high"]
    assert report["heldout_at_default"]["fresh"]["paraphrases_found"]["n"] == sum(
        p.label == "paraphrase" for p in fresh)
    # the other splits also at the threshold the rule picks on every domain
    assert report["chosen"] == choose_on(scored)[0]
    fresh_scored = score_pairs(fresh, model_client.embed, Verifier(model_client.embed,
                                                                   known=known))
    assert report["heldout_at_chosen"]["fresh"]["paraphrases_found"]["k"] == sum(
        s.pair.label == "paraphrase" and is_hit(s, report["chosen"], *_mode("verifier_on"))
        for s in fresh_scored)


def test_lodo_needs_pairs_that_name_their_domain(model_client: Any) -> None:
    from embedq.errors import InvalidInput

    with pytest.raises(InvalidInput, match="domain"):
        lodo_report(load_pairs(FRESH)[:4], {}, model_client.embed, default=0.62)


def test_one_namespace_figures_are_what_the_cache_returns(model_client: Any) -> None:
    # every stored query of a domain in one namespace of the real cache, every query
    # looked up: crowded() must sort each answer as the cache gives it
    pairs = load_pairs(BLIND)
    threshold = model_client.semantic.settings.semantic.threshold
    for p in pairs:
        model_client.cache_put(f"crowded-{p.domain}", p.stored, p.stored)
    label = {(p.query, p.stored): p.label for p in pairs}
    counts = {"true_hits": 0, "near_misses_served": 0, "other_entry_hits": 0, "misses": 0}
    others = []
    for domain, query in sorted({(p.domain, p.query) for p in pairs}):
        got = model_client.cache_lookup(f"crowded-{domain}", query)
        entry = got.matches[0].query if got.hit else None
        kind = ("misses" if entry is None else "true_hits" if label.get(
            (query, entry)) == "paraphrase" else "near_misses_served" if label.get(
            (query, entry)) == "near_miss" else "other_entry_hits")
        counts[kind] += 1
        if kind == "other_entry_hits":
            others.append((query, entry))
    verifier = Verifier(model_client.embed, known=model_client.semantic.verifier.known)
    row = crowded(pairs, model_client.embed, verifier, (threshold,))[f"{threshold:.2f}"]
    assert {k: row[k] for k in counts} == counts
    assert sorted((o["query"], o["entry"]) for o in row["other_entries"]) == sorted(others)
    assert row["queries"] == sum(counts.values())


def test_the_word_bar_is_chosen_per_domain_without_it(model_client: Any,
                                                      subset: list[Any]) -> None:
    from embedq.bench.word_bar import BARS, word_bar_report

    known = model_client.semantic.verifier.known
    fresh = load_pairs(FRESH)[:10]
    report = word_bar_report(subset, {"fresh": fresh}, model_client.embed, 0.67, known)
    scored = {bar: score_pairs(subset, model_client.embed, Verifier(
        model_client.embed, known=known, min_word_similarity=bar)) for bar in BARS}
    found = 0
    for domain, bar in report["chosen_per_domain"].items():
        assert bar in BARS
        # no other bar finds more on the other domains at its own safe threshold
        def on_others(b: float, domain: str = domain) -> int:
            others = [s for s in scored[b] if s.pair.domain != domain]
            threshold, safe = choose_on(others)
            return sum(s.pair.label == "paraphrase" and is_hit(
                s, threshold, *_mode("verifier_on")) for s in others) if safe else -1
        assert on_others(bar) == max(on_others(b) for b in BARS)
        threshold = choose_on([s for s in scored[bar] if s.pair.domain != domain])[0]
        found += sum(s.pair.label == "paraphrase" and is_hit(
            s, threshold, *_mode("verifier_on")) for s in scored[bar] if s.pair.domain == domain)
    assert report["lodo"]["paraphrases_found"]["k"] == found
    fixed = report["per_bar"][report["fixed"]]
    assert fixed["threshold"] == choose_on(scored[report["fixed"]])[0]
    assert fixed["splits"]["fresh"]["paraphrases_found"]["n"] == sum(
        p.label == "paraphrase" for p in fresh)
