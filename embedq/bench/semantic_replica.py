"""`embedq bench semantic --writers N | --replica N`: the semantic cache's tables and the
replicas that follow them, on the database EMBEDQ_DATABASE_URL names.

--writers N   N puts per tenant (synthetic 384-dimension vectors, no model), one tenant
              writing and then two at once, each in its own namespace, under the global
              lock alone (every write, the scheme before per-namespace locks) and under
              the per-namespace locks, alternating for 3 rounds: puts/s, and the ratio of
              two tenants to one for each scheme (Postgres only: SQLite has one writer).
--replica N   one namespace of N entries, loaded by a replica (`IndexSync.hold`) from the
              table and then from its snapshot: seconds of each, and the bytes a held
              entry counts against EMBEDQ_SEMANTIC_MEMORY_MB.
The namespaces it writes are dropped at the end; the tables stay as they were.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert, literal, select

from embedq.bench.semantic import DIMENSION, synthetic
from embedq.config import Settings
from embedq.errors import ConfigError
from embedq.models import Database, SemanticChange, SemanticEntry
from embedq.models.migrate import upgrade
from embedq.semantic.index import IndexConfig
from embedq.semantic.store import SemanticStore, TenantCaps, query_digest, utcnow
from embedq.semantic.sync import IndexSync, SyncConfig

ROUNDS = 3
SPACE = "bench-semantic-replica"  # a space no model has: nothing mixes with real entries
CAPS = TenantCaps(namespaces=1000, entries=1_000_000)


def _database(settings: Settings, what: str, postgres: bool) -> Database:
    if postgres and not settings.resolved_database_url.startswith("postgresql"):
        raise ConfigError(f"bench semantic {what} measures Postgres's locks: set "
                          "EMBEDQ_DATABASE_URL=postgresql://... (SQLite has one writer)")
    upgrade(settings.resolved_database_url)
    return Database.from_settings(settings)


def _puts(store: SemanticStore, tenants: int, puts: int, tag: str) -> float:
    """Puts per second of `tenants` threads writing `puts` each, one namespace each."""
    rng = np.random.default_rng(len(tag))
    vectors = [rng.standard_normal(DIMENSION).astype("<f4").tobytes() for _ in range(puts)]
    names = [(f"bench-t{t}-{tag}", f"bench-w{t}-{tag}") for t in range(tenants)]

    def put(tenant: str, namespace: str, i: int) -> None:
        store.put(namespace=namespace, model="bench", space=SPACE, query=f"q{i}",
                  vector=vectors[i], payload=i, metadata={}, ttl_s=None, sliding=False,
                  max_entries=100_000, max_namespaces=100_000, tenant=tenant, caps=CAPS)

    for tenant, namespace in names:  # created before the clock starts
        put(tenant, namespace, 0)
    errors: list[BaseException] = []

    def write(tenant: str, namespace: str) -> None:
        try:
            for i in range(1, puts):
                put(tenant, namespace, i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=name) for name in names]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    for _, namespace in names:
        store.drop_namespace(namespace)
    if errors:
        raise errors[0]
    return tenants * (puts - 1) / elapsed


def bench_writers(settings: Settings, puts: int) -> dict[str, Any]:
    db = _database(settings, "--writers", postgres=True)
    run = uuid.uuid4().hex[:8]
    rates: dict[str, dict[int, list[float]]] = {"global": {1: [], 2: []},
                                                "scoped": {1: [], 2: []}}
    for r in range(ROUNDS):
        for scheme in ("global", "scoped") if r % 2 == 0 else ("scoped", "global"):
            store = SemanticStore(db, scoped_locks=scheme == "scoped")
            for tenants in (1, 2):
                rates[scheme][tenants].append(_puts(store, tenants, puts,
                                                    f"{run}-{r}-{scheme}-{tenants}"))
    db.dispose()
    out: dict[str, Any] = {"puts_per_tenant": puts, "rounds": ROUNDS}
    for scheme, by in rates.items():
        one, two = statistics.median(by[1]), statistics.median(by[2])
        out[scheme] = {"one_tenant_puts_per_s": round(one, 1),
                       "two_tenants_puts_per_s": round(two, 1),
                       "two_to_one": round(two / one, 3)}
    out["scoped_to_global_two_tenants"] = round(
        out["scoped"]["two_tenants_puts_per_s"] / out["global"]["two_tenants_puts_per_s"], 3)
    return out


def _fill(store: SemanticStore, namespace: str, vectors: np.ndarray) -> None:
    """The namespace's entries and their changes, in batches of one transaction each."""
    now = utcnow()
    with store.writing(namespace) as s:
        store.ensure_namespace(s, namespace, 100_000)
    for start in range(0, len(vectors), 5000):
        with store.writing(namespace) as s:
            s.execute(insert(SemanticEntry), [
                {"namespace": namespace, "model": "bench", "space": SPACE,
                 "query": f"q{i}", "query_sha256": query_digest(f"q{i}"),
                 "vector": vectors[i].astype("<f4").tobytes(), "payload": i, "meta": {},
                 "created_at": now, "expires_at": None, "ttl_s": None, "sliding": False,
                 "hit_count": 0, "last_hit_at": None}
                for i in range(start, min(start + 5000, len(vectors)))])
    with store.writing(namespace) as s:
        s.execute(insert(SemanticChange).from_select(
            ["entry_id", "namespace", "space", "op"],
            select(SemanticEntry.id, SemanticEntry.namespace, SemanticEntry.space,
                   literal("put")).where(SemanticEntry.namespace == namespace)
            .order_by(SemanticEntry.id)))


def bench_replica(settings: Settings, entries: int) -> dict[str, Any]:
    db = _database(settings, "--replica", postgres=False)
    store = SemanticStore(db)
    namespace = f"bench-replica-{uuid.uuid4().hex[:8]}"
    s = settings.semantic
    config = IndexConfig(kind=s.index, flat_max=s.flat_max, ivf_list_size=s.ivf_list_size,
                         nprobe=s.nprobe, use_gpu=s.gpu)
    started = time.perf_counter()
    _fill(store, namespace, synthetic(entries))
    fill_s = time.perf_counter() - started
    try:
        with tempfile.TemporaryDirectory() as tmp:
            loads: dict[str, float] = {}
            held: dict[str, Any] = {}
            kind = ""
            for source in ("table", "snapshot"):
                sync = IndexSync(store, SPACE, Path(tmp), config,
                                 SyncConfig(memory_mb=s.memory_mb))
                started = time.perf_counter()
                sync.hold(namespace)
                loads[source] = time.perf_counter() - started
                assert sync.describe(namespace)["loaded_from"] == source
                held = sync.memory()
                kind = str(sync.describe(namespace)["index_kind"])
                sync.close(save=True)
    finally:
        store.drop_namespace(namespace)
        db.dispose()
    return {"entries": entries, "dialect": db.dialect, "fill_s": round(fill_s, 2),
            "load_table_s": round(loads["table"], 3),
            "load_snapshot_s": round(loads["snapshot"], 3),
            "table_to_snapshot": round(loads["table"] / max(loads["snapshot"], 1e-9), 1),
            "index_kind": kind,
            "held_bytes": held["bytes"],
            "bytes_per_entry": round(held["bytes"] / entries, 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.writers < 0 or args.replica < 0 or args.writers == 1:
        raise ConfigError("--writers takes the puts each tenant makes (at least 2), "
                          "--replica the entries of the namespace loaded (at least 1)")
    settings = Settings.from_env()
    report: dict[str, Any] = {}
    if args.writers:
        w = report["writers"] = bench_writers(settings, args.writers)
        print(f"bench semantic --writers {args.writers}: puts/s, median of {w['rounds']} "
              f"rounds ({settings.resolved_database_url.split(':')[0]})")
        print("  locks                one tenant  two tenants at once  two / one")
        for scheme, label in (("global", "global (before)"), ("scoped", "per namespace")):
            row = w[scheme]
            print(f"  {label:<18} {row['one_tenant_puts_per_s']:>11} "
                  f"{row['two_tenants_puts_per_s']:>20} {row['two_to_one']:>10}")
        print(f"  two tenants, per-namespace locks / global lock: "
              f"{w['scoped_to_global_two_tenants']}")
    if args.replica:
        r = report["replica"] = bench_replica(settings, args.replica)
        print(f"bench semantic --replica {args.replica} ({r['dialect']}): one namespace, "
              f"{r['index_kind']} index; load from the table {r['load_table_s']} s, from "
              f"its snapshot {r['load_snapshot_s']} s ({r['table_to_snapshot']}x); held "
              f"{r['held_bytes']} bytes, {r['bytes_per_entry']} a entry")
    return report
