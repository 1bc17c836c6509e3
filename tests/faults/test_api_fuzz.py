"""Scenario: schemathesis on the whole API with a fresh random seed and many examples per
route. The integration suite fuzzes with fixed seeds, which find the same inputs every
run; here each run explores new ones. No generated request, valid or not, may get a 5xx.

The seed is printed (and recorded): rerun a failure with EMBEDQ_FUZZ_SEED=<seed>.
EMBEDQ_FUZZ_EXAMPLES (default 300) sets the examples per route.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import Cluster
from tests.faults.recorder import Recorder
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

KEY = "fuzz-key"
EXAMPLES_ENV = "EMBEDQ_FUZZ_EXAMPLES"
SEED_ENV = "EMBEDQ_FUZZ_SEED"


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name) or str(default)
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"{name}={raw!r} must be a positive integer")
    return int(raw)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    env = {**cluster.env, "EMBEDQ_API_KEYS": KEY,
           "EMBEDQ_DATA_DIR": str(cluster.tmp / "api-fuzz")}
    with ApiServer(env, cluster.tmp / "api-fuzz.log") as server:
        yield server


def test_random_seed_fuzzing_never_gets_a_5xx(rep: int, record: Recorder,
                                              api: ApiServer) -> None:
    examples = _int_env(EXAMPLES_ENV, 300)
    seed = _int_env(SEED_ENV, 0) if os.environ.get(SEED_ENV) else random.randrange(1, 2**31)
    print(f"\nfuzz seed {seed}, {examples} examples per route: rerun with {SEED_ENV}={seed}")
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", api.url + "/openapi.json",
        "--header", f"Authorization: Bearer {KEY}", "--checks", "not_a_server_error",
        "--max-examples", str(examples), "--seed", str(seed), "--continue-on-failure",
        "--request-timeout", "60", "--no-shrink", "--generation-database", "none",
        "--no-color",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60 * examples)
    output = done.stdout + done.stderr
    generated = re.search(r"(\d+) generated", output)
    record.figure("cases", int(generated.group(1)) if generated else 0, worse="lower")
    unhandled = api.log().count("unhandled error")
    record.figure("server_errors", unhandled, limit=0)
    assert done.returncode == 0, f"seed {seed}:\n{output[-8000:]}"
    assert unhandled == 0, f"seed {seed}:\n{api.log()[-8000:]}"
