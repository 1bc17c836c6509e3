"""A model upgrade without downtime, end to end on CPU with the real default model served
as two revisions of one folder (`old`, `new`): a job's texts and a semantic-cache query
are held by `old`; `embedq models switch query new` is refused while `new` lacks them
(the alias keeps answering with `old`), `embedq models reembed --from old --to new` embeds
them under `new` as a bulk job, and the switch then moves the alias for every process, whose
requests are answered from what the job stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.jobs.service import JobService
from embedq.models import JobStatus
from embedq.semantic.service import SemanticCache
from tests import support

ENV = {"EMBEDQ_MODELS": "old=all-MiniLM-L6-v2@rev-a,new=all-MiniLM-L6-v2@rev-b",
       "EMBEDQ_MODEL_ALIASES": "query=old", "HF_HUB_OFFLINE": "1"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")},
            **ENV, "EMBEDQ_DATA_DIR": str(tmp_path)}


@pytest.fixture
def deployment(env: dict[str, str]) -> Iterator[Deployment]:
    one = Deployment.from_settings(support.settings_from(env))
    try:
        yield one
    finally:
        one.close()


def finished(jobs: JobService, job_id: str) -> dict[str, object]:
    support.wait_until(lambda: jobs.get(job_id).status in JobStatus.final(), 300, "the job")
    return jobs.describe(job_id)


def models(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embedq.cli", "models", *args], env=env,
                          capture_output=True, text=True, timeout=600, cwd=support.ROOT)


def test_reembed_then_switch_moves_an_alias_in_one_step(
        env: dict[str, str], deployment: Deployment, salt: str) -> None:
    texts = [f"{salt} knowledge base line {i}" for i in range(30)]
    jobs = deployment.jobs()
    assert finished(jobs, jobs.submit(texts, model="old"))["status"] == "succeeded"
    SemanticCache(deployment.service).put("kb", f"{salt} where is the invoice", {"n": 1})
    assert deployment.service.spec("query").revision == "rev-a"

    refused = models(env, "switch", "query", "new")
    assert refused.returncode == 2, refused.stderr
    assert "no vector yet for 31 of the 31 texts 'old' holds" in refused.stderr
    assert "embedq models reembed --from old --to new" in refused.stderr

    ran = models(env, "reembed", "--from", "old", "--to", "new", "--json")
    assert ran.returncode == 0, ran.stderr
    state = json.loads(ran.stdout.splitlines()[-1])
    assert (state["status"], state["model"], state["revision"]) == ("succeeded", "new", "rev-b")
    assert state["progress"]["total"] == 31 and state["progress"]["done"] == 31

    switched = models(env, "switch", "query", "new")
    assert switched.returncode == 0, switched.stderr
    assert "query: old -> new (31 texts" in switched.stdout
    # Another process (a fresh deployment on the same database) follows the alias, and
    # its requests for the texts are answered from what the job stored.
    later = Deployment.from_settings(Settings.from_env(env))
    try:
        result = later.service.embed([*texts[:3], f"{salt} where is the invoice"],
                                     model="query")
        assert result.spec.revision == "rev-b"
        assert {o.source for o in result.outcomes} == {"durable"}
    finally:
        later.close()
    # The old model is still served by its own name.
    assert deployment.service.spec("old").revision == "rev-a"
