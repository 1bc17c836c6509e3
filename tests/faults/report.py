"""Write the fault-suite table from the recorder's JSON lines.

    python -m tests.faults.report faults-results.jsonl > faults-report.md

One row per scenario: passes k/K and, for each figure, its worst value over the K runs
(the highest or the lowest, as the scenario recorded) with the bound it was held to.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def worst(runs: list[dict[str, Any]]) -> dict[str, str]:
    """Each figure's worst value over `runs`, with its limit (the tightest one seen)."""
    seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        for name, fig in run["figures"].items():
            seen[name].append(fig)
    out = {}
    for name, figs in seen.items():
        pick = max if figs[0]["worse"] == "higher" else min
        value = pick(f["value"] for f in figs)
        limits = [f["limit"] for f in figs if f["limit"] is not None]
        bound = ""
        if limits:
            tight = min(limits) if figs[0]["worse"] == "higher" else max(limits)
            bound = f" ({'<=' if figs[0]['worse'] == 'higher' else '>='} {_fmt(tight)})"
        out[name] = _fmt(value) + bound
    return out


def render(lines: list[dict[str, Any]]) -> str:
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by_scenario[line["scenario"]].append(line)
    k = max((len(runs) for runs in by_scenario.values()), default=0)
    rows = ["# Fault suite report", "",
            f"`make faults K={k}`: each scenario run K times against real processes "
            "(see tests/faults/). A figure shows its worst value over the runs and, in "
            "brackets, the bound the scenario asserts (a bound computed from measured "
            "terms is shown at its tightest).", "",
            "| scenario | passes | wall s (worst) | figures (worst) |", "|---|---|---|---|"]
    for name, runs in by_scenario.items():
        passes = sum(1 for r in runs if r["passed"])
        figures = "; ".join(f"{n} {v}" for n, v in worst(runs).items())
        wall = max(r["wall_s"] for r in runs)
        rows.append(f"| {name} | {passes}/{len(runs)} | {_fmt(wall)} | {figures or '-'} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.faults.report RESULTS.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[1])
    if not path.exists():
        print(f"{path} does not exist: run `make faults` first", file=sys.stderr)
        return 1
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    sys.stdout.write(render(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
