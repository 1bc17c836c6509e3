"""`embedq bench backends`: texts/s and fidelity of each backend and tier, same run.

The baseline is stock `SentenceTransformer.encode` (fp32, torch, batch 32) on the held-out
corpus texts; each ONNX tier encodes the same texts in length-sorted batches of 32 (what
the batcher hands an encoder) with ONNX Runtime's threads pinned to torch's; the baseline
runs first and last and its better rate counts. Fidelity is
against the baseline's vectors: mean and 1st-percentile cosine, and the overlap of the
top-10 neighbours of the first 200 texts among all of them. Exports are made (or reused)
under the data dir before anything is timed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedq.config import Settings
from embedq.corpus import load_texts

BATCH = 32
INT8_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8")


def int8_instruction_sets(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The CPU's instruction sets that int8 kernels use, from its flags (Linux)."""
    try:
        text = cpuinfo.read_text("ascii", errors="replace")
    except OSError:
        return []
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return [f for f in INT8_FLAGS if f in flags]


def fidelity(reference: npt.NDArray[np.float32], candidate: npt.NDArray[np.float32],
             queries: int = 200, k: int = 10) -> dict[str, float]:
    """Cosine of each candidate row to its reference row (mean, 1st percentile, min) and
    the mean overlap of the top-k neighbours of the first `queries` rows."""
    ref = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    cand = candidate / np.linalg.norm(candidate, axis=1, keepdims=True)
    cos = np.sum(ref * cand, axis=1)
    q = min(queries, len(ref))

    def neighbours(m: npt.NDArray[np.float32]) -> npt.NDArray[np.intp]:
        sims = m[:q] @ m.T
        sims[np.arange(q), np.arange(q)] = -np.inf  # a text is not its own neighbour
        return np.argsort(-sims, axis=1)[:, :k]

    a, b = neighbours(ref), neighbours(cand)
    overlap = np.mean([len(set(a[i]) & set(b[i])) / k for i in range(q)])
    return {"mean_cosine": float(cos.mean()), "p1_cosine": float(np.percentile(cos, 1)),
            "min_cosine": float(cos.min()), "top10_overlap": float(overlap)}


def sorted_encode(encoder: Any, texts: list[str]) -> tuple[Any, float]:
    """`texts` encoded in length-sorted batches of BATCH (as a bare user of the model
    would, and as the batcher hands an encoder): (vectors in input order, seconds)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), encoder.dimension), dtype=np.float32)
    t0 = time.perf_counter()
    for start in range(0, len(order), BATCH):
        rows = order[start:start + BATCH]
        out[rows] = encoder.encode([texts[i] for i in rows])
    return out, time.perf_counter() - t0


def bench_backends(n: int, path: str | None) -> dict[str, Any]:
    import torch

    from embedq.encoders import load_encoder

    texts = load_texts(n, path, split="heldout")
    settings = Settings.from_env()
    torch_settings = settings.with_overrides(backend="torch", tiers=("fp32",))
    onnx_settings = settings.with_overrides(backend="onnx", tiers=("fp32", "int8"))
    stock: Any = getattr(load_encoder(torch_settings), "model", None)
    if stock is None:
        raise SystemExit("bench backends needs EMBEDQ_ENCODER=sentence-transformers")
    encoders = {f"onnx {t}": load_encoder(onnx_settings, t) for t in onnx_settings.model.tiers}
    threads = torch.get_num_threads()
    stock.encode(texts[:BATCH], batch_size=BATCH)

    def stock_run() -> tuple[Any, float]:
        t0 = time.perf_counter()
        out = stock.encode(texts, batch_size=BATCH, show_progress_bar=False,
                           convert_to_numpy=True)
        return out, len(texts) / (time.perf_counter() - t0)

    reference, first_rate = stock_run()
    rows: list[dict[str, Any]] = []
    for label, encoder in encoders.items():
        encoder.warm_up()
        vectors, seconds = sorted_encode(encoder, texts)
        rate = len(texts) / seconds
        rows.append({"backend": label, "texts_s": rate, **fidelity(reference, vectors)})
    # The baseline runs before and after the others; its better figure counts, so a load
    # spike on a shared machine cannot flatter the ratios.
    base_rate = max(first_rate, stock_run()[1])
    for row in rows:
        row["speedup"] = row["texts_s"] / base_rate
    rows.insert(0, {"backend": "torch fp32 (stock encode)", "texts_s": base_rate,
                    "speedup": 1.0})
    report = {"texts": len(texts), "threads": threads, "batch": BATCH,
              "int8_instruction_sets": int8_instruction_sets(), "rows": rows}
    _print(report)
    return report


def _print(report: dict[str, Any]) -> None:
    print(f"{report['texts']} held-out texts, {report['threads']} threads for torch and "
          f"ONNX Runtime, batches of {report['batch']}; CPU int8 instruction sets: "
          f"{', '.join(report['int8_instruction_sets']) or 'none found'}")
    print(f"{'backend':28s} {'texts/s':>8s} {'x stock':>8s} {'mean cos':>9s} "
          f"{'p1 cos':>7s} {'top-10':>7s}")
    for row in report["rows"]:
        extra = (f" {row['mean_cosine']:9.4f} {row['p1_cosine']:7.4f} "
                 f"{row['top10_overlap']:7.3f}") if "mean_cosine" in row else ""
        print(f"{row['backend']:28s} {row['texts_s']:8.1f} {row['speedup']:8.2f}{extra}")
