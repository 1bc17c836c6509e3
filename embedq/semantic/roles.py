"""Who does what, and when: the role and tense slots' checks on clauses, for any pair.

grammar.py's role and tense slots judge minimal edits. Roles and tenses also change in
rewordings that keep few words in order, and a sentence embedding scores those as
paraphrases: "how much notice do I have to give my landlord before moving out" / "how much
notice does my landlord have to give me before I move out" 0.98, "can I cancel a transfer
that is still pending" / "... that has already gone through" 0.90. The checks here read
each clause's subject and verb from how English writes them (an auxiliary before the
subject in a question, after it in a statement; the person of a pronoun; a possessive
before a noun; a perfect or past auxiliary before a verb), not from the words a domain
uses, so they run on every pair:

  agent   (role slot) one verb has a first-person doer on one side (I, we, "for me to")
          and another party on the other (he, she, they, someone, others, or a noun
          phrase: "my landlord", "the tenant"): "I sent money" / "someone sent money". A
          noun phrase may name a thing, not a party ("can my phone receive calls" / "can I
          receive calls on my phone"): one WordNet reads as a person or a body of people
          ("employer", "council"; synonyms.party) is a party, against another each side
          must name the other's doer too ("can my landlord enter ... me" / "can I enter my
          landlord's ..."). Or
          the questions ask two parties about one obligation or ability ("how long do I
          have to report it to my insurer" / "how long does my insurer have to respond").
          A subject before a form of "be" or a passive "get" ("I was charged", "is it
          possible", "do I get paid") does nothing in its clause and is left out.
  owner   (role slot) one noun is owned by the first person on one side (my, our) and by
          another party on the other (his, their, "a network's"): "use another network's
          SIM in my phone" / "use my SIM in another network's phone".
  aspect  (tense slot) the auxiliary that opens both questions is past on one side (did,
          was, were, had, or has / have with a participle after it) and not on the other
          ("when is" / "when was", "do I" / "did I"); or one subject does one verb in the
          past or the perfect on one side and in the present on the other ("my tenancy
          ends" / "my tenancy has ended", "should I prune" / "I pruned"), a present after
          "after" or "once" reading as done ("after it ends" / "once it has ended"); or
          "still" on one side meets "already" on the other.

"You" names no party (a question addresses the service: "can you refund me" / "can I get
a refund"), nor do "it", "this" and "there". What the words alone cannot show is left to
the score: a party named only by its noun on one side ("when will my refund arrive" /
"when do I get my refund" names no second party), a passive's doer, irregular past forms.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from embedq.semantic.grammar import quantifier
from embedq.semantic.lexicon import closed, same_word
from embedq.semantic.numerals import NUMERAL, tokens
from embedq.semantic.synonyms import party
from embedq.semantic.verbs import participle, past_form, same_verb

# The checks, in the order `conflict` runs them: (slot, check); grammar.quantifier first.
CHECKS = (("scope", "quantifier"), ("tense", "aspect"), ("role", "agent"), ("role", "owner"))
FIRST = closed("i we i'm i've i'd i'll we're we've we'd we'll")
_FIRST_ANY = FIRST | closed("me my mine myself us our ours ourselves")
_OTHER = closed("he she they someone somebody others everyone everybody anyone anybody "
                 "nobody he's she's they're they've they'd they'll")
_PRONOUNS = FIRST | _OTHER | closed("me us")
_OWNERS = {"my": "first", "our": "first", "his": "other", "her": "other", "their": "other"}
_BE = closed("am is are was were be been being isn't aren't wasn't weren't")
_DO = closed("do does did don't doesn't didn't")
_HAVE = closed("has have had hasn't haven't hadn't")
_MODAL = closed("can could will would shall should may might must can't cannot couldn't "
                 "won't wouldn't shouldn't mustn't")
_AUX = _BE | _DO | _HAVE | _MODAL
_PAST = closed("did didn't was wasn't were weren't had hadn't")
_GET = closed("get gets got getting gotten")
# Words that stand between a subject and its verb: negators, adverbs of degree and aspect,
# and the "to" of "have to", "need to", "want to", "able to".
# As `tokens` writes them ("still" is "stil"), so "can I still view" finds "view".
_BETWEEN = frozenset(tokens(w)[0] for w in closed(
    "not never only just also even ever still already really actually always usually "
    "often else then yet to"))
_SEMI = closed("need needs needed want wants wanted going able allowed supposed ought "
                "have has had got")
_CONTRACTED = {"'m": "am", "'re": "are", "'ve": "have", "'d": "had", "'ll": "will",
               "'s": "is"}
_WH = closed("what when where why how which who whose whom")
_DETERMINERS = closed("a an the this that these those another other")
# Words that open a clause: a subject may follow.
_OPENERS = closed("if when whenever while because since after before once until so that "
                   "and but or whether")
_FUNCTION = (_AUX | _GET | _BETWEEN | _SEMI | _WH | _DETERMINERS | _OPENERS | _FIRST_ANY
             | _OTHER | frozenset(_OWNERS) | closed(
                 "you your yours it its there here what's of for with at by about as in "
                 "on into onto out off up down from over under than too very please any "
                 "some all each every no none both either neither own me him them us "
                 "without within during through between against per via"))


@dataclass(frozen=True)
class Clause:
    """A subject and the verb it does: `party` first or other; `head` the subject's word
    (its noun for a noun phrase); `chain` the auxiliaries between; `opener` the word before
    the subject where it opens a clause."""

    party: str
    head: str
    verb: str
    chain: tuple[str, ...]
    opener: str
    at: int
    passive: bool
    asks: bool  # the subject follows a question's auxiliary ("do I", "can my landlord")


def _tokens(text: str) -> list[str]:
    return tokens(text.replace("\u2019", "'"))


def _content(word: str) -> bool:
    return word not in _FUNCTION and word.isascii() and word.replace("-", "").isalpha() \
        and not word.endswith("'s") and NUMERAL.fullmatch(word) is None


def _verb(t: list[str], j: int, chain: list[str]) -> tuple[int, list[str]] | None:
    """The main verb after position `j` (past the auxiliaries, negators and "have to"),
    with the chain of words passed, or None where a content word does not follow."""
    while j < len(t) and len(chain) < 6:
        w = t[j]
        ahead = t[j + 1] if j + 1 < len(t) else ""
        if w in _HAVE and not (ahead in ("to", "got", "been") or ahead in _BETWEEN
                               or participle(ahead)):
            return None  # "do I have cover": "have" is the verb
        if w in _AUX or w in _BETWEEN or (w in _SEMI and ahead == "to") or (
                w in _GET and participle(ahead)):
            chain.append(w)
            j += 1
        else:
            break
    if j < len(t) and _content(t[j]):
        return j, chain
    return None


def _clause(t: list[str], k: int, party: str, head: str, verb_from: int,
            chain: list[str]) -> Clause | None:
    """The clause whose subject starts at `k`, its verb found from `verb_from`, or None."""
    found = _verb(t, verb_from, chain)
    if found is None:
        return None
    j, chain = found
    passive = (any(w in _BE for w in chain) and not t[j].endswith("ing")) or any(
        w in _GET for w in chain)
    before = t[k - 1] if k > 0 else ""
    return Clause(party, head, t[j], tuple(chain), before if before in _OPENERS else "",
                  k, passive, before in _AUX)


def clauses(text: str) -> list[Clause]:
    """Each subject of `text` the words show, with its verb, in the text's order."""
    return list(_clauses(text))


@lru_cache(maxsize=16384)
def _clauses(text: str) -> tuple[Clause, ...]:
    t = _tokens(text)
    out: list[Clause] = []
    for k, w in enumerate(t):
        before = t[k - 1] if k else ""
        inverted = [before] if before in _AUX else []
        pronoun = next((c for c in _CONTRACTED if w.endswith(c) and w in FIRST | _OTHER),
                       None)
        if w in FIRST or w in _OTHER:
            chain = [*inverted, *([_CONTRACTED[pronoun]] if pronoun else [])]
            found = _clause(t, k, "first" if w in FIRST else "other", w, k + 1, chain)
        elif w in ("me", "us") and before == "for" and t[k + 1:k + 2] == ["to"]:
            found = _clause(t, k, "first", w, k + 1, [])
        elif (w in _OWNERS or w in _DETERMINERS or w.endswith("'s")) and (
                k == 0 or inverted or before in _OPENERS):
            found = _noun_subject(t, k, inverted)
        else:
            continue
        if found is not None:
            out.append(found)
    return tuple(out)


def _noun_subject(t: list[str], k: int, inverted: list[str]) -> Clause | None:
    """A noun phrase that opens a statement or clause ("my employer has not paid") or
    follows a question's auxiliary ("can my landlord enter"): its run of content words,
    then the auxiliaries and the verb; with no auxiliary, the verb is in the run: its last
    word after an auxiliary (the bare verb: "can my mother fill"), else its first word
    inflected for the present or the past ("my tenancy ends", "my parcel arrived")."""
    run = [t[k].removesuffix("'s")] if t[k].endswith("'s") else []
    j = k + 1
    while j < len(t) and len(run) < 4 and (_content(t[j]) or t[j].endswith("'s")):
        run.append(t[j].removesuffix("'s"))
        j += 1
    ahead = t[j] if j < len(t) else ""
    if run and (ahead in _AUX or ahead in _BETWEEN):
        return _clause(t, k, "other", run[-1], j, list(inverted))
    if len(run) < 2:
        return None
    if inverted:
        at = len(run) - 1
    else:
        at = next((i for i, w in enumerate(run) if i and (
            past_form(w) or (w.endswith("s") and not w.endswith("ss")))), 0)
        if not at:
            return None
    return _clause(t, k, "other", run[at - 1], j - len(run) + at, list(inverted))


def _past(c: Clause) -> bool | None:
    """Whether the clause's verb is past or perfect ("did I get", "has ended", "I
    pruned"); None for a present after "after" or "once", which reads as either ("after it
    ends" / "once it has ended")."""
    chain = list(c.chain)
    if any(w in _PAST for w in chain) or any(
            w in _HAVE and chain[i + 1:i + 2] != ["to"] for i, w in enumerate(chain)):
        return True
    if all(w in _BETWEEN for w in chain) and past_form(c.verb):
        return True
    return None if c.opener in ("after", "once") else False


def _opening(t: list[str]) -> bool | None:
    """Whether the auxiliary that opens the question `t` is past (did, was, were, had);
    None where no auxiliary opens it, or a perfect's has / have does: "has my claim been
    approved" asks what "is my claim approved" asks."""
    at = 0 if t and t[0] in _AUX else None
    if t and t[0] in _WH:
        for j in range(1, min(len(t), 5)):
            if t[j] in _AUX:
                at = j
                break
            if not _content(t[j]) and t[j] not in ("much", "many", "long", "often"):
                break
    if at is None or (t[at] in _HAVE and t[at] not in _PAST):
        return None
    return t[at] in _PAST


# As `tokens` writes them ("still" is spelled as "stil", a doubled final l).
_STILL, _ALREADY = tokens("still")[0], tokens("already")[0]


def _same_subject(a: Clause, b: Clause) -> bool:
    if a.head in FIRST or a.head in _OTHER or b.head in FIRST or b.head in _OTHER:
        return a.party == b.party and (a.head in FIRST) == (b.head in FIRST)
    return same_word(a.head, b.head)


same_subject = _same_subject  # questions.py compares clauses by it


def _asked_when(ta: list[str], tb: list[str]) -> tuple[str, str] | None:
    oa, ob = _opening(ta), _opening(tb)
    if oa is not None and ob is not None and oa != ob:
        return ("past" if oa else "not past"), ("past" if ob else "not past")
    return None


def _done_when(asked: str, stored: str) -> tuple[str, str] | None:
    for a in _doers(clauses(asked)):
        for b in _doers(clauses(stored)):
            pa, pb = _past(a), _past(b)
            if _same_subject(a, b) and same_verb(a.verb, b.verb) and None not in (
                    pa, pb) and pa != pb:
                return " ".join((a.head, *a.chain, a.verb)), " ".join((b.head, *b.chain,
                                                                        b.verb))
    return None


def _still(ta: list[str], tb: list[str]) -> tuple[str, str] | None:
    for x, y in ((_STILL, _ALREADY), (_ALREADY, _STILL)):
        if x in ta and y in tb and x not in tb and y not in ta:
            return ("still", "already") if x == _STILL else ("already", "still")
    return None


def aspect(asked: str, stored: str) -> tuple[str, str] | None:
    """The tense slot's clause check (see the module): the two sides' words, or None."""
    ta, tb = _tokens(asked), _tokens(stored)
    return _asked_when(ta, tb) or _done_when(asked, stored) or _still(ta, tb)


def _doers(cs: list[Clause]) -> list[Clause]:
    return [c for c in cs if not c.passive]


def _asks(text: str) -> Clause | None:
    """The subject of the question's auxiliary, or None (a statement)."""
    return next((c for c in clauses(text) if c.asks), None)


def _names(t: list[str], c: Clause, skip: int) -> bool:
    """True when `t` names `c`'s subject anywhere but at position `skip`."""
    if c.party == "first":
        return any(w in _FIRST_ANY for i, w in enumerate(t) if i != skip)
    if c.head in _OTHER:
        return any(w in _OTHER or w in ("him", "her", "them", "his", "their")
                   for i, w in enumerate(t) if i != skip)
    return any(same_word(w.removesuffix("'s"), c.head) for i, w in enumerate(t)
               if i != skip and (_content(w) or w.endswith("'s")))


def _swapped(a: Clause, b: Clause, ta: list[str], tb: list[str]) -> bool:
    """True when `a` and `b` are different parties: two pronouns of other persons; the
    first person and a noun WordNet reads as a person or a body of people ("I" /
    "my employer", `synonyms.party`); or, where one is another noun phrase (which may name
    a thing, not a party), each side names the other side's subject too ("can my landlord
    enter ... me" / "can I enter my landlord's ...")."""
    if a.party == b.party:
        return False
    if a.head in _PRONOUNS and b.head in _PRONOUNS:
        return True
    if _first_and_party(a, b):
        return True
    return _names(ta, b, a.at) and _names(tb, a, b.at)


def _first_and_party(a: Clause, b: Clause) -> bool:
    """One subject is the first person, the other a noun WordNet reads as a person or a
    body of people (`synonyms.party`)."""
    return (a.head in FIRST and party(b.head)) or (b.head in FIRST and party(a.head))


def agent(asked: str, stored: str) -> tuple[str, str] | None:
    """The role slot's doer check (see the module): the two sides' words, or None."""
    ca, cb = _doers(clauses(asked)), _doers(clauses(stored))
    ta, tb = _tokens(asked), _tokens(stored)
    for a in ca:
        parties_a = {c.party for c in ca if same_verb(c.verb, a.verb)}
        bs = [c for c in cb if same_verb(c.verb, a.verb)]
        if bs and not parties_a & {c.party for c in bs} and _swapped(a, bs[0], ta, tb):
            return f"{a.head} {a.verb}", f"{bs[0].head} {bs[0].verb}"
    qa, qb = _asks(asked), _asks(stored)
    if qa is not None and qb is not None and not (qa.passive or qb.passive) and (
            _frame(qa) and _frame(qa) == _frame(qb)) and _swapped(qa, qb, ta, tb):
        return " ".join((qa.head, *_frame(qa))), " ".join((qb.head, *_frame(qb)))
    if qa is not None and qb is not None and not (qa.passive or qb.passive) and (
            qa.chain[:1] == qb.chain[:1] and qa.chain[:1] and qa.chain[0] in _MODAL) and (
            _first_and_party(qa, qb)):
        return f"{qa.chain[0]} {qa.head} {qa.verb}", f"{qb.chain[0]} {qb.head} {qb.verb}"
    return None


def _frame(c: Clause) -> tuple[str, ...]:
    """The obligation or ability a question asks its subject about ("do I have to",
    "is my landlord allowed to"): its chain past do-support, when it ends in "to"."""
    tail = tuple(w for w in c.chain if w not in _DO)
    return tail if tail[-1:] == ("to",) else ()


@lru_cache(maxsize=16384)
def _owned(text: str) -> tuple[tuple[str, str], ...]:
    """(noun, owner's party) for each noun after a possessive: my, our (first); his, her,
    their, a noun's (other); "your" names the service."""
    t = _tokens(text)
    out = []
    for k, w in enumerate(t):
        bare = w.removesuffix("'s")
        party = _OWNERS.get(w) or ("other" if bare != w and _content(bare) else None)
        if party is None or (party == "other" and k and t[k - 1] in _OWNERS):
            continue
        j = k + 2 if t[k + 1:k + 2] == ["own"] else k + 1
        while j < len(t) and j <= k + 3 and (_content(t[j]) or t[j].endswith("'s")):
            out.append((t[j].removesuffix("'s"), party))
            if t[j].endswith("'s"):
                break  # "my partner's pension": the partner's or mine, the words can't say
            j += 1
    return tuple(out)


def owner(asked: str, stored: str) -> tuple[str, str] | None:
    """The role slot's owner check (see the module): the two sides' words, or None."""
    oa, ob = _owned(asked), _owned(stored)
    for noun, _ in oa:
        pa = {p for n, p in oa if same_word(n, noun)}
        pb = {p for n, p in ob if same_word(n, noun)}
        if pb and not pa & pb:
            return f"{'my' if 'first' in pa else 'their'} {noun}", \
                f"{'my' if 'first' in pb else 'their'} {noun}"
    return None


def conflict(asked: str, stored: str) -> tuple[str, str, str, str] | None:
    """(slot, asked words, stored words, check) of the first check in CHECKS that finds a
    change, or None."""
    for (slot, check), found in zip(CHECKS, (quantifier, aspect, agent, owner), strict=True):
        words = found(asked, stored)
        if words is not None:
            return slot, *words, check
    return None
