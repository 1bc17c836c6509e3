"""`embedq cache ...` as a real process, and `Client.cache_*`, on the test cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from embedq.client import Client
from tests import support
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


def _cli(cluster: Cluster, tmp_path: Path, *args: str) -> tuple[int, Any, str]:
    env = dict(cluster.env, EMBEDQ_DATA_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "embedq.cli", "cache", *args], env=env,
                          capture_output=True, text=True, cwd=support.ROOT, timeout=120)
    out = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, out, done.stderr


def test_cache_commands(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    ns = f"cli-{salt}"
    code, out, _ = _cli(cluster, tmp_path, "put", ns, "how do I open an account",
                        '{"answer": "sign up"}', "--metadata", '{"lang": "en"}')
    assert code == 0
    entry_id = out["id"]
    code, out, _ = _cli(cluster, tmp_path, "lookup", ns, "how do I open an account")
    assert code == 0 and out["matches"][0]["payload"] == {"answer": "sign up"}
    code, out, _ = _cli(cluster, tmp_path, "lookup", ns, "unrelated question", "-k", "3")
    assert code == 1 and out["hit"] is False
    code, out, _ = _cli(cluster, tmp_path, "stats", ns)
    assert (out["entries"], out["hits"], out["misses"]) == (1, 1, 1)
    code, out, _ = _cli(cluster, tmp_path, "delete", ns, str(entry_id))
    assert code == 0 and out == {"id": entry_id, "deleted": True}
    code, _, err = _cli(cluster, tmp_path, "delete", ns, str(entry_id))
    assert code == 2 and f"no entry {entry_id}" in err
    code, _, err = _cli(cluster, tmp_path, "put", ns, "q", "not json")
    assert code == 2 and "payload is not JSON" in err
    code, _, err = _cli(cluster, tmp_path, "lookup", ns, "q", "--threshold", "2")
    assert code == 2 and "outside [-1, 1]" in err


def test_client_cache_methods(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    ns = f"client-{salt}"
    with Client(cluster.settings.with_overrides(data_dir=tmp_path)) as client:
        entry_id = client.cache_put(ns, "where is my order", {"tool": "track"}, ttl_s=60)
        got = client.cache_lookup(ns, "where is my order", k=2)
        assert got.hit and got.matches[0].id == entry_id
        assert client.cache_stats(ns)["entries"] == 1
        assert client.cache_delete(ns) == 1
        assert not client.cache_lookup(ns, "where is my order").hit
