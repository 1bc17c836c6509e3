"""The embedded worker: a real Celery worker (threads pool) inside the calling process.

Used when no broker is configured (EMBEDQ_BROKER_URL unset, i.e. memory://): `make demo`,
`embedq embed` and `Client()` then work on a fresh machine with no servers at all, through
the same tasks, batcher and stores as a deployment. `embedq.deployment` starts one per
deployment, on its own app and queues.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import Celery

from embedq.config import Settings
from embedq.coordination import HotStore
from embedq.encoders import Encoder
from embedq.workers.bodies import AppThreadPool, register
from embedq.workers.runtime import WorkerRuntime

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30


class EmbeddedWorker:
    """A worker thread consuming `app`'s queues in this process, on its own runtime."""

    def __init__(self, app: Celery, settings: Settings, hot: HotStore,
                 encoder: Encoder | None = None) -> None:
        """`encoder`: run this one (loaded already) instead of loading the settings'."""
        queues = [settings.queue.online_queue, settings.queue.bulk_queue]
        self.runtime = WorkerRuntime(settings, encoder=encoder, hot=hot, queues=queues)
        register(app, self.runtime)
        app.finalize()
        self._worker = app.WorkController(
            app=app,
            pool=AppThreadPool,
            concurrency=settings.worker.concurrency,
            queues=queues,
            hostname=f"embedq-embedded@{self.runtime.worker_id}-{settings.queue.online_queue}",
            loglevel=logging.WARNING,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            ready_callback=None,
        )
        self._thread = threading.Thread(target=self._worker.start,
                                        name="embedq-embedded-worker", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not getattr(self._worker.consumer, "task_consumer", None):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the embedded worker did not start within {START_TIMEOUT_S} s")
            time.sleep(0.01)
        log.info("embedded worker started (memory broker, SQLite, in-process store)")

    def close(self) -> None:
        """Stop consuming, then the runtime's threads (heartbeat, leases, batchers); the
        worker thread ends on its own (waiting for it would add its poll interval)."""
        try:
            self._worker.stop(in_sighandler=False)
        finally:
            self.runtime.close()
