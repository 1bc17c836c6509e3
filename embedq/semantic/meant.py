"""The asked query as its asker meant it, toward one candidate: the words the model cannot
read (typos, short forms) written as the candidate's.

The model cuts a word it does not know into pieces ("pasport", "lemmon", "wfh", "idx"),
and the query's vector drifts with them: "how do I renew my pasport online" scores 0.66
against "how do I renew my passport online", under the threshold, though every check
after the score reads the two as one (lexicon.same_word, lexicon.misspelt). So a
candidate is scored again on the query rewritten toward it (`meant`), and keeps the
better of its two scores; the guard and the verifier then judge the two texts as asked,
as for any candidate.

The rewrite touches only a word of the query that the model does not know (not one of
`known`, the model's whole words; a word with letters; not closed-class) and that is a
typo or a short form of exactly one word the candidate holds and the query does not
(`lexicon.same_word`, `lexicon.misspelt`: "pasport" / "passport", "idx" / "index"), or
the initials of a run of such words (`lexicon.acronym`: "wfh" / "working from home"). A
short form goes one way only, the query's word the shorter: "duplicates" is not written
as "date", whose letters it holds in order.
A word the model knows is never rewritten: "per" is no short form of "partner" here, nor
"dd" of "direct debit"; only a word the model cannot read is read as the candidate's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence, Set

from embedq.semantic.lexicon import CLOSED, acronym, misspelt, same_word, shortens
from embedq.semantic.numerals import tokens

_LETTER = re.compile(r"[a-z]")
RUNS = (2, 3, 4)  # the lengths of a run of words an acronym may spell


def unreadable(query: str, known: Collection[str]) -> list[str]:
    """The words of `query` the model does not know (none when `known` is empty)."""
    if not known:
        return []
    return [w for w in dict.fromkeys(tokens(query))
            if len(w) > 1 and w not in known and w not in CLOSED and _LETTER.search(w)]


def _counterpart(word: str, stored: Sequence[str], asked: Set[str],
                 known: Collection[str]) -> str | None:
    """The one word, or run of words in a row, of `stored` that the query (`asked`) does
    not hold and `word` misspells or shortens, else None."""
    words = [w for w in dict.fromkeys(stored) if w not in asked and (misspelt(
        word, w, known) or (same_word(word, w) and not shortens(w, word)))]
    if len(words) == 1:
        return words[0]
    if words:
        return None  # two readings: neither is meant
    runs = [" ".join(run) for n in RUNS for i in range(len(stored) - n + 1)
            if not asked & set(run := stored[i:i + n]) and acronym(word, run)]
    return runs[0] if len(runs) == 1 else None


def meant(query: str, stored: str, known: Collection[str],
          odd: list[str] | None = None) -> str | None:
    """`query` with each word the model cannot read (`odd`: `unreadable`'s, read here when
    not given) written as the word (or run of words) of `stored` it misspells or shortens,
    or None when no word was rewritten."""
    odd = unreadable(query, known) if odd is None else odd
    if not odd:
        return None
    asked, theirs = set(tokens(query)), tokens(stored)
    text = query
    for word in odd:
        found = _counterpart(word, theirs, asked, known)
        if found is not None:
            text = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", found, text, flags=re.IGNORECASE)
    return text if text != query else None
