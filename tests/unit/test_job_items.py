"""A job's items stored by the driver's own statement read back exactly as given."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from embedq.jobs.items import ItemRow
from embedq.jobs.store import JobStore
from embedq.models import Job, JobItem, JobStatus


def new_job(store: JobStore, job_id: str) -> None:
    store.create(Job(id=job_id, status=JobStatus.QUEUED, priority="bulk", model="m",
                     revision="r", normalize=True, total=0, chunks=0, loaded=False,
                     generation=0))


def test_items_read_back_in_order_with_their_ids(job_store: JobStore) -> None:
    new_job(job_store, "job1")
    rows = [ItemRow("job1", i, None if i % 2 else f"id-{i}", f"text {i} é \U0001f600",
                    f"{i:064x}") for i in range(5)]
    chunks = [{"job_id": "job1", "chunk": 0, "start": 0, "stop": 5, "tokens": 10}]
    job_store.add("job1", rows[:3], [])
    job_store.add("job1", rows[3:], chunks)

    assert job_store.chunk_items("job1", 1, 4) == [(r.fingerprint, r.text) for r in rows[1:4]]
    with job_store.db.session() as s:
        stored = s.execute(select(JobItem.index, JobItem.external_id, JobItem.error)
                           .where(JobItem.job_id == "job1").order_by(JobItem.index)).all()
    assert [tuple(r) for r in stored] == [(r.position, r.external_id, None) for r in rows]
    assert job_store.chunk("job1", 0).stop == 5


def test_a_page_is_one_transaction(job_store: JobStore) -> None:
    """An item the table refuses (its index taken) leaves none of its page stored."""
    new_job(job_store, "job2")
    job_store.add("job2", [ItemRow("job2", 0, None, "first", "0" * 64)], [])
    with pytest.raises(Exception, match=r"(?i)unique"):
        job_store.add("job2", [ItemRow("job2", 1, None, "second", "1" * 64),
                               ItemRow("job2", 0, None, "again", "2" * 64)], [])
    assert job_store.chunk_items("job2", 0, 10) == [("0" * 64, "first")]
