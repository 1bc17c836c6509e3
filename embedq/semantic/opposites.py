"""Opposites: two words that name the two ends of one relation (the direction slot).

An edit that swaps a word for its opposite asks the reverse request: "transfer money to
my savings" / "... from my savings", "overpaid" / "underpaid", "register" /
"deregister". `opposite` reads a short list of converses in any form of their verbs, and
one word under opposite or negating prefixes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from embedq.semantic.guard import QUESTION_WORDS
from embedq.semantic.lexicon import closed
from embedq.semantic.verbs import IRREGULAR

_OPPOSITES = {
    closed(p) for p in (
        "to from", "in out", "into out", "on off", "up down", "before after", "above below",
        "over under", "more less", "more fewer", "higher lower", "increase decrease",
        "max min", "maximum minimum", "most least", "first last", "next previous",
        "left right", "with without", "send receive", "buy sell", "lend borrow",
        "import export", "upload download", "enable disable", "open close", "accept reject",
        "best worst", "early late", "include exclude", "start stop", "start finish",
        "add remove", "win lose", "credit debit", "income expense", "inbound outbound",
    )
}
# Prefixes that turn a word into its opposite: over- / under-, or a negating one.
_PREFIX_PAIRS = (("over", "under"), ("in", "out"), ("up", "down"), ("pre", "post"))
_NEGATING = ("un", "dis", "de", "non", "anti")
_VERB_ENDINGS = ("ing", "ed")  # a negated verb in another form: "locked" / "unlock"


def _stems(word: str, suffixes: tuple[str, ...]) -> set[str]:
    """`word` and the bases one of `suffixes` may stand on ("locked": lock, locke)."""
    out = {word}
    for suffix in suffixes:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            out.update((word[:-len(suffix)], word[:-len(suffix)] + "e"))
    return out


def _bases(word: str) -> set[str]:
    """`word` and the base forms it may inflect ("received" receive, "sold" sell, "sends"
    send): a listed opposite keeps its sense in every form of the verb."""
    return _stems(word, ("ing", "ed", "es", "s")) | {
        base for base, *forms in IRREGULAR if word in forms}


@lru_cache(maxsize=65536)
def opposite(x: str, y: str) -> bool:
    """True when `x` and `y` name opposites: a listed pair in any of their forms, or one
    word under two opposite prefixes (overpay / underpay) or with a negating one in any
    form (register / deregister, locked / unlock)."""
    if any(frozenset((p, q)) in _OPPOSITES for p in _bases(x) for q in _bases(y)):
        return True
    for p, q in (*_PREFIX_PAIRS, *((q, p) for p, q in _PREFIX_PAIRS)):
        if x.startswith(p) and y.startswith(q) and x[len(p):] == y[len(q):] and len(
                x) - len(p) >= 3:
            return True
    # either in a verb's form: "locked" / "unlock" ("deduplicate" / "duplicates" is a
    # verb and a plural noun: no form of one verb)
    return any(len(long) - len(n) >= 4 and long == n + short.removeprefix("-")
               for n in _NEGATING for one, other in ((x, y), (y, x))
               for long in _stems(one, _VERB_ENDINGS) for short in _stems(other, _VERB_ENDINGS))


# A preposition that places what follows it as an end of a movement or a relation.
_PLACING = closed("to from into in out on off onto")
_DETERMINERS = closed("my your our his her their its this that these those")


def _placed(ws: Sequence[str], is_content: Callable[[str], bool]) -> dict[str, str]:
    """Each word of `ws` with the placing preposition before it ("from airport": the
    airport is where it starts), determiners between skipped."""
    out: dict[str, str] = {}
    for i, w in enumerate(ws):
        j = i - 1
        while j >= 0 and ws[j] in _DETERMINERS:
            j -= 1
        if j >= 0 and ws[j] in _PLACING and is_content(w):
            out.setdefault(w, ws[j])
    return out


def opposed(a: Sequence[str], b: Sequence[str],
            is_content: Callable[[str], bool]) -> tuple[str, str] | None:
    """A word for its opposite (to / from, send / receive), or one thing both name placed
    at opposite ends ("a cab from the airport to the city" / "a taxi from downtown to the
    airport"; `is_content` tells a content word): the direction slot's words, or
    None."""
    wa, wb = _directed(a), _directed(b)
    for x in wa - wb:
        for y in wb - wa:
            if opposite(x, y):
                return x, y
    pa, pb = _placed(a, is_content), _placed(b, is_content)
    for w in pa.keys() & pb.keys():
        if opposite(pa[w], pb[w]):
            return f"{pa[w]} {w}", f"{pb[w]} {w}"
    return None


# A question word before "to" makes it the mark of an infinitive ("how to delete a
# branch", "where to send it"): no direction.
_ASKING = QUESTION_WORDS | {"whether"}


def _directed(ws: Sequence[str]) -> set[str]:
    """The words of `ws`, an infinitive's "to" left out."""
    return {w for i, w in enumerate(ws) if not (w == "to" and i and ws[i - 1] in _ASKING)}
