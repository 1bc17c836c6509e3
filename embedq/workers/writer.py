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
from typing import Any

from embedq import stages
from embedq.config import Settings
from embedq.coordination.outcomes import publish_failures
from embedq.coordination.store import BatchRecord, HotStore, failures_of
from embedq.encoders import Encoder
from embedq.encoders.base import finish_rows
from embedq.errors import EmbeddingFailed, InvalidVector, Unavailable, UpstreamError
from embedq.fingerprint import EncodeSpec
from embedq.models.vectors import StoredVector, VectorStore, to_bytes
from embedq.workers.items import ONLINE, Batch, Item
from embedq.workers.outcome import Outcome

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

    def __call__(self, batches: list[Batch]) -> None:
        """Write the batches the model finished since the last write, together: one
        durable statement and one hot-store round trip for all of them (a model that
        outruns the writes hands over several at once; a slow one, one at a time)."""
        with stages.timed("writer"):
            good = [b for b in batches if self._encoded(b)]
            if good:
                self._write(good)

    def _encoded(self, batch: Batch) -> bool:
        """True when `batch` has rows to write; a failed one is handled here."""
        items = [item for waiters in batch.waiters for item in waiters]
        if batch.error is None:
            assert batch.raw is not None
            width = self.encoder.dimension
            if len(batch.texts) > 1 and width and batch.raw.shape[1:] != (width,):
                # A whole batch of the wrong width says nothing about which text caused
                # it: like a failed batch, each text is tried alone, and only its own row
                # refused.
                batch.error = InvalidVector(f"encoder returned a batch of shape "
                                            f"{batch.raw.shape}, expected (n, {width})")
        if batch.error is not None:
            self._failed(batch, items)
            return False
        return True

    def _write(self, batches: list[Batch]) -> None:
        """Validate, persist once, fill the hot store, resolve each item."""
        now = time.perf_counter()
        items = [item for b in batches for waiters in b.waiters for item in waiters]
        rows: dict[str, StoredVector] = {}
        bad: dict[str, BaseException] = {}
        for batch in batches:
            ok, refused = self._finish(batch)
            rows.update(ok)
            bad.update(refused)
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
        texts = sum(len(b.texts) for b in batches)
        # Bulk vectors get a hot copy only where an online caller joined the work (a
        # million-row job must not fill Redis); a job's own waiters, and later lookups,
        # read Postgres. One round trip in all, the texts whose vectors were refused
        # included.
        self.hot.record_batch(BatchRecord(
            vectors=[({fp: b for fp, b in blobs.items() if fp in online}, hot_ttl_s)],
            wanted={fp: b for fp, b in blobs.items() if fp not in online},
            wanted_ttl_s=min(hot_ttl_s, BULK_HOT_TTL_S),
            failures=failures_of(bad), failure_ttl_s=self.settings.worker.failure_ttl_s,
            forget_attempts=sorted({i.fp for i in items}),
            free_claims=[*blobs, *bad],
            done=sorted([*blobs, *bad]),
            counts={"encoded": texts, "batches": len(batches), "failed": len(bad),
                    "model_busy_us": int(sum(b.encode_s for b in batches) * 1_000_000),
                    **self.usage(), **stages.take()},
            observations=[{"batch_texts": len(b.texts), "batch_tokens": b.tokens,
                           "encode_seconds": now - b.started - b.paused} for b in batches],
        ))
        for fp, why in bad.items():
            log.warning("failed fp=%s: %s", fp[:12], why)
        for item in items:
            if item.fp in blobs:
                item.future.set_result(blobs[item.fp])
            else:
                item.future.set_exception(bad[item.fp])
        for b in batches if log.isEnabledFor(logging.INFO) else ():  # args cost too
            log.info("batch done texts=%d items=%d tokens=%d failed=%d cost_ms=%.1f",
                     len(b.texts), sum(len(w) for w in b.waiters), b.tokens,
                     sum(1 for w in b.waiters for i in w if i.fp in bad),
                     (now - b.started - b.paused) * 1000)

    def _finish(self, batch: Batch) -> tuple[dict[str, StoredVector], dict[str, BaseException]]:
        """Each item's vector finished for its spec, or why it was refused (NaN, Inf, a
        wrong width): its own row only. The rows of one spec are finished together."""
        assert batch.raw is not None
        by_spec: dict[EncodeSpec, list[tuple[int, Item]]] = {}
        for r, waiters in enumerate(batch.waiters):
            for item in waiters:
                by_spec.setdefault(item.spec, []).append((r, item))
        rows: dict[str, StoredVector] = {}
        bad: dict[str, BaseException] = {}
        for spec, members in by_spec.items():
            picked = batch.raw[[r for r, _ in members]]
            done, reasons = finish_rows(picked, spec, self.encoder.dimension)
            for (_, item), vec, reason in zip(members, done, reasons, strict=True):
                if reason is not None:
                    bad[item.fp] = InvalidVector(reason, item.fp)
                else:
                    rows[item.fp] = StoredVector(item.fp, spec.model, spec.revision,
                                                 int(vec.shape[0]), to_bytes(vec), spec.dtype)
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
            retry = [dataclasses.replace(i, alone=True, future=Outcome()) for i in items]
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


def _relay(target: Outcome[bytes]) -> Any:
    def relay(source: Outcome[bytes]) -> None:
        exc = source.exception()
        if exc is not None:
            target.set_exception(exc)
        else:
            target.set_result(source.result())

    return relay
