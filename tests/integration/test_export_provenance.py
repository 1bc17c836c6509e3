"""An exported file says which model and revision its vectors came from: Parquet in its
key-value schema metadata (read back with pyarrow), JSONL on every line, NPY in the
`.meta.json` beside it. Embedded (`embedq bulk` runs its own job), with the hashing
encoder under a model name and revision of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests import support

MODEL, REVISION = "export-model", "export-rev-7"
PROVENANCE = {"model": MODEL, "revision": REVISION, "dimensions": "384",
              "normalize": "true", "dtype": "float32"}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "embedq.cli", *args], env=env,
                          cwd=support.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str, Path]:
    """An embedded deployment's environment, a finished job of 5 texts, its Parquet."""
    tmp = tmp_path_factory.mktemp("export")
    src = tmp / "in.txt"
    src.write_text("".join(f"exported line {i}\n" for i in range(5)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_MODEL": MODEL,
                "EMBEDQ_MODEL_REVISION": REVISION, "EMBEDQ_DATA_DIR": str(tmp / "data")})
    out = tmp / "out.parquet"
    state = json.loads(cli(env, "bulk", str(src), "--json", "--out", str(out)).stdout)
    assert state["status"] == "succeeded"
    return env, state["id"], out


def test_parquet_records_model_revision_and_vector_shape(
        job: tuple[dict[str, str], str, Path]) -> None:
    _, job_id, out = job
    schema = pq.read_schema(out)
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()
            if k.startswith(b"embedq.")}
    assert meta == {f"embedq.{k}": v for k, v in {**PROVENANCE, "job": job_id}.items()}
    table = pq.read_table(out)
    assert len(table.column("embedding")[0].as_py()) == 384  # as the metadata says


def test_jsonl_names_model_and_revision_on_every_line(
        job: tuple[dict[str, str], str, Path], tmp_path: Path) -> None:
    env, job_id, _ = job
    out = tmp_path / "out.jsonl"
    cli(env, "jobs", "export", job_id, "--out", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(5))
    assert {(line["model"], line["revision"]) for line in lines} == {(MODEL, REVISION)}


def test_npy_writes_its_provenance_beside_it(
        job: tuple[dict[str, str], str, Path], tmp_path: Path) -> None:
    env, job_id, _ = job
    out = tmp_path / "out.npy"
    cli(env, "jobs", "export", job_id, "--out", str(out))
    assert np.load(out).shape == (5, 384)  # the NPY itself stays a plain array
    meta = json.loads((tmp_path / "out.meta.json").read_text())
    assert meta == {**PROVENANCE, "job": job_id}
