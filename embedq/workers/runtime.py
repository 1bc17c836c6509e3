"""What runs inside a worker process: the loaded encoder, the batcher, and consuming.

One `WorkerRuntime` per worker (an `embedq worker` process, or an embedded worker thread):
it loads the model once, warms it up, and then serves every task thread. `embed_pairs` is
the whole life of one message's texts:

  1. fingerprints already in the durable tier (a duplicate delivery) are answered from it;
  2. texts that died with their process `max_attempts` times are dead-lettered (fencing);
  3. a run lease per fingerprint fences concurrent deliveries of the same work (fencing);
  4. the rest go through the batcher; the writer persists each batch and resolves each
     item on its own.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from concurrent.futures import wait as wait_futures
from typing import Any

from embedq import coordination
from embedq.cache import DurableStore, HotStore, make_hot_store
from embedq.config import Settings
from embedq.encoders import Encoder, load_encoder
from embedq.errors import EmbeddingFailed, EmbedqError, Unavailable
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.models import Database
from embedq.workers.batcher import BULK, ONLINE, Batcher, Item, Room
from embedq.workers.fencing import Fencing
from embedq.workers.writer import BatchWriter

log = logging.getLogger("embedq.worker")


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
        self.hot = hot if hot is not None else make_hot_store(settings)
        self.db = db if db is not None else Database.from_settings(settings)
        self.durable = DurableStore(self.db)
        started = time.perf_counter()
        self.encoder = encoder if encoder is not None else load_encoder(settings)
        self.encoder.warm_up()
        # The revision is every fingerprint's: an operator compares it across workers.
        log.info(
            "worker %s ready: model=%s revision=%s dimension=%s device=%s "
            "loaded+warmed in %.0f ms",
            self.worker_id, self.encoder.name, self.encoder.revision,
            self.encoder.dimension or "unknown until the first call",
            getattr(self.encoder, "device", "cpu"), (time.perf_counter() - started) * 1000,
        )
        on_gpu = str(getattr(self.encoder, "device", "cpu")).startswith("cuda")
        self.fencing = Fencing(self.hot, settings, self.worker_id)
        self.writer = BatchWriter(self.hot, self.durable, settings, self.encoder,
                                  resubmit=lambda items: self.batcher.submit(items))
        self.batcher = Batcher(
            self.encoder,
            self.writer,
            wait_ms=settings.batch_wait_ms,
            max_tokens=settings.batch_max_tokens or (32_768 if on_gpu else 4096),
            max_texts=settings.batch_max_texts or (512 if on_gpu else 64),
            on_attempt=self.fencing.count_attempt,
            parallel=settings.upstream_concurrency if settings.encoder == "upstream" else 1,
            bulk_step_ms=settings.bulk_step_ms,
        )
        self._stop = threading.Event()
        threading.Thread(target=self._heartbeat, name="embedq-heartbeat", daemon=True).start()

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
        self.fencing.close()
        self.batcher.stop()

    # --- one message
    def handle_embed(self, payload: dict[str, Any], lane: int = ONLINE) -> dict[str, int]:
        """Embed every (fingerprint, text) in `payload`; return counts, never vectors.

        The fingerprint in a message is recomputed from its text and spec, never trusted:
        a message whose fingerprint does not match (forged, or from a producer with
        another fingerprint scheme) is refused and logged, so it cannot store one text's
        vector under another text's key. Its fingerprint gets no outcome either: a real
        request for it must not read a forger's failure.
        """
        spec = EncodeSpec.from_json(payload["spec"])
        pairs: dict[str, str] = {}
        refused = 0
        for fp, text in payload["items"]:
            if isinstance(text, str) and fingerprint(spec, text) == fp:
                pairs[fp] = text
            else:
                refused += 1
                log.warning("refused a message item: fingerprint mismatch (claimed fp=%s, "
                            "spec=%s); check the producer's embedq version",
                            str(fp)[:12], spec.model)
        if refused:
            self.hot.incr({"refused": refused})
        counts = self.embed_pairs(spec, pairs, lane) if pairs else \
            {"done": 0, "failed": 0, "reused": 0}
        return {**counts, "refused": refused}

    def embed_pairs(self, spec: EncodeSpec, pairs: dict[str, str], lane: int,
                    room: Room | None = None) -> dict[str, int]:
        """Embed (fingerprint -> text) pairs; `room` is batcher room the caller reserved
        (filled by the first submit; the caller releases it if nothing was submitted)."""
        fps = list(pairs)
        if (spec.model, spec.revision) != (self.encoder.name, self.encoder.revision):
            err = EmbeddingFailed(
                f"this worker serves model {self.encoder.name!r} revision "
                f"{self.encoder.revision!r}, but the request was made for model "
                f"{spec.model!r} revision {spec.revision!r}; nothing was computed or stored. "
                "Give the producer (API, client) and the workers on its queues the same "
                "EMBEDQ_MODEL and EMBEDQ_MODEL_REVISION, or give each revision its own "
                "EMBEDQ_ONLINE_QUEUE and EMBEDQ_BULK_QUEUE"
            )
            self.writer.fail({fp: err for fp in fps})
            return {"done": 0, "failed": len(fps), "reused": 0}

        stored = self.durable.get_many(fps)
        if stored:
            coordination.publish_vectors(self.hot, stored, self.settings.hot_ttl_s)
        todo = [fp for fp in fps if fp not in stored]
        dead, suspects = self.fencing.triage(todo)
        todo = [fp for fp in todo if fp not in dead]

        def encode(mine: dict[str, str]) -> int:
            return self._encode(spec, mine, suspects, lane, room)

        done = self.fencing.run_leased({fp: pairs[fp] for fp in todo}, encode)
        return {"done": done + len(stored), "failed": len(fps) - done - len(stored),
                "reused": len(stored)}

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
            self.fencing.forget_attempts([i.fp for i in items])
            raise unavailable[0]  # type: ignore[misc]
        return sum(1 for i in items if i.future.exception() is None)


__all__ = ["BULK", "ONLINE", "WorkerRuntime"]
