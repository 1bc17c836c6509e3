"""Figures of one fault scenario run, appended as a JSON line for the K-run report.

Each scenario records the figures its issue names (lost texts, recomputed texts, attempts,
recovery seconds against the bound...) with the direction in which a value is worse, so
`tests/faults/report.py` can show the worst value over K repetitions. Lines go to
`EMBEDQ_FAULT_RESULTS` when it is set (`make faults` sets it); otherwise only the test
log shows them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Figure:
    value: float
    worse: str  # "higher" or "lower"
    limit: float | None = None


@dataclass
class Recorder:
    scenario: str
    rep: int
    figures: dict[str, Figure] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def figure(self, name: str, value: float, *, worse: str = "higher",
               limit: float | None = None) -> float:
        """Record `name`; `limit` is the bound the scenario asserts, shown beside it."""
        if worse not in {"higher", "lower"}:
            raise ValueError(f"worse={worse!r}: use 'higher' or 'lower'")
        self.figures[name] = Figure(float(value), worse, limit)
        return value

    def write(self, passed: bool, path: str | None = None) -> dict[str, object]:
        line: dict[str, object] = {
            "scenario": self.scenario,
            "rep": self.rep,
            "passed": passed,
            "wall_s": round(time.monotonic() - self.started, 2),
            "figures": {k: {"value": f.value, "worse": f.worse, "limit": f.limit}
                        for k, f in self.figures.items()},
        }
        target = path if path is not None else os.environ.get("EMBEDQ_FAULT_RESULTS")
        if target:
            with Path(target).open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
        return line
