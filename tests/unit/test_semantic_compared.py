"""Comparisons turned around (semantic/compared.py): "X slower than Y" / "Y slower than X"
ask the reverse question; with the opposite comparative they ask the same one. The pairs
are written for these tests, in no domain of the labelled splits."""

from __future__ import annotations

import pytest

from embedq.semantic.compared import compared
from embedq.semantic.guard import words
from tests.unit.test_semantic_verify import VERIFIER, refused_both_ways


@pytest.mark.parametrize(("asked", "stored"), [
    # not the same words in another order (the order check's case): a word more or less
    ("is renting cheaper than buying in Leeds", "is buying a home cheaper than renting in Leeds"),
    ("why is my upload slower than my download", "why is the download slower than my upload"),
    ("is a kettle more efficient than a hob for boiling water",
     "is a gas hob more efficient than a kettle to boil water"),
])
def test_the_same_comparison_turned_around_is_the_reverse_question(asked: str,
                                                                    stored: str) -> None:
    refused_both_ways(VERIFIER, asked, stored, "order", "compared")
    for x, y in ((asked, stored), (stored, asked)):
        conflict = VERIFIER.conflict(x, y)
        assert conflict is not None and "than" in conflict.asked and "than" in conflict.stored


@pytest.mark.parametrize(("asked", "stored"), [
    # the opposite comparative turned around: one question
    ("is renting cheaper than buying in Leeds",
     "is buying more expensive than renting in Leeds"),
    ("why is my upload slower than my download", "why is my download faster than my upload"),
    # one comparison, the same way round, in other words
    ("why is my upload slower than my download",
     "why is my upload speed so much slower than my download speed"),
    # a comparison with nothing turned around, or no comparison at all
    ("is renting cheaper than buying in Leeds", "is renting cheaper than buying in York"),
    ("should I rent or buy in Leeds", "is renting cheaper than buying in Leeds"),
])
def test_one_comparison_or_none_is_not_turned_around(asked: str, stored: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        assert compared(words(x), words(y)) is None


@pytest.mark.parametrize(("asked", "stored"), [
    ("is it better to water the lawn in the morning or the evening",
     "how long should I water the lawn in the evening"),
    ("can I pay the parking fine by card or by cheque", "can I pay the parking fine by card"),
])
def test_a_choice_against_one_of_its_two_words_is_another_question(asked: str,
                                                                    stored: str) -> None:
    refused_both_ways(VERIFIER, asked, stored, "question", "alternative")
    for x, y in ((asked, stored), (stored, asked)):
        conflict = VERIFIER.conflict(x, y)
        assert conflict is not None and " or " in (
            conflict.asked if x == asked else conflict.stored)


@pytest.mark.parametrize(("asked", "stored"), [
    # both choose, or the other side names both words, or neither
    ("can I pay the parking fine by card or by cheque",
     "is it possible to pay the parking fine by cheque or card"),
    ("should I water the lawn in the morning or the evening",
     "is morning better than evening for watering the lawn"),
    ("can I pay the parking fine online", "how do I pay a parking fine online"),
    # "or" that offers no second thing
    ("will the parking appeal take a week or so", "will the parking appeal take a week"),
    ("I wonder whether or not the fine is final", "is the fine final or not"),
])
def test_no_choice_set_against_one_of_its_words_is_no_alternative(asked: str,
                                                                  stored: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        conflict = VERIFIER.conflict(x, y)
        assert conflict is None or conflict.check != "alternative", conflict
