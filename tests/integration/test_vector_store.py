"""The vector store's contract, one body on Postgres and on SQLite."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedq.models import Database
from embedq.models.migrate import upgrade
from embedq.models.vectors import (
    COPY_MIN_ROWS,
    READ_CHUNK,
    PostgresVectors,
    SQLiteVectors,
    StoredVector,
    VectorStore,
    from_bytes,
    open_vectors,
    to_bytes,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def vectors(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'vectors.db'}"
        upgrade(url)
    else:
        url = request.getfixturevalue("pg_url")
    db = Database(url)
    store = open_vectors(db)
    assert isinstance(store, SQLiteVectors if request.param == "sqlite" else PostgresVectors)
    yield store
    store.close()
    db.dispose()


def row(fp: str, value: float = 0.5, dims: int = 4) -> StoredVector:
    return StoredVector(fp, "model", "rev", dims, to_bytes(np.full(dims, value)))


def test_a_put_row_reads_back_as_the_same_float32_bytes(vectors: VectorStore) -> None:
    fp = uuid.uuid4().hex
    vector = np.array([0.1, -2.5, 3e-8, 1e6], dtype=np.float32)
    assert vectors.put_many([StoredVector(fp, "m", "r", 4, to_bytes(vector))]) == 1
    got = vectors.get_many([fp, "absent-" + fp])
    assert list(got) == [fp]
    np.testing.assert_array_equal(from_bytes(got[fp]), vector)


def test_a_fingerprint_stored_twice_keeps_its_first_row(vectors: VectorStore) -> None:
    """The primary key is the fence: a duplicate execution inserts nothing."""
    fp, other = uuid.uuid4().hex, uuid.uuid4().hex
    assert vectors.put_many([row(fp, 1.0)]) == 1
    assert vectors.put_many([row(fp, 2.0), row(other, 3.0)]) == 1
    got = vectors.get_many([fp, other])
    assert from_bytes(got[fp])[0] == 1.0 and from_bytes(got[other])[0] == 3.0


def test_a_lookup_finds_exactly_the_keys_asked_whatever_they_hold(vectors: VectorStore
                                                                   ) -> None:
    """Postgres sends a lookup's fingerprints as one comma-joined text: a key with a comma
    in it (no fingerprint has one, but the store takes any key) must not be split into
    keys nobody asked for."""
    a, b = uuid.uuid4().hex[:24], uuid.uuid4().hex[:24]
    vectors.put_many([row(a, 1.0), row(b, 2.0), row(f"{a},{b}", 3.0)])
    assert set(vectors.get_many([f"{a},{b}"])) == {f"{a},{b}"}
    assert set(vectors.get_many([a, f"{a},{b}", "absent"])) == {a, f"{a},{b}"}
    assert set(vectors.get_many([a, b])) == {a, b}


def test_empty_calls_touch_nothing(vectors: VectorStore) -> None:
    before = vectors.count()
    assert vectors.put_many([]) == 0
    assert vectors.get_many([]) == {}
    assert vectors.count() == before


def test_lookups_past_one_read_chunk_find_every_row(vectors: VectorStore) -> None:
    fps = [uuid.uuid4().hex for _ in range(READ_CHUNK + 7)]
    before = vectors.count()
    assert vectors.put_many([row(fp, dims=2) for fp in fps[:2000]]) == 2000
    assert vectors.put_many([row(fp, dims=2) for fp in fps[2000:]]) == len(fps) - 2000
    assert set(vectors.get_many(fps)) == set(fps)
    assert vectors.count() == before + len(fps)


def test_a_large_batch_counts_only_its_new_rows_batch_after_batch(vectors: VectorStore
                                                                 ) -> None:
    """From COPY_MIN_ROWS rows a batch goes in by COPY on Postgres: straight into the table
    while every row is new; a batch that meets a stored row is undone and goes in staged,
    the same contract, and the connection and the staging table are ready for the next."""
    fps = [uuid.uuid4().hex for _ in range(4 * COPY_MIN_ROWS)]
    first, second = fps[:2 * COPY_MIN_ROWS], fps[COPY_MIN_ROWS:3 * COPY_MIN_ROWS]
    third = fps[3 * COPY_MIN_ROWS:]
    assert vectors.put_many([row(fp, 1.0) for fp in first]) == len(first)
    assert vectors.put_many([row(fp, 2.0) for fp in second]) == COPY_MIN_ROWS
    assert vectors.put_many([row(fp, 3.0) for fp in third]) == len(third)
    assert vectors.put_many([row(fp, 4.0) for fp in second]) == 0
    got = vectors.get_many(fps)
    assert set(got) == set(fps)
    assert [from_bytes(got[fp])[0] for fp in (first[-1], second[-1], third[-1])] == [1, 2, 3]


@pytest.mark.parametrize("n", [1, 7, 8, 9, 17, COPY_MIN_ROWS - 1])
def test_a_small_batch_of_any_size_stores_every_row_and_counts_the_new(
        vectors: VectorStore, n: int) -> None:
    """Under COPY_MIN_ROWS a batch goes in by INSERT on Postgres: every row lands, with
    its own vector, and a batch that repeats some of them counts only the new ones."""
    fps = [uuid.uuid4().hex for _ in range(2 * n)]
    first, again = fps[:n], fps[n // 2: n // 2 + n]
    assert vectors.put_many([row(fp, float(i)) for i, fp in enumerate(first)]) == n
    assert vectors.put_many([row(fp, -1.0) for fp in again]) == n - (n - n // 2)
    got = vectors.get_many(fps)
    assert set(got) == set(first) | set(again)
    assert [from_bytes(got[fp])[0] for fp in first] == [float(i) for i in range(n)]
    assert all(from_bytes(got[fp])[0] == -1.0 for fp in again if fp not in first)


def test_an_embedded_database_checkpoints_its_wal_every_ten_thousand_pages(
        tmp_path: Path) -> None:
    """SQLite's own 1,000 made the vector writer copy pages back every few writes of a
    job: each connection of an embedded database is in WAL mode with the larger bound."""
    from embedq.models.engine import SQLITE_CHECKPOINT_PAGES

    url = f"sqlite:///{tmp_path / 'wal.db'}"
    upgrade(url)
    db = Database(url)
    try:
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() \
                == SQLITE_CHECKPOINT_PAGES == 10_000
    finally:
        db.dispose()


@pytest.mark.parametrize("size", [COPY_MIN_ROWS - 1, 5000])
def test_two_writers_racing_over_the_same_rows_in_any_order_store_each_once(
        pg_url: str, size: int) -> None:
    """Two processes' batches of the same new fingerprints, at once and in opposite orders
    (two executions racing past their claims): each row is stored once, the two counts
    add up to the rows, and neither batch fails. Inserted in each batch's own order, each
    writer waited for a row the other held while holding one the other wanted: Postgres
    ended one of them as a deadlock."""
    stores = [PostgresVectors(pg_url) for _ in range(2)]
    for store in stores:
        store.get_many(["connected"])  # both writers start on a live connection
    fps = [uuid.uuid4().hex for _ in range(size)]
    start = threading.Barrier(2)
    counts: list[int] = []
    failures: list[BaseException] = []

    def put(store: PostgresVectors, order: list[str], value: float) -> None:
        start.wait()
        try:
            counts.append(store.put_many([row(fp, value) for fp in order]))
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    writers = [threading.Thread(target=put, args=(stores[0], fps, 1.0)),
               threading.Thread(target=put, args=(stores[1], fps[::-1], 2.0))]
    try:
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(60)
        assert failures == [] and len(counts) == 2 and sum(counts) == size
        got = stores[0].get_many(fps)
        assert set(got) == set(fps)
        assert {from_bytes(v)[0] for v in got.values()} <= {1.0, 2.0}
    finally:
        for store in stores:
            store.close()
