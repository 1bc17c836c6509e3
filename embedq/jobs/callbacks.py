"""Job callbacks: POST a job's final state to its `callback_url`, signed, at least once.

The body is the job as `GET /v1/jobs/{id}` shows it, without its `callback` field (the
delivery's own state). It is signed with HMAC-SHA256 over `"{timestamp}.{body}"` with
`EMBEDQ_CALLBACK_SECRET`; the headers are

    X-Embedq-Signature: t=<unix seconds>,v1=<hex digest>
    X-Embedq-Delivery:  <the job id>   (the same on every attempt: the idempotency key)

The delivery state lives in the job row (`callback_state`, `callback_attempts`,
`callback_next_at`, `callback_error`), never in a process: the worker that closes the job
makes the first attempt, and `embedq beat`'s tick (`Dispatcher.tick`) sends every pending
delivery that is due, so one survives the death of any process. Each attempt is claimed
by compare-and-set on the attempt count and pushes `callback_next_at` ahead by a lease:
two processes never send the same attempt, and one that dies mid-attempt leaves it due
again once the lease ends. A receiver may therefore see a delivery more than once (dedupe
on X-Embedq-Delivery), never zero times while attempts and time remain.

Failed attempts (connection errors, timeouts, any answer but 2xx, redirects included) are
retried after `callback_backoff_s`, doubling up to `callback_backoff_max_s`, at most
`callback_max_attempts` times and never later than `callback_max_age_s` after the job
ended; then the delivery is `failed` with the last error.

The server POSTs wherever a caller asks, so hosts must match `EMBEDQ_CALLBACK_ALLOW`
(empty, the default, allows none: callbacks fail closed); see docs/jobs.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import or_, select, update

from embedq.config import Settings
from embedq.errors import InvalidInput, Unavailable
from embedq.jobs.store import JobStore, utcnow
from embedq.models import Job, JobStatus
from embedq.models.job import CallbackState
from embedq.version import __version__

log = logging.getLogger("embedq.jobs.callbacks")

MAX_URL_CHARS = 2048
SCHEMES = ("http", "https")
DUE_PER_TICK = 50  # deliveries one tick attempts; the rest wait for the next tick

Describe = Callable[[str], dict[str, Any]]


def check_url(url: str, settings: Settings) -> str:
    """The callback URL if this server may POST to it; InvalidInput (HTTP 422) saying
    what to change otherwise."""
    if not settings.callbacks.secret:
        raise InvalidInput(
            "this server does not send callbacks (no EMBEDQ_CALLBACK_SECRET to sign them): "
            "drop callback_url and poll GET /v1/jobs/{id} or stream /v1/jobs/{id}/events, "
            "or ask its operator to set EMBEDQ_CALLBACK_SECRET", "callback_url")
    if len(url) > MAX_URL_CHARS:
        raise InvalidInput(f"callback_url is longer than {MAX_URL_CHARS} characters: "
                           "use a shorter URL", "callback_url")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise InvalidInput(f"callback_url is not a URL ({exc}): give an absolute http(s) "
                           "URL", "callback_url") from None
    if parts.scheme not in SCHEMES or not host:
        raise InvalidInput("callback_url must be an absolute http:// or https:// URL, "
                           "e.g. https://example.com/hooks/embedq", "callback_url")
    port = port or (443 if parts.scheme == "https" else 80)
    if not host_allowed(host, port, settings.callbacks.allow):
        raise InvalidInput(
            f"callbacks to {host}:{port} are not allowed here: the server's "
            "EMBEDQ_CALLBACK_ALLOW lists the hosts it may POST to; ask its operator to add "
            "this one", "callback_url")
    return url


def host_allowed(host: str, port: int, allow: str) -> bool:
    """True if `host` or `host:port` matches one of the comma-separated shell patterns in
    `allow` (case-insensitive). An empty `allow` matches nothing."""
    host = host.lower().rstrip(".")
    for pattern in (p.strip().lower() for p in allow.split(",")):
        if pattern and (fnmatchcase(host, pattern) or fnmatchcase(f"{host}:{port}", pattern)):
            return True
    return False


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `"{timestamp}.{body}"`."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signed_headers(secret: str, delivery_id: str, body: bytes, timestamp: int
                   ) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": f"embedq/{__version__}",
        "X-Embedq-Delivery": delivery_id,
        "X-Embedq-Signature": f"t={timestamp},v1={signature(secret, timestamp, body)}",
    }


def backoff_s(failures: int, settings: Settings) -> float:
    """The wait after the `failures`-th failed attempt (1, 2, ...)."""
    return float(min(settings.callbacks.backoff_s * 2 ** max(failures - 1, 0),
                     settings.callbacks.backoff_max_s))


class Callbacks:
    """Sends due deliveries; every state change is a guarded UPDATE on the job row."""

    def __init__(self, store: JobStore, settings: Settings, describe: Describe,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.store = store
        self.settings = settings
        self.describe = describe
        self.clock = clock

    def due(self, now: datetime, limit: int = DUE_PER_TICK) -> list[str]:
        """Ids of ended jobs whose delivery is pending and due, the longest waiting first."""
        with self.store.db.session() as s:
            return list(s.scalars(
                select(Job.id).where(
                    Job.callback_state == CallbackState.PENDING,
                    Job.status.in_(JobStatus.final()),
                    or_(Job.callback_next_at.is_(None), Job.callback_next_at <= now),
                ).order_by(Job.callback_next_at.nulls_first(), Job.finished_at).limit(limit)
            ))

    def run_due(self, now: datetime | None = None) -> dict[str, int]:
        """Attempt every due delivery once; counts by outcome."""
        counts = {"delivered": 0, "retrying": 0, "failed": 0}
        for job_id in self.due(now or self.clock()):
            try:
                outcome = self.deliver(job_id, now)
            except Unavailable:
                raise  # the database is down: the next tick tries them all again
            except Exception:
                # One bad row must not hold back every other delivery; this one stays
                # pending and is tried again once its lease ends.
                log.exception("job %s: callback attempt failed", job_id)
                continue
            if outcome is not None:
                counts[outcome] += 1
        return counts

    def deliver(self, job_id: str, now: datetime | None = None) -> str | None:
        """One attempt if the job's delivery is due and this process wins it: returns
        "delivered", "retrying" or "failed", or None when there was nothing to do."""
        secret = self.settings.callbacks.secret
        if not secret:
            log.warning("job %s has a callback but this process has no "
                        "EMBEDQ_CALLBACK_SECRET: left pending for one that has it", job_id)
            return None
        now = now or self.clock()
        job = self.store.get(job_id)
        if (job.callback_state != CallbackState.PENDING or not job.callback_url
                or job.status not in JobStatus.final()
                or (job.callback_next_at is not None and job.callback_next_at > now)):
            return None
        lease = timedelta(seconds=2 * self.settings.callbacks.timeout_s + 5)
        attempt = job.callback_attempts + 1
        if not self._update(job_id, job.callback_attempts, callback_attempts=attempt,
                            callback_next_at=now + lease):
            return None  # another process took this attempt
        started = job.finished_at if job.finished_at is not None else now
        try:
            check_url(job.callback_url, self.settings)
        except InvalidInput as exc:  # the allow list changed since the job was submitted
            return self._give_up(job_id, attempt, str(exc))
        error = self._post(job_id, job.callback_url, secret)
        if error is None:
            self._update(job_id, attempt, callback_state=CallbackState.DELIVERED,
                         callback_next_at=None, callback_error=None)
            log.info("job %s: callback delivered (attempt %d)", job_id, attempt)
            return "delivered"
        retry_at = self.clock() + timedelta(seconds=backoff_s(attempt, self.settings))
        max_age = timedelta(seconds=self.settings.callbacks.max_age_s)
        if attempt >= self.settings.callbacks.max_attempts or retry_at > started + max_age:
            return self._give_up(job_id, attempt, error)
        self._update(job_id, attempt, callback_next_at=retry_at, callback_error=error)
        log.warning("job %s: callback attempt %d failed (%s); next at %s", job_id, attempt,
                    error, retry_at.isoformat())
        return "retrying"

    def _post(self, job_id: str, url: str, secret: str) -> str | None:
        """POST the signed final state; None on a 2xx answer, else what went wrong."""
        state = self.describe(job_id)
        state.pop("callback", None)
        body = json.dumps(state, separators=(",", ":")).encode()
        # Wall time, not self.clock: the receiver checks it against its own clock.
        headers = signed_headers(secret, job_id, body, int(time.time()))
        import httpx  # here, not at the top: every `embedq bulk` imports this module

        try:
            answer = httpx.post(url, content=body, headers=headers, follow_redirects=False,
                                timeout=self.settings.callbacks.timeout_s)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:500]
        if 200 <= answer.status_code < 300:
            return None
        return f"the receiver answered HTTP {answer.status_code}"

    def _give_up(self, job_id: str, attempts: int, error: str) -> str:
        self._update(job_id, attempts, callback_state=CallbackState.FAILED,
                     callback_next_at=None,
                     callback_error=f"gave up after {attempts} attempt(s): {error}"[:2000])
        log.error("job %s: callback failed for good after %d attempt(s): %s", job_id,
                  attempts, error)
        return "failed"

    def _update(self, job_id: str, attempts: int, **values: Any) -> bool:
        """Set `values` if the delivery is still pending at `attempts`."""
        with self.store.db.session() as s:
            result = s.execute(update(Job).where(
                Job.id == job_id, Job.callback_state == CallbackState.PENDING,
                Job.callback_attempts == attempts,
            ).values(**values))
        return bool(getattr(result, "rowcount", 0))

