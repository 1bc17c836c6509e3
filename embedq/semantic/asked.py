"""What a question asks for, and a condition that narrows it: two checks in the band.

A sentence embedding scores two questions about one thing as paraphrases when they share
its words, whatever each asks of it: "should I take my iron tablets with food" / "what is
the best time of day to take my iron tablets" 0.68, "how do I paint over mould on the
ceiling" / "what paint finish is best for mould on the ceiling" 0.68, "what should I do
after a minor accident" / "what should I do if someone hits my parked car and drives off"
0.69. Both checks are rules of how English asks, run in the band (they ask the model
whether two words are counterparts, as the content slot does):

  asked      (content slot) a "what" / "which" question names what it asks for: the
             noun after it ("what paint finish", head "finish"), the noun after "what is
             the" ("what is the best time", "time"), or the verb its subject does ("what
             does the warning light mean", "mean"; a light verb, do / get / make ..., names
             nothing). That word must have a counterpart on the other side: the same word
             in any form, or a word embedded alone at or above the content slot's
             similarity. Checked against a yes-no question or one of manner ("how do I
             ..."), which ask for no thing: there the other side asks something else of the
             same things. A noun of manner ("what is the best way to") names nothing: it
             asks how. Against another question word ("when", "where", "how much") the
             asked noun may be what that word stands for ("what time", "what address"),
             and `attribute` judges two asked nouns. The words are read without their
             parts of speech: a verb right after the asked noun ("which adapter works")
             is read as its head, a noun the clause reader takes for the verb before a
             preposition ("what does the light on the router mean") hides the verb.
  place      (content slot) both sides say where ("can I take a power bank on a plane" /
             "... put a power bank in my checked bag") and each names a place none of
             whose words has a counterpart anywhere on the other side: the same thing
             asked of two places. A place one side adds, or names in other words
             ("in my street" / "on my road"), is no change of place.
  condition  (content slot) one side ends on a condition ("... if someone hits my parked
             car and drives off", unless, in case, provided) and most of its content words
             have no counterpart on the other side: the condition narrows the question to
             a case the other does not ask about. A condition restated in other words
             ("if I cancel my order" / "for a cancelled order") keeps its counterparts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np
import numpy.typing as npt

from embedq.semantic.align import EmbedTexts, lexical, unit
from embedq.semantic.lexicon import closed
from embedq.semantic.roles import clauses

# The checks, in the order the verifier runs them (after align's `attribute` and `act`).
CHECKS = ("asked", "condition", "place")
_WHAT = closed("what which")
_BE = closed("is are was were 's")
_ARTICLES = closed("the a an")
# Verbs that name no act of their own ("what should I do", "what do I get").
_LIGHT = closed("do does did doing done get gets got make makes made have has had take "
                 "takes took be need needs happen happens happened go goes")
# Auxiliaries that open a yes-no question, or follow "how" in a question of manner.
_AUX = closed("do does did can could should would will shall is are am was were may might "
               "must have has to")
# What a question of manner ("how do I ...") asks for, said as a noun.
_MANNER = closed("way method process procedure steps manner")
# Words that open a condition; "when" is left out (it also asks the time).
_CONDITIONS = closed("if unless provided providing")
_IN_CASE = ("in", "case")
# Prepositions that name where a thing is or goes, and the determiners before its noun.
_PLACES = closed("in on into onto inside")
_DETERMINERS = closed("my your our their his her its this that these those some any")


def _run(t: Sequence[str], start: int, is_content: Callable[[str], bool]) -> list[str]:
    """The words from `start` up to the first that is neither content (nor a noun of
    manner: "way" frames a question) nor an article before the first ("the best time"
    gives best, time)."""
    run: list[str] = []
    for w in t[start:]:
        if is_content(w) or w in _MANNER:
            run.append(w)
        elif not run and w in _ARTICLES:
            continue
        else:
            break
    return run


def head(t: Sequence[str], text: str, is_content: Callable[[str], bool]) -> str | None:
    """The word a "what" / "which" question names as what it asks for (module docstring),
    or None: another question, or one that names nothing (a light verb, a frame word)."""
    if len(t) < 2 or t[0] not in _WHAT | {"what's"}:
        return None
    if t[0] == "what's" or t[1] in _BE:
        run = _run(t, 1 if t[0] == "what's" else 2, is_content)
    elif is_content(t[1]):
        run = _run(t, 1, is_content)
    else:
        asks = next((c for c in clauses(text) if c.asks and c.at == 2), None)
        # The verb read may be a noun of its subject ("what does the warning light
        # mean" reads "light"): the asked verb ends the run of content words it opens.
        at = t.index(asks.verb, 2) if asks is not None and asks.verb in t[2:] else None
        run = [] if at is None else _run(t, at, is_content)
    word = run[-1] if run else None
    # "what is the best way to X" asks how to X, which "how" and "can I" questions reword.
    if word is None or word in _LIGHT or word in _MANNER or not is_content(word):
        return None
    return word


def _asks_whether_or_how(t: Sequence[str]) -> str | None:
    """"yes-no" for a question an auxiliary opens, "how" for one of manner ("how do I",
    "how to"), else None: a question word that asks for a thing ("when", "where", "how
    much") may name it by a noun on the other side, which `attribute` and the score
    judge."""
    if t and t[0] in _AUX:
        return "yes-no"
    return "how" if len(t) > 1 and t[0] == "how" and t[1] in _AUX else None


class _Counterparts:
    """Whether a word has a counterpart among another text's words: the same word in any
    form (align.lexical), or embedded alone at or above `min_similarity`."""

    def __init__(self, embed: EmbedTexts, min_similarity: float,
                 known: Collection[str]) -> None:
        self.embed = embed
        self.min_similarity = min_similarity
        self.known = known
        self.at: dict[str, npt.NDArray[np.float32]] = {}

    def __call__(self, word: str, own: Sequence[str], other: Sequence[str],
                 candidates: Collection[str]) -> bool:
        if lexical(word, own, other, self.known):
            return True
        wanted = sorted({word, *candidates} - set(self.at))
        if wanted:
            self.at.update({w: unit(v) for w, v in zip(wanted, self.embed(wanted),
                                                        strict=True)})
        return any(float(self.at[word] @ self.at[c]) >= self.min_similarity
                   for c in candidates)


def asked(a: list[str], b: list[str], texts: tuple[str, str],
          is_content: Callable[[str], bool], embed: EmbedTexts, min_similarity: float,
          known: Collection[str] = frozenset()) -> tuple[str, str] | None:
    """The asked word of one side with no counterpart on the other (module docstring), as
    (asked side's words, stored side's), or None."""
    counterpart = _Counterparts(embed, min_similarity, known)
    for x, y, text, flip in ((a, b, texts[0], False), (b, a, texts[1], True)):
        word = head(x, text, is_content)
        kind = _asks_whether_or_how(y)
        if word is None or kind is None:
            continue
        if counterpart(word, x, y, {w for w in y if is_content(w)}):
            continue
        other = " ".join(y[:2])
        return (other, word) if flip else (word, other)
    return None


def _condition(t: Sequence[str]) -> int | None:
    """Where a condition that ends the text opens (after its first word), or None."""
    for i in range(1, len(t) - 1):
        if t[i] in _CONDITIONS or tuple(t[i:i + 2]) == _IN_CASE:
            return i
    return None


def condition(a: list[str], b: list[str], is_content: Callable[[str], bool],
              embed: EmbedTexts, min_similarity: float,
              known: Collection[str] = frozenset()) -> tuple[str, str] | None:
    """A condition one side ends on whose content words mostly have no counterpart on the
    other side (module docstring), as (asked side's words, stored side's), or None."""
    counterpart = _Counterparts(embed, min_similarity, known)
    for x, y, flip in ((a, b, False), (b, a, True)):
        at = _condition(x)
        if at is None:
            continue
        said = [w for w in x[at:] if is_content(w)]
        other = {w for w in y if is_content(w)}
        missing = [w for w in said if not counterpart(w, x, y, other)]
        if len(missing) >= 2:
            clause = " ".join(x[at:])
            return ("", clause) if flip else (clause, "")
    return None


def conflict(a: list[str], b: list[str], texts: tuple[str, str],
             is_content: Callable[[str], bool], embed: EmbedTexts, min_similarity: float,
             known: Collection[str] = frozenset()) -> tuple[str, str, str] | None:
    """(check, asked words, stored words) of the first check in CHECKS that finds a
    change, or None; `a`, `b` the texts' words, `texts` the texts (asked, stored)."""
    found = asked(a, b, texts, is_content, embed, min_similarity, known)
    if found is not None:
        return "asked", *found
    found = condition(a, b, is_content, embed, min_similarity, known)
    if found is not None:
        return "condition", *found
    found = place(a, b, is_content, embed, min_similarity, known)
    return None if found is None else ("place", *found)


def _places(t: Sequence[str], is_content: Callable[[str], bool]) -> list[list[str]]:
    """The content words of each place `t` names: after a preposition of place and its
    determiners, up to the first word that is not content (three at most)."""
    out = []
    for i, w in enumerate(t):
        if w not in _PLACES:
            continue
        run: list[str] = []
        for x in t[i + 1:i + 6]:
            if not run and x in _DETERMINERS:
                continue
            if not is_content(x) or len(run) == 3:
                break
            run.append(x)
        if run:
            out.append(run)
    return out


def place(a: list[str], b: list[str], is_content: Callable[[str], bool],
          embed: EmbedTexts, min_similarity: float,
          known: Collection[str] = frozenset()) -> tuple[str, str] | None:
    """A place each side names with no counterpart anywhere on the other side (module
    docstring), as (asked side's words, stored side's), or None."""
    counterpart = _Counterparts(embed, min_similarity, known)
    content_a = {w for w in a if is_content(w)}
    content_b = {w for w in b if is_content(w)}

    def elsewhere(run: list[str], own: list[str], other: list[str], words: set[str]) -> bool:
        return not any(counterpart(w, own, other, words) for w in run)

    only_a = [r for r in _places(a, is_content) if elsewhere(r, a, b, content_b)]
    only_b = [r for r in _places(b, is_content) if elsewhere(r, b, a, content_a)]
    if only_a and only_b:
        return " ".join(only_a[0]), " ".join(only_b[0])
    return None
