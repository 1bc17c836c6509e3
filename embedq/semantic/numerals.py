"""Words as the checks compare them: one form per number, unit, time word and spelling.

`tokens` splits a text into lower-cased words (guard.words drops the articles) and writes
each the one way the guard, the verifier and the aligner compare:

  numbers    a number has one form whatever way it is written: "two", "2" and "a single"
             / "one" are "2" and "1"; "2,000", "2k", "two thousand" and "£2k" are "2000";
             "$10M" and "10 million" are "10000000"; "1/2" is "half"; "one" after "the",
             "which", "this" and the like is a pronoun ("the one I have"), no number
  ordinals   "first", "1st" are "1st"; "second" is an ordinal except after a number or
             "per" (where it is the unit)
  units      a number glued to its unit is two words ("10mg", "9am": "10 mg", "9 am"), a
             currency sign is its word after the number ("£150": "150 pounds"), and a
             unit's symbol after a number is the unit's word ("2 l", "3m": "2 litre", "3
             metre"; `_SYMBOLS`, the ones no short-form rule reads)
  names      a word that starts with a letter and holds digits (k8s, i18n, s3, p60) is a
             name, not a number: only a token that starts with a digit holds one
  spelling   a British or American spelling is one word (lexicon.spelling), and an
             abbreviated time word is that word (lexicon.TIME_ABBREVIATIONS: "wk" is "week")
  than       "then" after a comparative is "than", its common slip ("more then 3")
  signs      "%" and "per cent" are "percent", a currency code its word ("EUR": "euros"),
             and the words shortened with a slash theirs ("w/o" without, "w/" with, "b/c"
             because, "d/l" download); "no." before a digit or after a word that owns or
             names one is "number" ("my no.", "ref no."), "kilowatt hours" is "kwh"
  have got   "got" after a form of "have" is dropped ("I've got" is "I've")
  with no    "with no" is "without"; "past" and "previous" before a period are "last"
             ("the past 7 days", "the previous month")
  hyphens    a number word in a hyphenated word is its digits ("two-year" / "2-year")
  days       "sun" and "sat" after a word that names a day ("on Suns", "every Sat") are
             sunday and saturday
  weeks      a number of weeks is that many days ("2 weeks" / "14 days"), and so is a
             fortnight
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from embedq.semantic.lexicon import TIME_ABBREVIATIONS, spelling


def _listed(words: str) -> list[str]:
    return words.split()


_UNITS = _listed("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen")
_TENS = _listed("twenty thirty forty fifty sixty seventy eighty ninety")
CARDINALS = {w: i for i, w in enumerate(_UNITS)} | {w: 10 * i for i, w in enumerate(_TENS, 2)}
CARDINALS["dozen"] = 12
_ORDINAL_WORDS = _listed("first second third fourth fifth sixth seventh eighth ninth tenth "
                  "eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth "
                  "eighteenth nineteenth twentieth")
MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9,
               "k": 1000, "bn": 10**9}
_CURRENCY = {"£": "pounds", "$": "dollars", "€": "euros"}
# A currency's code is its word ("50 EUR" / "50 euros").
_CODES = {"gbp": "pounds", "usd": "dollars", "eur": "euros"}
# Comparatives that take "than" ("later" and "earlier" also read as "after that": left out).
_COMPARATIVES = frozenset(_listed(
    "more less fewer rather other better worse greater higher lower larger smaller bigger "
    "longer shorter older younger cheaper dearer faster slower"))
# Units' symbols too short, or too far from their word's letters, for lexicon.shortens
# (kg, km, ml, ft are read there); only after a number, where nothing else is meant.
_SYMBOLS = {"l": "litre", "ltr": "litre", "m": "metre", "g": "gram", "lb": "pound",
            "lbs": "pounds", "oz": "ounce"}
# Words shortened with a slash, as everyone writes them ("w/o" / "without").
_SLASH_WORDS = {"w/o": "without", "w/": "with", "b/c": "because", "d/l": "download"}
_SLASHED = re.compile(r"(?<![\w/])(?:w/o|b/c|d/l|w/(?=\s))(?![\w/])", re.IGNORECASE)
# "no." for "number": before a digit ("No. 5") or after a word that owns or names one
# ("my no.", "ref no.", "account no."); "no" without its point stays the negator.
_NUMBER_ABBREVIATION = re.compile(
    r"\b(?:(my|your|his|her|our|their|the|ref|reference|account|acct|phone|tel|policy|order|"
    r"invoice|case|claim|serial|booking|tracking|ticket|member|customer|passport|licence|"
    r"license|vat|tax|reg|flight|seat|room) )?no\.(?=\s*\d|(?(1)|(?!)))", re.IGNORECASE)
# An energy unit written out is its symbol ("kilowatt hours": kWh).
_WATT_HOURS = re.compile(r"\b(kilo|mega|giga)?watt[- ]?hours?\b", re.IGNORECASE)
_WATT_PREFIX = {"kilo": "k", "mega": "M", "giga": "G"}
# "have got" is "have": its "got" is no word of its own ("I've got 2 GB left").
_HAVE = frozenset(("have", "has", "i've", "we've", "you've", "they've"))
_SUBJECTS = frozenset(("i", "you", "we", "they", "he", "she", "it"))
# Determiners before which "one" stands for a noun ("the one", "which one"), not a number.
_PICKS_ONE = frozenset(("the", "this", "that", "which", "any", "each", "every", "another",
                        "other", "no"))
# "more than" / "less than" a number is "over" / "under" it: one comparison, two wordings.
_THAN = {"more": "over", "less": "under", "fewer": "under"}
_MONEY = re.compile(r"([£$€])\s?(\d[\d,]*(?:\.\d+)?)\s?(k|m|bn)?\b", re.IGNORECASE)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_WORD = re.compile(r"\d+(?:\.\d+)+[a-z]*|[^\W_]+(?:['-][^\W_]+)*")
_GLUED = re.compile(r"(\d+(?:\.\d+)?)(st|nd|rd|th|k|[a-z]+)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A number or an ordinal as `tokens` writes them.
NUMERAL = re.compile(r"\d+(?:\.\d+)?(?:st|nd|rd|th)?")


def _suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


ORDINALS = {w: f"{i}{_suffix(i)}" for i, w in enumerate(_ORDINAL_WORDS, 1)}


def _money(match: re.Match[str]) -> str:
    sign, amount, scale = match.group(1), match.group(2), (match.group(3) or "").lower()
    scale = {"m": " million", "k": " thousand", "bn": " billion"}.get(scale, "")
    return f" {amount}{scale} {_CURRENCY[sign]} "


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _split(word: str) -> list[str]:
    """A glued number and unit as two words; an ordinal or "2k" as one."""
    glued = _GLUED.fullmatch(word)
    if glued is None or not word[0].isdigit():
        return [word]
    number, tail = glued.groups()
    if tail in ("st", "nd", "rd", "th"):
        return [f"{int(float(number))}{_suffix(int(float(number)))}"]
    if tail == "k":
        return [number, "thousand"]
    return [number, tail]


def _canonical(words: list[str]) -> list[str]:
    """Numbers, multipliers and ordinals read (see the module); other words spelled one
    way."""
    out: list[str] = []
    for i, word in enumerate(words):
        before = out[-1] if out else ""
        if word in MULTIPLIERS and _NUMBER.fullmatch(before):
            out[-1] = _number(float(before) * MULTIPLIERS[word])
        elif word in MULTIPLIERS and word not in ("k", "bn") and before in ("a", "one"):
            out[-1] = str(MULTIPLIERS[word])
        elif word == "one" and before in _PICKS_ONE:
            out.append("one")  # "the one my provider gave me": a pronoun, no number
        elif word in CARDINALS:
            value = CARDINALS[word]
            if before.isdigit() and int(before) % 10 == 0 and int(before) >= 20 and value < 10:
                out[-1] = str(int(before) + value)  # "twenty five"
            elif word == "dozen" and before == "a":
                out[-1] = "12"
            else:
                out.append(str(value))
        elif word == "got" and (before in _HAVE or (
                before in _SUBJECTS and len(out) > 1 and out[-2] in _HAVE)):
            continue  # "I've got", "have I got"
        elif word == "single" and before == "a":
            out[-1] = "1"
        elif word == "cent" and before == "per":
            out[-1] = "percent"
        elif word == "no" and before == "with":
            out[-1] = "without"  # "with no fee" / "without a fee": one negation, one word
        elif (days := _DAYS.get(TIME_ABBREVIATIONS.get(word, word))) and _NUMBER.fullmatch(
                before):
            out[-1] = _number(float(before) * days)
            out.append("days")  # "2 weeks" / "14 days": one span of days
        elif word == "than" and before in _THAN and _a_number(words[i + 1:i + 2]):
            out[-1] = _THAN[before]  # "more than 1,000 pounds" / "over 1,000 pounds"
        elif word == "fortnight":
            out += ["14", "days"]
        elif word in _WEEKEND_SHORT and (before in _BEFORE_DAY or (
                before == "a" and len(out) > 1 and out[-2] == "on")):
            out.append(_WEEKEND_SHORT[word])  # "on Suns", "every Sat": not the sun
        elif word in ("past", "previous") and _period(words[i + 1:i + 2]):
            out.append("last")  # "the past 7 days", "the previous month"
        elif word in _CODES:
            out.append(_CODES[word])
        elif "-" in word and any(part in CARDINALS for part in word.split("-")):
            out.append("-".join(str(CARDINALS[part]) if part in CARDINALS else part
                                for part in word.split("-")))  # "two-year" / "2-year"
        elif word == "then" and before in _COMPARATIVES:
            out.append("than")
        elif word in _SYMBOLS and _NUMBER.fullmatch(before):
            out.append(spelling(_SYMBOLS[word]))
        elif word in ORDINALS and not (word == "second" and _unit(words, i, before)):
            out.append(ORDINALS[word])
        else:
            out.append(TIME_ABBREVIATIONS.get(word, spelling(word)))
    return out


# Weeks counted in days, so that one span reads one way ("two weeks", "14 days", "a
# fortnight"); months and years are no whole number of days.
_DAYS = {"week": 7, "weeks": 7, "fortnight": 14, "fortnights": 14}
# Short forms of two days that are words of their own too ("the sun", "I sat"): read as
# the day only after a word that names one ("on Sun", "every Sat", "on a Sun").
_WEEKEND_SHORT = {"sun": "sunday", "suns": "sundays", "sat": "saturday", "sats": "saturdays"}
_BEFORE_DAY = frozenset(("on", "every", "each", "next", "this", "last", "until", "till",
                         "by", "from"))
# The periods "last" counts back ("the last 7 days", "last month").
_PERIODS = frozenset(("day", "days", "week", "weeks", "month", "months", "year", "years",
                      "hour", "hours", "fortnight", "quarter", "weekend", "night"))


def _a_number(after: list[str]) -> bool:
    """True when the word after "more than" is a number ("1,000", "five")."""
    return bool(after) and (bool(_NUMBER.fullmatch(after[0])) or after[0] in CARDINALS)


def _period(after: list[str]) -> bool:
    """True when the word after "past" / "previous" opens a period: a number or a unit."""
    return bool(after) and (after[0].isdigit() or after[0] in CARDINALS or
                            TIME_ABBREVIATIONS.get(after[0], after[0]) in _PERIODS)


def _unit(words: list[str], i: int, before: str) -> bool:
    """ "second" as the unit: after a number or "per", or "a second" that ends the text or
    a clause ("wait a second"; "a second coat" is the ordinal)."""
    if _NUMBER.fullmatch(before) or before in ("per", "every", "each"):
        return True
    return before == "a" and (i + 1 == len(words) or words[i + 1] in _CLAUSE_END)


_CLAUSE_END = frozenset(_listed("and or to for before after then please"))


def tokens(text: str) -> list[str]:
    """The words of `text`, lower-cased, each in the one form the checks compare."""
    return list(_tokens(text))


@lru_cache(maxsize=16384)
def _tokens(text: str) -> tuple[str, ...]:
    text = _SLASHED.sub(lambda m: f" {_SLASH_WORDS[m.group(0).lower()]} ", text)
    text = _NUMBER_ABBREVIATION.sub(lambda m: f" {m.group(1) or ''} number ", text)
    text = _WATT_HOURS.sub(lambda m: _WATT_PREFIX.get((m.group(1) or "").lower(), "") + "Wh",
                           text)
    text = text.replace("%", " percent ")
    text = _MONEY.sub(_money, text)
    text = _THOUSANDS.sub("", text)
    text = re.sub(r"(?<![\d/])1/2(?![\d/])", " half ", text)
    words = [part for w in _WORD.findall(text.lower()) for part in _split(w)]
    return tuple(_canonical(words))


def numbers(words: list[str]) -> Counter[str]:
    """The numbers and ordinals among `words` (as `tokens` writes them); a hyphenated word
    holds its parts' ("two-factor" holds 2), a name (k8s) none."""
    found: Counter[str] = Counter()
    for word in words:
        for part in word.split("-"):
            if NUMERAL.fullmatch(part) or part == "half":
                found[part] += 1
            elif part in CARDINALS and part != "one":  # `tokens` left it a pronoun
                found[str(CARDINALS[part])] += 1
            elif part in ORDINALS and part != "second":  # `tokens` left it the unit
                found[ORDINALS[part]] += 1
    return found
