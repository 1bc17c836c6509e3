"""`embedq bench dify`, phase (e): the bare encode the server phases are compared with.

The configured encoder loaded in the bench's own process, once the server phases are done
(dify.py's docstring says why then): its own batched `encode` (SentenceTransformer.encode
at its default batch size), the same texts in batches of the size the server formed, and
one-text calls. A torch model runs at torch's default thread count and at 1 thread, and
each figure keeps the better.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from embedq.bench.stats import percentile
from embedq.config import Settings

BARE_WARM_UP = 5


@dataclass(frozen=True)
class BareEncoder:
    """The loaded encoder as the bare phases call it: what it is, its encode, the thread
    counts to try (0: not a torch model, threads not set) and how to set one."""

    what: str
    encode: Callable[[list[str]], Any]
    thread_counts: list[int]
    use: Callable[[int], None]


def load_bare_encoder(settings: Settings) -> BareEncoder:
    """The configured encoder, loaded and warmed up here; a SentenceTransformer is called
    through its own `encode`, under torch's thread counts."""
    import inspect

    from embedq.encoders import load_encoder

    encoder = load_encoder(settings)
    encoder.warm_up()
    model = getattr(encoder, "model", None)
    if model is not None and hasattr(model, "encode"):
        import torch

        batch = inspect.signature(model.encode).parameters["batch_size"].default

        def encode(texts: list[str]) -> Any:
            return model.encode(texts, show_progress_bar=False)

        def use(threads: int) -> None:
            torch.set_num_threads(threads)

        return BareEncoder(f"SentenceTransformer.encode (default batch_size {batch})",
                           encode, sorted({torch.get_num_threads(), 1}, reverse=True), use)

    def no_threads(threads: int) -> None:
        return None

    return BareEncoder(f"{type(encoder).__name__}.encode", encoder.encode, [0], no_threads)


def bare_run(bare: BareEncoder, threads: int, batched: list[str], single: list[str],
             formed: float | None) -> dict[str, Any]:
    """One pass at `threads`: warm-up, `batched` in one call, in batches of `formed` (when
    given), then each of `single` alone."""
    bare.use(threads)
    for text in single[:BARE_WARM_UP]:
        bare.encode([text])
    started = time.perf_counter()
    bare.encode(batched)
    rate = len(batched) / (time.perf_counter() - started)
    at_formed = None
    if formed:
        size = max(1, round(formed))
        started = time.perf_counter()
        for i in range(0, len(batched), size):
            bare.encode(batched[i : i + size])
        at_formed = round(len(batched) / (time.perf_counter() - started), 1)
    times = []
    for text in single:
        started = time.perf_counter()
        bare.encode([text])
        times.append((time.perf_counter() - started) * 1000)
    return {"threads": threads, "batched_texts_per_s": round(rate, 1),
            "formed_batch_texts_per_s": at_formed,
            "one_text_p50_ms": round(percentile(times, 50), 2),
            "one_text_p99_ms": round(percentile(times, 99), 2)}


def bare_phases(settings: Settings, batched: list[str], single: list[str],
                formed: float | None = None) -> dict[str, Any]:
    """The configured encoder loaded here: its own batched `encode` over `batched`
    (SentenceTransformer.encode at its default batch size), then one-text calls; with
    `formed` (the texts per model batch the server formed in phase b), also `batched` in
    consecutive batches of that size: what the model alone does at the batch size one
    text per request lets it form, which splits the gap to the batched rate between the
    batch size and everything else.

    A torch model runs both at torch's default thread count and at 1 thread, and each
    figure keeps the better: on a 2-core machine that others load, two intra-op threads
    were measured up to 20x slower than one (they wait on each other), and a baseline
    should be the best the bare model does, not its worst moment."""
    bare = load_bare_encoder(settings)
    runs = [bare_run(bare, threads, batched, single, formed) for threads in bare.thread_counts]
    bare.use(bare.thread_counts[0])
    fastest = max(runs, key=lambda r: r["batched_texts_per_s"])
    quickest = min(runs, key=lambda r: r["one_text_p50_ms"])
    formed_best = max((r["formed_batch_texts_per_s"] or 0 for r in runs), default=0) or None
    return {"encode": bare.what, "batched_texts": len(batched),
            "batched_texts_per_s": fastest["batched_texts_per_s"],
            "formed_batch": formed, "formed_batch_texts_per_s": formed_best,
            "batched_threads": fastest["threads"], "one_text_calls": len(single),
            "one_text_p50_ms": quickest["one_text_p50_ms"],
            "one_text_p99_ms": quickest["one_text_p99_ms"],
            "one_text_threads": quickest["threads"], "by_threads": runs}
