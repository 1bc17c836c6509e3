"""The batch writer: what happens to a batch after the model ran (the writer thread).

For each batch: finish every vector for its item's spec, reject NaN/Inf/wrong widths,
persist the batch in one statement (the fence against duplicate work), fill the hot store
(online vectors for `hot_ttl_s`, bulk ones briefly), release claims, wake waiters, count,
and resolve each item's future on its own. A failed batch of several texts is retried
text by text, so one bad text never fails its batch-mates; a batch the upstream API failed
is not (the upstream is at fault, not a text): its texts fail as a retryable UpstreamError.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from embedq.config import Settings
from embedq.coordination.outcomes import publish_failures
from embedq.coordination.store import BatchRecord, HotStore, failures_of
from embedq.encoders import Encoder, finish_vector
from embedq.errors import EmbeddingFailed, InvalidVector, Unavailable, UpstreamError
from embedq.models.vectors import StoredVector, VectorStore, to_bytes
from embedq.workers.items import ONLINE, Batch, Item

log = logging.getLogger("embedq.worker")

BULK_HOT_TTL_S = 300


class BatchWriter:
    def __init__(self, hot: HotStore, durable: VectorStore, settings: Settings,
                 encoder: Encoder, resubmit: Callable[[list[Item]], None]) -> None:
        self.hot = hot
        self.durable = durable
        self.settings = settings
        self.encoder = encoder
        self.resubmit = resubmit
        self._usage = (0, 0)

    def __call__(self, batch: Batch) -> None:
        """Validate, persist once, fill the hot store, resolve each item."""
        elapsed_ms = (time.perf_counter() - batch.started - batch.paused) * 1000
        items = [item for waiters in batch.waiters for item in waiters]
        if batch.error is not None:
            self._failed(batch, items)
            return
        assert batch.raw is not None
        width = self.encoder.dimension
        if len(batch.texts) > 1 and width and batch.raw.shape[1:] != (width,):
            # A whole batch of the wrong width says nothing about which text caused it:
            # like a failed batch, each text is tried alone, and only its own row refused.
            batch.error = InvalidVector(f"encoder returned a batch of shape "
                                        f"{batch.raw.shape}, expected (n, {width})")
            self._failed(batch, items)
            return
        rows, bad = self._finish(batch)
        _answer_early(items, rows)
        try:
            self.durable.put_many(list(rows.values()))
        except Unavailable as exc:
            for item in items:
                item.future.set_exception(exc)
            return
        blobs = {fp: r.vector for fp, r in rows.items()}
        online = {i.fp for i in items if i.lane == ONLINE}
        hot_ttl_s = self.settings.worker.hot_ttl_s
        # Bulk vectors stay hot only long enough for waiters to collect them: a million-row
        # job must not fill Redis; Postgres answers later lookups. One round trip in all,
        # the texts whose vectors were refused included.
        self.hot.record_batch(BatchRecord(
            vectors=[
                ({fp: b for fp, b in blobs.items() if fp in online}, hot_ttl_s),
                ({fp: b for fp, b in blobs.items() if fp not in online},
                 min(hot_ttl_s, BULK_HOT_TTL_S)),
            ],
            failures=failures_of(bad), failure_ttl_s=self.settings.worker.failure_ttl_s,
            forget_attempts=sorted({i.fp for i in items}),
            free_claims=[*blobs, *bad],
            done=sorted([*blobs, *bad]),
            counts={"encoded": len(batch.texts), "batches": 1, "failed": len(bad),
                    **self.usage()},
            observations={"batch_texts": len(batch.texts), "batch_tokens": batch.tokens,
                          "encode_seconds": elapsed_ms / 1000},
        ))
        for fp, refused in bad.items():
            log.warning("failed fp=%s: %s", fp[:12], refused)
        for item in items:
            if item.fp in blobs:
                item.future.set_result(blobs[item.fp])
            else:
                item.future.set_exception(bad[item.fp])
        log.info(
            "batch done texts=%d items=%d tokens=%d failed=%d cost_ms=%.1f",
            len(batch.texts), len(items), batch.tokens, len(bad), elapsed_ms,
        )

    def _finish(self, batch: Batch) -> tuple[dict[str, StoredVector], dict[str, BaseException]]:
        """Each item's vector finished for its spec, or why it was refused (NaN, Inf, a
        wrong width): its own row only."""
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
        return rows, bad

    def fail(self, failures: dict[str, BaseException],
             counts: dict[str, int] | None = None) -> None:
        publish_failures(self.hot, failures, self.settings.worker.failure_ttl_s, counts)

    def usage(self) -> dict[str, int]:
        """Calls and tokens the remote encoder spent since the last batch (else nothing)."""
        calls = int(getattr(self.encoder, "calls", 0))
        tokens = int(getattr(self.encoder, "tokens", 0))
        delta = {"upstream_calls": calls - self._usage[0],
                 "upstream_tokens": tokens - self._usage[1]}
        self._usage = (calls, tokens)
        return delta

    def _failed(self, batch: Batch, items: list[Item]) -> None:
        error = batch.error
        assert error is not None
        if isinstance(error, Unavailable):
            for item in items:
                item.future.set_exception(error)
            return
        if isinstance(error, UpstreamError):
            # The upstream already had its bounded retries; per-text retries would only
            # multiply calls to a service that is failing. Its outage is not the texts'
            # fault: the failure stays an UpstreamError (retryable, HTTP 502), and the
            # attempt is forgotten, so an outage never dead-letters a text as poison.
            fps = sorted({i.fp for i in items})
            outage = UpstreamError(
                f"{error}. Nothing was cached for this text: retry in a few seconds"
            )
            self.hot.forget_attempts(fps)
            self.fail({fp: outage for fp in fps}, self.usage())
            for item in items:
                item.future.set_exception(outage)
            return
        if len(batch.texts) > 1:
            # One bad text must not fail its batch-mates: retry each text on its own.
            log.warning("batch of %d failed (%s); retrying each text alone",
                        len(batch.texts), error)
            retry = [dataclasses.replace(i, alone=True, future=Future()) for i in items]
            for old, new in zip(items, retry, strict=True):
                new.future.add_done_callback(_relay(old.future))
            self.resubmit(retry)
            return
        failure = EmbeddingFailed(f"the encoder failed on this text: {error}")
        self.fail({i.fp: failure for i in items})
        for item in items:
            item.future.set_exception(failure)


def _answer_early(items: list[Item], rows: dict[str, StoredVector]) -> None:
    """A caller in this process has its vector before the writes: its claim stays held
    until they are done, so a request for the same text meanwhile joins it (no second
    computation), and is answered from the stores once they hold it."""
    for item in items:
        if item.ticket is not None and item.ticket.answer is not None and item.fp in rows:
            item.ticket.answer(item.fp, rows[item.fp].vector)


def _relay(target: Future[bytes]) -> Any:
    def relay(source: Future[bytes]) -> None:
        exc = source.exception()
        if exc is not None:
            target.set_exception(exc)
        else:
            target.set_result(source.result())

    return relay
