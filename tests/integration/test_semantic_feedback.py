"""The semantic cache's error budget over real Postgres, Redis, a worker and `embedq serve`:
feedback on served hits raises a namespace's threshold, a wrong hit's negative stops its
entry matching that query, bad feedback is a clear 4xx, and stats show the threshold.

The worker runs the hashing encoder: different texts get unrelated vectors (cosine near
0, either sign), so a namespace whose base threshold is -1.0 serves its entry for any
query, at a score the test reads from the lookup; which query scores what is fixed by
the texts, so each test sorts the scores it got rather than assume them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedq.client import Client
from embedq.config import Settings
from embedq.semantic import SemanticCache
from embedq.semantic.budget import just_above
from tests import support
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

# The server default a namespace runs at until a budget raises it (`embedq bench threshold`).
DEFAULT_THRESHOLD = Settings().semantic.threshold

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    env = dict(cluster.env, EMBEDQ_DATA_DIR=str(cluster.tmp / "semantic-feedback"))
    server = ApiServer(env, cluster.tmp / "semantic-feedback.log").start()
    try:
        yield server
    finally:
        server.stop()


def _call(api: ApiServer, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(method, f"{api.url}/v1/semantic-cache/{path}", json=body, timeout=30)


def _ok(api: ApiServer, method: str, path: str, body: Any = None) -> dict[str, Any]:
    got = _call(api, method, path, body)
    assert got.status_code == 200, got.text
    out: dict[str, Any] = got.json()
    return out


def _served(api: ApiServer, ns: str, query: str, **extra: Any) -> dict[str, Any]:
    """The one match a lookup serves (k=1), with its score and hit_id."""
    got = _ok(api, "POST", f"{ns}/lookup", {"query": query, **extra})
    assert got["hit"], got
    [match] = got["matches"]
    assert isinstance(match["hit_id"], str) and len(match["hit_id"]) == 32
    return dict(match)


def test_feedback_raises_the_threshold_past_a_wrong_hit(api: ApiServer, salt: str) -> None:
    ns = f"budget-{salt}"
    configured = _ok(api, "PUT", f"{ns}/config", {"max_false_hit_rate": 0.01,
                                                  "threshold": -1.0})
    assert configured == {"namespace": ns, "threshold": -1.0, "base_threshold": -1.0,
                          "max_false_hit_rate": 0.01, "trust_score": None,
                          "base_trust_score": None}
    entry = _ok(api, "PUT", ns, {"query": f"{salt} ledger stored question about weekly "
                                          "reports", "payload": 1})["id"]
    # No two texts one word apart, no times or opposites, the same numbers, and more than
    # two content words replaced: neither the guard nor the verifier refuses these pairs,
    # at any score (the verifier's content slot, which works near the threshold, only
    # judges short replaced spans). Each shares the content word "ledger" with the
    # entry: once the threshold rises to the scores, the verifier's disjoint slot judges
    # them, and it rightly refuses a pair with no content word in common; the salt cannot
    # be that word, since a salt of digits only is a number, not a content word.
    asked = [f"{salt} ledger asked {word}" for word in ("alpha", "bravo", "charlie",
                                                         "delta", "echo", "foxtrot")]
    served = sorted((_served(api, ns, query) | {"query": query} for query in asked),
                    key=lambda m: m["score"])
    assert {m["id"] for m in served} == {entry}
    low, wrong = served[:2]

    judged = _ok(api, "POST", f"{ns}/feedback", {"id": wrong["hit_id"], "correct": False})
    raised = just_above(wrong["score"])
    high = [m for m in served[2:] if m["score"] >= raised]
    assert high
    assert judged["threshold"] == pytest.approx(raised)
    assert (judged["recorded"], judged["negative"], judged["entry_id"]) == (True, True, entry)

    stats = _ok(api, "GET", f"{ns}/stats")
    assert stats["threshold"] == pytest.approx(raised)
    assert (stats["base_threshold"], stats["max_false_hit_rate"]) == (-1.0, 0.01)
    assert stats["feedback"] == {"correct": 0, "wrong": 1}

    # Below the new threshold: refused, even when the lookup names a lower threshold.
    for query in (low["query"], wrong["query"]):
        got = _ok(api, "POST", f"{ns}/lookup", {"query": query, "threshold": -1.0,
                                                "explain": True})
        assert not got["hit"] and got["threshold"] == pytest.approx(raised)
        assert got["considered"][0]["refused"] == "below_threshold"
    for match in high:
        assert _served(api, ns, match["query"])["score"] == pytest.approx(match["score"])

    # A correct verdict above the threshold leaves it where it is.
    right = _served(api, ns, high[-1]["query"])
    assert _ok(api, "POST", f"{ns}/feedback",
               {"id": right["hit_id"], "correct": True})["threshold"] == pytest.approx(raised)
    assert _ok(api, "GET", f"{ns}/stats")["feedback"] == {"correct": 1, "wrong": 1}


def test_a_wrong_hit_stops_its_entry_matching_that_query(
        api: ApiServer, cluster: Cluster, tmp_path: Path, salt: str) -> None:
    ns = f"negative-{salt}"  # no budget: only the negative acts
    entry = _ok(api, "PUT", ns, {"query": f"{salt} how do I open an account", "payload": 1})
    other = _ok(api, "PUT", ns, {"query": f"{salt} opening hours", "payload": 2})
    asked = f"{salt} where can I delete my profile"
    look = {"query": asked, "threshold": -1.0, "k": 2}
    first = _ok(api, "POST", f"{ns}/lookup", look)["matches"]
    assert {m["id"] for m in first} == {entry["id"], other["id"]}
    wrong = next(m for m in first if m["id"] == entry["id"])
    judged = _ok(api, "POST", f"{ns}/feedback", {"id": wrong["hit_id"], "correct": False})
    assert judged["negative"] is True and judged["threshold"] == pytest.approx(DEFAULT_THRESHOLD)

    got = _ok(api, "POST", f"{ns}/lookup", look | {"explain": True})
    assert [m["id"] for m in got["matches"]] == [other["id"]]
    why = {c["id"]: c for c in got["considered"]}
    assert why[entry["id"]]["refused"] == "negative"
    assert "marked wrong" in why[entry["id"]]["reason"]
    # Another query still finds the entry: the negative is one query's, not the entry's.
    assert entry["id"] in [m["id"] for m in _ok(api, "POST", f"{ns}/lookup", {
        "query": f"{salt} something else", "threshold": -1.0, "k": 2})["matches"]]
    # Another process (this one, its own cache) refuses it too: the negative is a row.
    cache = SemanticCache(cluster.service(data_dir=tmp_path))
    try:
        assert [m.id for m in cache.lookup(ns, asked, threshold=-1.0, k=2).matches] == [
            other["id"]]
    finally:
        cache.close(save=False)
        cache.service.close()
    assert _ok(api, "GET", f"{ns}/stats")["threshold"] == pytest.approx(DEFAULT_THRESHOLD)


def test_a_verdict_is_final(api: ApiServer, salt: str) -> None:
    ns = f"final-{salt}"
    _ok(api, "PUT", ns, {"query": f"{salt} q", "payload": 1})
    hit = _served(api, ns, f"{salt} q")
    assert _ok(api, "POST", f"{ns}/feedback", {"id": hit["hit_id"], "correct": True})[
        "recorded"] is True
    again = _ok(api, "POST", f"{ns}/feedback", {"id": hit["hit_id"], "correct": True})
    assert again["recorded"] is False
    flipped = _call(api, "POST", f"{ns}/feedback", {"id": hit["hit_id"], "correct": False})
    assert flipped.status_code == 409, flipped.text
    assert "already marked correct=True" in flipped.json()["error"]["message"]
    assert _ok(api, "GET", f"{ns}/stats")["feedback"] == {"correct": 1, "wrong": 0}
    # The hit belongs to its namespace: another one does not know it.
    elsewhere = _call(api, "POST", f"other-{salt}/feedback",
                      {"id": hit["hit_id"], "correct": True})
    assert elsewhere.status_code == 404 and "no served hit" in elsewhere.text


@pytest.mark.parametrize(("path", "body", "status", "says"), [
    ("ns/feedback", {"id": "0" * 32, "correct": False}, 404, "no served hit '000"),
    ("ns/feedback", {"id": "not-a-hit-id", "correct": True}, 404, "hit_id of a match"),
    ("ns/feedback", {"id": 12, "correct": True}, 422, "id"),
    ("ns/feedback", {"id": "0" * 32, "correct": "no"}, 422, "correct"),
    ("ns/feedback", {"id": "0" * 32, "correct": 0}, 422, "correct"),
    ("ns/feedback", {"id": "0" * 32}, 422, "correct"),
    ("ns/feedback", {"id": "0" * 32, "correct": True, "score": 1}, 422, "score"),
    ("ns/config", {"max_false_hit_rate": 1.5}, 422, "must be a share in [0, 1)"),
    ("ns/config", {"max_false_hit_rate": -0.01}, 422, "must be a share in [0, 1)"),
    ("ns/config", {"max_false_hit_rate": "low"}, 422, "max_false_hit_rate"),
    ("ns/config", {"threshold": 2}, 422, "outside [-1, 1]"),
    ("ns/config", {"trust_score": 0.9}, 422, "needs max_false_hit_rate"),
    ("ns/config", {"max_false_hit_rate": 0.01, "trust_score": -2}, 422,
     "trust_score -2.0 is outside [-1, 1]"),
    ("bad%20name/config", {"max_false_hit_rate": 0.01}, 422, "namespace"),
])
def test_bad_feedback_and_config_are_clear_4xx(api: ApiServer, path: str, body: Any,
                                               status: int, says: str) -> None:
    method = "PUT" if path.endswith("config") else "POST"
    got = _call(api, method, path, body)
    assert got.status_code == status, got.text
    assert says in got.json()["error"]["message"]


def test_stats_show_the_default_threshold_without_a_budget(api: ApiServer, salt: str) -> None:
    stats = _ok(api, "GET", f"fresh-{salt}/stats")
    assert (stats["threshold"], stats["base_threshold"], stats["max_false_hit_rate"],
            stats["feedback"]) == (pytest.approx(DEFAULT_THRESHOLD),
                                   pytest.approx(DEFAULT_THRESHOLD), None,
                                   {"correct": 0, "wrong": 0})
    assert _ok(api, "PUT", f"fresh-{salt}/config", {"threshold": 0.8})["threshold"] == 0.8
    assert _ok(api, "GET", f"fresh-{salt}/stats")["threshold"] == pytest.approx(0.8)
    assert _ok(api, "DELETE", f"fresh-{salt}") == {"namespace": f"fresh-{salt}", "deleted": 0}
    assert _ok(api, "GET", f"fresh-{salt}/stats")["threshold"] == pytest.approx(DEFAULT_THRESHOLD)


def test_client_and_cli_feedback(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    ns = f"client-budget-{salt}"
    with Client(cluster.settings.with_overrides(data_dir=tmp_path)) as client:
        assert client.cache_configure(ns, max_false_hit_rate=0.05, threshold=-1.0)[
            "max_false_hit_rate"] == 0.05
        client.cache_put(ns, f"{salt} the stored answer text", "payload")
        [match] = client.cache_lookup(ns, f"{salt} what was asked here").matches
        assert match.hit_id is not None
        judged = client.cache_feedback(ns, match.hit_id, False)
        assert judged["threshold"] == pytest.approx(just_above(match.score))
        assert client.cache_stats(ns)["threshold"] == judged["threshold"]
        [again] = client.cache_lookup(ns, f"{salt} the stored answer text").matches

    def cli(*args: str) -> tuple[int, Any, str]:
        env = dict(cluster.env, EMBEDQ_DATA_DIR=str(tmp_path))
        done = subprocess.run([sys.executable, "-m", "embedq.cli", "cache", *args], env=env,
                              capture_output=True, text=True, cwd=support.ROOT, timeout=120)
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, (
            done.stderr)

    code, out, _ = cli("feedback", ns, str(again.hit_id), "--correct")
    assert code == 0 and out["recorded"] is True and out["entry_id"] == again.id
    code, out, _ = cli("config", ns, "--max-false-hit-rate", "0.02")
    assert code == 0 and out["max_false_hit_rate"] == 0.02
    # The base went back to the default.
    assert out["base_threshold"] == pytest.approx(DEFAULT_THRESHOLD)
    code, out, _ = cli("stats", ns)
    # The wrong hit scored below the new base: it no longer raises the threshold.
    assert out["feedback"] == {"correct": 1, "wrong": 1}
    assert out["threshold"] == pytest.approx(DEFAULT_THRESHOLD)
    code, _, err = cli("feedback", ns, "0" * 32, "--wrong")
    assert code == 2 and "no served hit" in err
    code, out, _ = cli("config", ns, "--max-false-hit-rate", "0.02", "--trust-score", "0.9")
    assert code == 0 and (out["trust_score"], out["base_trust_score"]) == (0.9, 0.9)
    code, _, err = cli("config", ns, "--trust-score", "0.9")
    assert code == 2 and "needs max_false_hit_rate" in err
