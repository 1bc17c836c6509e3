"""The labelled pairs `embedq bench threshold` tunes on and the held-out ones it reports."""

from __future__ import annotations

from embedq.bench.threshold import BLIND, BLIND2, FRESH, HELDOUT, TUNE, Pair, load_pairs


def _texts(pairs: list[Pair]) -> set[str]:
    return {t.casefold() for p in pairs for t in (p.stored, p.query)}


def test_the_splits_share_no_text() -> None:
    tune, heldout, fresh, blind, blind2 = (_texts(load_pairs(p)) for p in (
        TUNE, HELDOUT, FRESH, BLIND, BLIND2))
    assert tune & heldout == set()
    assert fresh & (tune | heldout) == set()
    assert blind & (tune | heldout | fresh) == set()
    assert blind2 & (tune | heldout | fresh | blind) == set()


def test_each_split_is_big_balanced_and_has_no_duplicate_pair() -> None:
    for path in (TUNE, HELDOUT, FRESH, BLIND, BLIND2):
        pairs = load_pairs(path)
        paraphrases = sum(p.label == "paraphrase" for p in pairs)
        near_misses = sum(p.label == "near_miss" for p in pairs)
        assert paraphrases + near_misses == len(pairs) >= 80, path.name
        assert abs(paraphrases - near_misses) <= len(pairs) // 10, path.name
        assert len({(p.stored, p.query) for p in pairs}) == len(pairs), path.name
        assert all(p.stored != p.query for p in pairs), path.name


def test_in_each_split_a_paraphrase_stored_query_is_unique() -> None:
    # test_semantic_precision stores every paraphrase in one namespace: a hit names its pair
    for path in (TUNE, HELDOUT, FRESH, BLIND, BLIND2):
        stored = [p.stored for p in load_pairs(path) if p.label == "paraphrase"]
        assert len(set(stored)) == len(stored), path.name
