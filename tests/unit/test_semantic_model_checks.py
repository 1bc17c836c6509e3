"""The model checks added to the content slot's neighbours (align.py): `swapped` (the
crossed check, two substitutions whose words trade places), `attribute` (two questions
asking for things by nouns with no counterpart) and `act` (one subject asked about two
verbs). The pairs are written for these tests (no pair of the labelled splits). A small
table of word vectors stands in for the model, so each verdict is the rule's logic: words
of one group score 0.8 together, 0.2 across groups, 1.0 with themselves."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from embedq.semantic.verify import Check, Verifier

GROUPS = [("puppy", "dog"), ("kitten", "cat"), ("price", "cost"), ("weight",),
          ("cancel", "terminate"), ("pause",), ("fee", "charge"), ("repair", "fix")]
DIMENSIONS = 16


def _vector(word: str) -> npt.NDArray[np.float32]:
    """Group words share an axis (cosine 0.8); any other word gets its own."""
    v = np.zeros(DIMENSIONS, np.float32)
    group = next((i for i, g in enumerate(GROUPS) if word in g), None)
    if group is None:
        v[8 + hash(word) % 8] = 1.0
        v[hash(word) % 7] += 0.01
        return v / np.linalg.norm(v)
    v[group] = 0.8 ** 0.5
    v[8 + (hash(word) % 8)] = 0.2 ** 0.5
    return v


def embed(texts: list[str]) -> list[npt.NDArray[np.float32]]:
    return [_vector(t) for t in texts]


VERIFIER = Verifier(embed)


@pytest.mark.parametrize(("asked", "stored", "check"), [
    # the frame kept, its two arguments exchanged for their counterparts
    ("can a puppy share a bed with an old cat", "can a kitten share a bed with an old dog",
     "crossed"),
    # both ask for a thing by its noun, and the nouns are two properties (rewordings: in
    # a minimal edit the content slot refuses first)
    ("how much weight can a parcel hold", "what price applies when I post a parcel",
     "attribute"),
    # the same subject asked about two acts
    ("can my gym cancel my membership",
     "can my gym pause my membership for a few months while I am travelling abroad", "act"),
])
def test_a_model_check_refuses_its_near_miss(asked: str, stored: str, check: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        trace: list[Check] = []
        conflict = VERIFIER.conflict(x, y, trace=trace)
        assert conflict is not None and conflict.check == check, conflict
        assert check not in [c.name for c in trace]


@pytest.mark.parametrize(("asked", "stored"), [
    # counterparts in their own places; a noun with its counterpart; one act, two verbs
    ("can a puppy share a bed with an old kitten", "can a dog share a bed with an old cat"),
    ("what price applies when I post a parcel", "how much cost does posting a parcel have"),
    ("how many hours of repair does a boiler need", "how much repair does a boiler need"),
    ("can my gym cancel my membership", "can my gym terminate my membership"),
    # a light verb is never the act compared
    ("can my gym cancel my membership", "can my gym make a cancellation of my membership"),
])
def test_a_model_check_keeps_its_paraphrase(asked: str, stored: str) -> None:
    for x, y in ((asked, stored), (stored, asked)):
        trace: list[Check] = []
        conflict = VERIFIER.conflict(x, y, trace=trace)
        assert conflict is None or conflict.check not in ("crossed", "attribute", "act"), \
            conflict
