"""`embedq bench gpu`: the fp16 and fp32 tiers on one CUDA GPU, and the semantic index at
1,000,000 entries; writes the report (default docs/gpu-report.md).

Without a CUDA device it raises ConfigError ("no CUDA device: ...", exit 2) before it
measures anything, and leaves the report as it was. `python -m embedq.bench.gpu [args]`
runs the same command without the rest of the CLI, whose other commands import the
service's dependencies: it needs torch, sentence-transformers, numpy and FAISS only.
Measured, in about 1-3 minutes on one H200-class GPU (`make gpu-check`):

1. speed: texts/s and tokens/s of each tier (fp32, fp16) at batches of 256 and 1,024
   texts over the 10,000 shipped corpus texts (embedq.corpus: the tune and held-out
   splits), length-sorted and cut into batches as the worker's batcher does; each
   batch size runs whole passes for at least `min_s` after one warm-up batch;
2. fidelity: the cosine of each GPU tier's vector to CPU fp32 torch's vector of the same
   text, over the 2,000 held-out texts: mean, 1st percentile, min, top-10 overlap;
3. the pipeline: a bulk job of 20,000 texts through the embedded pipeline on the GPU, its
   texts/s and model-busy share against the bare GPU model in the same run
   (`bench/gpu_pipeline.py`; skipped, saying why, without the service's packages);
4. the semantic index: embedq's own `build_index` (semantic/index.py; IVF past
   EMBEDQ_SEMANTIC_FLAT_MAX, its list size and nprobe) over `entries` vectors, on the GPU
   when faiss has GPU support, else on CPU FAISS with a note saying so; one-query
   lookup p50/p99, and recall@1 against exact search (`faiss.knn`, brute force).

The index's vectors are the model's fp16 embeddings of the 8,000 tune texts, each
repeated with Gaussian perturbations (cosine ~0.9 to its text) up to `entries`; the
queries are the held-out texts' embeddings, which no entry was made from. Real embeddings
rather than random unit vectors: sentence vectors cluster by topic, and the IVF lists
(and so recall) depend on that shape; random unit vectors in 384 dimensions are all
nearly orthogonal, so every entry is about as far as every other and recall@1 measures
nothing the cache meets.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedq.bench.backends import fidelity
from embedq.bench.stats import percentile
from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.encoders.base import Encoder
from embedq.errors import ConfigError, EmbedqError

Matrix = npt.NDArray[np.float32]

DEFAULT_REPORT = Path("docs/gpu-report.md")
BATCHES = (256, 1024)
PERTURBATION = 0.5  # noise norm relative to a unit vector: cosine 1/sqrt(1.25) ~ 0.894


@dataclass
class GpuResult:
    """Everything the report shows; each part filled by the function that measures it."""

    environment: dict[str, str] = field(default_factory=dict)
    speed: list[dict[str, Any]] = field(default_factory=list)
    fidelity: dict[str, dict[str, float]] = field(default_factory=dict)
    index: dict[str, Any] = field(default_factory=dict)
    pipeline: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    wall_s: float = 0.0


def measure_speed(encoder: Encoder, texts: list[str], batch: int,
                  min_s: float = 2.0) -> dict[str, Any]:
    """texts/s and tokens/s of `encoder` over `texts` in batches of `batch`.

    The texts are sorted by length and cut in order (the batcher's way); whole passes run
    until `min_s` has passed, after one warm-up batch (CUDA kernels, allocator). Tokens
    are those the model computes: each text's tokens after truncation to its window.
    """
    tokens = encoder.count_tokens(texts)
    order = sorted(range(len(texts)), key=lambda i: tokens[i])
    ordered = [texts[i] for i in order]
    chunks = [ordered[i:i + batch] for i in range(0, len(ordered), batch)]
    encoder.encode(chunks[-1])
    passes, started = 0, time.perf_counter()
    while True:
        for chunk in chunks:
            encoder.encode(chunk)  # returns numpy: the device has finished the batch
        passes += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_s:
            break
    return {
        "batch": batch, "texts": len(texts) * passes, "seconds": round(elapsed, 3),
        "texts_per_s": round(len(texts) * passes / elapsed, 1),
        "tokens_per_s": round(sum(tokens) * passes / elapsed, 1),
    }


def encode_all(encoder: Encoder, texts: list[str], batch: int) -> Matrix:
    """Raw vectors of `texts` in order, encoded `batch` at a time (bounded memory)."""
    return np.vstack([encoder.encode(texts[i:i + batch]) for i in range(0, len(texts), batch)])


def perturbed(base: Matrix, n: int, seed: int = 0) -> Matrix:
    """`n` unit vectors: the rows of `base` in turn, each plus Gaussian noise of norm about
    PERTURBATION (so each copy is at cosine ~0.89 to its row, and copies of one row ~0.8
    to each other)."""
    from embedq.semantic.index import unit_rows

    rng = np.random.default_rng(seed)
    unit = unit_rows(base)
    dim = unit.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):
        stop = min(n, start + step)
        rows = unit[np.arange(start, stop) % len(unit)]
        noise = rng.standard_normal((stop - start, dim), dtype=np.float32)
        out[start:stop] = unit_rows(rows + noise * (PERTURBATION / np.sqrt(dim)))
    return out


def measure_index(vectors: Matrix, queries: Matrix, settings: Settings) -> dict[str, Any]:
    """Build embedq's semantic index over `vectors` and measure it with `queries`.

    GPU when faiss has GPU support (faiss-gpu) and EMBEDQ_SEMANTIC_GPU allows it; else
    CPU FAISS, and `note` says why. recall@1: the share of queries whose first hit is
    exact search's first hit.
    """
    import faiss

    from embedq.semantic.index import (
        FaissIndex,
        IndexConfig,
        build_index,
        gpu_available,
        unit_rows,
    )

    config = IndexConfig(flat_max=settings.semantic.flat_max,
                         ivf_list_size=settings.semantic.ivf_list_size,
                         nprobe=settings.semantic.nprobe, use_gpu=settings.semantic.gpu)
    n, dim = vectors.shape
    asked = unit_rows(queries)
    ids = np.arange(n, dtype=np.int64)
    started = time.perf_counter()
    index = build_index(ids, vectors, dim, config)
    build_s = time.perf_counter() - started
    on_gpu = isinstance(index, FaissIndex) and index.on_gpu
    if on_gpu:
        note = "built and searched on the GPU (faiss GPU index; IVF lists trained on CPU)"
    elif not gpu_available():
        note = ("faiss has no GPU support here (faiss-cpu installed, or no GPU it can "
                "see): the index was built and searched on CPU FAISS; install faiss-gpu "
                "(embedq[gpu], docs/backends.md) to measure it on the GPU")
    else:
        note = "CPU FAISS: EMBEDQ_SEMANTIC_GPU is off"
    started = time.perf_counter()
    _, truth = faiss.knn(asked, vectors, 1, metric=faiss.METRIC_INNER_PRODUCT)
    exact_s = time.perf_counter() - started
    latencies, found = [], []
    for q in asked:
        t0 = time.perf_counter()
        hits = index.search(q, 1)
        latencies.append((time.perf_counter() - t0) * 1000)
        found.append(hits[0][0] if hits else -1)
    return {
        "entries": n, "dimension": dim, "queries": len(asked), "kind": index.kind,
        "gpu": on_gpu, "note": note, "nprobe": config.nprobe if index.kind == "ivf" else 0,
        "nlist": config.nlist_for(n) if index.kind == "ivf" else 0,
        "build_s": round(build_s, 2),
        "lookup_p50_ms": round(percentile(latencies, 50), 3),
        "lookup_p99_ms": round(percentile(latencies, 99), 3),
        "exact_batch_ms_per_query": round(exact_s * 1000 / max(1, len(asked)), 3),
        "recall_at_1": round(float(np.mean(np.asarray(found) == truth[:, 0])), 4),
    }


def environment() -> dict[str, str]:
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "cuda": str(torch.version.cuda)}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    try:
        import faiss

        env["faiss"] = f"{faiss.__version__} (GPU support: " \
            f"{'yes' if hasattr(faiss, 'StandardGpuResources') else 'no'})"
    except ImportError:
        env["faiss"] = "not installed"
    return env


def require_cuda() -> None:
    """ConfigError "no CUDA device: ..." when torch has no CUDA device here."""
    from embedq.encoders.cuda import INSTALL_HINT, cuda_missing

    missing = cuda_missing()
    if missing is not None:
        raise ConfigError(f"no CUDA device: {missing}. `embedq bench gpu` measures a CUDA "
                          f"GPU and left its report as it was; {INSTALL_HINT}")


def bench_gpu(settings: Settings, entries: int, queries: int,
              min_s: float = 2.0, pipeline_texts: int = 20_000) -> GpuResult:
    """Every measurement in the module docstring, on CUDA device `settings.model.device`."""
    from embedq.encoders import load_encoder, model_identity

    require_cuda()
    result = GpuResult(environment=environment())
    name, revision = model_identity(settings, "fp32")
    result.environment["model"] = f"{name} ({revision})"
    _stage(f"environment: {result.environment}")
    tune = load_texts(8000, split="tune")
    heldout = load_texts(2000, split="heldout")
    gpu = settings.with_overrides(backend="torch", tiers=("fp32", "fp16"),
                                  device=settings.model.device or "cuda")
    cpu = settings.with_overrides(backend="torch", tiers=("fp32",), device="cpu")
    _stage("CPU fp32 reference vectors of the 2,000 held-out texts")
    reference = encode_all(load_encoder(cpu, "fp32"), heldout, 64)
    base: Matrix | None = None
    asked: Matrix | None = None
    for tier in ("fp32", "fp16"):
        _stage(f"{tier} on {gpu.model.device}: speed at batches {BATCHES}, then fidelity")
        encoder = load_encoder(gpu, tier)
        for batch in BATCHES:
            result.speed.append({"tier": tier, **measure_speed(encoder, tune + heldout,
                                                                 batch, min_s)})
            _stage(f"  {result.speed[-1]}")
        result.fidelity[tier] = fidelity(reference, encode_all(encoder, heldout, 256))
        if tier == "fp16":
            base = encode_all(encoder, tune, 1024)
            asked = encode_all(encoder, heldout[:queries], 1024)
        del encoder
    assert base is not None and asked is not None
    _stage(f"semantic index: {entries:,} entries, {len(asked)} queries")
    result.index = measure_index(perturbed(base, entries), asked, settings)
    _stage(f"  {result.index}")
    result.pipeline = pipeline_phase(gpu.with_overrides(tiers=("fp32",)), pipeline_texts)
    _stage(f"  {result.pipeline}")
    return result


def pipeline_phase(settings: Settings, texts: int) -> dict[str, Any]:
    """A bulk job of `texts` through the embedded pipeline on the device, against the bare
    model there (`bench/gpu_pipeline.py`); skipped, saying why, where the service's
    packages are not installed (this check needs only torch and FAISS otherwise)."""
    if texts <= 0:
        return {}
    _stage(f"pipeline: a bulk job of {texts:,} texts, embedded, against the bare model")
    try:
        from embedq.bench.gpu_pipeline import pipeline_job
    except ImportError as exc:
        return {"skipped": f"the service's packages are not installed here ({exc}): "
                           "pip install the embedq package into this python"}
    return pipeline_job(settings, texts, batch=512)


def _stage(message: str) -> None:
    """Progress on stderr, so a run cut short still shows how far it got."""
    print(f"bench gpu: {message}", file=sys.stderr, flush=True)


def render(result: GpuResult) -> str:
    """The report's markdown."""
    env = result.environment
    lines = [
        "# GPU check (`embedq bench gpu`)", "",
        f"Run {datetime.date.today().isoformat()} with `{result.command}` "
        f"({result.wall_s:.0f} s in all).", "",
        "| | |", "|---|---|",
        *(f"| {k} | {v} |" for k, v in env.items()), "",
        "## Speed: texts/s and tokens/s per tier", "",
        "The 10,000 shipped corpus texts (tune + held-out splits), length-sorted, in "
        "batches; whole passes for at least 2 s after a warm-up batch. Tokens are those "
        "the model computes (after truncation to its window).", "",
        "| tier | batch | texts/s | tokens/s | texts timed | seconds |",
        "|---|---|---|---|---|---|",
        *(f"| {r['tier']} | {r['batch']} | {r['texts_per_s']:,.0f} | "
          f"{r['tokens_per_s']:,.0f} | {r['texts']:,} | {r['seconds']} |"
          for r in result.speed), "",
        "## Fidelity: cosine to CPU fp32", "",
        "2,000 held-out corpus texts; each GPU tier's vector against CPU fp32 torch's "
        "vector of the same text; top-10 overlap of the first 200 texts' neighbours.", "",
        "| tier (GPU) | mean cosine | 1st percentile | min | top-10 overlap |",
        "|---|---|---|---|---|",
        *(f"| {tier} | {f['mean_cosine']:.5f} | {f['p1_cosine']:.5f} | "
          f"{f['min_cosine']:.5f} | {f['top10_overlap']:.3f} |"
          for tier, f in result.fidelity.items()), "",
    ]
    ix = result.index
    if ix:
        lines += [
            f"## Semantic index: {ix['entries']:,} entries", "",
            f"{ix['note'][:1].upper()}{ix['note'][1:]}.", "",
            "Vectors: the model's fp16 embeddings of the 8,000 tune texts, each repeated "
            "with Gaussian perturbations (cosine ~0.89 to its text) up to the entry count; "
            "queries: the held-out texts' embeddings (no entry was made from them). "
            "recall@1 is against exact brute-force search.", "",
            "| entries | kind | nlist | nprobe | GPU | build s | lookup p50 ms | "
            "lookup p99 ms | recall@1 |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {ix['entries']:,} | {ix['kind']} | {ix['nlist']} | {ix['nprobe']} | "
            f"{'yes' if ix['gpu'] else 'no'} | {ix['build_s']} | {ix['lookup_p50_ms']} | "
            f"{ix['lookup_p99_ms']} | {ix['recall_at_1']} |", "",
            f"{ix['queries']} one-query lookups; exact search took "
            f"{ix['exact_batch_ms_per_query']} ms a query in one batch.", "",
        ]
    return "\n".join(lines + render_pipeline(result.pipeline))


def render_pipeline(p: dict[str, Any]) -> list[str]:
    if not p:
        return []
    if "skipped" in p:
        return ["## Pipeline: a bulk job against the bare model", "", f"Skipped: {p['skipped']}.",
                ""]
    return [
        "## Pipeline: a bulk job against the bare model", "",
        f"{p['texts']:,} distinct held-out texts as one job through the embedded pipeline "
        f"(SQLite, in-process broker and store, the worker's batcher) on {p['device']}, then "
        f"the bare model on the same device in length-sorted batches of {p['batch']} "
        "(goal: the job at >= 0.8 of the bare model).", "",
        "| job texts/s | job s | model-busy share | bare texts/s | job / bare |",
        "|---|---|---|---|---|",
        f"| {p['job_texts_per_s']:,.0f} | {p['job_wall_s']} | {p['model_busy_share']} | "
        f"{p['bare_texts_per_s']:,.0f} | {p['job_over_bare']} |", ""]


def write_report(result: GpuResult, path: Path) -> None:
    """Write the report in one step (a temporary file renamed), never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(render(result), "utf-8")
    scratch.replace(path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.file:
        raise ConfigError("bench gpu measures the shipped corpus: drop --file")
    started = time.perf_counter()
    require_cuda()  # before any model loads, and before the report is touched
    result = bench_gpu(Settings.from_env(), args.index_entries, args.queries,
                       pipeline_texts=args.pipeline_texts)
    result.wall_s = time.perf_counter() - started
    result.command = (f"embedq bench gpu --index-entries {args.index_entries} "
                      f"--queries {args.queries} --pipeline-texts {args.pipeline_texts}")
    report = Path(args.report)
    write_report(result, report)
    print(render(result))
    print(f"\nwritten to {report}")
    return {"environment": result.environment, "speed": result.speed,
            "fidelity": result.fidelity, "index": result.index, "pipeline": result.pipeline,
            "wall_s": result.wall_s}


def main(argv: Sequence[str] | None = None) -> int:
    """`embedq bench gpu [args]` with the bench's own parser (`make gpu-check` runs this)."""
    from embedq import bench

    parser = argparse.ArgumentParser(prog="embedq")
    bench.add_parser(parser.add_subparsers(dest="command", required=True), None)
    args = parser.parse_args(["bench", "gpu", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run(args)
    except EmbedqError as exc:
        print(f"embedq: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
