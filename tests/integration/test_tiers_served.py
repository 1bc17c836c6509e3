"""Precision tiers per request, on real Redis, Postgres and `embedq worker` processes: a
worker serving EMBEDQ_TIERS=fp32,int8 routes each message to the encoder of its revision;
an unserved tier is refused at once (Python and HTTP), never waited on; jobs take
EMBEDQ_JOB_PRECISION. The routing tests use the faulty (hashing) encoder; one module
fixture runs the real model on ONNX Runtime, where the two tiers' vectors really differ."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from embedq.config import Settings
from embedq.errors import ConfigError, EmbeddingFailed, InvalidInput, UnknownModel
from embedq.fingerprint import fingerprint
from embedq.jobs.service import JobService
from embedq.models import JobStatus
from embedq.service import EmbeddingService
from tests import support
from tests.conftest import Cluster, OnnxExports
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

INT8 = "+int8.ort-dyn-pc.2"
MODEL = "all-MiniLM-L6-v2"


class Tiered:
    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env = env
        self.tmp = tmp

    def service(self, **overrides: object) -> EmbeddingService:
        return EmbeddingService(support.settings_from(self.env).with_overrides(**overrides))


@pytest.fixture(scope="module")
def tiered(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Tiered]:
    """A faulty-encoder worker serving fp32 and int8, on queues and a revision of its own."""
    tmp = tmp_path_factory.mktemp("tiers")
    env = support.cluster_env(
        redis_url, pg_url, ledger_path=tmp / "ledger.txt", online_queue="online-tiers",
        bulk_queue="bulk-tiers", backend="onnx", tiers="fp32,int8", model_revision="tiers-r",
        job_chunk_max_texts=50,
    )
    worker = support.WorkerProcess(env, tmp / "worker.log").start()
    try:
        yield Tiered(env, tmp)
    finally:
        worker.stop()


def test_a_worker_serving_two_tiers_stores_each_under_its_own_fingerprint(
    tiered: Tiered, salt: str
) -> None:
    service = tiered.service()
    text = f"{salt} one text, two tiers"
    fp32 = service.embed([text], timeout_s=30)
    int8 = service.embed([text], model=f"{MODEL}:int8", timeout_s=30)
    also_int8 = service.embed([text], precision="int8", timeout_s=30)
    assert fp32.spec.revision == "tiers-r"
    assert int8.spec.revision == also_int8.spec.revision == "tiers-r" + INT8
    assert int8.counts["submitted"] == 1 and also_int8.counts["cache_hits"] == 1
    fps = [fingerprint(fp32.spec, text), fingerprint(int8.spec, text)]
    assert fps[0] != fps[1]
    assert set(service.durable.get_many(fps)) == set(fps)
    assert all(o.error is None for o in [*fp32.outcomes, *int8.outcomes])
    beats = [w for w in service.hot.live_workers().values()
             if w.get("revision") == "tiers-r"]
    assert [(w["revisions"], w["tiers"]) for w in beats] == \
        [(["tiers-r", "tiers-r" + INT8], ["fp32", "int8"])]
    service.close()


def test_an_unserved_tier_is_refused_before_anything_is_queued(tiered: Tiered) -> None:
    service = tiered.service(tiers=("fp32",))
    with pytest.raises(InvalidInput, match="EMBEDQ_TIERS=fp32") as refused:
        service.embed(["never queued"], precision="int8")
    assert refused.value.param == "precision"
    with pytest.raises(UnknownModel, match="EMBEDQ_TIERS=fp32"):
        service.embed(["never queued"], model=f"{MODEL}:int8")
    for unknown in ("bf16", ""):
        with pytest.raises(InvalidInput, match=f"'{unknown}' is unknown: use one of fp32"):
            service.embed(["never queued"], precision=unknown)
    # fp16 is a tier embedq knows, but this deployment does not list it.
    with pytest.raises(InvalidInput, match=r"'fp16' is not served here .*add fp16"):
        service.embed(["never queued"], precision="fp16")
    with pytest.raises(InvalidInput, match="disagree"):
        tiered.service().spec(f"{MODEL}:int8", precision="fp32")
    service.close()


def test_a_tier_no_worker_serves_fails_fast_naming_what_the_worker_serves(
    cluster: Cluster, salt: str
) -> None:
    # This producer offers int8, but the cluster's worker loads fp32 only.
    service = cluster.service(backend="onnx", tiers=("fp32", "int8"))
    started = time.monotonic()
    result = service.embed([f"{salt} int8 nobody serves"], precision="int8", timeout_s=60)
    error = result.outcomes[0].error
    assert type(error) is EmbeddingFailed, error
    assert "fp32 ('hashing-v2')" in str(error) and f"'hashing-v2{INT8}'" in str(error)
    assert "EMBEDQ_TIERS" in str(error)
    assert time.monotonic() - started < 30  # refused by the worker, not timed out
    service.close()


def test_fp16_no_worker_serves_fails_fast_saying_it_needs_a_cuda_worker(
    cluster: Cluster, salt: str
) -> None:
    # This producer (on a CPU machine) lists fp16; the cluster's worker loads fp32 only.
    service = cluster.service(tiers=("fp32", "fp16"))
    started = time.monotonic()
    result = service.embed([f"{salt} fp16 nobody serves"], precision="fp16", timeout_s=60)
    error = result.outcomes[0].error
    assert type(error) is EmbeddingFailed, error
    assert "'hashing-v2+fp16.torch-half.1'" in str(error)
    assert "fp16 tier is served only by workers on a CUDA GPU" in str(error)
    assert time.monotonic() - started < 30  # refused by the worker, not timed out
    service.close()


def test_jobs_run_on_EMBEDQ_JOB_PRECISION_unless_they_name_a_tier(
    tiered: Tiered, salt: str
) -> None:
    service = tiered.service(job_precision="int8")
    jobs = JobService(service)
    texts = [f"{salt} off-peak {i}" for i in range(120)]
    cheap = jobs.submit(texts)
    exact = jobs.submit(texts[:10], precision="fp32")
    for job_id in (cheap, exact):
        _wait_for(jobs, job_id)
    assert jobs.get(cheap).revision == "tiers-r" + INT8
    assert jobs.get(exact).revision == "tiers-r"
    int8_spec = service.spec(precision="int8")
    rows = list(jobs.results(cheap, limit=200))
    stored = service.durable.get_many([fingerprint(int8_spec, t) for t in texts])
    assert len(rows) == 120 and len(stored) == 120
    assert [r.vector for r in rows] == [stored[fingerprint(int8_spec, t)] for t in texts]
    service.close()


def test_job_precision_must_be_a_served_tier() -> None:
    with pytest.raises(ConfigError, match="EMBEDQ_JOB_PRECISION='int8' is not a served tier"):
        Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_JOB_PRECISION": "int8"})


def test_http_refuses_an_unserved_tier_with_a_4xx_naming_EMBEDQ_TIERS(
    cluster: Cluster
) -> None:
    with ApiServer(cluster.env, cluster.tmp / "api-tiers.log") as api:
        got = httpx.post(api.url + "/v1/embeddings", timeout=30,
                         json={"input": ["x"], "model": f"{MODEL}:int8"})
        assert got.status_code == 404, got.text
        assert "EMBEDQ_TIERS=fp32" in got.json()["error"]["message"]
        models = httpx.get(api.url + "/v1/models", timeout=30).json()
        assert [m["id"] for m in models["data"]] == [MODEL]


def test_http_jobs_take_a_precision_and_refuse_an_unserved_one(
    tiered: Tiered, salt: str
) -> None:
    service = tiered.service()
    jobs = JobService(service)
    with ApiServer(tiered.env, tiered.tmp / "api-jobs.log") as api:
        got = httpx.post(api.url + "/v1/jobs", timeout=30,
                         json={"input": [f"{salt} a", f"{salt} b"], "precision": "int8"})
        assert got.status_code == 202, got.text
        _wait_for(jobs, got.json()["id"])
        assert jobs.get(got.json()["id"]).revision == "tiers-r" + INT8
        bad = httpx.post(api.url + "/v1/jobs", timeout=30,
                         json={"input": ["x"], "precision": "fp16"})
        assert bad.status_code == 422, bad.text
        assert "EMBEDQ_TIERS" in bad.json()["error"]["message"]
        models = httpx.get(api.url + "/v1/models", timeout=30).json()["data"]
        assert [m["id"] for m in models] == [MODEL, f"{MODEL}:int8"]
        one = httpx.get(api.url + f"/v1/models/{MODEL}:int8", timeout=30).json()
        assert one["revision"] == "tiers-r" + INT8
    service.close()


def test_cli_embed_takes_a_precision(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_BACKEND": "onnx",
                "EMBEDQ_TIERS": "fp32,int8", "EMBEDQ_DATA_DIR": str(tmp_path)})

    def embed(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "embedq.cli", "embed", "--json", *args,
                               "a text"], env=env, cwd=support.ROOT, capture_output=True,
                              text=True, timeout=120)

    int8 = embed("--precision", "int8")
    assert int8.returncode == 0, int8.stderr
    assert json.loads(int8.stdout)["data"][0]["source"] == "computed"
    again = embed("--precision", "int8")
    assert json.loads(again.stdout)["data"][0]["source"] in {"hot", "durable"}
    fp32 = embed()
    assert json.loads(fp32.stdout)["data"][0]["source"] == "computed"  # another fingerprint
    bad = embed("--precision", "fp16")
    assert bad.returncode == 2 and "use one of fp32, int8" in bad.stderr, bad.stderr


def test_readyz_and_live_workers_count_each_tier(cluster: Cluster) -> None:
    # This API offers int8 too, but the cluster's only worker on its revision loads fp32.
    env = {**cluster.env, "EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,int8"}
    with ApiServer(env, cluster.tmp / "api-tiers-ready.log") as api:
        ready = httpx.get(api.url + "/readyz", timeout=30)
        assert ready.status_code == 503, ready.text
        workers = ready.json()["checks"]["workers"]
        assert f"none serving tier int8 ({MODEL}@hashing-v2{INT8})" in workers, workers
        metrics = httpx.get(api.url + "/metrics", timeout=30).text
        live = {line.split("revision=")[1].split('"')[1]: float(line.rsplit(" ", 1)[1])
                for line in metrics.splitlines()
                if line.startswith("embedq_live_workers{") and f'model="{MODEL}"' in line}
        assert live["hashing-v2" + INT8] == 0 and live["hashing-v2"] >= 1, live


def _wait_for(jobs: JobService, job_id: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if jobs.get(job_id).status in JobStatus.final():
            assert jobs.get(job_id).status == JobStatus.SUCCEEDED, jobs.describe(job_id)
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end: {jobs.describe(job_id)}")


# --- the real model on ONNX Runtime, fp32 and int8 in one worker

@pytest.fixture(scope="module")
def onnx_api(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory,
             onnx_exports: OnnxExports) -> Iterator[ApiServer]:
    tmp = tmp_path_factory.mktemp("tiers-onnx")
    # The session's exports: the worker exports only when no earlier module has.
    env = support.cluster_env(
        redis_url, pg_url, encoder="sentence-transformers", backend="onnx",
        tiers="fp32,int8", data_dir=onnx_exports.shared, online_queue="online-onnx",
        bulk_queue="bulk-onnx",
    )
    worker = support.WorkerProcess(env, tmp / "worker.log").start(timeout_s=600)
    try:
        with ApiServer(env, tmp / "api.log") as api:
            yield api
    finally:
        worker.stop()


@pytest.mark.model
def test_one_worker_answers_fp32_and_int8_each_from_its_own_model(
    onnx_api: ApiServer, salt: str
) -> None:
    models = httpx.get(onnx_api.url + "/v1/models", timeout=30).json()["data"]
    assert [m["id"] for m in models] == [MODEL, f"{MODEL}:int8"]
    assert models[1]["revision"] == models[0]["revision"] + INT8
    text = f"{salt} a quantized model computes a slightly different vector"
    vectors = []
    for model in (MODEL, f"{MODEL}:int8"):
        got = httpx.post(onnx_api.url + "/v1/embeddings", timeout=120,
                         json={"input": [text], "model": model})
        assert got.status_code == 200, got.text
        assert got.json()["model"] == model
        vectors.append(np.array(got.json()["data"][0]["embedding"], dtype=np.float32))
    fp32, int8 = vectors
    cosine = float(fp32 @ int8 / np.linalg.norm(fp32) / np.linalg.norm(int8))
    assert 0.98 < cosine < 0.99999, cosine
    service = EmbeddingService(support.settings_from(onnx_api.env))
    fps = [fingerprint(service.spec(precision=t), text) for t in ("fp32", "int8")]
    assert fps[0] != fps[1]
    stored = service.durable.get_many(fps)
    assert set(stored) == set(fps)  # each vector under its own tier's fingerprint
    service.close()
