"""What runs inside a worker process: the loaded encoders, their batchers, and consuming.

One `WorkerRuntime` per worker (an `embedq worker` process, or an embedded worker thread):
it loads the model once per served precision tier (EMBEDQ_TIERS), each with its own
batcher and writer, warms them up, and then serves every task thread. A message's spec
names a revision, which names its tier: its texts go to the encoder of that revision.
`embed_pairs` is the whole life of one message's texts:

  1. a run lease per fingerprint fences concurrent deliveries of the same work
     (fencing), taken in the same atomic step that finds a vector already in the hot
     tier: such a fingerprint (a duplicate delivery) is answered, not leased. A runner
     stores its vector before it releases its lease, so checking first and leasing next
     would let a copy that looked just before the runner finished compute it again;
  2. under the lease, a delivery that may repeat a finished one also looks in the durable
     tier; texts that died with their process `max_attempts` times are dead-lettered;
  3. the rest go through the batcher; the writer persists each batch and resolves each
     item on its own. An online message's texts that nobody waits for any more when
     their batch is about to encode are left out (`workers.interest`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from embedq import stages
from embedq.config import Settings
from embedq.coordination import HotStore, make_hot_store
from embedq.coordination.executor import Ticket
from embedq.coordination.outcomes import publish_vectors
from embedq.coordination.waiting import Waiting
from embedq.encoders import Encoder, check_device, load_encoder
from embedq.encoders.tiers import CUDA_TIERS, tier_of_revision
from embedq.errors import EmbeddingFailed, EmbedqError, Unavailable
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.models import Database
from embedq.models.vectors import VectorStore, open_vectors
from embedq.workers.batcher import Batcher
from embedq.workers.fencing import Fencing, Ran
from embedq.workers.interest import DropUnwanted
from embedq.workers.items import BULK, ONLINE, Item, Room
from embedq.workers.outcome import wait_all
from embedq.workers.writer import BatchWriter

log = logging.getLogger("embedq.worker")

HEARTBEAT_S = 5.0
CLOSE_WAIT_S = 2.0  # how long stopping waits for a heartbeat in progress


@dataclass
class Served:
    """One served tier: its encoder, and the batcher and writer that run it."""

    tier: str
    encoder: Encoder
    writer: BatchWriter
    batcher: Batcher


class WorkerRuntime:
    def __init__(
        self,
        settings: Settings,
        *,
        encoder: Encoder | None = None,
        hot: HotStore | None = None,
        db: Database | None = None,
        durable: VectorStore | None = None,
        heartbeat: bool = True,
        queues: list[str] | None = None,
    ) -> None:
        """`heartbeat`: announce this runtime as a worker now (False: later, with
        `announce`, or never, as for one an API process holds to encode its own online
        misses, which consumes no queue); `queues`: the
        ones its consumer takes, announced with it (/readyz reads them; None: not said,
        as by an older worker)."""
        self.settings = settings
        if settings.worker.stage_timing:
            stages.enable()
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}"
        self.hot = hot if hot is not None else make_hot_store(settings)
        self.db = db if db is not None else Database.from_settings(settings)
        self._owns_durable = durable is None
        self.durable = durable if durable is not None else open_vectors(
            self.db, sync_commit=settings.links.vector_sync_commit)
        self.waiting = Waiting(self.hot, self.durable, eager=False)
        self.fencing = Fencing(self.hot, settings, self.worker_id, self.waiting)
        # Every tier's device first: a worker that cannot serve fp16 (no CUDA) stops
        # before it spends a minute loading the tiers it can.
        for tier in settings.model.tiers:
            check_device(settings, tier)
        # By revision, in EMBEDQ_TIERS order: the first is the default tier.
        self.served: dict[str, Served] = {}
        for tier in settings.model.tiers:
            given = encoder if tier == settings.model.tiers[0] else None
            served = self._load(tier, given)
            self.served[served.encoder.revision] = served
        default = next(iter(self.served.values()))
        self.encoder, self.writer, self.batcher = default.encoder, default.writer, \
            default.batcher
        self._stop = threading.Event()
        self.queues = queues
        self._heartbeat_thread: threading.Thread | None = None
        if heartbeat:
            self.announce()

    def announce(self) -> None:
        """Start beating: from now on this runtime is a live worker on its queues (jobs
        count it in their waves' width). An `embedq worker` announces itself once its
        consumer takes messages, not when its model is loaded: a worker counted before
        it consumes gets no chunk, and the others run its share after theirs."""
        if self._heartbeat_thread is not None:
            return
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat, name="embedq-heartbeat", daemon=True)
        self._heartbeat_thread.start()

    def _load(self, tier: str, encoder: Encoder | None) -> Served:
        settings = self.settings
        started = time.perf_counter()
        enc = encoder if encoder is not None else load_encoder(settings, tier)
        on_gpu = str(getattr(enc, "device", "cpu")).startswith("cuda")
        batcher: Batcher | None = None

        def resubmit(items: list[Item]) -> None:
            assert batcher is not None
            batcher.submit(items)

        writer = BatchWriter(self.hot, self.durable, settings, enc, resubmit=resubmit)
        batcher = Batcher(
            enc,
            writer,
            wait_ms=settings.worker.batch_wait_ms,
            max_tokens=settings.worker.batch_max_tokens or (32_768 if on_gpu else 4096),
            max_texts=settings.worker.batch_max_texts or (512 if on_gpu else 64),
            on_attempt=self.fencing.count_attempt,
            parallel=settings.upstream.concurrency if settings.model.encoder == "upstream" else 1,
            bulk_step_ms=settings.worker.bulk_step_ms,
            keep=DropUnwanted(self.hot),
            warm_up=True,  # on the batcher thread, which runs every later pass
        )
        try:
            batcher.wait_warm()
        except BaseException:
            batcher.stop()
            raise
        # The revision is every fingerprint's: an operator compares it across workers.
        log.info(
            "worker %s ready: model=%s revision=%s dimension=%s device=%s tier=%s "
            "loaded+warmed in %.0f ms",
            self.worker_id, enc.name, enc.revision,
            enc.dimension or "unknown until the first call",
            getattr(enc, "device", "cpu"), tier, (time.perf_counter() - started) * 1000,
        )
        return Served(tier, enc, writer, batcher)

    def serving(self, spec: EncodeSpec) -> Served | None:
        """The tier that computes `spec`'s vectors here, or None: not served here."""
        served = self.served.get(spec.revision)
        return served if served is not None and served.encoder.name == spec.model else None

    def depth(self) -> int:
        """Texts queued in all of this worker's batchers."""
        return sum(s.batcher.depth() for s in self.served.values())

    # --- liveness
    def info(self) -> dict[str, object]:
        return {
            "model": self.encoder.name,
            "revision": self.encoder.revision,
            "revisions": list(self.served),
            "tiers": [s.tier for s in self.served.values()],
            "dimension": self.encoder.dimension,
            "max_seq_length": self.encoder.max_seq_length,
            "device": getattr(self.encoder, "device", "cpu"),
            "pid": os.getpid(),
            "queued": self.depth(),
            **({"queues": list(self.queues)} if self.queues is not None else {}),
        }

    def model_busy_s(self) -> float:
        """Seconds the models of this runtime spent in forward passes since it started."""
        return sum(s.batcher.busy_s for s in self.served.values())

    def _heartbeat(self) -> None:
        """Every HEARTBEAT_S: this worker's info, with the share of the last interval its
        models spent in forward passes; the stage timings accumulated meanwhile."""
        last_wall, last_busy = time.monotonic(), self.model_busy_s()
        while not self._stop.is_set():
            now, busy = time.monotonic(), self.model_busy_s()
            share = (busy - last_busy) / (now - last_wall) if now > last_wall else 0.0
            last_wall, last_busy = now, busy
            try:
                self.hot.heartbeat(self.worker_id, {**self.info(), "model_busy_share":
                                                    round(min(1.0, share), 4)}, ttl_s=15)
                self.hot.incr(stages.take())
            except EmbedqError as exc:
                log.warning("heartbeat failed: %s", exc)
            self._stop.wait(HEARTBEAT_S)

    def close(self) -> None:
        """Stop; a worker that announced itself takes its heartbeat back (and hands in the
        stage timings counted since the last one)."""
        self._stop.set()
        beating = self._heartbeat_thread
        if beating is not None:
            # Still in a heartbeat after this long: Redis is slow or gone, and the
            # heartbeat expires by itself; stopping does not wait on it again.
            beating.join(timeout=CLOSE_WAIT_S)
        if beating is not None and not beating.is_alive():
            try:
                self.hot.incr(stages.take())
                self.hot.forget_worker(self.worker_id)
            except EmbedqError as exc:
                log.warning("could not take this worker's heartbeat back: %s", exc)
        self.fencing.close()
        for served in self.served.values():
            served.batcher.stop()
        if self._owns_durable:
            self.durable.close()

    # --- one message
    def handle_embed(self, payload: dict[str, Any], lane: int = ONLINE, *,
                     first_delivery: bool = False) -> dict[str, int]:
        """Embed every (fingerprint, text) in `payload`; return counts, never vectors.

        `first_delivery`: the broker delivers this message for the first time (neither
        redelivered nor a retry). Its producer found its fingerprints in neither store just
        before publishing and claimed them, so the durable store is not asked again (a
        query on the answer's critical path); the hot store still is, which holds every
        vector computed since for `hot_ttl_s`.

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
        owner = payload.get("owner")  # set: its producer tracks its callers' interest
        ran = self.embed_pairs(spec, pairs, lane,
                               ticket=Ticket(owner) if isinstance(owner, str) else None,
                               durable=not first_delivery) if pairs else Ran()
        return {"done": len(ran.done), "failed": len(pairs) - len(ran.done),
                "reused": len(ran.reused), "refused": refused}

    def embed_pairs(self, spec: EncodeSpec, pairs: dict[str, str], lane: int,
                    room: Room | None = None, ticket: Ticket | None = None, *,
                    durable: bool = True) -> Ran:
        """Embed (fingerprint -> text) pairs; `room` is batcher room the caller reserved
        (filled by the first submit; the caller releases it if nothing was submitted);
        `ticket`: an online message's (its claim owner), whose texts are not encoded once
        nobody waits for them (None: always encoded); `durable`: look for vectors already
        stored in the durable store too. Returns which fingerprints got a vector, and of
        those which were found stored rather than computed."""
        fps = list(pairs)
        served = self.serving(spec)
        if served is None:
            offered = ", ".join(f"{s.tier} ({r!r})" for r, s in self.served.items())
            asked = tier_of_revision(spec.revision)
            gpu_hint = (f"(the {asked} tier is served only by workers on a CUDA GPU with "
                        f"{asked} in EMBEDQ_TIERS) " if asked in CUDA_TIERS else "")
            err = EmbeddingFailed(
                f"this worker serves model {self.encoder.name!r} at revisions {offered}, "
                f"but the request was made for model {spec.model!r} revision "
                f"{spec.revision!r}; nothing was computed or stored. {gpu_hint}"
                "Give the producer (API, client) and the workers on its queues the same "
                "EMBEDQ_MODEL, EMBEDQ_MODEL_REVISION and EMBEDQ_TIERS, or give each "
                "revision its own EMBEDQ_ONLINE_QUEUE and EMBEDQ_BULK_QUEUE"
            )
            self.writer.fail({fp: err for fp in fps})
            return Ran()

        fencing = self.fencing

        def encode(mine: dict[str, str], attempts: dict[str, int]) -> Ran:
            # Under the lease: a vector the hot store had was found when leasing; one only
            # the durable store holds (a redelivery, a hot copy that expired, a text a job
            # embedded before) is found here. Bulk texts get a hot copy only where an
            # online caller waits for them (a re-run job must not fill Redis).
            with stages.timed("fencing"):
                stored = self.durable.get_many(list(mine)) if durable else {}
            publish_vectors(self.hot, stored, self.settings.worker.hot_ttl_s,
                            wanted_only=lane != ONLINE)
            rest = [fp for fp in mine if fp not in stored]
            dead, suspects = fencing.triage({fp: attempts[fp] for fp in rest})
            todo = {fp: mine[fp] for fp in rest if fp not in dead}
            got = self._encode(served.batcher, spec, todo, suspects, lane, room, ticket) \
                if todo else set()
            return Ran(got | set(stored), set(stored))

        return fencing.run_leased(pairs, encode)

    def _encode(self, batcher: Batcher, spec: EncodeSpec, pairs: dict[str, str],
                suspects: set[str], lane: int, room: Room | None = None,
                ticket: Ticket | None = None) -> set[str]:
        items = [
            Item(fp=fp, text=text, spec=spec, lane=lane, alone=fp in suspects, ticket=ticket)
            for fp, text in pairs.items()
        ]
        batcher.submit(items, room)
        wait_all([i.future for i in items])
        unavailable = [i.future.exception() for i in items
                       if isinstance(i.future.exception(), Unavailable)]
        if unavailable:
            # Infrastructure, not the text: forget the attempt and let the task retry.
            self.fencing.forget_attempts([i.fp for i in items])
            raise unavailable[0]  # type: ignore[misc]
        return {i.fp for i in items if i.future.exception() is None}


__all__ = ["BULK", "ONLINE", "Served", "WorkerRuntime"]
