"""Comparisons and choices: which thing is said to be more so than which (`compared`, the
order slot), and a choice between two against one of them (`alternative`, the question
slot: "is it better to eat before or after" / "what should I eat after").

"why is my wifi slower than my ethernet connection" / "why is my ethernet connection
slower than wifi" score 0.99 and keep few words in order, so the content slot (which
judges minimal edits) reads them as a rewording; yet they ask opposite questions. English
writes a comparison as "X <comparative> than Y": the comparative is the word before
"than" (or two before it: "more expensive than"), X the content words before it back to
the question's frame, Y those after "than" up to the end of its clause. Two texts that
compare with one comparative and each put the other's X after "than" and its Y before the
comparative ask the reverse comparison. Turned around with the opposite comparative
("wifi is slower than ethernet" / "ethernet is faster than wifi") they ask one thing, and
"more" / "less" alone is left to the direction slot's opposites; neither is read here.
"""

from __future__ import annotations

from collections.abc import Sequence

from embedq.semantic.lexicon import same_word

_THAN = "than"
# Words that end the compared phrase on either side of it: auxiliaries, question words,
# pronouns, prepositions and what joins clauses; the words between them are the two sides.
_FRAME = frozenset(" ".join((
    "is are am was were be been do does did can could will would shall should may might",
    "must has have had why how when where what which who whom whose if and but or so",
    "because while that to for i me my we our us you your it its this that these those",
    "there much many far get gets got getting seem seems feel feels look looks",
    "in on at of from with by about into onto over under during after before until per",
    "via without within than",
)).split())
_COMPARATIVES = frozenset(["more", "less", "fewer", "better", "worse", "further", "farther"])
_REACH = 4  # the most content words one side of a comparison is read as


def _comparative(word: str) -> bool:
    return word in _COMPARATIVES or (len(word) > 4 and word.endswith("er"))


def _sides(ws: Sequence[str]) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """(comparative, X, Y) of the first "X <comparative> than Y" in `ws`, or None."""
    if _THAN not in ws:
        return None
    k = list(ws).index(_THAN)
    at = next((j for j in (k - 1, k - 2) if j >= 0 and _comparative(ws[j])), None)
    if at is None:
        return None
    before: list[str] = []
    for w in reversed(ws[:at]):
        if w in _FRAME or w in _COMPARATIVES or len(before) == _REACH:
            break
        before.insert(0, w)
    after: list[str] = []
    for w in ws[k + 1:]:
        if (w in _FRAME and after) or len(after) == _REACH:
            break
        if w not in _FRAME:
            after.append(w)
    if not before or not after:
        return None
    return ws[at], tuple(before), tuple(after)


def _shares(x: Sequence[str], y: Sequence[str]) -> bool:
    return any(same_word(a, b) for a in x for b in y)


def compared(asked: Sequence[str], stored: Sequence[str]) -> tuple[str, str] | None:
    """The two comparisons when `asked` and `stored` (word lists, as `guard.words` gives)
    compare the same two things the other way round with one comparative; else None."""
    a, b = _sides(asked), _sides(stored)
    if a is None or b is None or not same_word(a[0], b[0]):
        return None
    _, xa, ya = a
    _, xb, yb = b
    if _shares(xa, yb) and _shares(ya, xb) and not _shares(xa, xb) and not _shares(ya, yb):
        return f"{' '.join(xa)} {a[0]} than {' '.join(ya)}", \
            f"{' '.join(xb)} {b[0]} than {' '.join(yb)}"
    return None


_OR = "or"
# What follows "or" where it offers no second thing ("a week or so", "whether or not").
_NO_CHOICE = frozenset(("so", "not", "more", "less", "else", "anything", "something",
                        "otherwise", "later", "earlier", "longer", "never"))
# Articles and the prepositions a choice repeats ("by card or by cheque").
_SKIP = frozenset(("a", "an", "the", "to", "by", "in", "on", "at", "for", "with", "from"))


def _choice(ws: Sequence[str]) -> tuple[str, str] | None:
    """The two words an "A or B" choice sets side by side ("before or after", "card or
    cash"), articles and repeated prepositions skipped, or None."""
    if _OR not in ws:
        return None
    k = list(ws).index(_OR)
    before = next((w for w in reversed(ws[:k]) if w not in _SKIP), None)
    after = next((w for w in ws[k + 1:] if w not in _SKIP), None)
    if before is None or after is None or same_word(before, after) or after in _NO_CHOICE:
        return None
    return before, after


def alternative(asked: Sequence[str], stored: Sequence[str]) -> tuple[str, str] | None:
    """One side asks to choose ("is it better to eat before or after a workout"), the other
    names one of the two and not the other ("... eat after a workout"): two questions, the
    choice's words and the one named; None otherwise (both choose, or neither does)."""
    for x, y, flip in ((asked, stored, False), (stored, asked, True)):
        choice = _choice(x)
        if choice is None or _OR in y:
            continue
        named = [w for w in choice if any(same_word(w, o) for o in y)]
        if len(named) == 1:
            found = f"{choice[0]} or {choice[1]}", named[0]
            return (found[1], found[0]) if flip else found
    return None
