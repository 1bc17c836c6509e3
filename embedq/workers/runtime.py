"""What runs inside a worker process: the loaded encoder, the batcher, and task handling.

One `WorkerRuntime` per process: it loads the model once, warms it up, and then serves
every task thread. `handle_embed` is the whole life of one online message:

  1. fingerprints already in the durable tier (a duplicate delivery) are answered from it;
  2. texts that died with their process `max_attempts` times are dead-lettered;
  3. a run lease per fingerprint fences concurrent deliveries of the same work (a
     redelivery after the visibility timeout while the first copy still runs);
  4. the rest go through the batcher; each item succeeds or fails on its own.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any

from embedq.cache import DurableStore, HotStore, StoredVector, keys, make_hot_store, to_bytes
from embedq.cache.hot import BatchRecord, encode_failure
from embedq.config import Settings
from embedq.encoders import Encoder, finish_vector, load_encoder
from embedq.errors import (
    EmbeddingFailed,
    EmbedqError,
    InvalidVector,
    PoisonText,
    Unavailable,
    UpstreamError,
)
from embedq.fingerprint import EncodeSpec
from embedq.models import Database
from embedq.workers.batcher import BULK, ONLINE, Batch, Batcher, Item, Room

log = logging.getLogger("embedq.worker")

ATTEMPTS_TTL_S = 3600
BULK_HOT_TTL_S = 300


class WorkerRuntime:
    def __init__(
        self,
        settings: Settings,
        *,
        encoder: Encoder | None = None,
        hot: HotStore | None = None,
        db: Database | None = None,
    ) -> None:
        self.settings = settings
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}"
        self.hot = hot or make_hot_store(settings)
        self.db = db or Database(settings.resolved_database_url)
        self.durable = DurableStore(self.db)
        started = time.perf_counter()
        self.encoder = encoder or load_encoder(settings)
        self.encoder.warm_up()
        log.info(
            "worker %s ready: model=%s dim=%d loaded+warmed in %.0f ms",
            self.worker_id, self.encoder.name, self.encoder.dimension,
            (time.perf_counter() - started) * 1000,
        )
        on_gpu = str(getattr(self.encoder, "device", "cpu")).startswith("cuda")
        self.batcher = Batcher(
            self.encoder,
            self._finish_batch,
            wait_ms=settings.batch_wait_ms,
            max_tokens=settings.batch_max_tokens or (32_768 if on_gpu else 4096),
            max_texts=settings.batch_max_texts or (512 if on_gpu else 64),
            on_attempt=self._count_attempt,
            parallel=settings.upstream_concurrency if settings.encoder == "upstream" else 1,
            bulk_step_ms=settings.bulk_step_ms,
        )
        self._stop = threading.Event()
        self._leased: set[str] = set()
        self._usage = (0, 0)
        self._leases_lock = threading.Lock()
        for target in (self._heartbeat, self._keep_leases):
            threading.Thread(target=target, name=f"embedq{target.__name__}", daemon=True).start()

    # --- liveness
    def info(self) -> dict[str, object]:
        return {
            "model": self.encoder.name,
            "revision": self.encoder.revision,
            "dimension": self.encoder.dimension,
            "max_seq_length": self.encoder.max_seq_length,
            "device": getattr(self.encoder, "device", "cpu"),
            "pid": os.getpid(),
            "queued": self.batcher.depth(),
        }

    def _heartbeat(self) -> None:
        while not self._stop.is_set():
            try:
                self.hot.heartbeat(self.worker_id, self.info(), ttl_s=15)
            except EmbedqError as exc:
                log.warning("heartbeat failed: %s", exc)
            self._stop.wait(5)

    def close(self) -> None:
        self._stop.set()
        self.batcher.stop()

    # --- one message
    def handle_embed(self, payload: dict[str, Any], lane: int = ONLINE) -> dict[str, int]:
        """Embed every (fingerprint, text) in `payload`; return counts, never vectors."""
        spec = EncodeSpec.from_json(payload["spec"])
        pairs: dict[str, str] = {fp: text for fp, text in payload["items"]}
        return self.embed_pairs(spec, pairs, lane)

    def embed_pairs(self, spec: EncodeSpec, pairs: dict[str, str], lane: int,
                    room: Room | None = None) -> dict[str, int]:
        """Embed (fingerprint -> text) pairs; `room` is batcher room the caller reserved
        (filled by the first submit; the caller releases it if nothing was submitted)."""
        fps = list(pairs)
        failures: dict[str, BaseException] = {}
        if (spec.model, spec.revision) != (self.encoder.name, self.encoder.revision):
            err = EmbeddingFailed(
                f"this worker serves {self.encoder.name}@{self.encoder.revision}, not "
                f"{spec.model}@{spec.revision}: point the request at a matching deployment"
            )
            self._fail({fp: err for fp in fps})
            return {"done": 0, "failed": len(fps), "reused": 0}

        stored = self.durable.get_many(fps)
        if stored:
            self._announce(stored)
        todo = [fp for fp in fps if fp not in stored]

        attempts = dict(zip(todo, self.hot.peek_attempts(todo), strict=True))
        for fp, n in attempts.items():
            if n >= self.settings.max_attempts:
                failures[fp] = PoisonText(
                    f"the worker process died {n} times while encoding this text; it is "
                    "dead-lettered and will not be retried. Check the text or the model",
                    fp,
                )
        if failures:
            self._fail(failures)
            self.hot.incr({"dead_lettered": len(failures)})
        todo = [fp for fp in todo if fp not in failures]
        suspects = {fp for fp in todo if attempts[fp] > 0}
        done = self._run_leased(spec, {fp: pairs[fp] for fp in todo}, suspects, lane, room)
        return {"done": done + len(stored), "failed": len(fps) - done - len(stored),
                "reused": len(stored)}

    def _run_leased(
        self, spec: EncodeSpec, pairs: dict[str, str], suspects: set[str], lane: int,
        room: Room | None = None,
    ) -> int:
        """Encode under run leases; wait out fingerprints another execution is running."""
        done = 0
        pending = dict(pairs)
        while pending:
            names = [keys.run_lease(fp) for fp in pending]
            won = self.hot.acquire(names, self.worker_id, self.settings.run_lease_ms)
            mine = [fp for fp, w in zip(pending, won, strict=True) if w]
            others = [fp for fp, w in zip(pending, won, strict=True) if not w]
            if mine:
                with self._leases_lock:
                    self._leased.update(mine)
                try:
                    done += self._encode(spec, {fp: pending[fp] for fp in mine}, suspects,
                                         lane, room)
                finally:
                    with self._leases_lock:
                        self._leased.difference_update(mine)
                    self.hot.release([keys.run_lease(fp) for fp in mine], self.worker_id)
                for fp in mine:
                    del pending[fp]
            if not others:
                break
            finished, abandoned = self._wait_for_others(others)
            done += finished
            for fp in others:
                if fp not in abandoned:
                    del pending[fp]
        return done

    def _wait_for_others(self, fps: list[str]) -> tuple[int, set[str]]:
        """Wait while other live executions hold these leases (they refresh them).

        Returns how many finished with a vector, and the fingerprints whose lease vanished
        with no result (their runner died): the caller takes those over.
        """
        deadline = time.monotonic() + self.settings.visibility_timeout_s
        left = list(fps)
        ok = 0
        abandoned: set[str] = set()
        while left and time.monotonic() < deadline:
            outcomes = self.hot.get_outcomes(left)
            holders = self.hot.holders([keys.run_lease(fp) for fp in left])
            still = []
            for fp, (v, e), h in zip(left, outcomes, holders, strict=True):
                if v is not None:
                    ok += 1
                elif e is not None:
                    continue
                elif h is None:
                    abandoned.add(fp)
                else:
                    still.append(fp)
            left = still
            if left:
                time.sleep(0.05)
        return ok, abandoned

    def _keep_leases(self) -> None:
        """Refresh the run leases of everything this process is encoding: a lease outlives
        its runner by at most run_lease_ms, however long the batch takes."""
        interval_s = self.settings.run_lease_ms / 3000
        while not self._stop.wait(interval_s):
            with self._leases_lock:
                names = [keys.run_lease(fp) for fp in self._leased]
            try:
                self.hot.extend(names, self.settings.run_lease_ms)
            except EmbedqError as exc:
                log.warning("lease refresh failed: %s", exc)

    def _encode(self, spec: EncodeSpec, pairs: dict[str, str], suspects: set[str],
                lane: int, room: Room | None = None) -> int:
        items = [
            Item(fp=fp, text=text, spec=spec, lane=lane, alone=fp in suspects)
            for fp, text in pairs.items()
        ]
        self.batcher.submit(items, room)
        wait_futures([i.future for i in items])
        unavailable = [i.future.exception() for i in items
                       if isinstance(i.future.exception(), Unavailable)]
        if unavailable:
            # Infrastructure, not the text: forget the attempt and let the task retry.
            self.hot.clear_attempts([i.fp for i in items])
            raise unavailable[0]  # type: ignore[misc]
        return sum(1 for i in items if i.future.exception() is None)

    # --- batcher hooks
    def _count_attempt(self, fps: list[str]) -> None:
        self.hot.add_attempts(fps, ATTEMPTS_TTL_S)

    def _finish_batch(self, batch: Batch) -> None:
        """Writer thread: validate, persist once, fill the hot tier, resolve each item."""
        elapsed_ms = (time.perf_counter() - batch.started - batch.paused) * 1000
        items = [item for waiters in batch.waiters for item in waiters]
        if batch.error is not None:
            self._batch_failed(batch, items)
            return
        assert batch.raw is not None
        rows: dict[str, StoredVector] = {}
        bad: dict[str, BaseException] = {}
        for row, waiters in zip(batch.raw, batch.waiters, strict=True):
            for item in waiters:
                try:
                    vec = finish_vector(row, item.spec, self.encoder.dimension)
                except InvalidVector as exc:
                    bad[item.fp] = InvalidVector(str(exc), item.fp)
                    continue
                rows[item.fp] = StoredVector(
                    item.fp, item.spec.model, item.spec.revision, int(vec.shape[0]),
                    to_bytes(vec), item.spec.dtype,
                )
        try:
            self.durable.put_many(list(rows.values()))
        except Unavailable as exc:
            for item in items:
                item.future.set_exception(exc)
            return
        blobs = {fp: r.vector for fp, r in rows.items()}
        online = {i.fp for i in items if i.lane == ONLINE}
        # Bulk vectors stay hot only long enough for waiters to collect them: a million-row
        # job must not fill Redis; Postgres answers later lookups. One round trip in all.
        self.hot.record_batch(BatchRecord(
            vectors=[
                ({fp: b for fp, b in blobs.items() if fp in online}, self.settings.hot_ttl_s),
                ({fp: b for fp, b in blobs.items() if fp not in online},
                 min(self.settings.hot_ttl_s, BULK_HOT_TTL_S)),
            ],
            clear_attempts=sorted({i.fp for i in items}),
            release=[keys.claim(fp) for fp in blobs],
            done=sorted(blobs),
            counts={"encoded": len(batch.texts), "batches": 1, **self._upstream_usage()},
            observations={"batch_texts": len(batch.texts), "batch_tokens": batch.tokens,
                          "encode_seconds": elapsed_ms / 1000},
        ))
        if bad:
            self._fail(bad)
        for item in items:
            if item.fp in blobs:
                item.future.set_result(blobs[item.fp])
            else:
                item.future.set_exception(bad[item.fp])
        log.info(
            "batch done texts=%d items=%d tokens=%d failed=%d cost_ms=%.1f",
            len(batch.texts), len(items), batch.tokens, len(bad), elapsed_ms,
        )

    def _upstream_usage(self) -> dict[str, int]:
        """Calls and tokens the remote encoder spent since the last batch (else nothing)."""
        calls = int(getattr(self.encoder, "calls", 0))
        tokens = int(getattr(self.encoder, "tokens", 0))
        delta = {"upstream_calls": calls - self._usage[0],
                 "upstream_tokens": tokens - self._usage[1]}
        self._usage = (calls, tokens)
        return delta

    def _batch_failed(self, batch: Batch, items: list[Item]) -> None:
        error = batch.error
        assert error is not None
        if isinstance(error, Unavailable):
            for item in items:
                item.future.set_exception(error)
            return
        if isinstance(error, UpstreamError):
            # The upstream already had its bounded retries; per-text retries would only
            # multiply calls to a service that is failing.
            self.hot.incr(self._upstream_usage())
            failure = EmbeddingFailed(str(error))
            self._fail({i.fp: failure for i in items})
            for item in items:
                item.future.set_exception(failure)
            return
        if len(batch.texts) > 1:
            # One bad text must not fail its batch-mates: retry each text on its own.
            log.warning("batch of %d failed (%s); retrying each text alone",
                        len(batch.texts), error)
            retry = [Item(i.fp, i.text, i.spec, i.lane, alone=True) for i in items]
            for old, new in zip(items, retry, strict=True):
                new.future.add_done_callback(_relay(old.future))
            self.batcher.submit(retry)
            return
        failure = EmbeddingFailed(f"the encoder failed on this text: {error}")
        self._fail({i.fp: failure for i in items})
        for item in items:
            item.future.set_exception(failure)

    # --- outcomes
    def _announce(self, stored: dict[str, bytes]) -> None:
        self.hot.put_vectors(stored, self.settings.hot_ttl_s)
        self.hot.release([keys.claim(fp) for fp in stored])
        self.hot.publish_done(sorted(stored))

    def _fail(self, failures: dict[str, BaseException]) -> None:
        self.hot.put_failures(
            {fp: encode_failure(e) for fp, e in failures.items()}, self.settings.failure_ttl_s
        )
        self.hot.release([keys.claim(fp) for fp in failures])
        self.hot.publish_done(sorted(failures))
        self.hot.incr({"failed": len(failures)})
        for fp, e in failures.items():
            log.warning("failed fp=%s: %s", fp[:12], e)


def _relay(target: Future[bytes]) -> Any:
    def relay(source: Future[bytes]) -> None:
        exc = source.exception()
        if exc is not None:
            target.set_exception(exc)
        else:
            target.set_result(source.result())

    return relay


_current: WorkerRuntime | None = None
_by_queue: dict[str, WorkerRuntime] = {}


def install(runtime: WorkerRuntime, queues: list[str] | None = None) -> None:
    """Make `runtime` the one tasks use: per queue for embedded workers (several may share
    a process, each on its own queues), else process-wide."""
    global _current
    if queues is None or _current is None:
        _current = runtime
    if queues is not None:
        _by_queue.update({q: runtime for q in queues})


def current(queue: str | None = None) -> WorkerRuntime:
    """The runtime serving `queue` (embedded workers), else the process's runtime."""
    if queue is not None and queue in _by_queue:
        return _by_queue[queue]
    if _current is None:
        raise RuntimeError(
            f"no worker runtime for queue {queue!r} in this process: "
            "start workers with `embedq worker`"
        )
    return _current


__all__ = ["BULK", "ONLINE", "WorkerRuntime", "current", "install"]
