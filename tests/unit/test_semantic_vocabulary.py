"""British and American words for one thing (embedq/semantic/vocabulary.py): the guard and
the verifier read them as one word, and only where each side holds one of the two."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.semantic.guard import contrast, words
from embedq.semantic.verify import Verifier
from embedq.semantic.vocabulary import ENTRIES, reconcile, same_sense

ENCODER = HashingEncoder()


def embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    return list(ENCODER.encode(texts))


# The hashing encoder places different words apart, so a pair passes the content slot
# only when the vocabulary makes its words one.
VERIFIER = Verifier(embed)

PAIRS = [
    ("can I sublet my flat", "can I sublet my apartment"),
    ("how do I fill in the claim form", "how do I fill out the claim form"),
    ("what is the postcode of the office", "what is the zip code of the office"),
    ("can I book a holiday in August", "can I book a vacation in August"),
    ("who pays to fix the lift in my block of flats",
     "who pays to fix the elevator in my apartment building"),
    ("can I top up my mobile online", "can I top up my cell phone online"),
    ("how much is petrol this week", "how much is gasoline this week"),
    ("where do I find my payslips", "where do I find my pay stubs"),
    ("can I take a fortnight off in May", "can I take two weeks off in May"),
    ("does the tyre need replacing", "does the tire need replacing"),
    ("how do I remove mould from the bathroom", "how do I remove mold from the bathroom"),
]


@pytest.mark.parametrize(("asked", "stored"), PAIRS)
def test_british_and_american_words_pass_the_guard_and_the_verifier(
        asked: str, stored: str) -> None:
    assert contrast(asked, stored) is None
    assert VERIFIER.conflict(asked, stored) is None
    assert VERIFIER.conflict(stored, asked) is None


@pytest.mark.parametrize(("asked", "stored"), [
    ("can I sublet my flat", "can I sublet my house"),
    ("how do I fill in the claim form", "how do I fill in the tax form"),
    ("can I book a holiday in August", "can I book a holiday in June"),
    ("who pays to fix the lift", "who pays to fix the boiler"),
    ("how much is petrol this week", "how much is diesel this week"),
    ("can I take a fortnight off in May", "can I take three weeks off in May"),
    ("can I pay my bill online", "can I check my bill online"),
    ("is the flat furnished", "is the apartment unfurnished"),
])
def test_near_misses_around_a_listed_word_are_still_refused(asked: str,
                                                            stored: str) -> None:
    assert contrast(asked, stored) is not None or VERIFIER.conflict(asked, stored) is not None


def test_a_pair_is_rewritten_only_where_each_side_holds_one_form() -> None:
    # "check" is a verb here and "bill" is on both sides: nothing to reconcile.
    a, b = words("can I check my bill"), words("can I pay my bill and check it")
    assert reconcile(a, b) == (a, b)
    # One side holds both words of the pair: the other's word is no counterpart.
    a, b = words("is a flat or an apartment cheaper"), words("is an apartment cheaper")
    assert reconcile(a, b) == (a, b)
    assert reconcile(words("my flats"), words("my apartments")) == (
        ["my", "apartments"], ["my", "apartments"])


def test_multi_word_entries_match_glued_or_hyphenated() -> None:
    assert reconcile(words("my zipcode"), words("my postcode")) == (["my", "zipcode"],
                                                                     ["my", "zipcode"])
    assert same_sense("lorry", "truck") and same_sense("truck", "lorry")
    assert not same_sense("lorry", "van")


def test_every_entry_is_two_different_forms() -> None:
    assert len(ENTRIES) >= 300
    assert all(british and american and british != american
               for british, american in ENTRIES)
