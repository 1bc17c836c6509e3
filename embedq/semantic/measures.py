"""A measure asked two ways: "how much does it cost" / "what is the cost", "how long" /
"how many days", "how often" / "how many times", "why" / "what is the reason".

English asks for a measure with a question word and a modifier ("how much", "how long",
"how often") or names it as a noun after "what is the" ("the cost", "the duration",
"the reason"). Both forms ask one thing, but the content slot reads the modifier ("much")
or the noun ("reason") as a content word with no counterpart on the other side. So before
the band's checks, where one side asks by the question word and the other names the
measure, and not both ways on one side, the two framing words are dropped from both
sides: what remains is what each asks the measure of. The nouns are the measure's own
names (cost, price, amount for "how much"), never a thing measured: "how much is the
deposit" / "what is the deposit" keeps "much", whose counterpart is then missing; where
both sides name the cost by its verb, "how much does it cost" / "what does it cost", "much"
is dropped. "What is the process" asks what "how" asks ("how do I make a claim"). "show
me" / "show us" is dropped too: it asks what "how do I" asks ("show me how to hide a
column"), as "tell me" does (verify._FRAME); "show" alone ("show hidden rows") is a verb.
And "find" after "where do I" asks where a thing is, as "where is" does, where the other
side asks "where" without it.
"""

from __future__ import annotations

# (question word, modifier or None) -> the nouns that name what it asks for; a time unit
# after "many" names a duration too ("how many days" asks "how long").
_NAMES: dict[tuple[str, str | None], frozenset[str]] = {
    ("how", "much"): frozenset(("cost", "price", "amount")),
    ("how", "many"): frozenset(("number",)),
    ("how", "long"): frozenset(("duration", "length")),
    ("how", "often"): frozenset(("frequency",)),
    ("how", "old"): frozenset(("age",)),
    ("how", "far"): frozenset(("distance",)),
    ("why", None): frozenset(("reason", "cause")),
    ("how", None): frozenset(("process", "procedure", "steps")),
    ("where", None): frozenset(("location", "place")),
}
# What follows a measure's modifier when it asks the measure itself ("how much does",
# "how long will it").
_FOLLOW = frozenset(" ".join((
    "is are was were do does did can could will would should shall may might must has",
    "have had it i you we they he she this that",
    # an indirect question's subject ("tell me how long my landlord has")
    "my your our their his her its")).split())
# "show me how to" asks what "how do I" asks, as "tell me" does (verify._FRAME).
_ASKER = frozenset(("me", "us"))
# "where do I find the VAT number" asks where it is: "find" there asks no act.
_FIND = frozenset(("find", "locate"))
_FIND_AUX = frozenset(("do", "can", "could", "would", "should", "will"))
# "how many" before these asks what the modifier asks: a duration ("how many days" /
# "how long"), a frequency ("how many times" / "how often").
_COUNTED = {"long": frozenset(("seconds", "minutes", "hours", "days", "weeks", "months",
                               "years")),
            "often": frozenset(("times",))}


def _asks(ws: list[str], word: str, modifier: str | None) -> int | None:
    """The index of the modifier (or of the question word) where `ws` asks by it. Before
    a noun the modifier asks a measure of that noun ("how much weight"), not the one
    named here: only "how many" (whose noun is counted by "number of") is read there."""
    for i, w in enumerate(ws):
        if w != word:
            continue
        if modifier is None:
            return i
        after = ws[i + 2:i + 3]
        if ws[i + 1:i + 2] == [modifier] and (
                modifier == "many" or not after or after[0] in _FOLLOW):
            return i + 1
    return None


def _named(ws: list[str], names: frozenset[str]) -> list[int]:
    """Where `ws` names the measure: the noun itself or its plural, no other form (the
    short-form rule would read "am" or "at" as "amount")."""
    return [i for i, w in enumerate(ws) if w in names or w.removesuffix("s") in names]


def _counted(ws: list[str], modifier: str | None) -> list[int]:
    """"how many" before a word of `_COUNTED[modifier]`: "many" and that word ask what
    the modifier asks."""
    words = _COUNTED.get(modifier or "", frozenset())
    return [k for i in range(len(ws) - 2)
            if ws[i:i + 2] == ["how", "many"] and ws[i + 2] in words for k in (i + 1, i + 2)]


def measured(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """`a` and `b` without the words that frame one measure asked two ways (see the
    module); unchanged where no measure is asked one way on each side."""
    drop_a: set[int] = set()
    drop_b: set[int] = set()
    for x, y, dx, dy in ((a, b, drop_a, drop_b), (b, a, drop_b, drop_a)):
        for (word, modifier), names in _NAMES.items():
            at = _asks(x, word, modifier)
            if at is None or _asks(y, word, modifier) is not None:
                continue
            if _named(x, names):  # "how much does it cost" / "what does it cost"
                if modifier == "much" and "what" in y and _named(y, names):
                    dx.add(at)
                continue
            found = _named(y, names) or _counted(y, modifier)
            if found:
                dx.add(at)
                dy.update(found)
    for x, y, dx in ((a, b, drop_a), (b, a, drop_b)):
        dx.update(i for i in range(len(x) - 1) if x[i] == "show" and x[i + 1] in _ASKER)
        if "where" in y and not _finds(y):
            dx.update(_finds(x))
    return ([w for i, w in enumerate(a) if i not in drop_a],
            [w for i, w in enumerate(b) if i not in drop_b])


def _finds(ws: list[str]) -> list[int]:
    """Where `ws` asks "where do I find": the place of "find"."""
    return [i + 3 for i in range(len(ws) - 3) if ws[i] == "where" and ws[i + 1] in _FIND_AUX
            and ws[i + 3] in _FIND]
