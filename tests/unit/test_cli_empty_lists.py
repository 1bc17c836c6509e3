"""`embedq keys list` and `embedq jobs list` with nothing to list say so and how to make
one; `--json` stays a list."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.test_cli_exit import embedq


def test_no_keys_is_said_with_how_to_make_one(tmp_path: Path) -> None:
    plain = embedq(tmp_path, "keys", "list")
    assert plain.returncode == 0 and plain.stdout == ""
    assert "no keys: `embedq keys create --tenant NAME` makes one" in plain.stderr
    named = embedq(tmp_path, "keys", "list", "--tenant", "carol")
    assert "no keys of tenant carol" in named.stderr
    listed = embedq(tmp_path, "keys", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_no_jobs_is_said_with_how_to_submit_one(tmp_path: Path) -> None:
    plain = embedq(tmp_path, "jobs", "list", "--status", "failed")
    assert plain.returncode == 0 and plain.stdout == ""
    assert "no jobs failed: `embedq bulk FILE` submits one" in plain.stderr
    listed = embedq(tmp_path, "jobs", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
