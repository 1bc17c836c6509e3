"""The ONNX Runtime backend on the real default model: exported once, shared, and held
to the torch fp32 vectors on 2,000 held-out corpus texts (tiers under 0.98 mean cosine
fail; the figures are printed with -s)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.encoders import load_encoder
from embedq.encoders.export import ExportedModel, export_model
from embedq.encoders.onnx_runtime import OnnxEncoder
from tests.conftest import OnnxExports

pytestmark = pytest.mark.model

FIDELITY_TEXTS = 2000
QUERIES = 200


@pytest.fixture(scope="module")
def onnx_settings(onnx_exports: OnnxExports) -> Settings:
    data_dir = onnx_exports.empty_dir()  # later modules reuse what this one exports
    return Settings.from_env({"EMBEDQ_DATA_DIR": str(data_dir), "EMBEDQ_BACKEND": "onnx",
                              "EMBEDQ_TIERS": "fp32,int8"})


@pytest.fixture(scope="module")
def racing_exports(onnx_settings: Settings) -> list[ExportedModel]:
    """Two exporters of fp32 started at once on an empty data dir (two workers booting)."""
    results: list[ExportedModel] = []
    start = threading.Barrier(2)

    def export() -> None:
        start.wait()
        results.append(export_model(onnx_settings, "fp32"))

    threads = [threading.Thread(target=export) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert len(results) == 2, "an exporter did not finish"
    return results


@pytest.fixture(scope="module")
def encoders(onnx_settings: Settings, racing_exports: list[ExportedModel],
             model_encoder: Any) -> dict[str, Any]:
    # torch fp32 is the session's default model (backend torch, tier fp32), loaded once.
    return {"torch fp32": model_encoder,
            "onnx fp32": load_encoder(onnx_settings, "fp32"),
            "onnx int8": load_encoder(onnx_settings, "int8")}


def test_racing_exporters_export_once_and_share_the_folder(
        racing_exports: list[ExportedModel]) -> None:
    assert sorted(r.exported for r in racing_exports) == [False, True]
    assert racing_exports[0].folder == racing_exports[1].folder
    leftovers = [p.name for p in racing_exports[0].folder.parent.iterdir() if ".tmp-" in p.name]
    assert leftovers == []


def test_a_second_encoder_reuses_the_export(onnx_settings: Settings,
                                            encoders: dict[str, Any]) -> None:
    folders = {t: export_model(onnx_settings, t) for t in ("fp32", "int8")}
    assert not any(f.exported for f in folders.values())
    stamps = {t: f.model_file.stat().st_mtime_ns for t, f in folders.items()}
    again = load_encoder(onnx_settings, "int8")
    assert isinstance(again, OnnxEncoder)
    assert {t: f.model_file.stat().st_mtime_ns for t, f in folders.items()} == stamps
    assert folders["int8"].folder.name.endswith("-int8.ort-dyn-pc.2")
    assert Path(folders["fp32"].folder).parent == onnx_settings.links.data_dir / "models"


def test_tiers_name_themselves_in_the_revision(encoders: dict[str, Any]) -> None:
    torch_rev = encoders["torch fp32"].revision
    assert encoders["onnx fp32"].revision == torch_rev
    assert encoders["onnx int8"].revision == torch_rev + "+int8.ort-dyn-pc.2"


@pytest.mark.parametrize("label", ["torch fp32", "onnx fp32", "onnx int8"])
def test_encoders_keep_one_contract(encoders: dict[str, Any], label: str) -> None:
    encoder, reference = encoders[label], encoders["torch fp32"]
    assert (encoder.dimension, encoder.max_seq_length) == (384, 256)
    assert encoder.encode([]).shape == (0, 384)
    texts = ["Development files of gfal2", "word " * 400, "short", "ünïcödé text ✓"]
    assert encoder.count_tokens(texts) == reference.count_tokens(texts)
    assert encoder.raw_tokens(texts) == reference.raw_tokens(texts)
    assert encoder.count_tokens(texts)[1] == 256 < encoder.raw_tokens(texts)[1]
    encoder.warm_up()
    batch = encoder.encode(texts)
    assert batch.shape == (4, 384) and batch.dtype == np.float32
    backwards = encoder.encode(texts[::-1])[::-1]
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    # int8 quantizes activations with one scale per batch, so a batch's other rows move a
    # row: measured down to 0.970 for "short" padded beside a 256-token text
    # (docs/backends.md, "int8 depends on the batch"); the batcher groups similar lengths.
    tolerance = 1e-4 if label.endswith("fp32") else 0.05
    for other in (backwards, alone):
        cos = np.sum(batch * other, axis=1) / (
            np.linalg.norm(batch, axis=1) * np.linalg.norm(other, axis=1))
        assert cos.min() > 1 - tolerance


def test_onnx_has_no_layer_steps_so_the_batcher_preempts_between_batches(
        encoders: dict[str, Any]) -> None:
    def hook() -> None:
        raise AssertionError("an ONNX encoder has no steps to call a hook between")

    assert encoders["onnx int8"].add_checkpoint(hook) == 0
    encoders["onnx int8"].encode(["a bulk text"])
    encoders["onnx int8"].remove_checkpoint(hook)


def test_every_tier_stays_close_to_torch_fp32_on_held_out_texts(
        encoders: dict[str, Any]) -> None:
    texts = load_texts(FIDELITY_TEXTS, split="heldout")  # the whole held-out split
    reference = _unit(encoders["torch fp32"].model.encode(texts, batch_size=32))
    ref_neighbours = _neighbours(reference)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # as the batcher sorts
    for label in ("onnx fp32", "onnx int8"):
        got = np.zeros_like(reference)
        for start in range(0, len(order), 32):
            rows = order[start:start + 32]
            got[rows] = encoders[label].encode([texts[i] for i in rows])
        got = _unit(got)
        cos = np.sum(reference * got, axis=1)
        neighbours = _neighbours(got)
        overlap = np.mean([len(set(a) & set(b)) / 10
                           for a, b in zip(ref_neighbours, neighbours, strict=True)])
        print(f"\n{label}: mean cosine {cos.mean():.4f}, 1st percentile "
              f"{np.percentile(cos, 1):.4f}, min {cos.min():.4f}, top-10 overlap {overlap:.3f}")
        assert cos.mean() >= 0.98, f"{label} mean cosine {cos.mean():.4f} is under 0.98"
        assert overlap >= 0.9, f"{label} top-10 neighbour overlap {overlap:.3f}"
        if label == "onnx fp32":
            # fp32 on ONNX shares torch fp32's fingerprints: it must be the same function.
            assert cos.min() > 0.9999 and overlap >= 0.99


def _unit(m: Any) -> Any:
    m = np.asarray(m, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _neighbours(m: Any) -> list[list[int]]:
    sims = m[:QUERIES] @ m.T
    sims[np.arange(QUERIES), np.arange(QUERIES)] = -np.inf
    return [list(row) for row in np.argsort(-sims, axis=1)[:, :10]]


def test_model_export_command_reports_the_shared_exports(
        onnx_settings: Settings, encoders: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from embedq.cli import main

    monkeypatch.setenv("EMBEDQ_DATA_DIR", str(onnx_settings.links.data_dir))
    monkeypatch.setenv("EMBEDQ_BACKEND", "onnx")
    monkeypatch.setenv("EMBEDQ_TIERS", "int8,fp32")
    assert main(["model", "export", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(r["tier"], r["exported"]) for r in rows] == [("int8", False), ("fp32", False)]
    assert rows[0]["folder"] == str(export_model(onnx_settings, "int8").folder)
