"""The closed-class words that change what a question asks: scope, tense and roles.

A sentence embedding weighs these words lightly, so "how do I restart a pod" / "... every
pod" scores 0.89, "was my claim approved" / "will my claim be approved" 0.95 and "can my
landlord enter the flat without telling me" / "can I enter my landlord's flat without
telling him" 0.95. Each is a slot of verify.py, read from the words alone:

  scope  the quantity and scope words (all, every, each, any, some, only, both, several,
         many, few, most, none, whole, entire, just, multiple, various) differ; "how many"
         and "how much" ask for a number and are not a scope
  tense  one side asks about the past (was, were, did, had, or has / have before a
         participle: "has ended", "have been", "has my claim been accepted") and the
         other does not; present and
         future read alike ("do I get paid" / "will I be paid")
  role   who does what changes: both sides name people by pronoun and the persons
         differ (first: I, me, my, we; third: he, she, they, someone; "you" is the
         service the question addresses, no role), or a word one side makes possessive
         ("partner's") stands bare on the other ("partner"; not "bill's due", whose "'s"
         is "is"). Pronouns on one side only ("how do I" / "how to") change no role, nor
         does "me" after tell, show, help or let, nor the "I" that opens a question
         against one that opens with no subject ("is there a way to").

The slots judge minimal edits only (the texts keep one frame, align.minimal): there a
changed closed-class word is the edit, while a rewording changes them freely ("my
package arrived damaged" / "the parcel I received was broken").
"""

from __future__ import annotations

import re
from itertools import pairwise

from embedq.semantic import synonyms
from embedq.semantic.lexicon import closed, same_word
from embedq.semantic.numerals import tokens

# The slots `conflict` checks, in its order.
SLOTS = ("scope", "tense", "role")
SCOPE = closed("all every each any some only both several many few most none whole "
                "entire just multiple various")
_PAST = closed("was were did had wasn't weren't didn't hadn't")
_PERFECT = closed("has have hasn't haven't 've")
_SUBJECT_SPAN = 8  # words from a question's opening "has" to its participle, at most
# The person each pronoun names; "you" is left out: a question addresses the service
# ("do you accept Apple Pay" / "can I pay with Apple Pay").
_PERSONS = {
    **dict.fromkeys(("i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "i'm",
                     "i've", "i'd", "i'll", "we're", "we've", "ourselves"), "first"),
    **dict.fromkeys(("he", "him", "his", "she", "her", "hers", "they", "them", "their",
                     "theirs", "he's", "she's", "they're", "himself", "herself",
                     "themselves", "someone", "somebody", "others"), "third"),
}
_FRAMES = frozenset(("tell", "show", "help", "let"))


def scope(words: list[str]) -> frozenset[str]:
    """The scope words of `words` ("each" and "every" are one: "every month" / "each
    month")."""
    return frozenset(("each" if w == "every" else w) for before, w in pairwise(["", *words])
                     if w in SCOPE and not (before == "how" and w in ("many", "much")))


def past(words: list[str]) -> bool:
    if any(w in _PAST for w in words):
        return True
    # "has it ended": the participle within two words; a question that opens with "has"
    # puts its subject between them ("has my claim for the bike been accepted")
    return any(w in _PERFECT and any(_participle(x) for x in words[i + 1:i + (
        _SUBJECT_SPAN if i == 0 else 3)]) for i, w in enumerate(words))


def _participle(word: str) -> bool:
    """"been", or a word with a participle's ending that, where WordNet is read, is a
    verb's inflection ("shown", "broken", "ended"; not "brown", "kitchen", "phone")."""
    if word == "been":
        return True
    if len(word) <= 3 or not word.endswith(("ed", "en", "wn", "ne")):
        return False
    net = synonyms.active()
    return net is None or any(pos == "v" and base != word for pos, base in net.bases(word))


def persons(words: list[str]) -> frozenset[str]:
    return frozenset(_PERSONS[w] for before, w in pairwise(["", *words])
                     if w in _PERSONS and not (w == "me" and before in _FRAMES))


# A pronoun or question word before "'s" is "is" or "has" ("it's", "there's", "who's"):
# no possessive.
_IS_HAS = frozenset(["it", "that", "there", "here", "he", "she", "who", "what", "where", "how"])


# A word that follows "X's" where the "'s" is "is" or "has" ("my bill's due", "the
# parcel's been sent"): what comes after is said of X, not owned by it.
_SAID_OF = closed("due overdue late early been not gone going ready still already just "
                   "now missing broken free available open closed empty full")


def possessed(a: list[str], b: list[str]) -> str | None:
    """A word `a` makes possessive that `b` holds bare, or None."""
    bare = set(b)
    return next((w for w, then in pairwise([*a, ""]) if w.endswith("'s") and w[:-2] in bare
                 and w[:-2] not in _IS_HAS and w not in bare and then not in _SAID_OF),
                None)


def conflict(a: list[str], b: list[str]) -> tuple[str, str, str] | None:
    """(slot, asked words, stored words) of the first grammar slot `a` and `b` differ on."""
    sa, sb = scope(a), scope(b)
    if sa != sb:
        return "scope", " ".join(sorted(sa - sb)), " ".join(sorted(sb - sa))
    if past(a) != past(b):
        return "tense", "past" if past(a) else "not past", "past" if past(b) else "not past"
    pa, pb = persons(_unasked(a, b)), persons(_unasked(b, a))
    if pa and pb and pa != pb:
        return "role", " ".join(sorted(pa)), " ".join(sorted(pb))
    owned = possessed(a, b) or possessed(b, a)
    if owned is not None:
        return "role", owned, owned.removesuffix("'s")
    return None


# Openings that ask with no subject ("is there a way to protect a sheet"): against one,
# the "I" of "how do I protect a sheet" is whoever asks, no role.
_IMPERSONAL = (["is", "there", "way", "to"], ["how", "to"], ["ways", "to"],
               ["is", "it", "possible", "to"])
_ASKING_I = re.compile(r"(how|what|where|when|why|can|could|should|do) ((do|can|could|"
                       r"should|would) )?i ")


def _unasked(ws: list[str], other: list[str]) -> list[str]:
    """`ws` without the "I" that opens its question ("how do I", "can I") where `other`
    opens with no subject."""
    if not any(other[:len(o)] == o for o in _IMPERSONAL):
        return ws
    opened = _ASKING_I.match(" ".join(ws) + " ")
    if opened is None:
        return ws
    at = len(opened.group(0).split()) - 1
    return ws[:at] + ws[at + 1:]


# Determiners that pick out one thing, and those that take all of a kind; "the" and the
# possessives pick out one thing when their noun is singular ("my policy").
_UNIVERSAL = closed("all every each")
_THIS = closed("this that")
_DEFINITE = _THIS | closed("the my our your his her their")
# What may stand between "all" / "each" and its noun ("all of the", "each of my").
_BEFORE_NOUN = closed("of these those") | (_DEFINITE - _THIS)
_NOT_NOUN = SCOPE | _DEFINITE | closed(
    "of these those a an to in on at for from with by and or but is are was were be do does "
    "did can will should have has had not i we you he she it they me us him them")


def _determined(t: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(determiner, the words after it) for each determiner in `t` (tokens, articles kept):
    up to three content words, its noun among them ("all stopped docker containers")."""
    out = []
    for i, w in enumerate(t):
        if w not in _UNIVERSAL and w not in _DEFINITE:
            continue
        j = i + 1
        while w in _UNIVERSAL and j < len(t) and t[j] in _BEFORE_NOUN:
            j += 1
        run: list[str] = []
        while j < len(t) and len(run) < 3 and t[j].isalpha() and t[j] not in _NOT_NOUN:
            run.append(t[j])
            j += 1
        if run:
            out.append((w, tuple(run)))
    return out


def _one_of(q: str, run: tuple[str, ...], ys: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """The word of `run` (after the universal `q`) that `ys` determines as one thing."""
    # A noun `ys` also takes as all of its kind somewhere is no contrast.
    also_all = {noun for noun in run if any(
        u in _UNIVERSAL and any(same_word(noun, n) for n in ns) for u, ns in ys)}
    for d, other in ys:
        for noun in run:
            same = next((o for o in other if same_word(noun, o)), None)
            if d in _UNIVERSAL or same is None or noun in also_all:
                continue
            one_set = q == "all" and (noun == same or same.endswith("s"))
            if d in _THIS or not one_set:
                return f"{d} {same}"
    return None


def quantifier(asked: str, stored: str) -> tuple[str, str] | None:
    """One noun taken as all of its kind on one side (all, every, each) and as one thing on
    the other ("this antihistamine" / "all antihistamines", "my policy" / "each of the
    policies"); "all my emails" / "my emails" is one set. Any pair, not only minimal
    edits: the determiner and its noun say it wherever they stand."""
    da, db = _determined(tokens(asked)), _determined(tokens(stored))
    for xs, ys, flip in ((da, db, False), (db, da, True)):
        for q, run in xs:
            one = _one_of(q, run, ys) if q in _UNIVERSAL else None
            if one is not None:
                every = f"{q} {' '.join(run)}"
                return (one, every) if flip else (every, one)
    return None
