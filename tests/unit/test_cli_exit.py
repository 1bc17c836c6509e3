"""The `embedq` command ends without the interpreter's teardown (`cli.run`): its exit code,
its output into a pipe and its last messages must all still arrive. A real embedded job
(SQLite, the test encoders) runs in a child process as a user would start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def embedq(tmp: Path, *args: str, encoder: str = "hashing") -> subprocess.CompletedProcess[str]:
    # As a user's shell runs it: output into a pipe is block-buffered (no PYTHONUNBUFFERED).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EMBEDQ_") and k != "PYTHONUNBUFFERED"}
    env.update(EMBEDQ_DATA_DIR=str(tmp / "data"), EMBEDQ_ENCODER=encoder,
               HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "embedq.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def lines(tmp: Path, texts: list[str]) -> Path:
    path = tmp / "in.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


def test_a_finished_job_prints_all_of_its_json_into_a_pipe(tmp_path: Path) -> None:
    texts = [f"exit test {i} " + "word " * 200 for i in range(40)]
    run = embedq(tmp_path, "bulk", str(lines(tmp_path, texts)), "--json")
    assert run.returncode == 0, run.stderr
    state = json.loads(run.stdout)  # the whole line, flushed before the process ended
    assert state["status"] == "succeeded" and state["progress"]["done"] == 40


def test_a_failed_job_keeps_its_exit_code_and_says_why(tmp_path: Path) -> None:
    run = embedq(tmp_path, "bulk", str(lines(tmp_path, ["fine", "broken [[nan]]"])), "--json",
                 encoder="faulty")
    assert run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["status"] == "succeeded_with_errors"
    assert "succeeded_with_errors: 1 of 2 texts failed; 1 with: InvalidVector" in run.stderr


def test_an_error_keeps_its_exit_code_and_message(tmp_path: Path) -> None:
    run = embedq(tmp_path, "bulk", str(tmp_path / "missing.jsonl"))
    assert run.returncode == 2
    assert run.stderr.startswith("embedq: error:") and "missing.jsonl" in run.stderr


def test_an_export_name_no_format_takes_is_refused_before_a_job_exists(tmp_path: Path) -> None:
    run = embedq(tmp_path, "bulk", str(lines(tmp_path, ["a text"])), "--out", "out.xlsx")
    assert run.returncode == 2
    assert "cannot export to 'out.xlsx': name the file .parquet, .npy or .jsonl" in run.stderr
    listed = embedq(tmp_path, "jobs", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_a_from_line_past_the_last_text_says_so_not_to_fix_a_line(tmp_path: Path) -> None:
    run = embedq(tmp_path, "bulk", str(lines(tmp_path, ["one", "two"])), "--from-line", "3")
    assert run.returncode == 2
    assert "--from-line 3 is past the last text of 'in.jsonl' (line 2)" in run.stderr
    assert "failed, nothing stored)" in run.stderr and "fix the line" not in run.stderr
