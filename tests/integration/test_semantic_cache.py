"""The semantic cache on real Postgres, Redis, an `embedq worker`, and FAISS.

The worker runs the `faulty` hashing encoder: the same text always gives the same vector
and different texts give unrelated ones (cosine near 0), so "found again" here means the
index, the table and the sync work; finding paraphrases is test_semantic_precision.py's job.
Every test runs against FAISS and against the exact in-memory fake.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedq.errors import InputTooLarge, InvalidInput, NotFound
from embedq.semantic import SemanticCache
from tests import support
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(params=["faiss", "exact"])
def index_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_cache(cluster: Cluster, tmp_path: Path, index_kind: str) -> Iterator[Any]:
    """Opens SemanticCache instances (processes-to-be) sharing the cluster's tables."""
    def make(**overrides: Any) -> SemanticCache:
        overrides.setdefault("data_dir", tmp_path)
        overrides.setdefault("semantic_index", index_kind)
        return SemanticCache(cluster.service(**overrides))

    with support.semantic_caches(make) as open_:
        yield open_


@pytest.fixture
def cache(open_cache: Any) -> SemanticCache:
    c: SemanticCache = open_cache()
    return c


def test_put_then_lookup_finds_the_entry(cache: SemanticCache, salt: str) -> None:
    ns = f"faq-{salt}"
    entry_id = cache.put(ns, "how do I open an account", {"answer": "Sign up"},
                         metadata={"lang": "en"})
    got = cache.lookup(ns, "how do I open an account")
    assert got.hit
    [match] = got.matches
    assert (match.id, match.payload, match.metadata) == (entry_id, {"answer": "Sign up"},
                                                         {"lang": "en"})
    assert match.score == pytest.approx(1.0, abs=1e-5)
    assert not cache.lookup(ns, "what is the weather on Mars").hit


def test_same_query_replaces_the_payload(cache: SemanticCache, salt: str) -> None:
    ns = f"faq-{salt}"
    first = cache.put(ns, "reset my password", "old")
    second = cache.put(ns, "reset my password", "new")
    assert first == second
    assert [m.payload for m in cache.lookup(ns, "reset my password", k=5).matches] == ["new"]


def test_threshold_override_and_exact_text(cache: SemanticCache, salt: str) -> None:
    ns = f"t-{salt}"
    cache.put(ns, "alpha question", 1)
    cache.put(ns, "beta question", 2)
    anything = cache.lookup(ns, "something else entirely", threshold=-1.0, k=5)
    assert anything.hit and {m.payload for m in anything.matches} == {1, 2}
    assert all(-1.0 <= m.score <= 1.0 for m in anything.matches)
    exact = cache.lookup(ns, "alpha question", threshold=1.0)
    assert exact.hit and exact.matches[0].score == 1.0 and exact.matches[0].payload == 1
    assert not cache.lookup(ns, "alpha question ", threshold=1.0).hit


def test_metadata_filter(cache: SemanticCache, salt: str) -> None:
    ns = f"f-{salt}"
    cache.put(ns, "same words", "en", metadata={"lang": "en"})
    cache.put(ns, "same words!", "fr", metadata={"lang": "fr"})
    got = cache.lookup(ns, "same words!", threshold=-1.0, k=5, filter={"lang": "en"})
    assert [m.payload for m in got.matches] == ["en"]


def test_delete_entry_and_namespace(cache: SemanticCache, salt: str) -> None:
    ns = f"d-{salt}"
    a = cache.put(ns, "first entry", "a")
    cache.put(ns, "second entry", "b")
    cache.delete(ns, a)
    assert not cache.lookup(ns, "first entry").hit
    assert cache.lookup(ns, "second entry").hit
    with pytest.raises(NotFound):
        cache.delete(ns, a)
    assert cache.drop(ns) == 1
    assert not cache.lookup(ns, "second entry").hit
    assert cache.stats(ns)["entries"] == 0


def test_namespaces_never_see_each_other(cache: SemanticCache, salt: str) -> None:
    cache.put(f"a-{salt}", "shared words", "from a")
    assert not cache.lookup(f"b-{salt}", "shared words", threshold=-1.0).hit
    cache.put(f"b-{salt}", "an entry of namespace b", "from b")
    got = cache.lookup(f"b-{salt}", "shared words", threshold=-1.0, k=10)
    assert [m.payload for m in got.matches] == ["from b"]


def test_a_model_change_never_mixes_spaces(open_cache: Any, salt: str) -> None:
    ns = f"m-{salt}"
    old = open_cache()
    new = open_cache(dimensions=128)  # another vector space, as a new model would be
    assert old.space != new.space
    old.put(ns, "which space am I in", "old")
    assert not new.lookup(ns, "which space am I in", threshold=-1.0).hit
    new.put(ns, "which space am I in", "new")
    assert [m.payload for m in new.lookup(ns, "which space am I in", k=5).matches] == ["new"]
    assert [m.payload for m in old.lookup(ns, "which space am I in", k=5).matches] == ["old"]


def test_repeated_lookup_costs_no_model_call(cache: SemanticCache, cluster: Cluster,
                                             salt: str) -> None:
    ns = f"r-{salt}"
    cache.put(ns, f"{salt} stored once", 1)
    for _ in range(3):
        cache.lookup(ns, f"{salt} asked often")
        cache.lookup(ns, f"{salt} stored once")
    passes = cluster.passes()
    for text in (f"{salt} stored once", f"{salt} asked often"):
        assert passes[hashlib.sha256(text.encode()).hexdigest()] == 1


def test_absolute_ttl_expires(cache: SemanticCache, salt: str) -> None:
    """Times count from the put's start and end, so a slow lookup on a busy machine does
    not move them (with ttl 1 s and fixed sleeps, the put and first lookup once took over
    0.4 s and the second check came after expiry)."""
    ns = f"ttl-{salt}"
    ttl_s = 3
    before_put = time.monotonic()
    cache.put(ns, "short lived", "x", ttl_s=ttl_s)
    after_put = time.monotonic()
    assert cache.lookup(ns, "short lived").hit
    _sleep_until(before_put + ttl_s / 2)
    assert cache.lookup(ns, "short lived").hit  # a hit does not extend an absolute ttl
    # Gone within a second of its ttl; a sliding ttl, extended by these very hits, would
    # not be.
    support.wait_until(lambda: not cache.lookup(ns, "short lived").hit,
                       after_put + ttl_s + 1.0 - time.monotonic(),
                       "the entry expired at its absolute ttl", interval_s=0.2)
    assert not cache.lookup(ns, "short lived", threshold=1.0).hit


def _sleep_until(moment: float) -> None:
    """For a check that time has passed (nothing else to wait on)."""
    time.sleep(max(0.0, moment - time.monotonic()))


def test_sliding_ttl_extends_on_hit(cache: SemanticCache, salt: str) -> None:
    ns = f"slide-{salt}"
    cache.put(ns, "kept warm", "x", ttl_s=2, sliding=True)
    for _ in range(3):  # 3 x 1.2 s: past the 2 s an absolute ttl would have allowed
        time.sleep(1.2)
        assert cache.lookup(ns, "kept warm").hit
    time.sleep(2.3)
    assert not cache.lookup(ns, "kept warm").hit


def test_expired_entries_are_swept_from_table_and_index(cache: SemanticCache, salt: str
                                                        ) -> None:
    ns = f"sweep-{salt}"
    cache.put(ns, "gone soon", "x", ttl_s=1)
    time.sleep(1.1)
    assert cache.store.sweep_expired() >= 1
    cache.sync.catch_up()
    assert cache.sync.describe(ns)["index_vectors"] == 0


def test_eviction_drops_least_recently_hit_first(open_cache: Any, salt: str) -> None:
    cache = open_cache(semantic_max_entries=3)
    ns = f"evict-{salt}"
    for text in ("one", "two", "three"):
        cache.put(ns, text, text)
    assert cache.lookup(ns, "one").hit  # "one" is now the most recently hit
    cache.put(ns, "four", "four")  # evicts "two": oldest, never hit
    assert not cache.lookup(ns, "two").hit
    cache.put(ns, "five", "five")  # evicts "three"
    assert [t for t in ("one", "two", "three", "four", "five")
            if cache.lookup(ns, t).hit] == ["one", "four", "five"]
    assert cache.stats(ns)["entries"] == 3


def test_bad_input_is_a_clear_error(open_cache: Any, salt: str) -> None:
    cache = open_cache(semantic_max_payload_bytes=1000)
    ns = f"bad-{salt}"
    with pytest.raises(InvalidInput, match="query is empty"):
        cache.put(ns, "", "x")
    with pytest.raises(InvalidInput, match="query is empty"):
        cache.lookup(ns, "   ")
    with pytest.raises(InvalidInput, match="query is int, not a string"):
        cache.put(ns, 5, "x")
    with pytest.raises(InputTooLarge, match="limit is 1000"):
        cache.put(ns, "big", "x" * 2000)
    for bad in (1.5, -1.01, float("nan")):
        with pytest.raises(InvalidInput, match=r"outside \[-1, 1\]"):
            cache.lookup(ns, "q", threshold=bad)
    with pytest.raises(InvalidInput, match="namespace"):
        cache.put("a/b", "q", "x")
    with pytest.raises(InvalidInput, match="ttl_s"):
        cache.put(ns, "q", "x", ttl_s=0)
    with pytest.raises(InvalidInput, match="k 0"):
        cache.lookup(ns, "q", k=0)
    assert not cache.lookup(f"never-{salt}", "unknown namespace is a miss").hit


def test_stats_count_hits_and_misses(cache: SemanticCache, salt: str) -> None:
    ns = f"s-{salt}"
    cache.put(ns, "counted", 1)
    cache.lookup(ns, "counted")
    cache.lookup(ns, "counted")
    cache.lookup(ns, "not there")
    stats = cache.stats(ns)
    assert (stats["entries"], stats["hits"], stats["misses"]) == (1, 2, 1)
    assert stats["index_kind"] in {"flat", "exact"}
    assert stats["last_sync"] is not None


def _answers(cache: SemanticCache, ns: str, queries: list[str]) -> list[list[tuple[int, float]]]:
    return [[(m.id, round(m.score, 4)) for m in cache.lookup(ns, q, threshold=-1.0, k=5).matches]
            for q in queries]


def test_restart_rebuilds_the_same_answers(open_cache: Any, tmp_path: Path, salt: str) -> None:
    ns = f"restart-{salt}"
    first = open_cache()
    ids = [first.put(ns, f"stored question {i} on topic {7 * i}", i) for i in range(30)]
    first.delete(ns, ids[3])
    queries = [f"stored question {i} on topic {7 * i}" for i in range(0, 30, 3)]
    queries += ["something else", "stored question 1 on topic 9"]
    before = _answers(first, ns, queries)
    first.close()  # writes the snapshot
    from_snapshot = open_cache()
    assert _answers(from_snapshot, ns, queries) == before
    assert from_snapshot.sync.describe(ns)["loaded_from"] == "snapshot"
    shutil.rmtree(tmp_path / "semantic")
    from_table = open_cache()
    assert _answers(from_table, ns, queries) == before
    assert from_table.sync.describe(ns)["loaded_from"] == "table"


def test_a_write_that_never_reached_an_index_is_not_lost(open_cache: Any, salt: str) -> None:
    """A process that wrote the table and died before touching its index loses nothing."""
    ns = f"crash-{salt}"
    writer = open_cache()
    reader = open_cache()
    vector = writer._vector("written then crashed")
    writer.store.put(  # the table write alone, as if the process died right after it
        namespace=ns, model=writer.model, space=writer.space, query="written then crashed",
        vector=vector.astype("<f4").tobytes(), payload="kept", metadata={}, ttl_s=None,
        sliding=False, max_entries=100, max_namespaces=1000,
    )
    deadline = time.monotonic() + 1.0
    while not reader.lookup(ns, "written then crashed").hit:
        assert time.monotonic() < deadline, "not found by another process within 1 s"
        time.sleep(0.05)
    restarted = open_cache()
    assert restarted.lookup(ns, "written then crashed").matches[0].payload == "kept"


def test_compaction_and_rebuilds_keep_answers(open_cache: Any, salt: str) -> None:
    cache = open_cache(semantic_flat_max=40, semantic_compact_deletes=8)
    ns = f"grow-{salt}"
    ids = {f"q{i}": cache.put(ns, f"q{i}", i) for i in range(90)}
    assert cache.lookup(ns, "q0").hit  # a namespace is held from its first lookup
    cache.sync.upkeep(wait=True)
    kind = cache.stats(ns)["index_kind"]
    assert kind == ("ivf" if cache.settings.semantic.index == "faiss" else "exact")
    assert all(cache.lookup(ns, t).matches[0].id == i for t, i in ids.items())
    for text in list(ids)[:80]:
        cache.delete(ns, ids.pop(text))
    cache.sync.upkeep(wait=True)
    stats = cache.stats(ns)
    assert stats["index_vectors"] == 10
    if cache.settings.semantic.index == "faiss":
        assert stats["index_kind"] == "flat"
    assert all(cache.lookup(ns, t).matches[0].id == i for t, i in ids.items())
    assert not cache.lookup(ns, "q5").hit


def test_a_snapshot_from_another_database_is_not_used(
    redis_url: str, tmp_path: Path
) -> None:
    """A data dir shared by two databases (same model space) must not leak one's index
    into the other: the snapshot's last-change marker does not match, so it reloads."""
    from embedq.config import Settings
    from embedq.deployment import Deployment

    support.check_postgres()
    with support.temporary_database() as first_url, support.temporary_database() as second_url:
        def cache_on(url: str) -> SemanticCache:
            settings = Settings.from_env({
                "EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp_path),
                "EMBEDQ_DATABASE_URL": url})
            # Embedded (no broker): the deployment starts the worker its service needs.
            return SemanticCache(Deployment.from_settings(settings).service)

        first = cache_on(first_url)
        for i in range(5):
            first.put("shared", f"first database question {i}", {"n": i})
        assert first.lookup("shared", "first database question 0").hit  # held: saved
        first.close(save=True)
        second = cache_on(second_url)
        entry = second.put("shared", "a question stored in the second database", {"ok": 1})
        hit = second.lookup("shared", "a question stored in the second database")
        loaded_from = second.sync.describe("shared")["loaded_from"]
        second.close(save=False)
    assert hit.hit and hit.matches[0].id == entry
    assert loaded_from == "table"
