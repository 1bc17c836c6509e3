"""Several models in one deployment: two real workers, each `embedq worker --model NAME`
on the model's own queues, behind one real API.

Each request is routed by its `model` (an alias included) to the queue of that model, so
each text is encoded by the worker of its model and no other (the faulty encoder's
ledger, one file per worker, records every forward pass), and a model busy with a slow
batch does not hold up the other model's requests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests import support
from tests.integration.test_api_support import ApiServer


@dataclass
class TwoModels:
    env: dict[str, str]
    api: ApiServer
    ledgers: dict[str, Path]


@pytest.fixture(scope="module")
def two(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[TwoModels]:
    tmp = tmp_path_factory.mktemp("models")
    # Queues of this module's own, so no other test's worker takes its messages.
    env = support.cluster_env(redis_url, pg_url, models="small=mini@r1,large=big@r2:fp32",
                              model_aliases="query=small", online_queue="online-two",
                              bulk_queue="bulk-two")
    ledgers = {name: tmp / f"ledger-{name}.txt" for name in ("small", "large")}
    workers = [support.WorkerProcess({**env, "EMBEDQ_LEDGER_PATH": str(ledgers[name])},
                                     tmp / f"worker-{name}.log", "--model", name)
               for name in ledgers]
    try:
        for worker in workers:
            worker.start()
        with ApiServer(env, tmp / "api.log") as api:
            yield TwoModels(env, api, ledgers)
    finally:
        for worker in workers:
            worker.stop()


def embed(two: TwoModels, texts: list[str], model: str | None) -> httpx.Response:
    body: dict[str, object] = {"input": texts}
    if model is not None:
        body["model"] = model
    return httpx.post(two.api.url + "/v1/embeddings", json=body, timeout=60)


def encoded_by(two: TwoModels, texts: list[str]) -> dict[str, set[str]]:
    """For each text, the workers whose model encoded it."""
    counts = {name: support.ledger_counts(path) for name, path in two.ledgers.items()}
    return {t: {n for n, c in counts.items() if support.text_digest(t) in c} for t in texts}


def test_each_request_is_encoded_by_the_worker_of_its_model(two: TwoModels, salt: str) -> None:
    small, large = [f"{salt} small {i}" for i in range(3)], [f"{salt} large {i}" for i in range(3)]
    default, alias = [f"{salt} default"], [f"{salt} alias"]
    for texts, model in ((small, "small"), (large, "large"), (default, None), (alias, "query")):
        answer = embed(two, texts, model)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == (model or "small")
    by = encoded_by(two, small + large + default + alias)
    assert by == {**{t: {"small"} for t in small + default + alias},
                  **{t: {"large"} for t in large}}


def test_one_text_under_two_models_is_two_vectors_computed_once_each(
        two: TwoModels, salt: str) -> None:
    text = f"{salt} shared text"
    for model in ("small", "large", "small", "large"):
        assert embed(two, [text], model).status_code == 200
    counts = {n: support.ledger_counts(p).get(support.text_digest(text), 0)
              for n, p in two.ledgers.items()}
    assert counts == {"small": 1, "large": 1}


def test_a_busy_model_does_not_hold_up_the_other(two: TwoModels, salt: str) -> None:
    release = threading.Event()
    slow: dict[str, httpx.Response] = {}

    def ask_large() -> None:
        # The large model's batch sleeps 5 s: its worker's model is busy all that time
        # (five small requests take well under a second).
        slow["answer"] = embed(two, [f"{salt} slow [[sleep:5]]"], "large")
        release.set()

    thread = threading.Thread(target=ask_large, daemon=True)
    thread.start()
    support.wait_until(lambda: support.text_digest(f"{salt} slow [[sleep:5]]")
                       in support.ledger_counts(two.ledgers["large"]), 30,
                       "the large model to start its slow batch")
    quick = [f"{salt} quick {i}" for i in range(5)]
    for text in quick:
        assert embed(two, [text], "small").status_code == 200
    assert not release.is_set(), "the small model's answers came while large was busy"
    assert encoded_by(two, quick) == {t: {"small"} for t in quick}
    thread.join(60)
    assert slow["answer"].status_code == 200


def test_models_info_and_readiness_name_every_model(two: TwoModels) -> None:
    cards = httpx.get(two.api.url + "/v1/models", timeout=30).json()["data"]
    assert [(c["id"], c["revision"], c["aliases"]) for c in cards] == [
        ("small", "r1", ["default", "query"]), ("large", "r2", [])]
    assert httpx.get(two.api.url + "/v1/models/query", timeout=30).json()["id"] == "small"
    unknown = httpx.get(two.api.url + "/v1/models/medium", timeout=30)
    assert unknown.status_code == 404 and "small, large" in unknown.text
    info = httpx.get(two.api.url + "/info", timeout=30).json()
    assert (info["served_model_name"], info["model_sha"]) == ("small", "r1")
    other = httpx.get(two.api.url + "/info", headers={"X-Embedq-Model": "large"},
                      timeout=30).json()
    assert (other["model_id"], other["served_model_name"], other["model_sha"]) == \
        ("big", "large", "r2")
    ready = httpx.get(two.api.url + "/readyz", timeout=30)
    assert ready.status_code == 200, ready.text


def test_a_job_names_its_served_model_in_its_state_and_its_results(
        two: TwoModels, salt: str) -> None:
    sent = httpx.post(two.api.url + "/v1/jobs", timeout=30,
                      json={"input": [f"{salt} job {i}" for i in range(3)], "model": "large"})
    assert sent.status_code == 202, sent.text
    url = f"{two.api.url}/v1/jobs/{sent.json()['id']}"
    support.wait_until(lambda: httpx.get(url, timeout=30).json()["status"] == "succeeded",
                       60, "the job under the large model succeeding")
    state, results = httpx.get(url, timeout=30).json(), httpx.get(url + "/results",
                                                                   timeout=30).json()
    assert (state["model"], results["model"]) == ("large", "large")
    assert [row["embedding"] is not None for row in results["data"]] == [True] * 3
