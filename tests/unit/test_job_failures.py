"""A job with failed texts says how many and why (`jobs.failures.failure_summary`)."""

from __future__ import annotations

import pytest

from embedq.jobs.failures import MAX_MESSAGE_CHARS, failure_summary, unserved
from embedq.jobs.items import ItemRow
from embedq.jobs.store import JobStore
from embedq.models import Job, JobStatus


@pytest.fixture
def store(job_store: JobStore) -> JobStore:
    return job_store


def job_with(store: JobStore, errors: list[str | None]) -> str:
    store.create(Job(id="job1", status=JobStatus.RUNNING, priority="bulk", model="m",
                     revision="r", normalize=True, total=len(errors), chunks=1, loaded=True,
                     generation=1))
    store.add("job1", [ItemRow("job1", i, None, f"text {i}", f"{i:064x}")
                       for i in range(len(errors))], [])
    store.record_failures("job1", 0, len(errors),
                          {f"{i:064x}": e for i, e in enumerate(errors) if e is not None})
    return "job1"


def test_one_reason_is_said_word_for_word(store: JobStore) -> None:
    reason = "this worker serves model 'm' at revision 'x', but the request was made for 'r'"
    job = job_with(store, [reason, None, reason])
    assert failure_summary(store.db, job, 2, 3) == f"2 of 3 texts failed; 2 with: {reason}"


def test_the_commonest_reason_comes_first_and_the_others_are_counted(store: JobStore
                                                                     ) -> None:
    job = job_with(store, ["rare", "common", "common", "other", None, "common"])
    summary = failure_summary(store.db, job, 5, 6)
    assert summary is not None
    assert summary.startswith("5 of 6 texts failed; 3 with: common (and 2 with 2 other ")
    assert f"embedq jobs export {job} --out FILE.jsonl" in summary


def test_nothing_failed_or_no_message_kept_says_nothing(store: JobStore) -> None:
    job = job_with(store, [None, None])
    assert failure_summary(store.db, job, 0, 2) is None
    assert failure_summary(store.db, job, 1, 2) is None  # counted, but no row holds why


def test_a_very_long_message_is_cut(store: JobStore) -> None:
    job = job_with(store, ["x" * (MAX_MESSAGE_CHARS + 500)])
    summary = failure_summary(store.db, job, 1, 1)
    assert summary is not None and summary.endswith("x...")
    assert len(summary) < MAX_MESSAGE_CHARS + 100


def _job() -> Job:
    return Job(id="j1", model="m", revision="r1", priority="bulk")


def test_a_live_worker_serving_the_revision_on_the_queue_is_enough() -> None:
    workers = {"w1": {"model": "m", "revisions": ["r0"], "queues": ["bulk"]},
               "w2": {"model": "m", "revisions": ["r0", "r1"]}}  # no queues: the defaults
    assert unserved(_job(), "bulk", workers) is None


def test_workers_of_another_revision_are_named_with_what_to_do() -> None:
    said = unserved(_job(), "bulk", {"w1": {"model": "m", "revisions": ["r0"]},
                                     "w2": {"model": "m", "revisions": ["r1"],
                                            "queues": ["online"]}})
    assert said is not None
    assert "serve m@r0, not m@r1, and would fail this job's texts" in said
    assert "EMBEDQ_MODEL_REVISION" in said and "embedq jobs cancel j1" in said


def test_no_worker_on_the_queue_means_the_job_waits() -> None:
    said = unserved(_job(), "bulk", {"w1": {"model": "m", "revision": "r1",
                                            "queues": ["online"]}})
    assert said is not None and said.startswith("no live worker consumes the queue 'bulk'")
