"""The verifier: a candidate must agree with the asked query on its slots.

A sentence embedding scores "turn off the living room lights" / "... bedroom lights" 0.84
and "send an email to John" / "read my emails from John" 0.79: what differs is one slot
of the request, and the rest of the sentence outweighs it. So a candidate at or above the
threshold is compared slot by slot with the asked query, and refused on the first
conflict:

  number     the numbers differ: 5 / 50, five / fifty (number words read as digits, so
             five / 5 agree; "two-factor" holds "two")
  negation   one side negates and the other does not (not, no, never, n't, unable)
  order      the same words in another order (arguments swapped), or, in a minimal
             edit, content words crossed (align.crossed); a moved clause or the two
             sides of an "or" exchanged is no conflict for either (guard.moved)
  direction  an edit swaps a word for its opposite (to / from, on / off, more / less, with
             / without, send / receive), or one word under opposite prefixes (overpay /
             underpay) or a negating one (register / deregister): `opposite`; or a thing
             both sides name is placed at opposite ends ("from the airport" / "to the
             airport"): `opposites.opposed`
  scope, tense, role
             in a minimal edit, the scope words, the past, or the persons differ
             (grammar.py); in any pair, the clause checks (roles.py) read who does what
             and when from the grammar: `quantifier` (scope: "this antihistamine" / "all
             antihistamines"), `aspect` (tense: "do I" / "did I", "my tenancy ends" /
             "has ended", "still" / "already"), `agent` (role: "can my landlord enter" /
             "can I enter") and `owner` (role: "my SIM" / "another network's SIM")
  time       an edit changes a date or time: a calendar word (today, tomorrow, Monday,
             May) on one side only, or different time words on both (morning /
             afternoon); a time word only one side adds ("at night", "right now") is a
             rewording, as is "am" after anything but a number; a frequency word is
             its unit ("daily" / "a day" agree); "how long" / "how many days" and
             "when" / "which day" ask one time (measures.py, times.py)
  content    a minimal edit (the texts share most of their words in order) replaces a
             content word that has no counterpart on the other side: embedded alone by
             the cache's own embedder, it scores below `min_word_similarity` with every
             content word there ("remove" / "find", "living" of "living room" /
             "bedroom"), while synonyms align ("reboot" / "restart"); align.py. Its
             limit: the model places some co-hyponyms as close as synonyms ("dog" /
             "cat" 0.66), so a replaced word whose counterpart is a sibling passes here;
             the contrast guard refuses it when it is the only word replaced. The words
             that frame a question asked another way ("is it possible to", "is there a
             way to", "can you tell me", "is it ok to", "really", "ever") are no
             content words (`_FRAME`), nor is a negative contraction ("hasn't"), a
             contracted pronoun ("I'm"), or the words that frame one measure asked two
             ways ("how much" / "the cost": measures.py).
  disjoint   no content word of one side has a counterpart on the other (same stem, or
             the words embedded alone at or above `min_word_similarity`): the texts
             share a frame of function words at most ("how can I fall asleep faster" /
             "how can I wake up earlier", 0.63) and ask about different things however
             they score; rewordings that are paraphrases keep a counterpart ("asleep" /
             "sleep", "faster" / "quickly").

The question checks (questions.py: voice, doer, modality, polarity, excluded, relation,
asker, sought) run after the clause checks on any pair; in the band, `crossed` also refuses two
replaced words that trade places (align.swapped), `attribute` and `act` (align.py) two
properties asked by noun or two acts of one subject, `asked` and `condition` (asked.py)
what a "what" question names and a narrowing condition, without a counterpart.

With a `trace` (`explain`), `conflict` also lists each slot it checked as a `Check`:
passed, or skipped with why (the grammar slots and `crossed` outside a minimal edit,
MODEL_CHECKS above the band); `crossed` is the order slot's minimal-edit check, and the
clause checks run after the grammar slots under their own names, a conflict they find
naming its slot ("role: 'landlord enter' vs 'i enter'"). The first
failing slot is the Conflict returned, so a refused candidate's trace ends before it.
Without a trace nothing is collected.

The lexical slots cost microseconds; the model's (MODEL_CHECKS) embed the pair's words
(from the exact cache when seen before), in the band [threshold, threshold + band), which
by default covers every score above the threshold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from embedq.semantic import synonyms
from embedq.semantic.align import (
    DEFAULT_MIN_WORD_SIMILARITY,
    EmbedTexts,
    attribute,
    crossed,
    disjoint,
    minimal,
    other_act,
    reworded,
    substitutions,
    swapped,
    unaligned,
)
from embedq.semantic.asked import CHECKS as ASKED_CHECKS
from embedq.semantic.asked import conflict as asked_conflict
from embedq.semantic.compared import alternative, compared
from embedq.semantic.grammar import SLOTS as GRAMMAR_SLOTS
from embedq.semantic.grammar import conflict as grammar_conflict
from embedq.semantic.grammar import past, persons, possessed, scope
from embedq.semantic.guard import moved, words
from embedq.semantic.lexicon import closed, mended
from embedq.semantic.measures import measured
from embedq.semantic.numerals import NUMERAL, numbers
from embedq.semantic.opposites import opposed, opposite
from embedq.semantic.questions import CHECKS as QUESTION_CHECKS
from embedq.semantic.questions import asked_acts
from embedq.semantic.questions import conflict as question_conflict
from embedq.semantic.roles import CHECKS as CLAUSE_CHECKS
from embedq.semantic.roles import conflict as clause_conflict
from embedq.semantic.times import NUMBER_WORDS, TIME, singular
from embedq.semantic.times import conflict as time_conflict
from embedq.semantic.vocabulary import reconcile

# The slots that ask the model (word embeddings); checked only in the band.
MODEL_SLOTS = frozenset(("content", "disjoint"))
# The checks run only in the band, in their order (`trace`).
MODEL_CHECKS = ("crossed", "content", "attribute", "act", *ASKED_CHECKS, "disjoint")
# Wide enough that every candidate at or above a threshold from 0.6 up is verified: the
# content slot's word embeddings are cached, and minimal edits score up to 0.99.
DEFAULT_BAND = 0.4

_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATORS = closed("not no never none nothing nobody nowhere neither nor unable cannot "
                    "can't don't doesn't didn't isn't aren't wasn't won't shouldn't "
                    "couldn't")
_FUNCTION = closed(
    "i me my mine you your yours we our us he him his she her it its they them their this "
    "that these those is are was were be been being am do does did can could will would "
    "shall should may might must have has had what what's which who whom whose when where "
    "why how there here of for with at by about as if or and but so than too very just "
    "please any some all each every to from in on into out off up down per")
# A pronoun with a verb contracted onto it ("I'm", "it's", "we've", "they'll") is a
# pronoun and an auxiliary, the function words "I am" is written with.
_CONTRACTED = re.compile(
    r"(?:i|you|we|they|he|she|it|that|there|here|who|what|where|how)'(?:m|re|ve|ll|d|s)")
# The frame of a question asked another way ("is it possible to", "is there a way to", "I
# want to know", "can you tell me"): no content of its own.
_FRAME = closed("possible way able want wondering know tell whether ok okay really "
                 "actually ever need needs needed required allowed permitted obliged "
                 "necessary")


@dataclass(frozen=True)
class Conflict:
    """The slot a candidate disagrees on, and the words on each side."""

    slot: str
    asked: str
    stored: str
    check: str | None = None  # the check that found it, where not the slot (crossed)

    def __str__(self) -> str:
        return f"{self.slot}: {self.asked!r} vs {self.stored!r}"


@dataclass(frozen=True)
class Check:
    """One check a candidate went through (`explain`): `result` is pass, fail or skipped;
    `detail` says why it failed or was skipped (None for a plain pass)."""

    name: str
    result: str
    detail: str | None = None


def _passed(trace: list[Check] | None, *slots: str) -> None:
    if trace is not None:
        trace.extend(Check(slot, "pass") for slot in slots)


def _skipped(trace: list[Check] | None, why: str, *slots: str) -> None:
    if trace is not None:
        trace.extend(Check(slot, "skipped", why) for slot in slots)


def _grammar(asked: str, stored: str, a: list[str], b: list[str], edit: bool,
             trace: list[Check] | None) -> Conflict | None:
    """The grammar slots' conflict (grammar.py, minimal edits only, on `a` and `b`: the
    texts' words as `conflict` reconciled them), else the clause checks' (roles.py:
    quantifier, aspect, agent, owner, any pair), or None; `trace` gets the checks passed
    or skipped before it."""
    grammar = grammar_conflict(a, b) if edit else None
    if grammar is not None:
        _passed(trace, *GRAMMAR_SLOTS[:GRAMMAR_SLOTS.index(grammar[0])])
        return Conflict(*grammar)
    if edit:
        _passed(trace, *GRAMMAR_SLOTS)
    else:
        _skipped(trace, "not a minimal edit", *GRAMMAR_SLOTS)
    checks = [check for _, check in (*CLAUSE_CHECKS, *QUESTION_CHECKS)]
    found = clause_conflict(asked, stored) or question_conflict(
        asked, stored, _negations, _is_content)
    if found is None:
        _passed(trace, *checks)
        return None
    slot, was, now, check = found
    _passed(trace, *checks[:checks.index(check)])
    return Conflict(slot, was, now, check=check)


def _negations(ws: list[str]) -> int:
    return sum(w in _NEGATORS or w.endswith("n't") for w in ws)


def _lexical(a: list[str], b: list[str], trace: list[Check] | None,
             framed: tuple[list[str], list[str]]) -> Conflict | None:
    """The lexical slots, in order: number, negation, order (and `compared`), direction,
    time (on `framed`, `a` and `b` as measures.measured leaves them: "how long" / "how
    many days" name no unit); the first that `a` and `b` disagree on, or None."""
    na, ns = numbers(a), numbers(b)
    if na != ns:
        return Conflict("number", " ".join(sorted(na - ns)), " ".join(sorted(ns - na)))
    _passed(trace, "number")
    if _negations(a) != _negations(b):
        return Conflict("negation", " ".join(a), " ".join(b))
    _passed(trace, "negation")
    sa, sb = list(map(singular, a)), list(map(singular, b))
    if sa != sb and sorted(sa) == sorted(sb) and not moved(sa, sb):
        return Conflict("order", " ".join(a), " ".join(b))
    _passed(trace, "order")
    reversed_ = compared(a, b)
    if reversed_ is not None:
        return Conflict("order", *reversed_, check="compared")
    _passed(trace, "compared")
    chosen = alternative(a, b)
    if chosen is not None:
        return Conflict("question", *chosen, check="alternative")
    _passed(trace, "alternative")
    direction = opposed(a, b, _is_content)
    if direction is not None:
        return Conflict("direction", *direction)
    _passed(trace, "direction")
    timed = time_conflict(*framed)
    if timed is not None:
        return Conflict("time", *timed)
    _passed(trace, "time")
    return None


def _is_content(word: str) -> bool:
    return not (word in _FUNCTION or word in _FRAME or word in _NEGATORS
                or _CONTRACTED.fullmatch(word) is not None
                or word.endswith("n't") or word in TIME
                or word in NUMBER_WORDS or _DIGITS.fullmatch(word) is not None
                or NUMERAL.fullmatch(word) is not None)


class Verifier:
    """Slot checks for candidates; `embed` embeds words alone with the model."""

    def __init__(self, embed: EmbedTexts, *, band: float = DEFAULT_BAND,
                 min_word_similarity: float = DEFAULT_MIN_WORD_SIMILARITY,
                 known: frozenset[str] = frozenset()) -> None:
        self.embed = embed
        self.band = band
        self.min_word_similarity = min_word_similarity
        # The model's whole words (encoders.tokens.known_words): a word one edit from one
        # of them and not one itself is its typo (lexicon.misspelt), here and in the guard.
        self.known = known

    def in_band(self, score: float, threshold: float) -> bool:
        return threshold <= score < threshold + self.band

    def conflict(self, asked: str, stored: str, *, content: bool = True,
                 trace: list[Check] | None = None) -> Conflict | None:
        """The first slot `asked` and `stored` disagree on, or None; the content slot only
        with `content` (the score is in the band). `trace` (explain) gets a Check for each
        slot that passed or was skipped before that."""
        a, b = mended(*reconcile(words(asked), words(stored)), self.known)
        # one measure asked two ways ("how much" / "what is the cost") frames, no content
        framed = measured(a, b)
        lexical = _lexical(a, b, trace, framed)
        if lexical is not None:
            return lexical
        sa, sb = list(map(singular, a)), list(map(singular, b))
        edit = minimal(a, b)
        grammar = _grammar(asked, stored, a, b, edit, trace)
        if grammar is not None:
            return grammar
        if not content:
            _skipped(trace, "the score is above the band", *MODEL_CHECKS)
            return None
        a, b = framed
        content_a = [w for w in a if _is_content(w)]
        content_b = [w for w in b if _is_content(w)]
        subs = substitutions(a, b, _is_content)
        across = crossed(content_a, content_b) or swapped(
            subs, self.embed, self.min_word_similarity) if edit and not moved(sa, sb) else None
        if across is not None:
            return Conflict("order", *across, check="crossed")
        if edit:
            _passed(trace, "crossed")
        else:
            _skipped(trace, "not a minimal edit", "crossed")
        found = unaligned(subs, content_a, content_b, self.embed, self.min_word_similarity,
                          frames=(a, b), known=self.known)
        if found is not None:
            return Conflict("content", *found)
        if trace is not None:
            trace.append(Check("content", "pass", synonyms.note(a, b) if subs else
                               "no content word replaced"))
        asks = self._asked_about(asked, stored, a, b, trace)
        if asks is not None:
            return asks
        if disjoint(content_a, content_b, self.embed, self.min_word_similarity):
            return Conflict("disjoint", " ".join(content_a), " ".join(content_b))
        _passed(trace, "disjoint")
        return None

    def _asked_about(self, asked: str, stored: str, a: list[str], b: list[str],
                     trace: list[Check] | None) -> Conflict | None:
        """The content slot's question checks: `attribute`, the nouns both questions ask
        for, and `act`, the verbs one subject is asked about (align.py); `asked`, what a
        "what" question names, and `condition`, a narrowing "if" clause (asked.py)."""
        noun = attribute(a, b, _is_content, self.embed, self.min_word_similarity)
        if noun is not None:
            return Conflict("content", *noun, check="attribute")
        _passed(trace, "attribute")
        acts, ways = asked_acts(asked, stored), reworded(a, b)
        act = acts and other_act(acts, self.embed, self.min_word_similarity, ways, (a, b))
        if act is not None:
            return Conflict("content", *act, check="act")
        _passed(trace, "act")
        found = asked_conflict(a, b, (asked, stored), _is_content, self.embed,
                               self.min_word_similarity, self.known)
        if found is not None:
            _passed(trace, *ASKED_CHECKS[:ASKED_CHECKS.index(found[0])])
            return Conflict("content", *found[1:], check=found[0])
        _passed(trace, *ASKED_CHECKS)
        return None

    def slots(self, asked: str, stored: str) -> dict[str, bool]:
        """Each slot's verdict on its own (True: a conflict), every slot checked whatever
        the others say: the learned verifier's features (learned.py). The grammar slots
        and `crossed` judge minimal edits only, as in `conflict`; the clause checks
        (roles.py) are no feature, so the shipped weights read the features they were
        fitted on."""
        a, b = reconcile(words(asked), words(stored))
        sa, sb = list(map(singular, a)), list(map(singular, b))
        edit = minimal(a, b)
        content_a = [w for w in a if _is_content(w)]
        content_b = [w for w in b if _is_content(w)]
        subs = substitutions(a, b, _is_content)
        return {
            "number": numbers(a) != numbers(b),
            "negation": _negations(a) != _negations(b),
            "order": sa != sb and sorted(sa) == sorted(sb) and not moved(sa, sb),
            "direction": any(opposite(x, y) for x in set(a) - set(b) for y in set(b) - set(a)),
            "time": time_conflict(*measured(a, b)) is not None,
            "scope": edit and scope(a) != scope(b),
            "tense": edit and past(a) != past(b),
            "role": edit and (bool(persons(a) and persons(b) and persons(a) != persons(b))
                              or bool(possessed(a, b) or possessed(b, a))),
            "crossed": edit and crossed(content_a, content_b) is not None,
            "content": unaligned(subs, content_a, content_b, self.embed,
                                 self.min_word_similarity, frames=(a, b)) is not None,
            "disjoint": disjoint(content_a, content_b, self.embed, self.min_word_similarity),
        }

    def content_words(self, asked: str, stored: str) -> tuple[list[str], list[str]]:
        """The content words of each side, as the content slot reads them."""
        a, b = reconcile(words(asked), words(stored))
        return [w for w in a if _is_content(w)], [w for w in b if _is_content(w)]
