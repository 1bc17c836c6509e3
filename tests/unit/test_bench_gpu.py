"""`embedq bench gpu` on a machine without CUDA: the parts that run on a CPU are the
real ones (speed loop, perturbed vectors, the index on CPU FAISS with its recall), and
the command itself refuses clearly without touching its report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embedq.bench.gpu import (
    GpuResult,
    measure_index,
    measure_speed,
    perturbed,
    render,
    write_report,
)
from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.encoders.cuda import cuda_missing
from embedq.encoders.hashing import HashingEncoder
from tests import support

# IVF from 2,000 vectors (lists of 64, 8 searched): the kind the 1,000,000-entry run uses.
SMALL_IVF = Settings().with_overrides(semantic_flat_max=2000, semantic_ivf_list_size=64,
                                      semantic_nprobe=8)


def clustered(n: int, dim: int = 48, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, dim)).astype(np.float32)
    return centres[rng.integers(0, 20, n)] + rng.standard_normal((n, dim)).astype(np.float32)


def test_speed_counts_every_text_of_whole_passes_and_their_tokens() -> None:
    encoder = HashingEncoder("m")
    texts = load_texts(300, split="heldout")
    row = measure_speed(encoder, texts, batch=64, min_s=0.05)
    assert row["batch"] == 64 and row["texts"] % 300 == 0 and row["texts"] >= 300
    tokens = sum(encoder.count_tokens(texts)) * row["texts"] // 300
    assert row["tokens_per_s"] == pytest.approx(tokens / row["seconds"], rel=0.01)
    assert row["texts_per_s"] == pytest.approx(row["texts"] / row["seconds"], rel=0.01)


def test_perturbed_copies_stay_near_their_row_and_are_unit_length() -> None:
    base = clustered(50)
    out = perturbed(base, 500)
    assert out.shape == (500, 48) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    cos = np.sum(out * unit[np.arange(500) % 50], axis=1)
    assert 0.80 < float(cos.mean()) < 0.95  # PERTURBATION 0.5: about 0.89
    assert not np.allclose(out[0], out[50])  # two copies of one row differ


def test_index_on_cpu_faiss_reports_its_fallback_and_a_real_recall() -> None:
    vectors = perturbed(clustered(200), 6000)
    queries = perturbed(clustered(200), 200, seed=9)  # near stored rows, none stored
    got = measure_index(vectors, queries, SMALL_IVF)
    assert got["kind"] == "ivf" and got["entries"] == 6000 and got["queries"] == 200
    assert got["gpu"] is False and "CPU FAISS" in got["note"]
    assert got["nlist"] == 6000 // 64 and got["nprobe"] == 8
    assert 0.5 <= got["recall_at_1"] <= 1.0
    assert 0 < got["lookup_p50_ms"] <= got["lookup_p99_ms"]
    exact = measure_index(vectors, queries, SMALL_IVF.with_overrides(semantic_flat_max=10**6))
    assert exact["kind"] == "flat" and exact["recall_at_1"] == 1.0  # the baseline agrees


def test_report_renders_what_was_measured(tmp_path: Path) -> None:
    result = GpuResult(environment={"gpu": "none (CPU run of the parts)"},
                       command="embedq bench gpu", wall_s=1.0)
    encoder = HashingEncoder("m")
    texts = load_texts(200, split="heldout")
    result.speed.append({"tier": "fp32", **measure_speed(encoder, texts, 32, 0.01)})
    result.index = measure_index(perturbed(clustered(100), 3000),
                                 perturbed(clustered(100), 50, seed=5), SMALL_IVF)
    path = tmp_path / "docs" / "gpu-report.md"
    write_report(result, path)
    text = path.read_text("utf-8")
    assert f"| fp32 | 32 | {result.speed[0]['texts_per_s']:,.0f} |" in text
    assert "## Semantic index: 3,000 entries" in text and "Faiss has no GPU support" in text
    assert f"| {result.index['recall_at_1']} |" in text
    assert text == render(result) and not list(path.parent.glob(".*tmp"))


@pytest.mark.skipif(cuda_missing() is None, reason="this machine has CUDA")
def test_without_cuda_the_command_fails_clearly_and_keeps_the_report(tmp_path: Path) -> None:
    report = tmp_path / "gpu-report.md"
    report.write_text("not run\n", "utf-8")
    got = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "gpu", "--report", str(report)],
        cwd=support.ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "EMBEDQ_DATA_DIR": str(tmp_path),
             "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert got.returncode == 2, got.stderr
    assert "embedq: error: no CUDA device: torch" in got.stderr
    assert "CUDA build of torch" in got.stderr and "left its report as it was" in got.stderr
    assert report.read_text("utf-8") == "not run\n"


# What a GPU machine with only torch, sentence-transformers, numpy and FAISS lacks.
SERVICE_MODULES = ("celery", "kombu", "redis", "sqlalchemy", "psycopg", "fastapi", "uvicorn",
                   "alembic", "mcp")

LIGHT_RUN = f"""
import sys
sys.modules.update(dict.fromkeys({SERVICE_MODULES!r}))  # any import of these now fails
from embedq.bench import gpu
from embedq.config import Settings
from embedq.encoders.sentence import SentenceTransformerEncoder
code = gpu.main(["--report", sys.argv[1]])
index = gpu.measure_index(gpu.perturbed(gpu.np.eye(8, dtype="float32"), 300),
                          gpu.np.eye(8, dtype="float32"), Settings())
print("exit", code, "recall", index["recall_at_1"])
"""


@pytest.mark.skipif(cuda_missing() is None, reason="this machine has CUDA")
def test_the_check_runs_without_the_services_dependencies(tmp_path: Path) -> None:
    report = tmp_path / "gpu-report.md"
    got = subprocess.run(
        [sys.executable, "-c", LIGHT_RUN, str(report)], cwd=support.ROOT, capture_output=True,
        text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "EMBEDQ_DATA_DIR": str(tmp_path)},
    )
    assert got.returncode == 0, got.stderr
    assert "embedq: error: no CUDA device: torch" in got.stderr
    assert "exit 2 recall 1.0" in got.stdout and not report.exists()


def test_the_pipeline_phase_runs_a_job_against_the_bare_model_on_the_device() -> None:
    """On the CPU with the hashing encoder: the job runs embedded, every text encoded once,
    and the phase reports the job against the bare model and the model-busy share, as
    `make gpu-check` does on a GPU; the report renders it."""
    from embedq.bench.gpu import pipeline_phase, render_pipeline

    got = pipeline_phase(Settings.from_env({"EMBEDQ_ENCODER": "hashing"}), 300)
    assert got["texts"] == 300 and got["device"] == "cpu" and got["batch"] == 512
    assert got["job_texts_per_s"] > 0 and got["bare_texts_per_s"] > 0
    assert 0 < got["model_busy_share"] <= 1
    assert got["job_over_bare"] == round(got["job_texts_per_s"] / got["bare_texts_per_s"], 3)
    assert any("job / bare" in line for line in render_pipeline(got))
    assert pipeline_phase(Settings(), 0) == {}
