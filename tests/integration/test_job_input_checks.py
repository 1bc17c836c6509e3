"""Job inputs are checked before the job exists: a bad id or text is refused naming its
input and field, and leaves no job row behind; a time zone needs a window to mean
anything, and is refused without one instead of being ignored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from embedq.errors import BadInputFile, InvalidInput
from embedq.jobs.batches import BatchService
from embedq.jobs.files import FileStore
from embedq.jobs.readers import Record
from embedq.jobs.service import PAGE_ITEMS, JobService
from embedq.models import Job, JobChunk, JobItem
from embedq.service import EmbeddingService
from tests import support

pytestmark = pytest.mark.integration


@pytest.fixture
def jobs(redis_url: str, pg_url: str) -> Iterator[JobService]:
    service = EmbeddingService(support.settings_from(support.cluster_env(redis_url, pg_url)))
    yield JobService(service)


def job_rows(jobs: JobService) -> int:
    with jobs.service.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Job)) or 0)


@pytest.mark.parametrize(("bad", "field", "what"), [
    (Record(2, "a\udc00", "fine text"), "id", "lone surrogate"),
    (Record(2, "ok", "a\ud800b"), "text", "lone surrogate"),
    (Record(2, "a\x00", "fine text"), "id", "NUL"),
    (Record(2, "ok", "a\x00b"), "text", "NUL"),
])
def test_a_bad_input_is_refused_before_the_job_exists(
    jobs: JobService, salt: str, bad: Record, field: str, what: str
) -> None:
    before = job_rows(jobs)
    with pytest.raises(BadInputFile) as caught:
        jobs.submit([Record(1, "first", f"{salt} fine"), bad], start=False)
    message = str(caught.value)
    assert caught.value.line == 2 and f"the {field} contains" in message and what in message
    assert job_rows(jobs) == before


def test_a_timezone_without_a_window_is_refused(jobs: JobService, salt: str) -> None:
    before = job_rows(jobs)
    with pytest.raises(InvalidInput) as caught:
        jobs.submit([f"{salt} text"], timezone="Europe/Paris", start=False)
    assert caught.value.param == "timezone" and "window" in str(caught.value)
    with pytest.raises(InvalidInput) as caught:
        jobs.submit([f"{salt} text"], window="01:00-02:00", timezone="a\ud800", start=False)
    assert caught.value.param == "timezone"
    assert job_rows(jobs) == before


def test_a_batch_whose_input_fails_while_loading_leaves_no_item_behind(
    jobs: JobService, salt: str
) -> None:
    """A Batch API job whose records fail after a page of items is stored is discarded
    whole: its items and chunks go with it (the items have no foreign key to cascade)."""
    batches = BatchService(jobs, FileStore(jobs.service.db, jobs.settings))

    def records() -> Iterator[Record]:
        for i in range(PAGE_ITEMS + 10):
            yield Record(i + 1, f"r{i}", f"{salt} line {i}")
        raise BadInputFile("the line cannot be read", PAGE_ITEMS + 11)

    saved: list[str] = []
    with pytest.raises(BadInputFile):
        batches._submit_whole(records(), saved, on_saved=saved.append)
    assert len(saved) == 1
    with jobs.service.db.session() as s:
        left = [int(s.scalar(select(func.count()).where(column == saved[0])) or 0)
                for column in (Job.id, JobItem.job_id, JobChunk.job_id)]
    assert left == [0, 0, 0]
