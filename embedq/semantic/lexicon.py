"""Word forms that are the same word: what the guard, the verifier and the aligner share.

Two texts that write one word two ways ask one thing, and embedded alone the two forms
often score far apart ("colour" / "color" is the same word, "kuberentes" a typo of
"kubernetes", "k8s" its numeronym), so each check asks `same_word` before it asks the model.
The rules follow how English spells and shortens, not a word list fitted to a corpus:

  spelling   British and American endings read as one (`spelling`): -our/-or (six
             letters or more, so "four" stays), -ise/-ize and -isation/-ization,
             -yse/-yze, -re/-er after a consonant, -ogue/-og, -ence/-ense, -mme/-m,
             "ae" inside a word as "e" (paediatric), -ll- before -ed/-ing/-er in words of
             eight letters or more (cancelled), a doubled final l (enroll)
  typo       one edit (insert, delete, replace, swap two neighbours) in words of five to
             seven letters, two from eight, keeping the first letter: a typo keeps it, and
             the antonyms an edit makes (register / deregister, import / export) do not;
             two neighbouring letters swapped in a word of any length from three (cdoe /
             code, jbo / job), a closed-class word's from five only (wihtout / without,
             but form / from stays two words)
  short      a numeronym (k8s: k, 8 letters, s), a truncation or contraction: the short
             form keeps the first letter, is two or more letters shorter and its letters
             appear in order in the long one (wk / week, acct / account, intl /
             international), and an acronym: the initials of a run of words (wfh /
             working from home, pt / part-time), or a first word's initial glued to the
             second (gsheets / google sheets)

Numbers, numerals and units are not words here: a token of digits is never a typo or an
abbreviation of another (verify.py's number slot owns it), nor is a word naming a time
(the time slot owns those, abbreviations included: `TIME_ABBREVIATIONS`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from functools import lru_cache

# Abbreviations of the closed class of time words (the time slot's vocabulary): a word
# that names a time is read as the time word it shortens, wherever it stands.
TIME_ABBREVIATIONS = {
    "yr": "year", "yrs": "years", "wk": "week", "wks": "weeks", "mo": "month",
    "mos": "months", "mth": "month", "mths": "months", "hr": "hour", "hrs": "hours",
    "mins": "minutes", "secs": "seconds", "mon": "monday", "tue": "tuesday",
    "tues": "tuesday", "thu": "thursday", "thur": "thursday", "thurs": "thursday",
    "fri": "friday", "jan": "january", "feb": "february", "mar": "march",
    "apr": "april", "jun": "june", "jul": "july", "aug": "august", "sep": "september",
    "sept": "september", "oct": "october", "nov": "november", "dec": "december",
    "tmrw": "tomorrow", "tmr": "tomorrow", "tmw": "tomorrow", "tonite": "tonight",
    "weds": "wednesday",
}
_CONSONANT = "bcdfghjklmnpqrstvwxz"
# Prepositions, conjunctions and quantifiers: a closed class whose members are never a
# short form or a typo of one another ("with" is not short for "without").
CLOSED = frozenset(" ".join((
    "with without within over under out in into on off up down for from to about after",
    "before and or but nor not no all any some each every only both none more most less",
    "least then than")).split())
# (pattern, replacement) on the lower-cased word, applied in order.
_SPELLING = tuple((re.compile(p), r) for p, r in (
    (r"(?<=\w{3})our(?=s?$|ed$|ing$|ite|able|ful|less)", "or"),
    (r"is(e|ed|es|ing|ation|ations|er|ers)$", r"iz\1"),
    (r"ys(e|ed|es|ing)$", r"yz\1"),
    (rf"(?<=[{_CONSONANT}])re(s|d)?$", r"er\1"),
    (r"ogue(s)?$", r"og\1"),
    (r"ence(s)?$", r"ense\1"),
    (r"mme(s)?$", r"m\1"),
    (r"(?<=[a-z])ae(?=[a-z])", "e"),
    (r"(?<=\w{4})ll(ed|ing|er|ers|ery|ment|ments)$", r"l\1"),
    (r"(?<=[a-z]{3})ll(s)?$", r"l\1"),
))



def closed(words: str) -> frozenset[str]:
    """A closed class of words, written as one space-separated string."""
    return frozenset(words.split())

@lru_cache(maxsize=65536)
def spelling(word: str) -> str:
    """The word with British and American endings made one (`colour` and `color` alike)."""
    if len(word) < 5 or not word.isalpha():
        return word
    for pattern, replacement in _SPELLING:
        word = pattern.sub(replacement, word)
    return word


def _edits(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance of `a` and `b`, or limit + 1 once past `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            row.append(cost)
        if min(row) > limit:
            return limit + 1
        previous2, previous = previous, row
    return previous[-1]


def transposed(a: str, b: str) -> bool:
    """True when `b` is `a` with two neighbouring letters swapped, the first letter kept
    ("cdoe" / "code", "wihtout" / "without"): the slip of two keys struck out of order."""
    if len(a) != len(b) or len(a) < 3 or a[0] != b[0]:
        return False
    at = [i for i in range(len(a)) if a[i] != b[i]]
    return len(at) == 2 and at[1] == at[0] + 1 and a[at[0]] == b[at[1]] and a[
        at[1]] == b[at[0]]


def typo(a: str, b: str) -> bool:
    """True when one of `a`, `b` is a typo of the other (see the module's rules)."""
    if not (a.isalpha() and b.isalpha()):
        return False
    shorter = min(len(a), len(b))
    closed = a in CLOSED or b in CLOSED
    if transposed(a, b) and not (closed and shorter < 5) and not (a in CLOSED and b in CLOSED):
        return True
    if closed or shorter < 5 or a[0] != b[0]:
        return False
    return _edits(a, b, 1 if shorter < 8 else 2) <= (1 if shorter < 8 else 2)


_NUMERONYM = re.compile(r"[a-z]\d+[a-z]")


def _subsequence(short: str, long: str) -> bool:
    letters = iter(long)
    return all(c in letters for c in short)


def shortens(short: str, long: str) -> bool:
    """True when `short` is a numeronym, truncation or contraction of `long`."""
    if len(short) >= len(long) or not long.isalpha() or short[:1] != long[:1] or (
            short in CLOSED or long in CLOSED):
        return False
    if _NUMERONYM.fullmatch(short):
        return short == f"{long[0]}{len(long) - 2}{long[-1]}"
    return (short.isalpha() and len(short) >= 2 and len(long) - len(short) >= 2
            and _subsequence(short, long))


def acronym(short: str, span: Sequence[str]) -> bool:
    """True when `short` spells the initials of the words of `span` (hyphenated parts
    count as words), with or without its function words; or the initial of the first of
    two words glued to the second, of four letters or more ("gsheets" / "google sheets",
    "ebill" / "electronic bill": a name clipped the way gmail and e-mail were)."""
    if not (2 <= len(short) <= 10 and short.isalpha()) or not span or span[0][:1] != short[:1]:
        return False
    parts = [p for w in span for p in w.split("-") if p]
    if len(parts) == 2 and len(parts[1]) >= 4 and (
            spelling(short) == spelling(parts[0][0] + parts[1])):  # tokens are spelt
        return True
    return len(short) <= 6 and len(parts) >= 2 and "".join(p[0] for p in parts) == short


def _bare(word: str) -> str:
    return word.removesuffix("'s").removesuffix("s'")


def _base(word: str) -> str:
    """`word` without a regular ending: -ies as -y (policies), -es only after a sibilant
    (taxes, classes, but miles), and no -s off a word in -ss (access, class), which is no
    plural."""
    if word.endswith("ss"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            if suffix == "es" and not word[:-2].endswith(("s", "x", "z", "ch", "sh")):
                continue
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65536)
def same_word(a: str, b: str) -> bool:
    """True when `a` and `b` (lower-cased words) are one word: the same stem, one spelling,
    a typo of one another, or one a short form of the other."""
    if a == b:
        return True
    if a.replace("-", "") == b.replace("-", ""):
        return True
    if not re.search(r"[a-z]", a) or not re.search(r"[a-z]", b):
        return False
    pa, pb = a.split("-"), b.split("-")
    if len(pa) == len(pb) > 1:
        return all(same_word(x, y) for x, y in zip(pa, pb, strict=True))
    if _NUMERONYM.fullmatch(a) or _NUMERONYM.fullmatch(b):
        return shortens(a, b) or shortens(b, a)
    if "-" in a or "-" in b:  # the initials of a hyphenated word: pt / part-time
        return acronym(a, [b]) or acronym(b, [a])
    sa, sb = _base(spelling(_bare(a))), _base(spelling(_bare(b)))
    return sa == sb or typo(sa, sb) or shortens(sa, sb) or shortens(sb, sa)


def _doubled(a: str, b: str, known: Collection[str]) -> bool:
    """True when neither `a` nor `b` is a known word and one is the other with the final
    consonant of a known stem doubled before -ed, -ing or -er ("flaged" / "flagged", the
    stem "flag"): the doubling rule of English spelling, slipped. A stem the model does
    not hold decides nothing."""
    if a in known or b in known:
        return False
    for single, double in ((a, b), (b, a)):
        for suffix in ("ed", "ing", "er"):
            stem = single.removesuffix(suffix)
            if (stem != single and len(stem) >= 3 and stem[-1] in _CONSONANT
                    and double == stem + stem[-1] + suffix and stem in known):
                return True
    return False


def misspelt(a: str, b: str, known: Collection[str]) -> bool:
    """True when one of `a`, `b` is a word of `known` (the model's vocabulary of whole
    words) and the other is not, one edit apart (two from eight letters), the first letter
    kept, three letters or more: a typo of a known word ("stoped" / "stopped", "aple" /
    "apple"); or, neither known, a doubled consonant missed or added on a known stem
    (`_doubled`). Two known words an edit apart ("filed" / "filled", "then" / "than") stay
    two words, as do closed-class words; with no vocabulary (`known` empty) nothing is."""
    if not known or a in CLOSED or b in CLOSED:
        return False
    if _doubled(a, b, known):
        return True
    if (a in known) == (b in known):
        return False
    shorter = min(len(a), len(b))
    if shorter < 3 or a[0] != b[0] or not (a.isalpha() and b.isalpha()):
        return False
    limit = 1 if shorter < 8 else 2
    return _edits(a, b, limit) <= limit


def mended(a: list[str], b: list[str], known: Collection[str]) -> tuple[list[str], list[str]]:
    """`a` and `b` with each typo (`misspelt` against `known`) of a word only the other side
    holds written as that word, where the two pair with no other ("sick todya" / "sick
    today"): every slot then reads the word that was meant."""
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    pairs = [(x, y) for x in only_a for y in only_b if misspelt(x, y, known)]
    xs, ys = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    meant = {w: (x if x in known else y) for x, y in pairs if xs[x] == ys[y] == 1
             for w in (x, y)}
    return [meant.get(w, w) for w in a], [meant.get(w, w) for w in b]
