"""The verifier's time slot (verify.py): the dates and times two questions name.

A calendar word (today, tomorrow, Monday, May, am / pm after a number) on one side only
changes the request; other time words (morning, week, daily) change it only against
another time word ("in the morning" / "in the afternoon"), so a time word one side adds
("at night", "right now", "how soon") is a rewording. A frequency word is its unit
("daily" / "a day" agree), a possessive its word ("tomorrow's forecast" / "the forecast
tomorrow"; alone, "today's date" names no day against "the current date").

"when" and "which" / "what" before "day" or "date" ask one time ("when do I get paid" /
"which day do I get paid"): the day such a question asks for is read as the question's
form, not as a time it names, where the other side asks "when". The slot reads the words
measures.py leaves, so "how long" / "how many days" name no unit either.
"""

from __future__ import annotations

from itertools import pairwise

from embedq.semantic.lexicon import closed
from embedq.semantic.numerals import CARDINALS, NUMERAL, ORDINALS

NUMBER_WORDS = frozenset(CARDINALS) | frozenset(ORDINALS) | closed(
    "hundred thousand million billion half dozen")
# Calendar words name one date or time: one on one side only changes the request.
CALENDAR = closed(
    "today tomorrow yesterday tonight monday tuesday wednesday thursday friday saturday "
    "sunday january february march april june july august september october november "
    "december am pm")
# Other time words change it only against another time word ("morning" / "afternoon").
TIME = CALENDAR | closed(
    "now morning afternoon evening night noon midnight week weekend month year day hour "
    "minute second next last ago later earlier soon weekly monthly yearly daily hourly "
    "nightly annual annually")
# A frequency word names its unit: "daily" asks what "a day" / "per day" asks, as "five"
# reads as "5" in the number slot.
_UNIT_OF = {"daily": "day", "weekly": "week", "monthly": "month", "yearly": "year",
            "annual": "year", "annually": "year", "hourly": "hour", "nightly": "night"}
_DAY_ASKED = closed("day date")


def singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def time_word(word: str) -> str:
    """`word` as the slot reads it: a frequency word as its unit, a possessive bare."""
    word = word.removesuffix("'s")
    return _UNIT_OF.get(word, singular(word))


def times(ws: list[str], owning: bool = True) -> set[str]:
    """The time words of `ws`, frequency words as their unit ("daily" is "day"), with
    `owning` possessives too ("today's"); "am" only after a number ("7 am", not "I am")."""
    found = {t for w in ws if w != "am" and (owning or not w.endswith("'s"))
             and (t := time_word(w)) in TIME}
    found.update("am" for before, w in pairwise(ws)
                 if w == "am" and (NUMERAL.fullmatch(before) or before in NUMBER_WORDS))
    return found


def conflict(a: list[str], b: list[str]) -> tuple[str, str] | None:
    """The time words only `a` and only `b` name, where the two disagree; else None."""
    a, b = _asked_form(a, b), _asked_form(b, a)
    ta, tb = times(a), times(b)
    calendar_differs = (times(a, False) & CALENDAR) != (times(b, False) & CALENDAR)
    if ta == tb or not ((ta and tb) or calendar_differs):
        return None
    return " ".join(sorted(ta - tb)), " ".join(sorted(tb - ta))


def _asked_form(ws: list[str], other: list[str]) -> list[str]:
    """`ws` without the day its "which day" / "what date" asks for where `other` asks
    "when"."""
    if "when" not in other:
        return ws
    return [w for i, w in enumerate(ws)
            if not (w in _DAY_ASKED and i > 0 and ws[i - 1] in ("which", "what"))]
