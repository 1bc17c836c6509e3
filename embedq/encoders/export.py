"""ONNX export of a sentence-transformers model: once per model, revision and tier.

`export_model(settings, tier)` returns the folder holding `model.onnx`, `tokenizer.json`
and `export.json` under `<data_dir>/models/<model>-<revision>-<tier>/`, exporting it
first when it is not there. Every worker on the data dir shares the folder:

  - a lock file per folder serialises exporters; the one that takes it second finds the
    folder made and reuses it;
  - an export is written to a temporary folder beside the final one and renamed into place
    in one step, so a reader never sees half a model.

The graph is the whole sentence-transformers pipeline (transformer, pooling, and Dense or
Normalize where the model has them), traced with `torch.onnx.export`, so ONNX Runtime
computes what `SentenceTransformer.encode` does. int8 is quantized from the fp32 export.
Exports run at `embedq worker` start or `embedq model export`, never inside a request.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedq.config import Settings
from embedq.encoders.tiers import ONNX_TIERS, check_tier, tier_label
from embedq.errors import ConfigError

log = logging.getLogger(__name__)

MODEL_FILE = "model.onnx"
META_FILE = "export.json"
OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class ExportedModel:
    folder: Path
    exported: bool  # False: this call found the folder made (by this process or another)

    @property
    def model_file(self) -> Path:
        return self.folder / MODEL_FILE

    def meta(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.folder / META_FILE).read_text("utf-8"))
        return data


def export_folder(settings: Settings, tier: str) -> Path:
    """Where `tier` of the configured model is (or will be) kept."""
    from embedq.encoders import model_identity

    name, revision = model_identity(settings, "fp32")
    folder = f"{_slug(name)}-{_slug(revision)}-{tier_label(tier)}"
    return settings.links.data_dir / "models" / folder


def export_model(settings: Settings, tier: str) -> ExportedModel:
    """The exported folder for `tier`, made now when no process has made it yet."""
    from embedq.encoders import model_identity

    if check_tier(tier) not in ONNX_TIERS:
        raise ConfigError(f"the {tier} tier runs on torch, not ONNX Runtime: there is nothing "
                          f"to export for it (export one of {', '.join(ONNX_TIERS)})")
    final = export_folder(settings, tier)
    if (final / META_FILE).is_file():
        return ExportedModel(final, exported=False)
    source = _source_folder(settings)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locked(final.parent / f".{final.name}.lock"):
        if (final / META_FILE).is_file():  # another exporter finished while we waited
            return ExportedModel(final, exported=False)
        fp32 = None if tier == "fp32" else export_model(settings, "fp32")
        scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            if fp32 is None:
                window, dimension = _export_fp32(source, scratch / MODEL_FILE)
            else:
                _quantize_int8(fp32.model_file, scratch / MODEL_FILE)
                window, dimension = fp32.meta()["max_seq_length"], fp32.meta()["dimension"]
            shutil.copyfile(source / "tokenizer.json", scratch / "tokenizer.json")
            meta = {
                "model": settings.model.model, "tier": tier, "recipe": tier_label(tier),
                "source_revision": model_identity(settings, "fp32")[1],
                "max_seq_length": window, "dimension": dimension,
                "inputs": list(_INPUTS), "opset": OPSET,
            }
            # The meta file is the folder's completion mark: written last, inside scratch.
            (scratch / META_FILE).write_text(json.dumps(meta, indent=2), "utf-8")
            os.rename(scratch, final)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    log.info("exported %s tier=%s to %s", settings.model.model, tier, final)
    return ExportedModel(final, exported=True)


def _source_folder(settings: Settings) -> Path:
    from embedq.encoders import model_path

    folder = Path(model_path(settings.model.model))
    if not folder.is_dir() or not (folder / "tokenizer.json").is_file():
        raise ConfigError(
            f"EMBEDQ_BACKEND=onnx exports from a local sentence-transformers model folder "
            f"with a tokenizer.json; {settings.model.model!r} is not one: set EMBEDQ_MODEL to such "
            "a folder, or EMBEDQ_BACKEND=torch"
        )
    return folder


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-")[:80]


def _export_fp32(source: Path, out: Path) -> tuple[int, int]:
    """Export; (max_seq_length, dimension) of the model."""
    import warnings

    import torch
    from sentence_transformers import SentenceTransformer

    model: Any = SentenceTransformer(str(source), device="cpu").eval()

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            features = {"input_ids": input_ids, "attention_mask": attention_mask,
                        "token_type_ids": token_type_ids}
            return self.model(features)["sentence_embedding"]

    sample = model.tokenizer(["an export sample", "a longer export sample text"],
                             padding=True, return_tensors="pt")
    args = tuple(sample.get(k, torch.zeros_like(sample["input_ids"])) for k in _INPUTS)
    axes = {k: {0: "batch", 1: "tokens"} for k in _INPUTS}
    with warnings.catch_warnings(), torch.no_grad():
        # The tracer warns about shape checks it records as constants; the fidelity test
        # (other lengths and batch sizes than the sample's) is what shows they are sound.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pipeline(), args, str(out), input_names=list(_INPUTS),
            output_names=["sentence_embedding"],
            dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
            opset_version=OPSET, dynamo=False,
        )
    dimension = (model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension")
                 else model.get_sentence_embedding_dimension())
    return int(model.max_seq_length), int(dimension)


# The feed-forward block's output projection (BERT's `layer.N/output/dense`, as traced by
# torch.onnx.export) takes the GELU's long-tailed activations: quantized, it costs the most
# fidelity (mean cosine 0.993 -> 0.996, top-10 overlap 0.885 -> 0.919 kept fp32).
_KEEP_FP32 = re.compile(r"/layer\.\d+/output/dense/")


def _quantize_int8(fp32: Path, out: Path) -> None:
    """Dynamic int8: weights per output channel; activations quantized per batch at run
    time; feed-forward outputs stay fp32. docs/backends.md has the table of what else was
    tried and why this won."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32), load_external_data=False).graph
    keep = [n.name for n in graph.node if n.op_type in {"MatMul", "Gemm"}
            and _KEEP_FP32.search(n.name)]
    quantize_dynamic(str(fp32), str(out), per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gemm"], nodes_to_exclude=keep)
