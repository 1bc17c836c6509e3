"""The pipeline on one device: a bulk job through the embedded pipeline against the bare
model on the same device, in the same run (`embedq bench gpu`, `make gpu-check`).

Embedded (no servers: SQLite in a temporary data dir, the in-process broker and store, a
worker thread), `n` distinct texts (the held-out corpus split, salted) go in as one job on
the device's default tier; its texts/s from submission to the job's end, and the
model-busy share: the seconds the worker's model spent in forward passes over the job's
wall seconds. The bare model encodes the same texts on the same device, length-sorted in
batches of the batcher's size there (512 on CUDA), after a warm-up. The goal on a GPU:
the job at >= 0.8 of the bare model.

This needs the whole service (Celery, SQLAlchemy, ...), which `bench gpu` alone does not:
`bench gpu` reports the phase as skipped, saying what is missing, when they do not import.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.encoders.base import Encoder, Matrix
from embedq.encoders.hashing import HashingEncoder

JOB_DEADLINE_S = 1800.0
# How often the job is read for its end: a 20,000-text job ends in about a second here
# (less on a GPU), and 0.2 s between reads had added 0.1 s to it on average; every 10 ms,
# the reads took 13% of the interpreter's time from the job's threads.
POLL_S = 0.05


class PacedEncoder(HashingEncoder):
    """A stand-in for a device, for measuring how well the pipeline feeds one: the hashing
    vectors, and a forward pass that then waits `fixed_ms` + `per_text_us` a text with the
    interpreter lock released, as a GPU's kernels run while Python waits (`bench pipeline
    --embedded --device MS,US`). Not a model: nothing it returns means anything."""

    def __init__(self, fixed_ms: float, per_text_us: float, name: str = "hashing") -> None:
        super().__init__(name)
        self.fixed_s, self.per_text_s = fixed_ms / 1000, per_text_us / 1e6

    def encode(self, texts: list[str]) -> Matrix:
        out = super().encode(texts)
        time.sleep(self.fixed_s + self.per_text_s * len(texts))
        return out


def bare_rate(settings: Settings, texts: list[str], batch: int,
              encoder: Encoder | None = None) -> float:
    """Texts/s of the bare model on the settings' device (or of `encoder`), length-sorted
    batches."""
    from embedq.encoders import load_encoder

    encoder = encoder if encoder is not None else load_encoder(settings)
    encoder.warm_up()
    ordered = sorted(texts, key=len)
    encoder.encode(ordered[:batch])
    started = time.perf_counter()
    for i in range(0, len(ordered), batch):
        encoder.encode(ordered[i:i + batch])
    return len(ordered) / max(time.perf_counter() - started, 1e-9)


def pipeline_job(settings: Settings, n: int, batch: int,
                 encoder: Encoder | None = None) -> dict[str, Any]:
    """The job through the embedded pipeline, then the bare model, on `settings`' device;
    `encoder`: the model both run instead of the settings' (a `PacedEncoder`)."""
    from embedq.deployment import Deployment

    salt = uuid.uuid4().hex[:8]
    texts = [f"{salt} {i} {t}" for i, t in enumerate(load_texts(n, split="heldout"))]
    with tempfile.TemporaryDirectory(prefix="embedq-gpu-pipeline-") as tmp:
        embedded = settings.with_overrides(data_dir=Path(tmp), broker_url="memory://localhost/",
                                           redis_url=None, database_url="")
        deployment = Deployment.from_settings(embedded, own_process=True, encoder=encoder)
        try:
            deployment.ensure_worker()  # the model loads and warms up before the clock
            jobs = deployment.jobs()
            before = deployment.hot.counters().get("model_busy_us", 0)
            started = time.perf_counter()
            job_id = jobs.submit(texts)
            _wait(jobs, job_id)
            wall = time.perf_counter() - started
            busy_s = (deployment.hot.counters().get("model_busy_us", 0) - before) / 1e6
        finally:
            deployment.close()
    bare = bare_rate(embedded, texts, batch, encoder)
    job_rate = n / wall
    return {"texts": n, "device": settings.model.device or "cpu",
            "job_texts_per_s": round(job_rate, 1), "job_wall_s": round(wall, 3),
            "model_busy_share": round(min(1.0, busy_s / wall), 3),
            "bare_texts_per_s": round(bare, 1), "batch": batch,
            "job_over_bare": round(job_rate / bare, 3)}


def _wait(jobs: Any, job_id: str) -> None:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        job = jobs.get(job_id)
        if job.status in {"succeeded", "failed", "cancelled"}:
            if job.status != "succeeded":
                raise RuntimeError(f"the pipeline job ended {job.status}: {job.error}")
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pipeline job did not end within {JOB_DEADLINE_S:.0f} s")
        time.sleep(POLL_S)
