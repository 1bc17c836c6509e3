"""The one percentile every bench reports with."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(samples: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `samples`, interpolated linearly between the two
    nearest ranks (numpy's default); 0.0 when there are none. Any order, any unit."""
    if not samples:
        return 0.0
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))
