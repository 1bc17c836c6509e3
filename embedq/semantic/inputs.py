"""What a caller names a namespace and a threshold with: checked before anything is read."""

from __future__ import annotations

import math
import re
from typing import Any

from embedq.errors import InvalidInput

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise InvalidInput(
            f"namespace {namespace!r} is not valid: use 1-128 characters from letters, "
            "digits and . _ : - (starting with a letter or digit)", "namespace",
        )
    return namespace


def check_threshold(threshold: Any) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or (
        math.isnan(threshold) or not -1.0 <= threshold <= 1.0
    ):
        raise InvalidInput(
            f"threshold {threshold!r} is outside [-1, 1]: it is a cosine similarity "
            "(1.0 = the exact text only)", "threshold",
        )
    return float(threshold)
