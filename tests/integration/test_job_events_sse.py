"""The job event stream as a real SSE client (httpx-sse) reads it, on the cluster of
test_job_events (Redis, Postgres, a worker, a beat, the API behind a key): every event
carries JSON data (`retry:` rides on the first, keepalives are comments), and a client
that reconnects with the id of a final event gets 204, also once the job's callback was
delivered after that event."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from httpx_sse import EventSource, ServerSentEvent, connect_sse

from embedq.api.routes import jobs as job_routes
from embedq.models.job import CallbackState
from tests.integration import test_job_events
from tests.integration.test_job_events import AUTH, EventsCluster, submit
from tests.receiver import Receiver

pytestmark = pytest.mark.integration

ec = test_job_events.ec  # that module's cluster fixture, started for this module too


def stream(ec: EventsCluster, job_id: str) -> list[ServerSentEvent]:
    with httpx.Client(headers=AUTH, timeout=60) as client, connect_sse(
            client, "GET", f"{ec.api}/v1/jobs/{job_id}/events") as source:
        assert source.response.status_code == 200
        return list(source.iter_sse())  # returns when the server ends the stream


def test_every_event_a_real_sse_client_reads_has_json_data(ec: EventsCluster,
                                                           salt: str) -> None:
    job_id = submit(ec, [f"{salt} sse-client {i} [[sleep:0.3]]" for i in range(150)])
    events = stream(ec, job_id)
    states = [json.loads(event.data) for event in events]  # each one parses
    assert events[0].retry == 1000 and all(e.retry is None for e in events[1:])
    assert all(e.event == "state" and e.id for e in events)
    assert states[-1]["status"] == "succeeded" and events[-1].id.endswith("-final")
    assert not any(e.id.endswith("-final") for e in events[:-1])


def test_keepalives_are_comments_that_no_client_reads_as_an_event(
        ec: EventsCluster, salt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_routes, "EVENTS_KEEPALIVE_S", 0.2)  # the API runs in-process
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    job_id = submit(ec, [f"{salt} waits"], not_before=later)  # stays queued
    raw, cancelled = "", False
    with httpx.stream("GET", f"{ec.api}/v1/jobs/{job_id}/events", headers=AUTH,
                      timeout=60) as response:
        for chunk in response.iter_text():
            raw += chunk
            if raw.count(": keepalive") >= 2 and not cancelled:
                cancelled = ec.jobs.cancel(job_id)  # the stream ends with that state
                assert cancelled
    # httpx-sse's decoder over the very bytes sent: a blank line after a keepalive would
    # be an event with empty data once an id was sent.
    sent = httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=raw.encode())
    events = list(EventSource(sent).iter_sse())
    assert [json.loads(e.data)["status"] for e in events] == ["queued", "cancelled"], raw


def test_a_client_with_the_final_event_gets_204_after_the_callback_changed_the_state(
        ec: EventsCluster, salt: str) -> None:
    receiver = Receiver(status=503)  # the first delivery fails: the state moves on later
    try:
        job_id = submit(ec, [f"{salt} final {i}" for i in range(20)],
                        callback_url=receiver.url())
        final = stream(ec, job_id)[-1]
        receiver.status = 200
        ec.wait_state(job_id, CallbackState.DELIVERED)
        now = httpx.get(f"{ec.api}/v1/jobs/{job_id}", headers=AUTH).json()
        assert now["callback"]["state"] == "delivered"
        assert json.loads(final.data) != now  # so its id is no longer the state's digest
        url = f"{ec.api}/v1/jobs/{job_id}/events"
        again = httpx.get(url, headers={**AUTH, "Last-Event-ID": final.id})
        assert again.status_code == 204, again.text
        [fresh] = stream(ec, job_id)  # a client without the final state gets it, once
        assert json.loads(fresh.data) == now and fresh.id.endswith("-final")
    finally:
        receiver.stop()
