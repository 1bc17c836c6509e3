"""Scenario 8: a message in a content type other than JSON (here the Python object
serialization type) pushed straight onto the worker's queue is refused and logged,
never executed; the worker keeps serving."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from kombu.connection import Connection

from embedq.fingerprint import fingerprint
from embedq.service import EmbeddingService
from embedq.tasks import names
from tests import support
from tests.faults.helpers import fault_env, stored
from tests.faults.procs import wait_until
from tests.faults.recorder import Recorder

pytestmark = pytest.mark.integration

FOREIGN_TYPE = "application/x-python-serialize"


def test_a_foreign_content_type_on_the_broker_is_refused_not_run(
    rep: int, record: Recorder, redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"content-{salt}")
    settings = support.settings_from(env)
    log = tmp_path / "worker.log"
    worker = support.WorkerProcess(env, log).start()
    service = EmbeddingService(settings)
    text = f"{salt} smuggled"
    fp = fingerprint(service.spec(), text)
    try:
        with Connection(settings.links.broker_url) as conn:  # type: ignore[no-untyped-call]
            conn.Producer().publish(
                # Any bytes: the point is the content type, which must never be decoded.
                b"\x80\x04not json at all " + text.encode(),
                routing_key=settings.queue.online_queue,
                content_type=FOREIGN_TYPE,
                content_encoding="binary",
                headers={"task": names.EMBED, "id": fp, "lang": "py"},
            )
        refused_s = wait_until(lambda: "Refusing to deserialize" in log.read_text(), 30,
                               "the worker logging the refusal")
        time.sleep(1.0)  # time the message would have needed to run, had it been accepted
        broker = redis.Redis.from_url(settings.links.broker_url)
        # The Redis transport keeps a queue as lists named after it (one per priority).
        queue = settings.queue.online_queue
        left = sum(int(broker.llen(k)) for k in broker.scan_iter(match=f"{queue}*"))
        ok = service.embed([f"{salt} after the refusal"], timeout_s=60)
    finally:
        worker.stop()

    lines = [x for x in log.read_text().splitlines() if "Refusing to deserialize" in x]
    ran = len(support.ledger_counts(Path(env["EMBEDQ_LEDGER_PATH"])))
    record.figure("refusal_logged_s", round(refused_s, 2))
    record.figure("executed", ran - 1, limit=0)
    record.figure("stored", len(stored(service.db, [fp])), limit=0)
    assert FOREIGN_TYPE in lines[0]
    assert ran == 1, "only the request made after the refusal may reach the encoder"
    assert not stored(service.db, [fp]) and service.hot.vectors([fp]) == [None]
    assert left == 0, "a refused message is dropped, not redelivered"
    assert ok.outcomes[0].vector is not None
