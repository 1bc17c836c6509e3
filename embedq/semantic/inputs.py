"""What a caller names a namespace, a threshold and a namespace's policy with: checked
before anything is read."""

from __future__ import annotations

import math
import re
from typing import Any

from embedq.errors import InvalidInput
from embedq.limits import check_json

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise InvalidInput(
            f"namespace {namespace!r} is not valid: use 1-128 characters from letters, "
            "digits and . _ : - (starting with a letter or digit)", "namespace",
        )
    return namespace


def check_threshold(threshold: Any, name: str = "threshold") -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or (
        math.isnan(threshold) or not -1.0 <= threshold <= 1.0
    ):
        raise InvalidInput(
            f"{name} {threshold!r} is outside [-1, 1]: it is a cosine similarity "
            "(1.0 = the exact text only)", name,
        )
    return float(threshold)


def check_policy(max_false_hit_rate: Any, threshold: Any, trust_score: Any
                 ) -> tuple[float | None, float | None, float | None]:
    """A namespace's policy as `configure` takes it: (budget, base threshold, base trust
    score), each None where unset. A trust score serves hits the verifier refuses, so it
    needs a budget: the budget's rule is what raises it when those hits are wrong."""
    rate = max_false_hit_rate
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)
                             or math.isnan(rate) or not 0.0 <= rate < 1.0):
        raise InvalidInput(
            f"max_false_hit_rate {rate!r} must be a share in [0, 1), e.g. 0.01 for at "
            "most 1 wrong hit in 100; omit it (null) for no budget", "max_false_hit_rate")
    trust = None if trust_score is None else check_threshold(trust_score, "trust_score")
    if trust is not None and rate is None:
        raise InvalidInput(
            f"trust_score {trust} needs max_false_hit_rate: it serves hits the verifier "
            "refuses, and the error budget is what raises it when they are reported wrong; "
            "set both (e.g. max_false_hit_rate 0.02 and trust_score 0.9)", "trust_score")
    return (None if rate is None else float(rate),
            None if threshold is None else check_threshold(threshold), trust)


def check_lookup(k: Any, filter: Any, max_k: int) -> None:
    """A lookup's `k` (1 to `max_k` matches) and metadata `filter` (a JSON object)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise InvalidInput(f"k {k!r} must be an integer from 1 to {max_k}", "k")
    if filter is not None and not isinstance(filter, dict):
        raise InvalidInput("filter must be a JSON object of metadata values", "filter")
    check_json(filter, "filter")
