"""What `explain` says a candidate went through (Verifier.conflict's trace,
lookup.refusal): the verifier's slots in the order it checks them, each passed or
skipped with why, ending before the slot that refused it; and tracing changes no
decision. The hashing encoder embeds the words (the slots' logic, not the model's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.semantic.lookup import TRUSTED, refusal
from embedq.semantic.store import Entry, utcnow
from embedq.semantic.verify import Check, Verifier

ENCODER = HashingEncoder()
PAIRS = Path(__file__).parents[1] / "data" / "semantic_pairs.domains.jsonl"
# Every slot verify.py checks, in its order; the last eight only in the band.
SLOTS = ["number", "negation", "order", "compared", "alternative", "direction", "time",
         "scope", "tense", "role", "quantifier", "aspect", "agent", "owner", "voice", "doer",
         "modality", "polarity", "excluded", "relation", "asker", "sought", "crossed",
         "content", "attribute", "act", "asked", "condition", "place", "disjoint"]


# What the band line of explain says it checks.
BAND_CHECKS = "crossed, content, attribute, act, asked, condition, place and disjoint"


def embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    return list(ENCODER.encode(texts))


VERIFIER = Verifier(embed)


def _entry(query: str, metadata: dict[str, str] | None = None) -> Entry:
    now = utcnow()
    return Entry(id=1, namespace="ns", query=query, payload=None, metadata=metadata or {},
                 created_at=now, expires_at=None, hit_count=0, last_hit_at=None)


def test_a_pair_that_passes_lists_every_slot_in_order() -> None:
    trace: list[Check] = []
    assert VERIFIER.conflict("how do I restart my router", "how do I restart the router",
                             trace=trace) is None
    assert [c.name for c in trace] == SLOTS
    assert {c.result for c in trace} == {"pass"}


def test_outside_a_minimal_edit_the_grammar_slots_and_crossed_are_skipped() -> None:
    trace: list[Check] = []
    assert VERIFIER.conflict("how to create an account", "how do I open an account",
                             content=False, trace=trace) is None
    skipped = {c.name: c.detail for c in trace if c.result == "skipped"}
    assert skipped == {"scope": "not a minimal edit", "tense": "not a minimal edit",
                       "role": "not a minimal edit",
                       "crossed": "the score is above the band",
                       "content": "the score is above the band",
                       "attribute": "the score is above the band",
                       "act": "the score is above the band",
                       "asked": "the score is above the band",
                       "condition": "the score is above the band",
                       "place": "the score is above the band",
                       "disjoint": "the score is above the band"}


@pytest.mark.parametrize(("asked", "stored", "slot"), [
    ("set a timer for 5 minutes", "set a timer for 50 minutes", "number"),
    ("was my claim approved", "will my claim be approved", "tense"),
    ("flights from Rome to Madrid", "flights from Madrid to Rome", "order"),
    ("send an email to John", "read my emails from John", "direction"),
])
def test_a_refused_pair_lists_the_slots_it_passed_before_the_one_that_refused_it(
        asked: str, stored: str, slot: str) -> None:
    trace: list[Check] = []
    conflict = VERIFIER.conflict(asked, stored, trace=trace)
    assert conflict is not None and conflict.slot == slot
    assert [c.name for c in trace] == SLOTS[:SLOTS.index(slot)]
    assert all(c.result in ("pass", "skipped") for c in trace)


def test_a_clause_check_fails_under_its_name_with_its_slot_in_the_reason() -> None:
    trace: list[Check] = []
    conflict = VERIFIER.conflict("can my tenant sublet the flat without asking me",
                                 "can I sublet my tenant's flat without asking him", trace=trace)
    assert conflict is not None and (conflict.slot, conflict.check) == ("role", "agent")
    assert str(conflict) == "role: 'tenant sublet' vs 'i sublet'"
    assert [c.name for c in trace] == SLOTS[:SLOTS.index("agent")]
    assert {c.name: c.result for c in trace}["role"] == "skipped"  # not a minimal edit


def test_content_words_crossed_in_one_frame_fail_the_crossed_check() -> None:
    trace: list[Check] = []
    conflict = VERIFIER.conflict(
        "how to copy a file from a running docker container onto my machine",
        "how to copy a file from my machine into a running docker container", trace=trace)
    assert conflict is not None and (conflict.slot, conflict.check) == ("order", "crossed")
    assert [c.name for c in trace] == SLOTS[:SLOTS.index("crossed")]


def test_refusal_names_the_threshold_guard_band_and_filter_it_passed() -> None:
    trace: list[Check] = []
    refused = refusal("how do I restart my router", _entry("how do I restart the router",
                                                          {"lang": "en"}),
                      0.9, 0.62, {"lang": "en"}, guard=False, verifier=VERIFIER,
                      trace=trace)
    assert refused == (None, None)
    assert [c.name for c in trace] == ["threshold", "live", "guard", "band", *SLOTS,
                                       "filter"]
    assert trace[0] == Check("threshold", "pass", "score 0.9000 >= threshold 0.6200")
    assert trace[2] == Check("guard", "skipped", "EMBEDQ_SEMANTIC_CONTRAST_GUARD=false")
    assert trace[3].result == "pass"
    assert f"{BAND_CHECKS} checked" in str(trace[3].detail)
    assert trace[-1] == Check("filter", "pass")


def test_a_refused_candidate_ends_with_the_check_that_refused_it() -> None:
    for score, query, refused, last in [
        (0.5, "how do I restart my router", "below_threshold", "threshold"),
        (0.9, "how do I restart my modem", "guard", "guard"),
        (0.9, "how do I restart my router in 5 minutes", "verifier", "number"),
    ]:
        trace: list[Check] = []
        why, reason = refusal("how do I restart my router", _entry(query), score, 0.62,
                              None, guard=True, verifier=VERIFIER, trace=trace)
        assert why == refused
        assert (trace[-1].name, trace[-1].result) == (last, "fail")
        assert trace[-1].detail == reason
        assert [c for c in trace[:-1] if c.result == "fail"] == []


def test_tracing_changes_no_decision_on_the_domains_corpus() -> None:
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        for content in (True, False):
            trace: list[Check] = []
            plain = VERIFIER.conflict(row["query"], row["stored"], content=content)
            traced = VERIFIER.conflict(row["query"], row["stored"], content=content,
                                       trace=trace)
            assert traced == plain, row
            names = [c.name for c in trace]
            assert names == SLOTS[:len(names)], row
            assert len(names) == len(SLOTS) or plain is not None, row


def test_a_trust_score_serves_over_a_model_judged_slot_only_and_says_so() -> None:
    asked, stored = ("how can I attach photos of the damage to my claim",
                     "how do I upload photos of the damage to my claim")
    trace: list[Check] = []
    assert refusal(asked, _entry(stored), 0.93, 0.67, None, guard=True, verifier=VERIFIER,
                   trace=trace, trust=0.9) == (TRUSTED, "content: 'attach' vs 'upload'")
    assert [(c.name, c.result) for c in trace[-4:]] == [
        ("crossed", "pass"), ("content", "fail"), ("trust", "pass"), ("filter", "pass")]
    assert "trust score 0.9000" in (trace[-2].detail or "")
    # Below the trust score, or with none, the verifier refuses as it always does; below
    # it, explain says the trust score failed too.
    for score, trust, last in ((0.89, 0.9, "trust"), (0.93, None, "content")):
        trace = []
        assert refusal(asked, _entry(stored), score, 0.67, None, guard=True,
                       verifier=VERIFIER, trust=trust, trace=trace)[0] == "verifier"
        assert (trace[-1].name, trace[-1].result) == (last, "fail")
    # A slot the rules read (a number) is never served over it (the guard off, so the
    # verifier judges the pair), nor is a filter the entry does not match.
    assert refusal("how do I add 3 seats to my plan", _entry("how do I add 5 seats to my plan"),
                   0.99, 0.67, None, guard=False, verifier=VERIFIER, trust=0.5) == (
        "verifier", "number: '3' vs '5'")
    assert refusal(asked, _entry(stored, {"lang": "en"}), 0.93, 0.67, {"lang": "de"},
                   guard=True, verifier=VERIFIER, trust=0.9)[0] == "filter"
