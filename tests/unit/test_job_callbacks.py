"""Job callbacks on SQLite and a real receiver on 127.0.0.1, under a fake clock: which URLs
are accepted, how deliveries are signed, retried, given up, and never sent twice at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery

from embedq.config import Settings
from embedq.errors import InvalidInput
from embedq.jobs.callbacks import Callbacks, backoff_s, check_url, signed_headers
from embedq.jobs.dispatch import Dispatcher
from embedq.jobs.store import JobStore
from embedq.models import Job, JobStatus
from embedq.models.job import CallbackState
from embedq.testing.processes import free_port
from tests.receiver import Receiver, documented_verifier

SECRET = "a-test-secret"
verify = documented_verifier()


def settings(**changes: object) -> Settings:
    base = Settings().with_overrides(callback_secret=SECRET, callback_allow="127.0.0.1",
                    callback_backoff_s=1.0, callback_backoff_max_s=8.0,
                    callback_max_attempts=5, callback_timeout_s=5.0)
    return base.with_overrides(**changes)


# --- which URLs are accepted
def test_a_callback_needs_a_secret_to_sign_it() -> None:
    with pytest.raises(InvalidInput, match="EMBEDQ_CALLBACK_SECRET"):
        check_url("http://127.0.0.1/hook", settings(callback_secret=None))


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "file:///etc/passwd", "/relative",
                                 "127.0.0.1:8080/hook", "http://[::1/x"])
def test_only_absolute_http_urls_are_accepted(url: str) -> None:
    with pytest.raises(InvalidInput, match="callback_url"):
        check_url(url, settings(callback_allow="*"))


def test_a_url_past_the_length_bound_is_refused() -> None:
    with pytest.raises(InvalidInput, match="2048 characters"):
        check_url("http://127.0.0.1/" + "a" * 2048, settings())


def test_by_default_no_host_is_allowed() -> None:
    with pytest.raises(InvalidInput, match="EMBEDQ_CALLBACK_ALLOW"):
        check_url("https://hooks.example.com/x", settings(callback_allow=""))


@pytest.mark.parametrize(("allow", "url", "ok"), [
    ("*", "https://anything.example.org/x", True),
    ("*.example.com", "https://Hooks.Example.COM/x", True),
    ("*.example.com", "https://example.org/x", False),
    ("hooks.example.com", "http://hooks.example.com@169.254.169.254/x", False),
    ("10.0.0.5:8443", "https://10.0.0.5:8443/x", True),
    ("10.0.0.5:8443", "https://10.0.0.5/x", False),
    ("a.test, 127.0.0.1", "http://127.0.0.1:9/x", True),
])
def test_hosts_must_match_the_allow_list(allow: str, url: str, ok: bool) -> None:
    if ok:
        assert check_url(url, settings(callback_allow=allow)) == url
    else:
        with pytest.raises(InvalidInput, match="not allowed"):
            check_url(url, settings(callback_allow=allow))


# --- signatures, checked with the snippet docs/jobs.md gives receivers
def test_the_documented_snippet_accepts_a_signature_and_refuses_forgeries() -> None:
    body = b'{"id":"j","status":"succeeded"}'
    now = int(time.time())
    header = signed_headers(SECRET, "j", body, now)["X-Embedq-Signature"]
    assert verify(SECRET, header, body)
    assert not verify(SECRET, header, body.replace(b"succeeded", b"failed"))
    assert not verify("another-secret", header, body)
    old = signed_headers(SECRET, "j", body, now - 3600)["X-Embedq-Signature"]
    assert not verify(SECRET, old, body)
    assert not verify(SECRET, "garbage", body)
    assert not verify(SECRET, f"t={now}", body)


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_s(n, settings()) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]


# --- delivery state in the job row
class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def store(job_store: JobStore) -> JobStore:
    return job_store


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def ended_job(store: JobStore, url: str, clock: Clock, job_id: str = "job1") -> str:
    store.create(Job(id=job_id, status=JobStatus.SUCCEEDED, priority="bulk", model="m",
                     revision="r", normalize=True, total=0, chunks=0, loaded=True,
                     generation=1, finished_at=clock(), callback_url=url,
                     callback_state=CallbackState.PENDING))
    return job_id


def callbacks(store: JobStore, clock: Clock, **changes: object) -> Callbacks:
    s = settings(**changes)
    dispatcher = Dispatcher(store, Celery(set_as_current=False), s, clock)
    return dispatcher.callbacks


def test_a_delivery_is_retried_with_backoff_then_delivered_with_one_id(
    store: JobStore, receiver: Receiver
) -> None:
    clock = Clock()
    sender = callbacks(store, clock)
    job_id = ended_job(store, receiver.url(), clock)
    receiver.status = 500
    assert sender.deliver(job_id) == "retrying"
    job = store.get(job_id)
    assert job.callback_attempts == 1 and "HTTP 500" in (job.callback_error or "")
    assert sender.run_due(clock.advance(0.5))["retrying"] == 0  # not due for 1 s
    assert sender.run_due(clock.advance(0.5))["retrying"] == 1
    assert sender.run_due(clock.advance(1.9))["retrying"] == 0  # now 2 s
    receiver.status = 200
    assert sender.run_due(clock.advance(0.1)) == {"delivered": 1, "retrying": 0, "failed": 0}
    job = store.get(job_id)
    assert (job.callback_state, job.callback_attempts) == (CallbackState.DELIVERED, 3)
    got = receiver.got()
    assert [d.answered for d in got] == [500, 500, 200]
    assert {d.delivery_id for d in got} == {job_id}
    assert all(verify(SECRET, d.signature, d.body) for d in got)
    assert sender.run_due(clock.advance(3600)) == {"delivered": 0, "retrying": 0, "failed": 0}
    assert len(receiver.got()) == 3


def test_a_refused_connection_is_retried_and_attempts_are_bounded(store: JobStore) -> None:
    clock = Clock()
    sender = callbacks(store, clock, callback_max_attempts=3)
    job_id = ended_job(store, f"http://127.0.0.1:{free_port()}/nobody", clock)
    outcomes = [sender.deliver(job_id, clock.advance(60)) for _ in range(3)]
    assert outcomes == ["retrying", "retrying", "failed"]
    job = store.get(job_id)
    assert job.callback_state == CallbackState.FAILED
    assert "gave up after 3 attempt(s)" in (job.callback_error or "")
    assert "ConnectError" in (job.callback_error or "")
    assert sender.deliver(job_id, clock.advance(60)) is None


def test_no_attempt_is_scheduled_past_the_maximum_age(store: JobStore) -> None:
    clock = Clock()
    sender = callbacks(store, clock, callback_max_age_s=3.0, callback_max_attempts=100)
    job_id = ended_job(store, f"http://127.0.0.1:{free_port()}/nobody", clock)
    assert sender.deliver(job_id) == "retrying"  # retry at +1 s
    assert sender.deliver(job_id, clock.advance(1)) == "retrying"  # retry at +3 s
    assert sender.deliver(job_id, clock.advance(2)) == "failed"  # +7 s is past 3 s


def test_an_attempt_in_flight_is_never_sent_twice(store: JobStore, receiver: Receiver
                                                  ) -> None:
    clock = Clock()
    first, second = callbacks(store, clock), callbacks(store, clock)
    job_id = ended_job(store, receiver.url(), clock)
    receiver.release.clear()  # the receiver holds the first attempt
    outcome: list[str | None] = []
    sending = threading.Thread(target=lambda: outcome.append(first.deliver(job_id)))
    sending.start()
    deadline = time.monotonic() + 10
    while store.get(job_id).callback_attempts == 0:
        assert time.monotonic() < deadline, "the first attempt was never claimed"
        time.sleep(0.01)
    assert second.deliver(job_id) is None and second.run_due()["delivered"] == 0
    receiver.release.set()
    sending.join(timeout=10)
    assert outcome == ["delivered"] and len(receiver.got()) == 1


def test_a_host_removed_from_the_allow_list_fails_without_a_request(
    store: JobStore, receiver: Receiver
) -> None:
    clock = Clock()
    job_id = ended_job(store, receiver.url(), clock)
    assert callbacks(store, clock, callback_allow="hooks.example.com").deliver(job_id) \
        == "failed"
    assert "not allowed" in (store.get(job_id).callback_error or "")
    assert receiver.got() == []


def test_a_process_without_the_secret_leaves_the_delivery_pending(
    store: JobStore, receiver: Receiver
) -> None:
    clock = Clock()
    job_id = ended_job(store, receiver.url(), clock)
    assert callbacks(store, clock, callback_secret=None).deliver(job_id) is None
    assert callbacks(store, clock).deliver(job_id) == "delivered"


def test_the_body_is_the_jobs_state_without_the_delivery_state(
    store: JobStore, receiver: Receiver
) -> None:
    import json

    clock = Clock()
    sender = callbacks(store, clock)
    job_id = ended_job(store, receiver.url(), clock)
    before = sender.describe(job_id)
    assert before["callback"] == {"state": "pending", "attempts": 0, "error": None}
    assert sender.deliver(job_id) == "delivered"
    body = json.loads(receiver.got()[0].body)
    before.pop("callback")
    assert body == before
