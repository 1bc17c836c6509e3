"""The question checks (embedq/semantic/questions.py): voice, modality, polarity,
excluded, relation and asker, through the verifier, each with a near-miss it refuses and
a paraphrase it keeps. The pairs are written for these tests (no pair of the labelled
splits); the hashing encoder embeds the words, so only the rules' logic is under test."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.semantic.grammar import scope
from embedq.semantic.questions import voice
from embedq.semantic.verify import Check, Verifier
from tests.unit.test_semantic_verify import refused_both_ways

ENCODER = HashingEncoder()


def embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    return list(ENCODER.encode(texts))


VERIFIER = Verifier(embed)
CHECKS = ("voice", "doer", "modality", "polarity", "excluded", "relation", "asker", "sought")


@pytest.mark.parametrize(("asked", "stored", "slot", "check"), [
    # one subject, one verb: the doer on one side, the receiver on the other
    ("when do I get invoiced for the repairs", "when do I have to invoice the garage",
     "role", "voice"),
    ("do I get charged by the hotel for a late checkout",
     "how do I charge the hotel for a late checkout", "role", "voice"),
    # a third party's act on one side, nobody's named on the other
    ("can I claim for a bike my neighbour damaged", "can I claim for a bike damaged in a storm",
     "role", "doer"),
    # what one may do against what one must do
    ("how many days can I work from home", "how many days do I have to work from home",
     "modality", "modality"),
    ("am I allowed to park on the pavement outside my house",
     "must I park on the pavement outside my house", "modality", "modality"),
    ("do I need a permit for a garden shed", "can I build a garden shed on my own",
     "modality", "modality"),
    # the same clauses, the negation moved from one to the other
    ("the phone charges but the screen does not turn on",
     "the phone does not charge but the screen turns on", "negation", "polarity"),
    # a verb ruled out on one side, done on the other
    ("how do I clean the oven without using chemicals",
     "which chemicals should I use to clean the oven", "negation", "excluded"),
    ("can I rent a van instead of buying it", "is it cheaper to buy a van",
     "negation", "excluded"),
    # two time relations between the same events
    ("can I swim before eating a big meal", "can I swim while eating a snack",
     "time", "relation"),
    # who does it, against whether a named party does it
    ("who pays for the wedding venue", "do we pay for the wedding venue", "question", "asker"),
    ("who signs off the budget", "when is the budget signed off", "question", "asker"),
    # a reason, a means, a consequence: answers of different kinds
    ("why is my pod stuck in Pending", "how do I restart a pod in kubernetes",
     "question", "sought"),
    ("what happens to my pension when I die", "how do I change who gets my pension when I die",
     "question", "sought"),
    ("how come my bill went up", "how can I lower my bill", "question", "sought"),
    ("how do I get my deposit back", "how many days does my landlord have to return my deposit",
     "question", "sought"),
])
def test_a_changed_question_is_refused_under_its_check(asked: str, stored: str, slot: str,
                                                       check: str) -> None:
    refused_both_ways(VERIFIER, asked, stored, slot, check)


@pytest.mark.parametrize(("asked", "stored"), [
    # the same voice said two ways; a doer named by "by"
    ("when do I get invoiced", "when will I be invoiced"),
    ("when will the council collect my bins", "when do my bins get collected by the council"),
    # "allowed to" and "can"; "have to" and "must"; "able to" is no obligation
    ("am I allowed to bring my dog on the train", "can I bring my dog on the train"),
    ("do I have to show my passport at the gate", "must I show my passport at the gate"),
    ("am I able to cancel online", "can I cancel online"),
    # both modals asked, in either order; the doer named on both sides
    ("can I fit the shelf myself or do I need a carpenter",
     "do I need a carpenter or can I fit the shelf myself"),
    ("can I claim for a bike my neighbour damaged",
     "does my insurance pay if my neighbour damaged my bike"),
    # one negation in the same clause, the clauses in another order
    ("the phone charges but the screen does not turn on",
     "the screen does not turn on but the phone charges"),
    # a verb excluded on both sides, or with "avoid"
    ("how do I clean the oven without using chemicals",
     "how can I avoid using chemicals when cleaning the oven"),
    # "once" is "after"; "while" is "during"
    ("can I swim after eating", "can I swim once I have eaten"),
    ("can I drive while on painkillers", "can I drive during a course of painkillers"),
    # "who" on both sides; "which" may ask for a person
    ("who pays for the wedding venue", "who has to pay for the venue of the wedding"),
    ("who signs off the budget", "which manager signs off the budget"),
    # a time asked two ways; an amount and a time, a question of "what" read as none;
    # a problem stated, against why it happens
    ("when does the reset password email expire",
     "how long does a password reset link stay valid"),
    ("how many hours of sleep should a grown-up get", "how much sleep does an adult need"),
    ("what formula gives the number of days between two dates",
     "how do I calculate the number of days between two dates"),
    ("why does my phone show no service", "my phone shows no service since this morning"),
])
def test_a_paraphrase_passes_the_question_checks(asked: str, stored: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        trace: list[Check] = []
        conflict = VERIFIER.conflict(x, y, content=False, trace=trace)
        assert conflict is None or conflict.check not in CHECKS, conflict
        if conflict is None:
            assert {c.name: c.result for c in trace if c.name in CHECKS} == dict.fromkeys(
                CHECKS, "pass")


def test_have_got_is_have_not_a_passive() -> None:
    # "I've got left" is "I have left": no voice conflict with the plain form
    assert voice("how much data have I got left this month",
                 "how much data do I have left this month") is None
    assert voice("how much data I've got left", "how much data I have left") is None
    # "get" before a participle is still a passive
    assert voice("when do I get paid", "when do I pay") is not None


def test_each_and_every_are_one_scope() -> None:
    assert scope(["pay", "into", "my", "pension", "every", "month"]) == scope(
        ["pay", "into", "my", "pension", "each", "month"])
    assert scope(["restart", "every", "pod"]) != scope(["restart", "pod"])
