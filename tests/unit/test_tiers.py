"""Precision tiers are part of the model identity: fp32 keeps its fingerprints, int8
never shares one with fp32, and settings refuse tiers nothing can serve."""

from __future__ import annotations

import pytest

from embedq.config import Settings
from embedq.encoders import model_identity
from embedq.encoders.tiers import tier_label, tier_revision
from embedq.errors import ConfigError
from embedq.fingerprint import EncodeSpec, fingerprint


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
    with pytest.raises(ConfigError, match="use one of fp32, int8"):
        tier_revision("r1", "fp16")


def test_tiers_are_parsed_and_checked() -> None:
    assert Settings.from_env({"EMBEDQ_BACKEND": "onnx",
                              "EMBEDQ_TIERS": " int8, fp32 "}).tiers == ("int8", "fp32")
    with pytest.raises(ConfigError, match="EMBEDQ_BACKEND=onnx"):
        Settings.from_env({"EMBEDQ_TIERS": "fp32,int8"})
    with pytest.raises(ConfigError, match="fp32 and/or int8 once each"):
        Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,bf16"})
    with pytest.raises(ConfigError, match="fp32 and/or int8 once each"):
        Settings.from_env({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "fp32,fp32"})
    with pytest.raises(ConfigError, match="use torch or onnx"):
        Settings.from_env({"EMBEDQ_BACKEND": "tensorrt"})
