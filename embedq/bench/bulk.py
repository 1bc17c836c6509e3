"""`embedq bench bulk`: one `Client.embed` call over the corpus against bare encode.

The baseline is the configured model as a bare SentenceTransformer at its best batch size,
measured in the same run on the same texts (before and after embedq; the better figure
counts). Also the baseline of `bench bulk --via-jobs` (embedq.bench.jobs).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from embedq.config import Settings
from embedq.corpus import load_texts


def bare_model(settings: Settings, command: str) -> Any:
    """The configured model as a bare SentenceTransformer, loaded and warm: the baseline.

    Always stock torch fp32, whatever EMBEDQ_BACKEND and EMBEDQ_TIERS say, so an ONNX or
    int8 run of embedq is measured against the encode it replaces."""
    from embedq.encoders import load_encoder

    encoder = load_encoder(settings.with_overrides(backend="torch", tiers=("fp32",)), "fp32")
    encoder.warm_up()
    model = getattr(encoder, "model", None)
    if model is None:
        raise SystemExit(f"{command} needs EMBEDQ_ENCODER=sentence-transformers")
    return model


def best_raw_rate(model: Any, texts: list[str]) -> tuple[int, float]:
    """SentenceTransformer.encode at its best batch size on these texts."""
    sample = texts[: min(len(texts), 1000)]
    best_bs, best = 32, 0.0
    for bs in (32, 64, 128):
        t0 = time.perf_counter()
        model.encode(sample, batch_size=bs, show_progress_bar=False)
        rate = len(sample) / (time.perf_counter() - t0)
        if rate > best:
            best_bs, best = bs, rate
    t0 = time.perf_counter()
    model.encode(texts, batch_size=best_bs, show_progress_bar=False)
    return best_bs, len(texts) / (time.perf_counter() - t0)


def bench_bulk(n: int, path: str | None) -> dict[str, Any]:
    from embedq.client import Client

    texts = load_texts(n, path)
    settings = Settings.from_env()
    with tempfile.TemporaryDirectory(prefix="embedq-bench-") as tmp:
        if settings.embedded:
            settings = settings.with_overrides(data_dir=Path(tmp))
        model = bare_model(settings, "bench bulk")
        best_bs, raw_rate = best_raw_rate(model, texts)
        client = Client(settings)
        client.embed(["embedq bench warm-up"])
        before = client.stats()
        t0 = time.perf_counter()
        client.embed(texts)
        dt = time.perf_counter() - t0
        after = client.stats()
        client.close()
        # Raw again after embedq, keeping the better figure: load drift favours neither side.
        raw_rate = max(raw_rate, best_raw_rate(model, texts)[1])
    rate = len(texts) / dt
    report = {
        "texts": len(texts),
        "unique": len(set(texts)),
        "encoded": after["encoded"] - before["encoded"],
        "raw_batch_size": best_bs,
        "raw_texts_per_s": round(raw_rate, 1),
        "embedq_texts_per_s": round(rate, 1),
        "ratio": round(rate / raw_rate, 3),
        "mode": "embedded" if settings.embedded else "cluster",
    }
    print(
        f"bench bulk: {report['texts']} texts ({report['unique']} unique), "
        f"raw SentenceTransformer.encode (batch {best_bs}): {raw_rate:.0f} texts/s; "
        f"embedq end to end (persisted, {report['mode']}): {rate:.0f} texts/s; "
        f"ratio {report['ratio']:.3f}"
    )
    return report
