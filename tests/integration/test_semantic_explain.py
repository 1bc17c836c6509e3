"""`explain` and `stats` with the REAL default model, embedded (the session's
`model_client`): a served hit names every check it passed, the band decides whether the
verifier's model slots ran, a refused candidate's checks end at the one that refused it,
and stats count the namespace's served hits as confirmed, wrong and unverified after real
feedback calls.

Scores are the model's (all-MiniLM-L6-v2): "how to create an account" / "how do I open an
account" 0.81, "how do I close an account" 0.69, "how can I open a new account" 0.89; each
test sets thresholds well clear of them.
"""

from __future__ import annotations

from typing import Any

import pytest

from embedq.config.groups import SemanticSettings
from embedq.semantic import LookupResult
from embedq.semantic.lookup import Considered

DEFAULT_THRESHOLD = SemanticSettings().threshold  # the configured default

pytestmark = [pytest.mark.integration, pytest.mark.model]

STORED = "how do I open an account"
PARAPHRASE = "how to create an account"
VERIFIER_SLOTS = ["number", "negation", "order", "compared", "alternative", "direction",
                  "time", "scope", "tense", "role", "quantifier", "aspect", "agent", "owner",
                  "voice", "doer", "modality", "polarity", "excluded", "relation", "asker",
                  "sought", "crossed", "content", "attribute", "act", "asked", "condition",
                  "place", "disjoint"]


# What the band line of explain says it checks.
BAND_CHECKS = "crossed, content, attribute, act, asked, condition, place and disjoint"


def _served(result: LookupResult) -> Considered:
    assert result.hit and result.considered is not None, result
    [served] = [c for c in result.considered if c.refused is None]
    assert served.id == result.matches[0].id
    return served


def _put(model_client: Any, ns: str) -> None:
    model_client.cache_put(ns, STORED, {"answer": "sign up"})


def test_a_served_hit_names_every_check_it_passed(model_client: Any, salt: str) -> None:
    ns = f"explain-served-{salt}"
    _put(model_client, ns)
    served = _served(model_client.cache_lookup(ns, PARAPHRASE, explain=True))
    assert served.checks is not None
    names = [c.name for c in served.checks]
    assert names == ["threshold", "live", "guard", "band", *VERIFIER_SLOTS, "filter",
                     "negative"]
    results = {c.name: (c.result, c.detail) for c in served.checks}
    assert results["threshold"] == (
        "pass", f"score {served.score:.4f} >= threshold {DEFAULT_THRESHOLD:.4f}")
    assert results["guard"] == ("pass", None)
    assert results["band"][0] == "pass"
    assert f"{BAND_CHECKS} checked" in str(results["band"][1])
    # A rewording, not a minimal edit: the slots that judge one frame's edits do not apply.
    for slot in ("scope", "tense", "role", "crossed"):
        assert results[slot] == ("skipped", "not a minimal edit"), slot
    # The clause checks read any pair.
    for slot in ("number", "negation", "order", "compared", "alternative", "direction",
                 "time", "quantifier", "aspect", "agent", "owner", "disjoint"):
        assert results[slot] == ("pass", None), slot
    assert results["content"] == ("pass", "no content word replaced")
    assert results["negative"] == ("pass", "no negatives")
    # The JSON every surface returns (HTTP, CLI, Client) keeps the fields it had.
    [as_json] = [c for c in model_client.cache_lookup(ns, PARAPHRASE, explain=True)
                 .to_json()["considered"] if c["refused"] is None]
    assert set(as_json) == {"id", "score", "query", "refused", "reason", "checks"}
    assert [c["name"] for c in as_json["checks"]] == names
    assert {tuple(c) for c in as_json["checks"]} == {("name", "result", "detail")}


def test_above_the_band_the_model_slots_are_skipped(model_client: Any, salt: str) -> None:
    ns = f"explain-band-{salt}"
    _put(model_client, ns)
    score = _served(model_client.cache_lookup(ns, PARAPHRASE, explain=True)).score
    band = model_client.semantic.verifier.band
    low = round(score - band - 0.05, 4)  # the score is then above the band's top
    served = _served(model_client.cache_lookup(ns, PARAPHRASE, threshold=low, explain=True))
    assert served.checks is not None
    results = {c.name: (c.result, c.detail) for c in served.checks}
    assert results["band"][0] == "skipped"
    assert f"{BAND_CHECKS} skipped" in str(results["band"][1])
    for slot in ("crossed", "content", "disjoint"):
        assert results[slot] == ("skipped", "the score is above the band"), slot


def test_a_refused_candidate_lists_the_checks_it_passed_and_the_one_it_failed(
        model_client: Any, salt: str) -> None:
    ns = f"explain-refused-{salt}"
    _put(model_client, ns)
    for query, threshold, refused, failed in [
        ("how do I close an account", 0.5, "guard", "guard"),
        ("how can I open a new account", 0.6, "verifier", "content"),
    ]:
        result = model_client.cache_lookup(ns, query, threshold=threshold, explain=True)
        assert not result.hit and result.considered is not None
        [candidate] = result.considered
        assert candidate.refused == refused and candidate.checks is not None
        last = candidate.checks[-1]
        assert (last.name, last.result, last.detail) == (failed, "fail", candidate.reason)
        assert all(c.result != "fail" for c in candidate.checks[:-1])
    assert model_client.cache_lookup(ns, PARAPHRASE).considered is None


def test_stats_count_confirmed_wrong_and_unverified_hits(model_client: Any,
                                                         salt: str) -> None:
    ns = f"explain-stats-{salt}"
    _put(model_client, ns)
    fresh = model_client.cache_stats(ns)["served"]
    assert fresh == {"window_s": model_client.semantic.settings.semantic.feedback_ttl_s,
                     "correct": 0, "wrong": 0, "unverified": 0, "unverified_share": None,
                     "over_trust": 0}
    hits = [model_client.cache_lookup(ns, q).matches[0].hit_id
            for q in (STORED, PARAPHRASE, STORED)]
    assert all(hits)
    assert model_client.cache_stats(ns)["served"]["unverified"] == 3
    assert model_client.cache_feedback(ns, hits[0], True)["recorded"]
    assert model_client.cache_feedback(ns, hits[1], False)["negative"]
    stats = model_client.cache_stats(ns)
    assert stats["served"] == {"window_s": fresh["window_s"], "correct": 1, "wrong": 1,
                               "unverified": 1, "unverified_share": 0.3333, "over_trust": 0}
    assert stats["feedback"] == {"correct": 1, "wrong": 1}
    assert stats["hits"] == 3
    # The wrong hit's query now misses (its negative); a miss serves nothing to verify.
    assert not model_client.cache_lookup(ns, PARAPHRASE).hit
    assert model_client.cache_stats(ns)["served"]["unverified"] == 1


def test_a_typo_the_model_cannot_read_is_scored_as_meant_and_still_judged(
        model_client: Any, salt: str) -> None:
    """"pasport" is no word of the model: as asked the query scores 0.66 against the
    stored one, under the default threshold; scored again as meant ("passport") it is a
    hit, and explain says so first. A real difference behind the typo ("cancel" for
    "renew") is still refused by the guard, however high the mended score."""
    ns = f"meant-{salt}"
    model_client.cache_put(ns, "how do I renew my passport online", {"answer": "renew"})
    typed = "how do I renew my pasport online"
    served = _served(model_client.cache_lookup(ns, typed, explain=True))
    assert served.checks is not None and served.checks[0].name == "meant"
    detail = served.checks[0].detail or ""
    assert detail.startswith("scored 1.0000 as 'how do I renew my passport online'")
    assert float(detail.split("(")[1].split()[0]) < DEFAULT_THRESHOLD  # as asked
    refused = model_client.cache_lookup(ns, "how do I cancel my pasport online", explain=True)
    assert not refused.hit
    assert refused.considered is not None and refused.considered[0].refused == "guard"
    assert refused.considered[0].checks[0].name == "meant"
