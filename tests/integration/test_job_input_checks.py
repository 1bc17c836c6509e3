"""Job inputs are checked before the job exists: a bad id or text is refused naming its
input and field, and leaves no job row behind; a time zone needs a window to mean
anything, and is refused without one instead of being ignored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from embedq.errors import BadInputFile, InvalidInput
from embedq.jobs.readers import Record
from embedq.jobs.service import JobService
from embedq.models import Job
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
