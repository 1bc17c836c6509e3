"""The band's question checks of asked.py: `asked` (what a "what" question names),
`condition` (a narrowing "if" clause) and `place` (two places), through the verifier,
each with near-misses it refuses and paraphrases it keeps. The pairs are written for
these tests (no pair of the labelled splits); the hashing encoder embeds the words, so two
different words are never counterparts and only the rules' logic is under test."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.semantic.asked import CHECKS, head
from embedq.semantic.guard import words
from embedq.semantic.verify import Check, Verifier, _is_content

ENCODER = HashingEncoder()


def embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    return list(ENCODER.encode(texts))


VERIFIER = Verifier(embed)


@pytest.mark.parametrize(("asked", "stored", "check"), [
    # a yes-no question against one that asks for a thing by its noun
    ("can I freeze cooked rice", "what is the shelf life of cooked rice", "asked"),
    ("should I prune my roses in autumn", "what is the right height to prune my roses",
     "asked"),
    # a question of manner against one that asks for a thing
    ("how do I descale my kettle", "what descaler brand is best for my kettle", "asked"),
    # what the subject does ("mean"), read past a noun the parser takes for the verb
    ("what does the amber battery light mean",
     "can I keep using the laptop with the amber battery light on", "asked"),
    # a condition one side adds, with none of its words on the other side
    ("what should I do after a small fire in my kitchen",
     "what should I do if a neighbour floods my kitchen and leaves", "condition"),
    ("can I get a refund after a late delivery",
     "can I get a refund if the courier loses my parcel abroad", "condition"),
    # one thing asked of two places, each named only on its own side
    ("can I store a bike in my hallway", "can I keep a bike on the balcony", "place"),
    ("can I put a laptop into my checked suitcase", "can I take a laptop on the ferry",
     "place"),
])
def test_a_question_that_asks_another_thing_is_refused_under_its_check(
        asked: str, stored: str, check: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        trace: list[Check] = []
        conflict = VERIFIER.conflict(x, y, trace=trace)
        assert conflict is not None and (conflict.slot, conflict.check) == ("content", check)
        assert str(conflict).startswith("content: ")
        # explain lists the checks before it, passed, and not the failing one
        names = [c.name for c in trace]
        assert check not in names and all(c.result != "fail" for c in trace)
        assert CHECKS[:CHECKS.index(check)] == tuple(n for n in names if n in CHECKS)


@pytest.mark.parametrize(("asked", "stored"), [
    # "the best way" / "method" asks how: a question of manner rewords it
    ("what is the best way to descale my kettle", "how do I descale my kettle"),
    ("what is the best method to descale my kettle", "how do I descale my kettle"),
    # the asked noun or verb said on the other side
    ("what documents do I need to renew my passport",
     "do I need any documents to renew my passport"),
    ("what does my travel insurance cover", "does my travel insurance cover lost luggage"),
    # another question word may stand for the asked noun: left to the other checks
    ("what time does the pharmacy open on sunday", "when does the pharmacy open on sunday"),
    # a condition said again in the other side's words
    ("what happens if I miss a payment", "what happens when a payment is missed"),
    ("can I get a refund if I cancel my order", "can I get a refund after cancelling my order"),
    ("what should I do if my card is stolen", "my card was stolen what should I do"),
    # a place one side adds, or the same place in both
    ("can I store a bike in my hallway", "can I store a bike"),
    ("can I store a bike in my hallway", "is it ok to keep a bike in the hallway"),
])
def test_a_paraphrase_passes_the_asked_checks(asked: str, stored: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        trace: list[Check] = []
        conflict = VERIFIER.conflict(x, y, trace=trace)
        assert conflict is None or conflict.check not in CHECKS, conflict
        if conflict is None:
            assert {c.name: c.result for c in trace if c.name in CHECKS} == dict.fromkeys(
                CHECKS, "pass")


@pytest.mark.parametrize(("text", "asked"), [
    ("what is the best time of day to water tomatoes", "time"),
    ("what paint finish is best for a kitchen", "finish"),
    ("what does the red router light mean", "mean"),
    ("which plug adapter do I need in japan", "adapter"),
    ("what should I do after a power cut", None),  # a light verb names nothing
    ("what is the easiest way to learn spanish", None),  # a noun of manner asks how
    ("how do I learn spanish", None),
])
def test_head_is_what_a_what_question_names(text: str, asked: str | None) -> None:
    assert head(words(text), text, _is_content) == asked
