"""The contrast guard: two questions one word apart are usually two different questions.

Sentence embeddings score minimal edits as near-duplicates: with all-MiniLM-L6-v2,
"how do I enable two-factor authentication" / "... disable ..." scores 0.88 and "convert a
string to an integer" / "convert an integer to a string" 0.997, above most true
paraphrases. No cosine threshold separates those from paraphrases (README, semantic
cache), so a candidate at or above the threshold is still refused when, compared word by
word (case folded, articles dropped), its query and the asked one

  * differ in exactly one aligned word that is not the same word inflected
    (open/close, monthly/yearly, key/value, Windows/Mac), or
  * hold the same words in another order (string to integer / integer to string).

Rewordings change more than one word ("how do I open an account" / "how to create an
account"), so they pass. A refused near-paraphrase costs a
recomputation; a false hit would have returned a wrong answer: a cache errs towards the
first. The guard is lexical and tuned for English; `EMBEDQ_SEMANTIC_CONTRAST_GUARD=false`
turns it off.
"""

from __future__ import annotations

import re

ARTICLES = frozenset({"a", "an", "the"})
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in ARTICLES]


def stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def contrast(asked: str, stored: str) -> str | None:
    """Why `asked` and `stored` are one word (or one word order) apart, or None."""
    a, b = words(asked), words(stored)
    if [stem(w) for w in a] == [stem(w) for w in b]:
        return None
    if sorted(a) == sorted(b):
        return f"same words reordered: {' '.join(a)!r} vs {' '.join(b)!r}"
    if len(a) != len(b):
        return None
    differing = [(x, y) for x, y in zip(a, b, strict=True) if stem(x) != stem(y)]
    if len(differing) != 1:
        return None
    return f"one word apart: {differing[0][0]!r} vs {differing[0][1]!r}"


def contrasting(asked: str, stored: str) -> bool:
    """True when `asked` and `stored` are one word (or one word order) apart."""
    return contrast(asked, stored) is not None
