"""The verifier: a borderline candidate must agree with the asked query on its slots.

A sentence embedding scores "turn off the living room lights" / "... bedroom lights" 0.84
and "send an email to John" / "read my emails from John" 0.79: what differs is one slot
of the request, and the rest of the sentence outweighs it. So a candidate whose score is
in the band [threshold, threshold + band) is compared slot by slot with the asked query,
and refused on the first conflict:

  number     the numbers (digits or number words) differ: 5 / 50, five / fifty
  negation   one side negates and the other does not (not, no, never, n't)
  order      the same words in another order (arguments swapped)
  direction  an edit swaps a word for its opposite (to / from, on / off, more / less)
  time       an edit changes a date or time word (today / tomorrow, am / pm, Monday)
  content    the texts are at most MAX_EDITS edits apart (a minimal edit, not a
             rewording), and an edit replaces up to MAX_SPAN content words on each side
             by words the model itself places apart: the two spans, embedded alone by
             the cache's own embedder, score below `min_span_similarity` ("remove" /
             "find"). Spellings that differ only by spaces or hyphens ("user name" /
             "username") are the same span. Its limit: the model places co-hyponyms as
             close as synonyms ("bedroom" / "living room" 0.77, "signs" / "symptoms"
             0.58), so a threshold on span similarity refuses some synonyms and lets
             some co-hyponyms through (docs/semantic-cache.md has the held-out figures).

The edits are the differences of a word alignment (difflib over case-folded, lightly
stemmed words, articles dropped). Rewordings (long replaced spans, or words only added
on one side) are left to the score. The closed word classes below are English function
words (numbers, negators, opposite particles, time words), not topic lists: the content
slot, which decides most cases, uses the model's embeddings and no word list.

The lexical slots (number to time) cost microseconds and are checked on every candidate
at or above the threshold. The content slot costs one embedding call of the short edited
spans (served from the exact cache when seen before) and is checked only in the band
[threshold, threshold + band): above it the score alone says paraphrase.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from embedq.cache.semantic.guard import stem, words

EmbedTexts = Callable[[list[str]], Sequence[npt.NDArray[np.float32]]]



def _closed(words: str) -> frozenset[str]:
    return frozenset(words.split())


MAX_SPAN = 2
MAX_EDITS = 1
DEFAULT_BAND = 0.2
DEFAULT_MIN_SPAN_SIMILARITY = 0.3

_NUMBER_WORDS = _closed(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty "
    "seventy eighty ninety hundred thousand million billion half dozen")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATORS = _closed("not no never none nothing nobody cannot can't don't doesn't "
                      "didn't isn't aren't wasn't won't shouldn't couldn't")
_OPPOSITES = {
    _closed(p) for p in (
        "to from", "in out", "into out", "on off", "up down", "before after", "above below",
        "over under", "more less", "more fewer", "higher lower", "increase decrease",
        "max min", "maximum minimum", "most least", "first last", "next previous",
    )
}
_TIME = _closed(
    "today tomorrow yesterday tonight now morning afternoon evening night noon midnight "
    "week weekend month year day hour minute second am pm next last ago later earlier "
    "monday tuesday wednesday thursday friday saturday sunday january february march "
    "april may june july august september october november december")
_FUNCTION = _closed(
    "i me my mine you your yours we our us he him his she her it its they them their this "
    "that these those is are was were be been being am do does did can could will would "
    "shall should may might must have has had what what's which who whom whose when where "
    "why how there here of for with at by about as if or and but so than too very just "
    "please any some all each every to from in on into out off up down")


@dataclass(frozen=True)
class Conflict:
    """The slot a candidate disagrees on, and the words on each side."""

    slot: str
    asked: str
    stored: str

    def __str__(self) -> str:
        return f"{self.slot}: {self.asked!r} vs {self.stored!r}"


def _numbers(text: str) -> Counter[str]:
    found = Counter(_DIGITS.findall(text))
    found.update(w for w in words(text) if w in _NUMBER_WORDS)
    return found


def _negations(ws: list[str]) -> int:
    return sum(w in _NEGATORS or w.endswith("n't") for w in ws)


def _content(ws: list[str]) -> list[str]:
    return [w for w in ws if w not in _FUNCTION]


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _squashed(span: list[str]) -> str:
    return "".join(span).replace("-", "")


def edits(asked: str, stored: str) -> list[tuple[list[str], list[str]]]:
    """The (asked span, stored span) pairs a word alignment of the two texts leaves over."""
    a, b = words(asked), words(stored)
    matcher = difflib.SequenceMatcher(a=[stem(w) for w in a], b=[stem(w) for w in b],
                                      autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes()
            if op != "equal"]


class Verifier:
    """Slot checks for candidates in the band; `embed` embeds short spans with the model."""

    def __init__(self, embed: EmbedTexts, *, band: float = DEFAULT_BAND,
                 min_span_similarity: float = DEFAULT_MIN_SPAN_SIMILARITY) -> None:
        self.embed = embed
        self.band = band
        self.min_span_similarity = min_span_similarity

    def in_band(self, score: float, threshold: float) -> bool:
        return threshold <= score < threshold + self.band

    def conflict(self, asked: str, stored: str, *, content: bool = True) -> Conflict | None:
        """The first slot `asked` and `stored` disagree on, or None; the content slot only
        with `content` (the score is in the band)."""
        na, ns = _numbers(asked), _numbers(stored)
        if na != ns:
            return Conflict("number", " ".join(sorted(na - ns)), " ".join(sorted(ns - na)))
        a, b = words(asked), words(stored)
        if _negations(a) != _negations(b):
            return Conflict("negation", " ".join(a), " ".join(b))
        if a != b and sorted(map(_singular, a)) == sorted(map(_singular, b)):
            return Conflict("order", " ".join(a), " ".join(b))
        spans: list[tuple[list[str], list[str]]] = []
        changes = edits(asked, stored)
        for ea, eb in changes:
            sa, sb = set(ea), set(eb)
            for x in sa:
                for y in sb:
                    if frozenset((x, y)) in _OPPOSITES:
                        return Conflict("direction", x, y)
            if (sa & _TIME) != (sb & _TIME):
                return Conflict("time", " ".join(ea), " ".join(eb))
            wa, wb = _content(ea), _content(eb)
            if len(changes) <= MAX_EDITS and wa and wb and len(wa) <= MAX_SPAN and (
                    len(wb) <= MAX_SPAN and _squashed(wa) != _squashed(wb)):
                spans.append((wa, wb))
        if not spans or not content:
            return None
        vectors = self.embed([" ".join(s) for pair in spans for s in pair])
        for i, (wa, wb) in enumerate(spans):
            va, vb = vectors[2 * i], vectors[2 * i + 1]
            similarity = float(va @ vb) / float(np.linalg.norm(va) * np.linalg.norm(vb))
            if similarity < self.min_span_similarity:
                return Conflict("content", " ".join(wa), " ".join(wb))
        return None
