"""The semantic cache past one process's memory, on real Postgres, Redis and a worker:
namespaces held from their first lookup within EMBEDQ_SEMANTIC_MEMORY_MB, dropped least
recently used first and reloaded with the writes made meanwhile; two tenants writing at
once under per-namespace locks while a follower misses and reorders nothing; hot
namespaces and the replica's figures in stats, the CLI and /metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import select

from embedq.models import SemanticChange, SemanticEntry
from embedq.semantic import SemanticCache
from embedq.semantic.changes import Change
from embedq.semantic.store import TenantCaps, query_digest, utcnow
from tests import support
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration


@pytest.fixture
def open_cache(cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    def make(**overrides: Any) -> SemanticCache:
        overrides.setdefault("data_dir", tmp_path)
        return SemanticCache(cluster.service(**overrides))

    with support.semantic_caches(make) as open_:
        yield open_


def _fill(cache: SemanticCache, namespace: str, texts: list[str]) -> list[int]:
    """Entries for `texts`, embedded in one batch and written in one transaction (with
    their changes, as the store writes them) under the namespace's locks."""
    vectors = cache.service.embed(texts).vectors()
    now = utcnow()
    with cache.store.writing(namespace) as s:
        cache.store.ensure_namespace(s, namespace, 10_000)
        rows = [SemanticEntry(
            namespace=namespace, model=cache.model, space=cache.space, query=text,
            query_sha256=query_digest(text), payload=i, meta={}, created_at=now,
            vector=np.ascontiguousarray(vector, dtype="<f4").tobytes(), expires_at=None,
            ttl_s=None, sliding=False, hit_count=0, last_hit_at=None)
            for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))]
        s.add_all(rows)
        s.flush()
        s.add_all(SemanticChange(entry_id=row.id, namespace=namespace, space=cache.space,
                                 op="put") for row in rows)
        return [row.id for row in rows]


def test_past_the_budget_namespaces_are_dropped_and_reload_with_writes_made_meanwhile(
        open_cache: Any, salt: str) -> None:
    writer = open_cache()
    reader = open_cache(semantic_memory_mb=1)  # about 4 namespaces of 150 at 384 dims
    names = [f"mem{i}-{salt}" for i in range(6)]
    for ns in names:
        _fill(writer, ns, [f"{ns} question {i}" for i in range(150)])
    for ns in names:
        assert reader.lookup(ns, f"{ns} question 7").matches[0].payload == 7
    held = reader.sync.memory()
    assert held["loads"] == 6 and held["evictions"] >= 2
    assert held["namespaces"] == 6 - held["evictions"]
    assert held["bytes"] <= held["budget_bytes"] == 1024 * 1024
    assert reader.sync.residency.held()[-1] == names[-1]
    assert names[0] not in reader.sync.residency  # the least recently used went first
    assert writer.sync.memory()["namespaces"] == 0  # puts alone hold nothing

    # Written while the reader does not hold names[0]: seen once it is loaded again.
    added = writer.put(names[0], f"{names[0]} added while evicted", "new")
    writer.delete(names[0], _fill(writer, names[0], [f"{names[0]} deleted"])[0])
    assert reader.lookup(names[0], f"{names[0]} added while evicted").matches[0].id == added
    assert not reader.lookup(names[0], f"{names[0]} deleted", threshold=0.99).hit
    assert reader.sync.describe(names[0])["loaded_from"] == "snapshot"  # saved when dropped
    for ns in names:  # every namespace right after however many reloads
        assert reader.lookup(ns, f"{ns} question 42").matches[0].payload == 42
    assert reader.sync.memory()["loads"] > 7

    # Threads looking up in turn across namespaces that do not fit: loads run outside
    # the lock, evict each other, and every answer is still right.
    wrong: list[tuple[str, int, Any]] = []

    def ask(offset: int) -> None:
        for i in range(12):
            ns, n = names[(i + offset) % len(names)], 3 * i + offset
            got = reader.lookup(ns, f"{ns} question {n}").matches
            if not got or got[0].payload != n:
                wrong.append((ns, n, got))

    threads = [threading.Thread(target=ask, args=(offset,)) for offset in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    assert reader.sync.memory()["bytes"] <= 1024 * 1024


def test_a_process_holding_no_namespace_reads_nothing(open_cache: Any, salt: str) -> None:
    from sqlalchemy import event

    idle = open_cache(semantic_sync_interval_s=0.01)
    statements: list[str] = []
    engine = idle.store.db.engine

    def seen(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert idle.sync.catch_up() == 0
        threading.Event().wait(0.3)  # 30 sync intervals
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # The expiry sweep still runs at its interval; the change log is not followed.
    following = [s for s in statements if "max(semantic_changes.seq)" in s
                 or "pg_advisory" in s]
    assert statements and not following, statements


def test_two_tenants_write_at_once_and_a_follower_misses_nothing(
        open_cache: Any, salt: str) -> None:
    """Each tenant's writer holds its own namespace's lock; a follower reading the log
    under the shared locks while they write sees every change of both, in `seq` order,
    once, and its index ends with exactly the entries the table has."""
    writer = open_cache()
    follower = open_cache(semantic_sync_interval_s=0.01)
    names = {f"ta-{salt}": f"a-{salt}", f"tb-{salt}": f"b-{salt}"}
    dim = writer.service.spec().dimensions or 384
    for tenant, ns in names.items():  # created (under the global lock) before the race
        writer.store.put(namespace=ns, model=writer.model, space=writer.space, query="seed",
                         vector=np.ones(dim, dtype="<f4").tobytes(), payload=0, metadata={},
                         ttl_s=None, sliding=False, max_entries=40, max_namespaces=10_000,
                         tenant=tenant)
        follower.sync.hold(ns)
    rng = np.random.default_rng(7)
    done = threading.Event()
    read: list[Change] = []
    errors: list[BaseException] = []

    def write(tenant: str, ns: str) -> None:
        try:
            for i in range(60):  # past max_entries 40: evictions log deletes too
                writer.store.put(
                    namespace=ns, model=writer.model, space=writer.space, query=f"q{i}",
                    vector=rng.standard_normal(dim).astype("<f4").tobytes(), payload=i,
                    metadata={}, ttl_s=None, sliding=False, max_entries=40,
                    max_namespaces=10_000, tenant=tenant, caps=TenantCaps(10, 10_000))
        except BaseException as exc:
            errors.append(exc)

    def follow() -> None:
        watermark = 0
        while True:
            last = done.is_set()
            watermark, changes = writer.store.follow(sorted(names.values()), watermark)
            read.extend(changes)
            if last:
                return

    threads = [threading.Thread(target=write, args=item) for item in names.items()]
    reader = threading.Thread(target=follow)
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert not errors, errors
    with writer.store.db.session() as s:
        logged = s.execute(select(SemanticChange.seq, SemanticChange.namespace).where(
            SemanticChange.namespace.in_(names.values())).order_by(SemanticChange.seq)).all()
    assert [(c.seq, c.namespace) for c in read] == [tuple(row) for row in logged]
    assert len(logged) == 2 * (61 + 21)  # each: 61 puts, 21 evictions
    follower.sync.catch_up()
    for ns in names.values():
        with writer.store.db.session() as s:
            ids = set(s.scalars(select(SemanticEntry.id)
                                .where(SemanticEntry.namespace == ns)).all())
        index = follower.sync.indexes[ns]
        assert len(index) == len(ids) == 40
        assert set(index.contents()[0].tolist()) == ids


def test_hot_namespaces_and_the_replica_in_stats_cli_and_metrics(
        cluster: Cluster, open_cache: Any, tmp_path: Path, salt: str) -> None:
    hot_ns, cold_ns = f"hot-{salt}", f"cold-{salt}"
    env = dict(cluster.env, EMBEDQ_SEMANTIC_HOT_LOOKUPS_PER_S="0.5",
               EMBEDQ_DATA_DIR=str(tmp_path))
    cache = open_cache(semantic_hot_lookups_per_s=0.5)
    cache.put(hot_ns, "the hot question", "hot")
    cache.put(cold_ns, "the cold question", "cold")
    for _ in range(12):  # 12 lookups over the 10 s a young process counts: 1.2 a second
        assert cache.lookup(hot_ns, "the hot question").hit
    assert cache.lookup(cold_ns, "the cold question").hit
    cache.service.stats()  # flushes: the process publishes its hot keys
    stats = cache.stats(hot_ns)
    assert stats["hot"] is True and stats["lookups_per_s"] >= 1.0
    assert cache.stats(cold_ns)["hot"] is False
    assert stats["replica"]["namespaces"] == 2 and stats["replica"]["entries"] == 2

    done = subprocess.run([sys.executable, "-m", "embedq.cli", "cache", "stats", hot_ns],
                          env=env, capture_output=True, text=True, cwd=support.ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["hot"] is True and out["replica"]["namespaces"] == 0  # the CLI held none
    text_out = subprocess.run([sys.executable, "-m", "embedq.cli", "stats"], env=env,
                              capture_output=True, text=True, timeout=60)
    assert "hot namespaces" in text_out.stdout and hot_ns in text_out.stdout

    with ApiServer(env, tmp_path / "api.log") as api:
        got = httpx.post(f"{api.url}/v1/semantic-cache/{cold_ns}/lookup",
                         json={"query": "the cold question"}, timeout=60)
        assert got.status_code == 200 and got.json()["hit"], got.text
        lines = httpx.get(api.url + "/metrics", timeout=30).text.splitlines()
        replica = httpx.get(f"{api.url}/v1/semantic-cache/{cold_ns}/stats", timeout=30)
    values = {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in lines
              if ln and not ln.startswith("#")}
    assert values["embedq_semantic_replica_namespaces"] == 1
    assert values["embedq_semantic_replica_entries"] == 1
    assert values["embedq_semantic_replica_bytes"] > 0
    assert values["embedq_semantic_replica_budget_bytes"] == 1024 * 1024 * 1024
    assert values["embedq_semantic_replica_loads_total"] == 1
    hot = f'embedq_semantic_hot_namespace_lookups_per_second{{namespace="{hot_ns}"}}'
    assert values[hot] >= 1.0
    assert not any(cold_ns in key for key in values if "hot_namespace" in key)
    assert replica.json()["replica"]["namespaces"] == 1
