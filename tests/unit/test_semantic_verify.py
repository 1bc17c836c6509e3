"""The verifier's slots (embedq/semantic/verify.py), with the hashing encoder as the
span embedder: it places different words apart and the same words together."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.semantic.verify import Verifier

ENCODER = HashingEncoder()


def embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    return list(ENCODER.encode(texts))


VERIFIER = Verifier(embed)


# One edit a slot refuses on (test_semantic_learned.py reads each as its feature too).
ONE_SLOT_EDITS = [
    ("set a timer for 5 minutes", "set a timer for 50 minutes", "number"),
    ("is this dish spicy", "is this dish not spicy", "negation"),
    ("flights from Rome to Madrid", "flights from Madrid to Rome", "order"),
    ("send an email to John", "read my emails from John", "direction"),
    ("what's the weather like tomorrow", "what was the weather like yesterday", "time"),
    ("turn off the kitchen lights", "turn off the garage lights", "content"),
]


@pytest.mark.parametrize(("asked", "stored", "slot"), [
    *ONE_SLOT_EDITS,
    ("set a timer for five minutes", "set a timer for fifty minutes", "number"),
])
def test_a_one_slot_edit_is_a_conflict_on_that_slot(asked: str, stored: str,
                                                    slot: str) -> None:
    conflict = VERIFIER.conflict(asked, stored)
    assert conflict is not None and conflict.slot == slot, conflict


@pytest.mark.parametrize(("asked", "stored"), [
    ("how do I change my user name", "how do I change my username"),
    ("How do I Reset my password?", "how do I reset my password"),
    ("what is the best way to learn to cook at home quickly", "how can I learn cooking fast"),
])
def test_spelling_case_and_rewordings_are_no_conflict(asked: str, stored: str) -> None:
    assert VERIFIER.conflict(asked, stored) is None


def test_the_content_slot_is_checked_only_when_asked_to() -> None:
    assert VERIFIER.conflict("turn off the kitchen lights", "turn off the garage lights",
                             content=False) is None


def test_only_scores_in_the_band_are_verified() -> None:
    verifier = Verifier(embed, band=0.1)
    assert verifier.in_band(0.75, 0.70)
    assert not verifier.in_band(0.80, 0.70)
    assert not verifier.in_band(0.69, 0.70)


# A word table standing in for the model's word embeddings: words in one group share a
# direction (synonyms), every other word gets its own.
SYNONYMS = [("reboot", "restart"), ("shipment", "delivery"), ("remove", "delete"),
            ("shut", "close"), ("room", "bedroom")]


def table_embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    out = []
    for text in texts:
        group = next((g for g in SYNONYMS if text in g), (text,))
        out.append(ENCODER.encode([group[0]])[0])
    return out


TABLE = Verifier(table_embed)


@pytest.mark.parametrize(("asked", "stored", "words"), [
    ("turn off the living room lights", "turn off the bedroom lights", ("living room", "bedroom")),
    ("how to remove duplicates from a list in Python",
     "how to find duplicates in a list in Python", ("remove", "find")),
    ("close the bathroom window", "close the kitchen cabinet",
     ("bathroom window", "kitchen cabinet")),
    ("why is my laptop running slow", "why is my laptop battery draining fast",
     ("running slow", "battery draining fast")),
])
def test_a_replaced_word_without_counterpart_is_a_content_conflict(
        asked: str, stored: str, words: tuple[str, str]) -> None:
    conflict = TABLE.conflict(asked, stored)
    assert conflict is not None and conflict.slot == "content", conflict
    assert (conflict.asked, conflict.stored) == words


@pytest.mark.parametrize(("asked", "stored"), [
    ("how do I reboot my router", "how do I restart my router"),
    ("how do I track my delivery", "how do I track my shipment"),
    ("how can I remove my account", "how can I delete my account"),
    ("shut the bathroom window", "close the bathroom window"),
    # a rewording keeps few words in order: left to the score
    ("what is the process to get a passport", "how do I apply for a passport"),
])
def test_synonyms_and_rewordings_are_no_content_conflict(asked: str, stored: str) -> None:
    assert TABLE.conflict(asked, stored) is None


@pytest.mark.parametrize(("asked", "stored"), [
    ("set a timer for 5 minutes", "set a timer for five minutes"),
    ("how to turn on two factor authentication", "how do I enable two-factor authentication"),
    ("ways to stop snoring at night", "how can I stop snoring"),
    ("signs that I am having a migraine", "what are the symptoms of a migraine"),
    ("I am unable to sign in", "why can't I sign in"),
])
def test_lexical_slots_read_digits_hyphens_one_sided_time_words_and_unable(
        asked: str, stored: str) -> None:
    conflict = TABLE.conflict(asked, stored, content=False)
    assert conflict is None, conflict


@pytest.mark.parametrize(("asked", "stored", "slot"), [
    ("wake me at 7 am", "wake me at 7 pm", "time"),
    ("is the museum open on Sunday", "is the museum open", "time"),
    ("how do I enable three-factor authentication", "how do I enable two-factor authentication",
     "number"),
])
def test_calendar_words_on_one_side_and_hyphenated_numbers_conflict(
        asked: str, stored: str, slot: str) -> None:
    conflict = TABLE.conflict(asked, stored, content=False)
    assert conflict is not None and conflict.slot == slot, conflict


@pytest.mark.parametrize(("asked", "stored"), [
    ("how many steps should I walk daily", "how many steps should I walk a day"),
    ("what is the weekly limit on transfers", "how much can I transfer per week"),
    ("what does the annual plan cost", "how much is the plan for a year"),
])
def test_a_frequency_word_reads_as_its_unit(asked: str, stored: str) -> None:
    conflict = TABLE.conflict(asked, stored, content=False)
    assert conflict is None, conflict


def test_frequency_words_of_different_units_conflict() -> None:
    conflict = TABLE.conflict("how many steps should I walk daily",
                              "how many steps should I walk weekly", content=False)
    assert conflict is not None and conflict.slot == "time", conflict


def test_texts_that_share_no_content_word_or_counterpart_are_disjoint() -> None:
    conflict = TABLE.conflict("how can I wake up earlier", "how can I fall asleep faster")
    assert conflict is not None and conflict.slot == "disjoint", conflict
    assert (conflict.asked, conflict.stored) == ("wake", "fall asleep faster")
    # a disjoint pair is a model slot: not checked outside the band
    assert TABLE.conflict("how can I wake up earlier", "how can I fall asleep faster",
                          content=False) is None


@pytest.mark.parametrize(("asked", "stored"), [
    ("any tips to reboot the thing quickly", "how can I restart"),  # a synonym counterpart
    ("what is it", "how do I reboot"),  # one side has no content word: nothing to compare
])
def test_a_counterpart_or_no_content_word_is_not_disjoint(asked: str, stored: str) -> None:
    assert TABLE.conflict(asked, stored) is None


def test_a_shared_number_is_not_a_shared_content_word() -> None:
    # A token of digits only (an order number, a test's salt) is a number: sharing one
    # does not make two texts about the same thing, sharing a word does.
    assert VERIFIER.conflict("84120937 asked alpha", "84120937 stored weekly reports") \
        == VERIFIER.conflict("asked alpha", "stored weekly reports")
    conflict = VERIFIER.conflict("84120937 asked alpha", "84120937 stored weekly reports")
    assert conflict is not None and conflict.slot == "disjoint", conflict
    assert VERIFIER.conflict("84120937 ledger asked alpha",
                             "84120937 ledger stored question about weekly reports") is None
    assert VERIFIER.conflict("8a120937 asked alpha", "8a120937 stored weekly reports") is None


@pytest.mark.parametrize(("asked", "stored"), [
    ("what colour should my dog's gums be", "what color should my dog's gums be"),
    ("how do I restart a pod in kuberentes", "how do I restart a pod in kubernetes"),
    ("schedule a k8s cronjob", "schedule a kubernetes cronjob"),
    ("what deposit do I need to buy my 1st home", "what deposit do I need to buy my first home"),
    ("can I claim WFH expenses", "can I claim working from home expenses"),
    ("can I submit the visa form 6 months before I travel",
     "6 months before I travel, can I submit the visa form"),
])
def test_one_word_written_two_ways_or_a_moved_clause_is_no_conflict(asked: str,
                                                                     stored: str) -> None:
    assert VERIFIER.conflict(asked, stored) is None


@pytest.mark.parametrize(("asked", "stored", "slot"), [
    ("how do I restart every pod in kubernetes", "how do I restart a pod in kubernetes",
     "scope"),
    ("how do I remove all stopped docker containers", "how do I remove a stopped docker container",
     "scope"),
    ("what was the deadline for filing the census form",
     "what is the deadline for filing the census form", "tense"),
    ("can I cancel a transfer that has gone through",
     "can I cancel a transfer that is pending", "tense"),
    ("what happens to my pension if they die", "what happens to my pension if I die", "role"),
    ("how do I combine my pensions with my partner's",
     "how do I combine my pensions with my partner", "role"),
    ("can I underpay my mortgage without a penalty", "can I overpay my mortgage without a penalty",
     "direction"),
    ("how do I deregister from self assessment", "how do I register for self assessment",
     "direction"),
    ("how do I unblock a sink with chemicals", "how do I unblock a sink without chemicals",
     "direction"),
])
def test_scope_tense_roles_and_opposites_conflict(asked: str, stored: str, slot: str) -> None:
    conflict = VERIFIER.conflict(asked, stored, content=False)
    assert conflict is not None and conflict.slot == slot, conflict


@pytest.mark.parametrize(("asked", "stored"), [
    # the future reads as the present
    ("will I be paid if I am off sick", "do I get paid if I am off sick"),
    ("how to reset a password", "how do I reset my password"),  # a pronoun one side adds
    ("how many days of leave do I get", "how many days of leave do I get per year"),
])
def test_present_and_future_and_one_sided_pronouns_are_no_grammar_conflict(
        asked: str, stored: str) -> None:
    conflict = VERIFIER.conflict(asked, stored, content=False)
    assert conflict is None or conflict.slot not in ("scope", "tense", "role"), conflict


@pytest.mark.parametrize(("asked", "stored", "words"), [
    ("how often should I water tomato plants in a greenhouse during a heatwave",
     "how often should I water tomato plants in a greenhouse", ("during heatwave", "")),
    ("do transfers between my own accounts at different banks arrive instantly",
     "do transfers between my own accounts arrive instantly", ("different banks", "")),
])
def test_an_added_span_without_counterpart_is_a_content_conflict(
        asked: str, stored: str, words: tuple[str, str]) -> None:
    conflict = TABLE.conflict(asked, stored)
    assert conflict is not None and conflict.slot == "content", conflict
    assert (conflict.asked, conflict.stored) == words


def test_swapped_content_words_in_one_frame_are_an_order_conflict() -> None:
    conflict = TABLE.conflict("how to copy a file from a running docker container to my machine",
                              "how to copy a file from my machine into a running docker container")
    assert conflict is not None and conflict.slot == "order", conflict
    # a modifier moved next to its noun is no swap
    assert TABLE.conflict("how to reverse a Python list", "how to reverse a list in Python") is None
