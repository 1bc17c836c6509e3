"""Precision tiers: which numeric recipe computes a vector, and how it names itself.

A tier is part of the model's identity, so of every fingerprint: the revision that enters
a fingerprint is the source model's revision plus the tier's suffix. fp32 has none, so
fp32 vectors (torch or ONNX Runtime: the same function, agreeing to ~1e-7; the fidelity
test holds ONNX fp32 to a minimum cosine of 0.9999) keep the fingerprints and caches they
always had. int8's and fp16's suffixes name their recipe: a different quantization or
half-precision recipe is a different model.

    tier   backend        device  recipe                                  revision suffix
    fp32   torch or onnx  any     the model as shipped                    (none)
    int8   onnx           CPU     ONNX Runtime dynamic quantization, int8 +int8.ort-dyn-pc.2
                                  weights per output channel, MatMul/Gemm
    fp16   torch          CUDA    the whole model cast to float16         +fp16.torch-half.1
                                  (`module.half()`), outputs read as fp32
"""

from __future__ import annotations

from embedq.errors import ConfigError

TIERS = ("fp32", "int8", "fp16")
DEFAULT_TIER = "fp32"
ONNX_TIERS = ("fp32", "int8")  # the tiers `embedq model export` makes
CUDA_TIERS = ("fp16",)  # loaded only on a CUDA device

# Change the trailing number whenever a recipe changes what it computes.
_SUFFIX = {"fp32": "", "int8": "+int8.ort-dyn-pc.2", "fp16": "+fp16.torch-half.1"}


def check_tier(tier: str) -> str:
    """`tier` when it is one embedq knows; ConfigError naming the choices otherwise."""
    if tier not in TIERS:
        raise ConfigError(f"precision tier {tier!r} is unknown: use one of {', '.join(TIERS)}")
    return tier


def tier_revision(revision: str, tier: str) -> str:
    """The revision a fingerprint names for `tier` of a model at `revision`."""
    return revision + _SUFFIX[check_tier(tier)]


def tier_label(tier: str) -> str:
    """The tier with its recipe, for folder names: `fp32`, `int8.ort-dyn-pc.2`."""
    return tier + _SUFFIX[check_tier(tier)].removeprefix("+" + tier)


def tier_of_revision(revision: str) -> str:
    """The tier a fingerprint's revision names (its suffix), fp32 when it has none."""
    for tier, suffix in _SUFFIX.items():
        if suffix and revision.endswith(suffix):
            return tier
    return DEFAULT_TIER
