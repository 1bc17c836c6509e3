"""Precision of the default threshold with the REAL default model (all-MiniLM-L6-v2).

tests/data/semantic_pairs.jsonl holds labelled pairs: paraphrases that must hit, and
near-misses (the same frame, another subject or the opposite action) that must not. The
model is loaded once per session, by an `embedq worker` started with
EMBEDQ_ENCODER=sentence-transformers on queues of its own (beside the session's hashing
worker), on the session's Redis and Postgres. Measured figures are in README (semantic cache).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.cache.semantic import SemanticCache
from embedq.service import EmbeddingService
from tests import support

pytestmark = [pytest.mark.integration, pytest.mark.model]

PAIRS = Path(__file__).resolve().parents[1] / "data" / "semantic_pairs.jsonl"


def _pairs() -> list[dict[str, str]]:
    return [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def real_cache(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[SemanticCache]:
    tmp = tmp_path_factory.mktemp("semantic-real")
    env = support.cluster_env(redis_url, pg_url, encoder="sentence-transformers",
                              online_queue="semantic-real-online",
                              bulk_queue="semantic-real-bulk")
    worker = support.WorkerProcess(env, tmp / "worker.log").start(timeout_s=300)
    service = EmbeddingService(support.settings_from(env).with_overrides(data_dir=tmp))
    cache = SemanticCache(service)
    try:
        yield cache
    finally:
        cache.close(save=False)
        service.close()
        worker.stop()


def test_the_labelled_set_is_big_enough() -> None:
    pairs = _pairs()
    labels = [p["label"] for p in pairs]
    assert len(pairs) >= 60
    assert set(labels) == {"paraphrase", "near_miss"}
    assert min(labels.count("paraphrase"), labels.count("near_miss")) >= 30


def test_default_threshold_has_no_false_hits_and_finds_paraphrases(
    real_cache: SemanticCache, salt: str
) -> None:
    pairs = _pairs()
    outcomes: dict[str, list[bool]] = {"paraphrase": [], "near_miss": []}
    false_hits = []
    for i, pair in enumerate(pairs):
        ns = f"pairs-{salt}-{i}"  # one namespace per pair: a hit can only be its partner
        real_cache.put(ns, pair["stored"], {"pair": i})
        got = real_cache.lookup(ns, pair["query"])
        outcomes[pair["label"]].append(got.hit)
        if got.hit and pair["label"] == "near_miss":
            false_hits.append((pair, got.matches[0].score))
        if got.hit:
            assert got.matches[0].payload == {"pair": i}
    assert false_hits == []
    recall = sum(outcomes["paraphrase"]) / len(outcomes["paraphrase"])
    assert recall >= 0.8, f"paraphrase recall {recall:.2f} at the default threshold"


def test_in_one_namespace_a_paraphrase_hits_its_own_entry(
    real_cache: SemanticCache, salt: str
) -> None:
    pairs = [p for p in _pairs() if p["label"] == "paraphrase"]
    ns = f"faq-{salt}"
    ids = {p["stored"]: real_cache.put(ns, p["stored"], p["stored"]) for p in pairs}
    hits = 0
    for pair in pairs:
        got = real_cache.lookup(ns, pair["query"])
        if got.hit:
            hits += 1
            assert got.matches[0].id == ids[pair["stored"]], pair
    assert hits / len(pairs) >= 0.8


def test_exact_threshold_and_repeats_with_the_real_model(real_cache: SemanticCache,
                                                         salt: str) -> None:
    ns = f"exact-{salt}"
    real_cache.put(ns, "how do I open an account", "sign up")
    assert real_cache.lookup(ns, "how do I open an account", threshold=1.0).hit
    assert not real_cache.lookup(ns, "how to create an account", threshold=1.0).hit
    assert real_cache.lookup(ns, "how to create an account").hit
    before = real_cache.service.stats().get("submitted", 0)
    real_cache.lookup(ns, "how to create an account")
    assert real_cache.service.stats().get("submitted", 0) == before  # no model call
