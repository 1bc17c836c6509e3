"""Schemathesis against the served /openapi.json: generated requests, valid and not, on a
real server with keys required. No answer may be a 5xx, and every check schemathesis
knows must pass (413 counts as a rejection: it is how documented limits answer)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

KEY = "schemathesis-key"
# The routes of this feature; other features' routers are fuzzed by their own tests.
OPERATIONS = r"^/(v1/embeddings|v1/models|healthz|readyz|metrics)"
# Examples per route of the fixed-seed pass over the rest of the API (the random-seed fuzz
# in tests/faults runs 60 per route in `make test` and 300 in `make faults`).
OTHER_ROUTES_EXAMPLES = 20
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "404", "405", "413", "415", "422"]
"""


@pytest.fixture(scope="module")
def keyed_api(cluster: Cluster) -> Iterator[ApiServer]:
    env = {**cluster.env, "EMBEDQ_API_KEYS": KEY}
    with ApiServer(env, cluster.tmp / "api-schemathesis.log") as server:
        yield server


def test_generated_requests_never_get_a_5xx(
    keyed_api: ApiServer, tmp_path: Path
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    output = run_schemathesis(
        keyed_api, ["--config-file", str(config)],
        ["--checks", "all", "--include-path-regex", OPERATIONS, "--max-examples", "200",
         "--seed", "20261129"],
    )
    cases = re.search(r"(\d+) generated", output)
    assert cases is not None, output[-3000:]
    assert int(cases.group(1)) >= 1000, output[-3000:]
    assert "unhandled error" not in keyed_api.log()


def test_no_route_of_the_whole_api_answers_a_5xx(keyed_api: ApiServer) -> None:
    """Every other router (jobs, batches, semantic cache, tenants, ...): no generated
    request, valid or not, may get a server error.

    The routes of OPERATIONS are left out: the test above already runs every check,
    not_a_server_error included, on them with more examples. The seed is fixed, so this is
    a regression test that finds the same inputs every run; tests/faults/test_api_fuzz.py
    fuzzes the whole API with a new seed each run and many more examples."""
    output = run_schemathesis(
        keyed_api, [],
        ["--checks", "not_a_server_error", "--exclude-path-regex", OPERATIONS,
         "--max-examples", str(OTHER_ROUTES_EXAMPLES), "--seed", "20261130"],
    )
    cases = re.search(r"(\d+) generated", output)
    assert cases is not None and int(cases.group(1)) >= OTHER_ROUTES_EXAMPLES, output[-3000:]
    assert "unhandled error" not in keyed_api.log()


def run_schemathesis(api: ApiServer, global_args: list[str], run_args: list[str]) -> str:
    """Run the schemathesis CLI against the served schema; fail with its output."""
    command = [
        sys.executable, "-m", "schemathesis.cli", *global_args, "run",
        api.url + "/openapi.json", "--header", f"Authorization: Bearer {KEY}", *run_args,
        "--no-shrink", "--generation-database", "none", "--no-color",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    return output
