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


@pytest.mark.parametrize(("asked", "stored", "slot"), [
    ("set a timer for 5 minutes", "set a timer for 50 minutes", "number"),
    ("set a timer for five minutes", "set a timer for fifty minutes", "number"),
    ("is this dish spicy", "is this dish not spicy", "negation"),
    ("flights from Rome to Madrid", "flights from Madrid to Rome", "order"),
    ("send an email to John", "read my emails from John", "direction"),
    ("what's the weather like tomorrow", "what was the weather like yesterday", "time"),
    ("turn off the kitchen lights", "turn off the garage lights", "content"),
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
