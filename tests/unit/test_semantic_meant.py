"""The query as meant toward a candidate (semantic/meant.py): only a word the model cannot
read is rewritten, as the one word or run of words of the candidate it misspells or
shortens."""

from __future__ import annotations

import pytest

from embedq.semantic.meant import meant, unreadable

# A model's whole words, as encoders.tokens.known_words reads them (those these texts use).
_WORDS = """how do i renew my passport online can claim working from home expenses on tax
return add an index to column in postgres per week weeks much shared parental pay is paid
many of leave share with partner find list python get current date the direct debit went up
to a month lower it dd what daily limit for transfers duplicate"""
KNOWN = frozenset(_WORDS.split())


@pytest.mark.parametrize(("query", "stored", "expected"), [
    ("how do I renew my pasport online", "how do I renew my passport online",
     "how do I renew my passport online"),  # a typo of a word the candidate holds
    ("can I claim WFH expenses on my tax return",
     "can I claim working from home expenses on my tax return",
     "can I claim working from home expenses on my tax return"),  # initials of a run
    ("how do I add an idx to a column", "how do I add an index to a column",
     "how do I add an index to a column"),  # a short form
])
def test_a_word_the_model_cannot_read_is_written_as_the_candidates(
        query: str, stored: str, expected: str) -> None:
    assert meant(query, stored, KNOWN) == expected


@pytest.mark.parametrize(("query", "stored"), [
    # every word known: nothing to rewrite ("per" is no short form of "partner" here)
    ("how much shared parental pay is paid per week",
     "how many weeks of parental leave can I share with my partner"),
    # "dd" is a word of the model: it is read as written, not as "direct debit"
    ("my dd went up", "my direct debit went up"),
    # a short form goes one way: "duplicates" holds the letters of "date" in order
    ("how to find duplicates in a list in Python", "how to get the current date in Python"),
    # no word of the candidate for the unknown one: "xfers" starts with another letter
    ("what is the daily limit for xfers", "what is the daily limit for transfers"),
])
def test_nothing_else_is_rewritten(query: str, stored: str) -> None:
    assert meant(query, stored, KNOWN) is None


def test_two_readings_of_one_word_leave_it_as_written() -> None:
    assert meant("renew my pasport", "renew my passport and my pastport", KNOWN) is None


def test_without_the_models_words_nothing_is_unreadable() -> None:
    assert unreadable("how do I renew my pasport", frozenset()) == []
    assert meant("renew my pasport", "renew my passport", frozenset()) is None
    assert unreadable("how do I renew my pasport online", KNOWN) == ["pasport"]
