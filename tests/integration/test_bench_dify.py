"""`embedq bench dify` on real Redis and Postgres: it starts its own serve and worker, every
phase's texts come back as vectors and were encoded by the worker (cluster counters), each
phase sends what its Dify provider sends, it stops what it started, and a missing server
is named within seconds."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid

import pytest

from embedq.testing.processes import free_port
from tests import support

pytestmark = pytest.mark.integration

TEXTS = 40
SEQUENTIAL = 5
BATCH = 3  # the server's max inputs a request: /info's max_client_batch_size


def _bench(env: dict[str, str], *extra: str, timeout_s: float = 300
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "dify", "--texts", str(TEXTS),
         "--sequential", str(SEQUENTIAL), *extra],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=timeout_s,
    )


def _own_env(redis_url: str, pg_url: str, **extra: object) -> dict[str, str]:
    # A model and queues of its own: a worker another test left running neither counts as
    # live for it nor takes its messages, so the bench must start its own worker.
    tag = uuid.uuid4().hex[:8]
    return support.cluster_env(redis_url, pg_url, encoder="hashing", model=f"dify-{tag}",
                               online_queue=f"dify-{tag}", bulk_queue=f"dify-bulk-{tag}",
                               **extra)


def test_runs_every_phase_end_to_end_and_stops_what_it_started(
    redis_url: str, pg_url: str
) -> None:
    done = _bench(_own_env(redis_url, pg_url, max_inputs=BATCH), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert "debian-heldout" in report["corpus"] and "debian-heldout" in done.stdout
    assert set(report["started"]) == {"serve", "worker"}
    assert report["credential_check"]["vectors"] == 1
    for name, texts in (("openai", TEXTS), ("tei", TEXTS), ("sequential", SEQUENTIAL)):
        got = report[name]
        assert got["texts"] == got["vectors"] == texts, name
        assert got["dimension"] == 384, name  # the hashing encoder's width
        # Fresh texts: each one computed by the worker once, none answered from cache.
        assert got["encoded"] == texts, name
        assert got["texts_per_s"] > 0 and 0 < got["p50_ms"] <= got["p99_ms"], name
    assert report["openai"]["requests"] == TEXTS  # one text per request
    assert report["openai"]["routes"] == {"POST /v1/embeddings": TEXTS}
    assert report["sequential"]["requests"] == SEQUENTIAL
    # Dify's TEI plugin: /info once, then only /v1/embeddings, in batches of at most
    # max_client_batch_size (never /tokenize or /embed).
    tei = report["tei"]
    assert tei["max_client_batch_size"] == BATCH
    assert tei["routes"] == {"GET /info": 1, "POST /v1/embeddings": tei["requests"]}
    assert tei["largest_request"] == BATCH
    assert math.ceil(TEXTS / BATCH) <= tei["requests"] < TEXTS
    bare = report["bare"]
    assert bare["batched_texts"] == TEXTS and bare["one_text_calls"] == SEQUENTIAL
    assert bare["batched_texts_per_s"] > 0 and bare["one_text_p50_ms"] > 0
    assert report["openai_over_bare_batched"] == pytest.approx(
        report["openai"]["texts_per_s"] / bare["batched_texts_per_s"], rel=0.01)
    assert report["tei_over_openai"] == pytest.approx(
        report["tei"]["texts_per_s"] / report["openai"]["texts_per_s"], rel=0.01)
    for key in ("tei_over_bare_batched", "sequential_p50_over_bare_one_text_p50"):
        assert report[key] > 0
    # CPU a text: the client's and the started server's (which did every request's work,
    # so it used CPU), and the ceiling they imply, model / (model + client).
    cpu = report["cpu"]
    assert cpu["client_ms_per_text"] > 0 and cpu["server_ms_per_text"] > 0
    assert cpu["client_ms_per_text"] == report["openai"]["client_cpu_ms_per_text"]
    model = cpu["bare_model_ms_per_text"]
    assert model == pytest.approx(cpu["cores"] * 1000 / bare["batched_texts_per_s"], rel=0.01)
    assert cpu["openai_ceiling_over_bare_batched"] == pytest.approx(
        model / (model + cpu["client_ms_per_text"]), rel=0.01)
    assert "CPU a text in (b)" in done.stdout
    for pid in report["started"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_closed_redis_port_is_named_at_once(redis_url: str, pg_url: str) -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"
    env = {**_own_env(redis_url, pg_url), "EMBEDQ_REDIS_URL": closed,
           "EMBEDQ_BROKER_URL": closed}
    started = time.monotonic()
    done = _bench(env, timeout_s=60)
    assert done.returncode != 0
    assert f"Redis at {closed}" in done.stderr and "EMBEDQ_REDIS_URL" in done.stderr
    assert time.monotonic() - started < 30


def test_a_closed_postgres_port_is_named_at_once(redis_url: str, pg_url: str) -> None:
    env = {**_own_env(redis_url, pg_url),
           "EMBEDQ_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{free_port()}/embedq"}
    started = time.monotonic()
    done = _bench(env, timeout_s=60)
    assert done.returncode != 0
    assert "EMBEDQ_DATABASE_URL" in done.stderr and "not reachable" in done.stderr
    assert time.monotonic() - started < 30
