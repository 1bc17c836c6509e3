"""The embedded worker: a real Celery worker (threads pool) inside the calling process.

Used when no broker is configured (EMBEDQ_BROKER_URL unset, i.e. memory://): `make demo`,
`embedq embed` and `Client()` then work on a fresh machine with no servers at all, through
the same tasks, batcher and stores as a deployment.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import Celery

from embedq.config import Settings
from embedq.workers.runtime import WorkerRuntime, install

log = logging.getLogger(__name__)

_lock = threading.Lock()
_started: dict[int, tuple[WorkerRuntime, threading.Thread]] = {}
_runtimes: dict[int, WorkerRuntime] = {}


def embedded_runtime(app: Celery) -> WorkerRuntime | None:
    """The runtime of the embedded worker started for `app`, if any."""
    return _runtimes.get(id(app))


def ensure_embedded_worker(app: Celery, settings: Settings) -> WorkerRuntime:
    """Start (once per app) a worker thread consuming the app's queues in-process."""
    with _lock:
        if id(app) in _started:
            return _started[id(app)][0]
        runtime = WorkerRuntime(settings)
        queues = [settings.online_queue, settings.bulk_queue]
        install(runtime, queues)
        app.finalize()
        worker = app.WorkController(
            app=app,
            pool="threads",
            concurrency=settings.concurrency,
            queues=queues,
            hostname=f"embedq-embedded@{runtime.worker_id}-{len(_started)}",
            loglevel=logging.WARNING,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            ready_callback=None,
        )
        thread = threading.Thread(target=worker.start, name="embedq-embedded-worker",
                                  daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while worker.consumer is None or not getattr(worker.consumer, "task_consumer", None):
            if time.monotonic() > deadline:
                raise RuntimeError("the embedded worker did not start within 30 s")
            time.sleep(0.01)
        _started[id(app)] = (runtime, thread)
        _runtimes[id(app)] = runtime
        log.info("embedded worker started (memory broker, SQLite, in-process store)")
        return runtime
