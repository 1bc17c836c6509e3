"""Precision tiers are part of the model identity: fp32 keeps its fingerprints, int8 and
fp16 never share one with fp32 or each other, and settings and workers refuse tiers
nothing here can serve (fp16 without CUDA) at start, saying what to do."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from embedq.config import DEFAULT_MODEL, Settings
from embedq.encoders import check_device, load_encoder, model_identity, model_path
from embedq.encoders.cuda import cuda_missing
from embedq.encoders.export import export_model
from embedq.encoders.tiers import tier_label, tier_of_revision, tier_revision
from embedq.errors import ConfigError
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.semantic import space_of
from embedq.workers.runtime import WorkerRuntime

MODEL = DEFAULT_MODEL


def test_fp32_identity_is_the_revision_embedq_always_used() -> None:
    plain = Settings.from_env({})
    onnx = Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,int8"})
    name, revision = model_identity(plain)
    assert revision.startswith("sha256:") and "+" not in revision
    assert model_identity(onnx) == (name, revision)
    assert model_identity(onnx, "fp32") == (name, revision)


def test_int8_fingerprints_never_equal_fp32_ones() -> None:
    settings = Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "int8,fp32"})
    name, fp32 = model_identity(settings, "fp32")
    _, int8 = model_identity(settings)  # the first tier listed is the default
    assert int8 == fp32 + "+int8.ort-dyn-pc.2"
    text = "the same text"
    assert fingerprint(EncodeSpec(name, fp32), text) != fingerprint(EncodeSpec(name, int8), text)


def test_tier_names_carry_their_recipe() -> None:
    assert tier_label("fp32") == "fp32"
    assert tier_label("int8") == "int8.ort-dyn-pc.2"
    assert tier_revision("r1", "fp32") == "r1"
    assert tier_label("fp16") == "fp16.torch-half.1"
    with pytest.raises(ConfigError, match="use one of fp32, int8, fp16"):
        tier_revision("r1", "bf16")


def test_tiers_are_parsed_and_checked() -> None:
    assert Settings.from_env({"EMBEDQ_BACKEND": "onnx",
                              "EMBEDQ_TIERS": " int8, fp32 "}).model.tiers == ("int8", "fp32")
    with pytest.raises(ConfigError, match="EMBEDQ_BACKEND=onnx"):
        Settings.from_env({"EMBEDQ_TIERS": "fp32,int8"})
    with pytest.raises(ConfigError, match=r"among fp32, int8 \(ONNX Runtime\) and fp16"):
        Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,bf16"})
    with pytest.raises(ConfigError, match="each once"):
        Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,fp32"})
    with pytest.raises(ConfigError, match="use torch or onnx"):
        Settings.from_env({"EMBEDQ_BACKEND": "tensorrt"})


# --- fp16: a CUDA tier, named apart from fp32 and int8
def test_fp16_fingerprints_differ_from_fp32_and_int8() -> None:
    settings = Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,int8,fp16"})
    name, fp32 = model_identity(settings, "fp32")
    _, int8 = model_identity(settings, "int8")
    _, fp16 = model_identity(settings, "fp16")
    assert fp16 == fp32 + "+fp16.torch-half.1"
    assert tier_of_revision(fp16) == "fp16" and tier_of_revision(int8) == "int8"
    assert tier_of_revision(fp32) == "fp32"
    text = "the same text"
    prints = {fingerprint(EncodeSpec(name, r), text) for r in (fp32, int8, fp16)}
    assert len(prints) == 3
    assert space_of(name, fp16, None) != space_of(name, fp32, None)  # semantic spaces


def test_fp16_is_listed_without_cuda_by_producers() -> None:
    # An API on a CPU machine fingerprints for GPU workers elsewhere: settings accept it.
    settings = Settings.from_env({"EMBEDQ_TIERS": "fp32,fp16"})
    assert settings.model.tiers == ("fp32", "fp16") and settings.model.backend == "torch"


def test_fp16_on_a_device_that_is_not_cuda_is_refused_by_settings() -> None:
    with pytest.raises(ConfigError, match=r"EMBEDQ_DEVICE='cpu'.*unset EMBEDQ_DEVICE"):
        Settings.from_env({"EMBEDQ_TIERS": "fp32,fp16", "EMBEDQ_DEVICE": "cpu"})
    assert Settings.from_env({"EMBEDQ_TIERS": "fp16", "EMBEDQ_DEVICE": "cuda:1"}).model.tiers == (
        "fp16",)
    with pytest.raises(ConfigError, match="upstream computes vectors remotely"):
        Settings.from_env({"EMBEDQ_ENCODER": "upstream", "EMBEDQ_UPSTREAM_URL": "http://u",
                           "EMBEDQ_MODEL_REVISION": "v1", "EMBEDQ_TIERS": "fp16"})


needs_no_cuda = pytest.mark.skipif(cuda_missing() is None, reason="this machine has CUDA")


@needs_no_cuda
def test_fp16_without_cuda_is_refused_before_any_model_loads() -> None:
    settings = Settings.from_env({"EMBEDQ_TIERS": "fp32,fp16"})
    with pytest.raises(ConfigError, match=r"^no CUDA device: .*lists fp16.*Remove fp16 from "
                       r"this worker's EMBEDQ_TIERS.*CUDA build of torch"):
        check_device(settings, "fp16")
    check_device(settings, "fp32")  # fp32 runs anywhere
    with pytest.raises(ConfigError, match=r"^no CUDA device"):
        load_encoder(settings, "fp16")


@needs_no_cuda
def test_a_worker_listing_fp16_without_cuda_stops_at_start(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_TIERS": "fp32,fp16",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"^no CUDA device"):
        WorkerRuntime(settings)
    assert time.monotonic() - started < 20  # refused before the fp32 model loaded


@needs_no_cuda
def test_the_torch_encoder_refuses_fp16_off_cuda() -> None:
    from embedq.encoders.sentence import SentenceTransformerEncoder

    with pytest.raises(ConfigError, match="no CUDA device: the fp16 tier runs only on CUDA"):
        SentenceTransformerEncoder("m", model_path(DEFAULT_MODEL), "r", "cpu", tier="fp16")


def test_fp16_has_nothing_to_export_to_onnx(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_TIERS": "fp16", "EMBEDQ_DATA_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="runs on torch, not ONNX Runtime"):
        export_model(settings, "fp16")


def test_models_listing_names_each_tier_and_refuses_unlisted_fp16(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from embedq.api.app import create_app

    def listing(tiers: str) -> tuple[list[dict[str, object]], int, str]:
        settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_TIERS": tiers,
                                      "EMBEDQ_DATA_DIR": str(tmp_path / tiers)})
        with TestClient(create_app(settings)) as client:
            models = client.get("/v1/models").json()["data"]
            got = client.post("/v1/embeddings", json={"input": ["x"], "model": f"{MODEL}:fp16"})
            return models, got.status_code, got.text

    models, status, _ = listing("fp32,fp16")
    assert [m["id"] for m in models] == [MODEL, f"{MODEL}:fp16"]
    assert models[1]["revision"] == models[0]["revision"] + "+fp16.torch-half.1"
    assert status == 200
    models, status, text = listing("fp32")
    assert [m["id"] for m in models] == [MODEL] and status == 404
    assert "not served here (EMBEDQ_TIERS=fp32)" in text and "add fp16" in text
