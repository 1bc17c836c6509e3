"""The verifier's slots (embedq/cache/semantic/verify.py), with the hashing encoder as the
span embedder: it places different words apart and the same words together."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from embedq.cache.semantic.verify import Verifier
from embedq.encoders.hashing import HashingEncoder

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
