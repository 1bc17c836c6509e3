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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.errors import InvalidInput
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


def finished(jobs: JobService, job_id: str) -> dict[str, Any]:
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


ASKED = {"kb": [("How do I reset my password?", "I forgot my password, how do I reset it?"),
                ("What are your opening hours?", "When are you open?")],
         "faq": [("Where can I download my invoice?", "how to download an invoice"),
                 ("Can I pay by credit card?", "is payment by credit card accepted")]}


def test_switching_default_carries_the_semantic_cache(
        env: dict[str, str], deployment: Deployment) -> None:
    """Entries put under `old` answer under `new` after `switch default new`: the same
    payload, metadata and expiry, found by a paraphrase through a cache made before the
    switch (it follows the alias), a fresh process and HTTP; an entry deleted before the
    switch stays deleted, one put after the job is carried once re-embedded, and nothing
    is carried or computed twice. Switching back carries the other way: payloads replaced
    under `new`, and an entry a process still on `new` put right after the switch."""
    from starlette.testclient import TestClient

    from embedq.api.app import create_app
    from embedq.fingerprint import space_of
    from embedq.jobs.reembed import Switched, reembed, switch
    from embedq.semantic.carry import Carried, carrier, carry
    from embedq.semantic.store import utcnow

    jobs, service = deployment.jobs(), deployment.service

    def switch_default(to: str = "new", wait: Callable[[], None] = lambda: None
                       ) -> Switched[Carried]:
        return switch(jobs, deployment.durable, deployment.catalog, "default", to,
                      carry=carrier(service, wait))

    cache = SemanticCache(service)
    try:
        ids = {q: cache.put(ns, q, {"answer": q}, metadata={"ns": ns}, ttl_s=86_400)
               for ns, pairs in ASKED.items() for q, _ in pairs}
        before = {asked: cache.lookup(ns, asked) for ns, pairs in ASKED.items()
                  for _, asked in pairs}
        assert all(r.hit for r in before.values()), before
        cache.delete("faq", ids["Can I pay by credit card?"])

        first = finished(jobs, reembed(jobs, deployment.catalog, "old", "new"))
        assert first["status"] == "succeeded" and first["progress"]["total"] == 3
        cache.put("faq", "Do you ship abroad?", {"answer": "yes"})  # after the job
        with pytest.raises(InvalidInput, match="no vector yet for 1 of the 4 texts"):
            switch_default()
        again = finished(jobs, reembed(jobs, deployment.catalog, "old", "new"))
        assert (again["progress"]["encoded"], again["progress"]["cached"]) == (1, 3)

        switched = models(env, "switch", "default", "new")
        assert switched.returncode == 0, switched.stderr
        assert ("semantic cache: 4 live entries of old, 4 carried into new's space, "
                "0 updated") in switched.stdout
        new = service.spec("new")
        assert cache.space == space_of(new.model, new.revision, new.dimensions)
        for ns, pairs in ASKED.items():
            for query, asked in pairs:
                got = cache.lookup(ns, asked)
                if query == "Can I pay by credit card?":
                    assert not got.hit  # deleted under old: not resurrected
                    continue
                assert got.hit, (asked, got)
                match = got.matches[0]
                assert (match.query, match.payload, match.metadata) == (
                    query, {"answer": query}, {"ns": ns})
                assert match.id != ids[query]  # the counterpart, in new's space
        assert cache.stats("faq")["entries"] == 2 and cache.stats("kb")["entries"] == 2

        # Idempotent: a second switch is a no-op, a second carry adds nothing; one after
        # the switch (its last step) leaves what was written under new since.
        assert switch_default().carried is None
        cache.put("kb", "How do I reset my password?", {"answer": "see /reset"})
        old = service.spec("old")
        with cache.store.writing() as s:
            twice = carry(s, source=space_of(old.model, old.revision, old.dimensions),
                          target=cache.space, model=new.model, now=utcnow(), update=False,
                          vectors=lambda queries: pytest.fail(f"computed {queries}"))
        assert (twice.read, twice.added, twice.updated) == (4, 0, 0)
        assert cache.lookup("kb", ASKED["kb"][0][1]).matches[0].payload == {
            "answer": "see /reset"}

        # An id from before the switch deletes the pair it names, in both spaces.
        cache.delete("kb", ids["What are your opening hours?"])
        assert not cache.lookup("kb", "When are you open?").hit

        # Back to old: new's payloads, and a put by a process not yet switched back.
        def late_put() -> None:
            cache.store.put(
                namespace="faq", model=new.model,
                space=space_of(new.model, new.revision, new.dimensions),
                query="Is there a student discount?", payload={"answer": "10%"},
                vector=service.embed(["Is there a student discount?"], model="new")
                .vectors()[0].tobytes(),
                metadata={}, ttl_s=None, sliding=False, max_entries=100, max_namespaces=100)

        back = switch_default("old", late_put).carried
        assert back is not None and (back.read, back.added, back.updated) == (4, 1, 1)
        support.wait_until(lambda: cache.view().name == "old", 10, "the switch back")
        assert cache.lookup("faq", "Is there a student discount?").matches[0].payload == {
            "answer": "10%"}
    finally:
        cache.close(save=False)

    # A process started after the switches: the HTTP API (Client and MCP: the same cache).
    with TestClient(create_app(support.settings_from(env))) as http:
        got = http.post("/v1/semantic-cache/kb/lookup",
                        json={"query": "I forgot my password, how do I reset it?"}).json()
        assert got["hit"], got
        assert got["matches"][0]["payload"] == {"answer": "see /reset"}
        assert http.get("/v1/semantic-cache/kb/stats").json()["entries"] == 1
