"""Whether this process can compute on a CUDA device, asked without loading a model.

Asking imports torch (a dependency of every install) but nothing CUDA-specific: a CPU
build of torch answers `torch.version.cuda is None` and never loads CUDA libraries.
"""

from __future__ import annotations

# What to do about a missing device, for every message that reports one.
INSTALL_HINT = (
    "on a machine with an NVIDIA GPU and driver, install a CUDA build of torch, e.g. "
    "pip install --force-reinstall torch==2.13.0 --index-url "
    "https://download.pytorch.org/whl/cu128 (docs/backends.md, \"GPU\")"
)


def cuda_missing() -> str | None:
    """Why torch cannot use a CUDA device here (a sentence), or None when it can."""
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    if not torch.cuda.is_available():
        return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device "
                "(no GPU or driver, or CUDA_VISIBLE_DEVICES hides it)")
    return None
