"""What a question asks of its clauses: voice, modality, polarity, time relation, asker.

roles.py reads who does what and when; a sentence embedding also scores as paraphrases two
questions that keep the subject and the verb but change how the clause holds them: "when
do I get paid" / "when do I have to pay my contractors" 0.72, "is there a limit to how much
leave I can take" / "... a minimum ... I have to take" 0.90, "there is no hot water but
the heating works" / "there is hot water but the heating does not work" 0.87. Each check
below is a rule of English grammar, read from closed-class words (auxiliaries, modals,
conjunctions, prepositions), so it runs on any pair, like the clause checks:

  voice     (role slot) one subject does one verb in the active on one side and has it
            done to it on the other (a passive: "be" or "get" before a participle): "I
            pay" / "I get paid". The subject is the doer in one and the receiver in the
            other, so the questions ask about two parties' acts.
  modality  (modality slot) one subject and one verb under a modal of permission or
            ability on one side (can, could, may, able to, allowed to) and of obligation
            on the other (must, have to, need to, required to): "can I take" / "do I have
            to take". What one may do and what one must do are two answers.
  polarity  (negation slot) both sides hold the same clauses (joined by but, and, while,
            although ...) and as many negations, but a clause negated on one side is
            matched, by its content words, with one that is not on the other: the
            negation moved between clauses.
  excluded  (negation slot) a verb is ruled out by a preposition or a verb of avoiding
            on one side ("without harming", "instead of replacing", "rather than",
            "avoid", "prevent") and stands asserted on the other ("even if it harms",
            "replace"): its act is excluded in one question and part of the other.
  relation  (time slot) the two sides place their events in different time relations:
            before (before, until, prior to), after (after, once, following) or during
            (while, whilst, during): "while taking" / "after finishing". The rest of the
            sentence can be the same words; the answer differs.
  asker     (question slot) one question asks who does something ("who is responsible")
            and the other asks something else of a named subject: a yes-no question
            ("am I responsible"), or another question word (what, how, when, where, why):
            the answer is a person in one and not in the other.
  sought    (question slot) the question words ask for different things and one of them
            for a reason (why), a means (how do I, how to) or a consequence (what
            happens): "why is my pod stuck" / "how do I restart my pod".

What the words alone cannot show is left to the score: a modal implied by a verb ("I need
a witness"), a negation carried by a verb's meaning ("refuse" / "force").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from embedq.semantic.lexicon import closed, same_word
from embedq.semantic.numerals import tokens
from embedq.semantic.roles import Clause, clauses, same_subject
from embedq.semantic.verbs import participle, past_form, same_verb

# The checks, in the order `conflict` runs them: (slot, check).
CHECKS = (("role", "voice"), ("role", "doer"), ("modality", "modality"), ("negation", "polarity"),
          ("negation", "excluded"), ("time", "relation"), ("question", "asker"),
          ("question", "sought"))
_BE_GET = closed("am is are was were be been being get gets got getting gotten isn't "
                  "aren't wasn't weren't")
# Modals of permission or ability, and of obligation (with the "to" of "have to").
_MAY = closed("can could may might able allowed permitted can't cannot couldn't")
_DO = closed("do does did")
_MUST = closed("must have has had need needs needed required obliged supposed mustn't")
# Conjunctions that join two clauses of one sentence.
_JOINS = closed("but and while whilst although though because whereas yet so")
# A verb these rule out: prepositions ("without harming") and verbs of avoiding.
_EXCLUDING = closed("without avoid avoids avoiding prevent prevents preventing")
_INSTEAD = (("instead", "of"), ("rather", "than"))
# Time relations between two events; "since" and "when" read either way and are left out.
_RELATIONS = {**dict.fromkeys(("before", "until", "till", "prior"), "before"),
              **dict.fromkeys(("after", "once", "following"), "after"),
              **dict.fromkeys(("while", "whilst", "during"), "during")}
_WH = closed("what when where why how which whose whom who")
_AUX = _BE_GET | _MAY | closed("do does did will would shall should must has have had "
                                "don't doesn't didn't won't")


def _passive(c: Clause) -> bool:
    """A passive: "be" or "get" right before a participle ("I get paid", "was I
    charged"); "am I allowed to sublet" is no passive of "sublet", nor "I've got left"
    of "leave"."""
    if c.chain[-2:] in (("have", "got"), ("has", "got"), ("'ve", "got")):
        return False  # "have got" is "have": "how much data I've got left"
    return bool(c.chain) and c.chain[-1] in _BE_GET and participle(c.verb)


def _pairs(asked: str, stored: str) -> list[tuple[Clause, Clause]]:
    """Clauses of `asked` and `stored` with one subject and one verb."""
    return [(a, b) for a in clauses(asked) for b in clauses(stored)
            if same_subject(a, b) and same_verb(a.verb, b.verb)]


def voice(asked: str, stored: str) -> tuple[str, str] | None:
    for a, b in _pairs(asked, stored):
        if _passive(a) != _passive(b) and (not a.passive or _passive(a)) and (
                not b.passive or _passive(b)):
            return " ".join((a.head, *a.chain, a.verb)), " ".join((b.head, *b.chain, b.verb))
    return None


_POSSESSIVES = closed("my our his her their")


def _doers_named(t: list[str]) -> list[tuple[str, str]]:
    """(noun, verb) for each possessed noun that does a verb in the past inside a sentence
    ("jewellery my guest lost", "the damage our dog did"): a relative clause's doer."""
    out = []
    for k in range(1, len(t) - 2):
        if t[k] in _POSSESSIVES and t[k - 1] not in _AUX:
            noun, verb = t[k + 1], t[k + 2]
            if noun.isalpha() and noun not in _AUX and past_form(verb):
                out.append((noun, verb))
    return out


def doer(asked: str, stored: str) -> tuple[str, str] | None:
    """A relative clause names who did an act on one side ("jewellery my guest lost") and
    the other names no such party at all ("jewellery lost on holiday"): there the act is
    the asker's own or anyone's, and a third party's act is another claim."""
    ta, tb = tokens(asked), tokens(stored)
    for x, y, flip in ((ta, tb, False), (tb, ta, True)):
        for noun, verb in _doers_named(x):
            if not any(same_word(noun, w) for w in y):
                said = f"my {noun} {verb}"
                return (verb, said) if flip else (said, verb)
    return None


def _modal(c: Clause) -> str | None:
    may = any(w in _MAY for w in c.chain)
    must = any(w in _MUST and c.chain[i + 1:i + 2] == ("to",) for i, w in
               enumerate(c.chain)) or "must" in c.chain
    return None if may == must else "may" if may else "must"


_NEED = closed("need needs")
_PERSONAL = closed("i we he she they")


def _asks_modal(text: str) -> tuple[str, str] | None:
    """(subject, modal) of a yes-no question that opens on a pronoun with a modal: "can
    I" (may), "must I", "do I have to", "do I need" (must: "need" is the verb of
    obligation whether a noun or "to" follows); None for another question."""
    t = tokens(text)
    c = next((c for c in clauses(text) if c.asks and c.at == 1), None)
    modal = None if c is None else _modal(c)
    if modal is not None and c is not None and c.head in _PERSONAL:
        return c.head, modal
    if len(t) > 2 and t[0] in _DO and t[1] in _PERSONAL and t[2] in _NEED:
        return t[1], "must"
    return None


def _asked_modals(text: str) -> set[tuple[str, str]]:
    """`_asks_modal` of each question `text` joins with "or" ("can I do it myself or do
    I need an electrician" asks with both modals)."""
    parts = " ".join(tokens(text)).split(" or ")
    return {m for m in map(_asks_modal, parts) if m is not None}


def modality(asked: str, stored: str) -> tuple[str, str] | None:
    for a, b in _pairs(asked, stored):
        ma, mb = _modal(a), _modal(b)
        if ma and mb and ma != mb:
            return " ".join((a.head, *a.chain, a.verb)), " ".join((b.head, *b.chain, b.verb))
    qa, qb = _asked_modals(asked), _asked_modals(stored)
    if qa and qb and not qa & qb and {s for s, _ in qa} == {s for s, _ in qb}:
        (sa, ma), (sb, mb) = min(qa), min(qb)
        return f"{ma} {sa}", f"{mb} {sb}"
    return None


def _clauses_of(t: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for w in t:
        if w in _JOINS and out[-1]:
            out.append([])
        else:
            out[-1].append(w)
    return [c for c in out if c]


def polarity(asked: str, stored: str, negated: Callable[[list[str]], int],
             content: Callable[[str], bool]) -> tuple[str, str] | None:
    """A clause negated on one side matched by its content words with one that is not."""
    ca, cb = _clauses_of(tokens(asked)), _clauses_of(tokens(stored))
    if len(ca) < 2 or len(cb) < 2:
        return None
    for x in ca:
        words_x = [w for w in x if content(w)]
        shared = [sum(any(same_word(w, o) for o in y if content(o)) for w in words_x)
                  for y in cb]
        best = max(shared)
        if best and shared.count(best) == 1:
            y = cb[shared.index(best)]
            if bool(negated(x)) != bool(negated(y)):
                return " ".join(x), " ".join(y)
    return None


def _excluded_verbs(t: list[str]) -> tuple[list[str], list[str]]:
    """(verbs ruled out, other words) of the tokens `t`: the word after an excluding word
    or "instead of" / "rather than"."""
    out, rest = [], []
    skip = -1
    for i, w in enumerate(t):
        pair = tuple(t[i:i + 2])
        if w in _EXCLUDING or pair in _INSTEAD:
            at = i + (2 if pair in _INSTEAD else 1)
            if at < len(t) and t[at].endswith("ing"):
                out.append(t[at])
                skip = at
            continue
        if i != skip:
            rest.append(w)
    return out, rest


def _same_act(gerund: str, word: str) -> bool:
    """`word` is the verb of `gerund` ("using" / "use": short roots same_verb leaves)."""
    root = gerund.removesuffix("ing")
    return same_verb(gerund, word) or word in (root, root + "e")


def excluded(asked: str, stored: str, negated: Callable[[list[str]], int],
             content: Callable[[str], bool]) -> tuple[str, str] | None:
    ta, tb = tokens(asked), tokens(stored)
    for x, y, flip in ((ta, tb, False), (tb, ta, True)):
        ruled_out, _ = _excluded_verbs(x)
        other_out, other = _excluded_verbs(y)
        for verb in ruled_out:
            if any(_same_act(verb, o) for o in other_out):
                continue
            said = next((o for o in other if content(o) and _same_act(verb, o)), None)
            if negated(y) == 0 and said is not None:
                return (said, f"without {verb}") if flip else (f"without {verb}", said)
    return None


def _relations(t: list[str]) -> set[str]:
    return {_RELATIONS[w] for i, w in enumerate(t) if w in _RELATIONS
            and not (w == "prior" and t[i + 1:i + 2] != ["to"])}


def relation(asked: str, stored: str) -> tuple[str, str] | None:
    ra, rb = _relations(tokens(asked)), _relations(tokens(stored))
    if ra and rb and not ra & rb:
        return " ".join(sorted(ra)), " ".join(sorted(rb))
    return None


def _opening(t: list[str]) -> str | None:
    """"who" where the question asks who does something (who + a verb or auxiliary),
    "yes-no" where an auxiliary opens it, the question word otherwise; None for a
    statement or "which" (it may ask for a person)."""
    if not t:
        return None
    if t[0] == "who":
        return "who" if len(t) > 1 and t[1] not in _WH else None
    if t[0] in _AUX:
        return "yes-no"
    return t[0] if t[0] in _WH and t[0] not in ("which", "whose", "whom") else None


def asker(asked: str, stored: str) -> tuple[str, str] | None:
    oa, ob = _opening(tokens(asked)), _opening(tokens(stored))
    if oa and ob and oa != ob and "who" in (oa, ob):
        return oa, ob
    return None


# What a question word asks for, where it says so plainly: a reason ("why", "how come"),
# a means ("how do I", "how can I", "how to"), a consequence ("what happens"), a time
# ("when", "how long", "how often", "how many days") or an amount ("how much", "how
# many"). A question of "what", "where" or "which" says too little on its own ("what
# formula gives ..." asks a means), and is read as none.
_TIME_UNITS = closed("second seconds minute minutes hour hours day days week weeks month "
                      "months year years")
_DECIDED = closed("reason means consequence")
_PUNCTUATION = re.compile(r"[,.;:?!]")


def _sought(text: str) -> str | None:
    """What the question word that opens a part of `text` (split at its punctuation)
    asks for: "how do I pay it in" of "I got a cheque, how do I pay it in", "why" of "my
    query is slow, why"; a question word inside a part opens a clause, not a question
    ("what happens to my pension when I die", "I want to keep my number when I move")."""
    parts = (tokens(part) for part in _PUNCTUATION.split(text))
    t = next((t for t in parts if t and t[0] in ("why", "how", "when", "what")), None)
    if t is None:
        return None
    w, ahead = t[0], [*t[1:3], "", ""]
    if w == "why" or (w == "how" and ahead[0] == "come"):
        return "reason"
    if w == "how" and (ahead[0] in _MEANS or ahead[0] in _MAY or ahead[0] in ("to", "")):
        return "means"
    if w == "when" or (w == "how" and ahead[0] in ("long", "often", "soon")):
        return "time"
    if w == "how" and ahead[0] in ("much", "many"):
        return "time" if ahead[1] in _TIME_UNITS else "amount"
    if w == "what" and (ahead[0] == "happens" or ahead[:2] == ["will", "happen"]):
        return "consequence"
    return None


def sought(asked: str, stored: str) -> tuple[str, str] | None:
    """What each side asks for, where they ask for different things and one of them a
    reason, a means or a consequence ("why is my pod stuck" / "how do I restart my pod":
    the answers are a cause and a procedure). A time and an amount ("when is it
    collected" / "how many bags") are left to the other slots."""
    sa, sb = _sought(asked), _sought(stored)
    if sa and sb and sa != sb and {sa, sb} & _DECIDED:
        return sa, sb
    return None


def conflict(asked: str, stored: str, negated: Callable[[list[str]], int],
             content: Callable[[str], bool]) -> tuple[str, str, str, str] | None:
    """(slot, asked words, stored words, check) of the first check in CHECKS that finds a
    change, or None; `negated` counts a word list's negations, `content` tells a content
    word (verify.py's)."""
    checks: tuple[Callable[[], tuple[str, str] | None], ...] = (
        lambda: voice(asked, stored), lambda: doer(asked, stored),
        lambda: modality(asked, stored),
        lambda: polarity(asked, stored, negated, content),
        lambda: excluded(asked, stored, negated, content), lambda: relation(asked, stored),
        lambda: asker(asked, stored), lambda: sought(asked, stored))
    for (slot, check), found in zip(CHECKS, checks, strict=True):
        words = found()
        if words is not None:
            return slot, *words, check
    return None


# Verbs that carry little of a question's meaning ("get a refund", "make a claim", "do
# the test"): a question reworded often changes them, so they are never the act compared.
_LIGHT = closed("get gets got getting be do does did make makes made have has had take "
                 "takes took give gives gave go goes went put keep let use")


# The auxiliaries a question of means asks with: "how do I", "how can I", "how should I".
_MEANS = closed("do does can could should")


def _asking(text: str) -> Clause | None:
    """The clause a question asks of: its subject right after the opening auxiliary ("can
    my manager refuse"), or after "how" and one ("how do I cancel")."""
    t = tokens(text)
    return next((c for c in clauses(text) if c.asks and (
        c.at == 1 or (c.at == 2 and t[0] == "how"))), None)


def asked_acts(asked: str, stored: str) -> tuple[str, str] | None:
    """The main verbs of two yes-no questions that open with the same auxiliary and the
    same subject ("can my manager refuse" / "can my manager force"), or of two questions
    of means with the same subject ("how can I pause" / "how do I cancel": any auxiliary
    of `_MEANS`), where they are not one verb (nor a light verb: `_LIGHT`); None
    otherwise. align.other_act asks the model whether they are counterparts."""
    qa, qb = _asking(asked), _asking(stored)
    if qa is None or qb is None or not same_subject(qa, qb):
        return None
    means = qa.at == qb.at == 2 and {*qa.chain[:1], *qb.chain[:1]} <= _MEANS
    if qa.chain[:1] != qb.chain[:1] and not means:
        return None
    if qa.verb in _LIGHT or qb.verb in _LIGHT or same_verb(qa.verb, qb.verb):
        return None
    return qa.verb, qb.verb
