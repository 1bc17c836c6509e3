"""The fault-suite report: one row per scenario, passes k/K, each figure at its worst."""

from __future__ import annotations

import json
from pathlib import Path

from tests.faults.report import main, render


def run(scenario: str, passed: bool, wall_s: float, **figures: tuple[float, str, float | None]
        ) -> dict[str, object]:
    return {"scenario": scenario, "passed": passed, "wall_s": wall_s,
            "figures": {n: {"value": v, "worse": w, "limit": lim}
                        for n, (v, w, lim) in figures.items()}}


def test_each_figure_shows_its_worst_run_and_its_tightest_bound() -> None:
    lines = [run("test_kill", True, 10.0, lost=(0, "higher", 0), answered=(500, "lower", 500),
                 worst_wait_s=(12.5, "higher", 19.7)),
             run("test_kill", False, 14.25, lost=(2, "higher", 0), answered=(498, "lower", 500),
                 worst_wait_s=(11.0, "higher", 19.6)),
             run("test_fuzz", True, 3.0)]
    out = render(lines)
    assert "`make faults K=2`" in out
    assert ("| test_kill | 1/2 | 14.25 | lost 2 (<= 0); answered 498 (>= 500); "
            "worst_wait_s 12.50 (<= 19.60) |") in out
    assert "| test_fuzz | 1/1 | 3 | - |" in out


def test_the_command_reads_a_results_file_and_says_when_there_is_none(
        tmp_path: Path, capsys: object) -> None:
    results = tmp_path / "r.jsonl"
    assert main(["report", str(results)]) == 1
    results.write_text(json.dumps(run("test_x", True, 1.0, n=(3, "lower", None))) + "\n")
    assert main(["report", str(results)]) == 0
    assert main(["report"]) == 2
