"""Where embedq runs, decided once: embedded (one process) or a cluster.

- **Embedded** (no `EMBEDQ_BROKER_URL`): an in-memory broker and hot store, SQLite in the
  data dir (migrated on first use), and a Celery worker thread in this process, started
  the first time work is queued. Every deployment gets its own queues, store and worker,
  so two in one process never take each other's work.
- **Cluster**: Redis (or RabbitMQ) as the broker, Redis as the hot store, Postgres, and
  `embedq worker` processes elsewhere; nothing runs a model here, unless online misses
  are encoded here (EMBEDQ_ONLINE_ENCODE=local, `embedq.workers.local`).

`Deployment` builds the pieces for its mode and hands them to the services, so no other
module asks which mode it is in. Entry points (the CLI, the API, the MCP server, `Client`)
start from `Deployment.from_settings()`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from functools import cached_property

from embedq.config import Settings
from embedq.coordination import HotStore, make_hot_store
from embedq.coordination.executor import Executor
from embedq.encoders import Encoder
from embedq.encoders.catalog import Catalog
from embedq.heap import settle
from embedq.jobs.service import JobService
from embedq.jobs.store import JobStore, utcnow
from embedq.models import Database
from embedq.models.alias import switched_aliases
from embedq.models.vectors import open_vectors
from embedq.service import EmbeddingService
from embedq.tasks.app import create_app
from embedq.tasks.depth import broker_depth
from embedq.tasks.executor import QueueExecutor
from embedq.workers.chunk import run_chunk
from embedq.workers.embedded import EmbeddedWorker
from embedq.workers.local import LocalExecutor
from embedq.workers.runtime import WorkerRuntime


class Deployment:
    def __init__(self, settings: Settings, *, hot: HotStore | None = None,
                 db: Database | None = None, own_process: bool = False,
                 encoder: Encoder | None = None) -> None:
        """`own_process`: this deployment is what its process is for (a CLI command), so
        once an embedded worker started, the collector is settled (`embedq.heap`), as
        `embedq worker` and `embedq serve` do; a library caller's process is left as it
        is. `encoder`: the default model's embedded worker runs this one instead of
        loading it (a bench's stand-in for a device)."""
        self.settings = settings
        self.own_process = own_process
        self._encoder = encoder
        self.embedded = settings.embedded
        self.hot = hot if hot is not None else make_hot_store(settings)
        self.db = db if db is not None else Database.from_settings(settings)
        self.durable = open_vectors(self.db, sync_commit=settings.links.vector_sync_commit)
        self.app = create_app(settings)
        # Aliases switched at run time (`embedq models switch`) reach it within 2 s.
        self.catalog = Catalog(settings, switched=switched_aliases(settings, self.db))
        # Embedded: one worker per served model, by name (each model on its own queues).
        self._workers: dict[str, EmbeddedWorker] = {}
        self._local_runtime: WorkerRuntime | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings | None = None, *,
                      hot: HotStore | None = None, own_process: bool = False,
                      encoder: Encoder | None = None) -> Deployment:
        """The deployment `settings` describe (default: the environment); `hot`: a hot
        store to use instead of the one they name (tests run one body on each);
        `own_process`, `encoder`: see `__init__`."""
        settings = settings or Settings.from_env()
        if settings.embedded:
            _migrate_embedded(settings)
            # The memory transport is process-global: give each embedded deployment its own
            # queues so two with different settings never take each other's work.
            tag = uuid.uuid4().hex[:8]
            settings = settings.with_overrides(
                online_queue=f"{settings.queue.online_queue}-{tag}",
                bulk_queue=f"{settings.queue.bulk_queue}-{tag}",
            )
        return cls(settings, hot=hot, own_process=own_process, encoder=encoder)

    # --- the services
    @cached_property
    def service(self) -> EmbeddingService:
        return EmbeddingService(self.settings, hot=self.hot, db=self.db,
                                durable=self.durable, app=self.app, executor=self.executor,
                                catalog=self.catalog)

    @cached_property
    def executor(self) -> Executor:
        """Where the service's claimed misses are encoded: the online queue (the embedded
        worker starts on first use), or with EMBEDQ_ONLINE_ENCODE=local this process."""
        queue = QueueExecutor(self.app, self.settings, self.hot,
                              before_publish=self.ensure_worker, catalog=self.catalog)
        return self.local_executor(queue) if self.settings.queue.online_encode == "local" \
            else queue

    def local_executor(self, fallback: Executor) -> LocalExecutor:
        """Online misses encoded in this process: on the embedded worker's model, or in a
        cluster on a model loaded here (it does not announce itself as a worker: it
        consumes no queue)."""
        if self.embedded:
            self.ensure_worker()
            return LocalExecutor(self._default_worker().runtime, fallback)
        # The default model's (with EMBEDQ_MODELS the others' misses go to their queues).
        self._local_runtime = WorkerRuntime(self.catalog.default.settings, hot=self.hot,
                                            db=self.db, durable=self.durable, heartbeat=False)
        return LocalExecutor(self._local_runtime, fallback)

    def jobs(self, clock: Callable[[], datetime] = utcnow) -> JobService:
        """Jobs over this deployment's service; embedded jobs run their chunks here."""
        run_chunk = self._run_chunk_here if self.embedded else None
        return JobService(self.service, clock, run_chunk=run_chunk)

    # --- the embedded worker
    def ensure_worker(self) -> None:
        """Start the embedded workers once, one per served model, each on its model's
        queues (a cluster's workers run elsewhere)."""
        if self.embedded and not self._workers:
            with self._lock:
                if not self._workers:
                    self._workers = self._start_workers()
                    if self.own_process:
                        # The model and everything before it live as long as the process.
                        settle(self.settings.worker.gc_gen0)

    def _start_workers(self) -> dict[str, EmbeddedWorker]:
        if not self.catalog.several:
            return {self.catalog.default.name: EmbeddedWorker(self.app, self.settings,
                                                              self.hot, self._encoder)}
        # Task bodies are bound per app (workers.bodies): each model's worker gets its own.
        return {m.name: EmbeddedWorker(
                    create_app(m.settings), m.settings, self.hot,
                    self._encoder if m.name == self.catalog.default.name else None)
                for m in self.catalog.models.values()}

    def _default_worker(self) -> EmbeddedWorker:
        return self._workers.get(self.catalog.default.name) or next(iter(self._workers.values()))

    @property
    def worker_runtime(self) -> WorkerRuntime | None:
        """The embedded worker's runtime (the default model's), once started (None in a
        cluster)."""
        return self._default_worker().runtime if self._workers else None

    def _run_chunk_here(self, store: JobStore, job_id: str, chunk: int) -> None:
        """Run a chunk on the embedded worker of the job's model."""
        self.ensure_worker()
        job = store.get(job_id)
        served = self.catalog.route(job.model, job.revision)
        worker = self._workers.get(served.name) if served is not None else None
        run_chunk((worker or self._default_worker()).runtime, store, job_id, chunk)

    # --- introspection
    def queue_depth(self, queue: str) -> int:
        """Messages waiting in `queue`: the broker's count, or in embedded mode the
        embedded batcher's backlog (the in-process broker hands messages over at once)."""
        if self.embedded:
            self.ensure_worker()
            return sum(w.runtime.depth() for w in self._workers.values()
                       if w.runtime.settings.queue.online_queue == queue)
        here = self._local_runtime.depth() if self._local_runtime is not None \
            and queue == self.settings.queue.online_queue else 0
        return broker_depth(self.app, queue) + here

    def close(self) -> None:
        executor = self.__dict__.get("executor")
        if isinstance(executor, LocalExecutor):  # store what it computed first
            executor.drain()
        if self._local_runtime is not None:
            self._local_runtime.close()
        for worker in self._workers.values():
            worker.close()
        self._workers = {}
        self.durable.close()
        self.db.dispose()


def _migrate_embedded(settings: Settings) -> None:
    """The embedded SQLite database migrates itself; servers use `embedq db upgrade`."""
    from embedq.models.migrate import upgrade

    if settings.resolved_database_url.startswith("sqlite"):
        upgrade(settings.resolved_database_url)
