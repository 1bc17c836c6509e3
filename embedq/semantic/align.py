"""Content-word alignment: which replaced words of a minimal edit have no counterpart.

Two queries that keep one sentence frame and replace a few words in it ("turn off the
living room lights" / "... the bedroom lights", "how to remove duplicates from a list" /
"how to find duplicates in a list") ask two things unless every replaced content word
has a counterpart on the other side ("restart" / "reboot", "shipment" / "delivery").

`substitutions` finds the edits: a word alignment (difflib over case-folded, lightly
stemmed words, articles dropped) whose matched words make up at least MIN_FRAME of both
texts (a minimal edit, not a rewording: rewordings keep few words in order and are left
to the score), and whose replaced spans hold content words on both sides. Function words
and the words the lexical slots own (numbers, negators, time words) are not content
words, so "from" / "in" beside "remove" / "find" neither counts as an edit nor hides one.

`unaligned` then asks the model: each replaced content word is embedded alone (one call,
through the cache's embedder, so a word seen before costs a lookup) and matched against
every content word of the other text; a word whose best cosine is below
`min_similarity` has no counterpart. One such word on either side is a conflict: in
"living room" / "bedroom", "bedroom" finds "room" but "living" finds nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from embedq.semantic.guard import stem
from embedq.semantic.lexicon import acronym, misspelt, same_word
from embedq.semantic.synonyms import kind_of, phrase, phrased, synonyms
from embedq.semantic.vocabulary import same_sense

EmbedTexts = Callable[[list[str]], Sequence[npt.NDArray[np.float32]]]

# Share of both texts' words the alignment must match for the pair to be a minimal edit
# (difflib's ratio, 2 * matched / total words), tuned on the tune split.
MIN_FRAME = 0.6
# Cosine of two words embedded alone above which they are counterparts, tuned on the tune
# split: synonyms and inflections score 0.6-0.9 ("int" / "integer" 0.61, "remove" /
# "delete" 0.76); most different nouns and verbs below ("living" / "bedroom").
DEFAULT_MIN_WORD_SIMILARITY = 0.6


@dataclass(frozen=True)
class Substitution:
    """Content words one text has where the other has others, in the same frame."""

    asked: tuple[str, ...]
    stored: tuple[str, ...]
    # For a span one side adds (the other's part empty): the other side's content words
    # the alignment left unmatched, the only ones that can be its counterpart.
    free: tuple[str, ...] = ()


def minimal(asked: list[str], stored: list[str]) -> bool:
    """True when `asked` and `stored` (word lists) keep one frame: a minimal edit."""
    matcher = difflib.SequenceMatcher(a=[stem(w) for w in asked],
                                      b=[stem(w) for w in stored], autojunk=False)
    return matcher.ratio() >= MIN_FRAME


def _squashed(span: Sequence[str]) -> str:
    return "".join(span).replace("-", "")


def substitutions(asked: list[str], stored: list[str],
                  is_content: Callable[[str], bool]) -> list[Substitution]:
    """The content-word substitutions of a minimal edit of `asked` into `stored` (word
    lists, as `guard.words` gives), or [] when the pair is a rewording (frame below
    MIN_FRAME). Spellings that differ only by spaces or hyphens are no substitution."""
    matcher = difflib.SequenceMatcher(a=[stem(w) for w in asked],
                                      b=[stem(w) for w in stored], autojunk=False)
    edits = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    one_span = len(edits) == 1 and all(
        is_content(w) for w in (*asked[edits[0][1]:edits[0][2]],
                                *stored[edits[0][3]:edits[0][4]]))
    if matcher.ratio() < MIN_FRAME and not one_span:
        return []
    free_a = tuple(w for _, i1, i2, _, _ in edits for w in asked[i1:i2] if is_content(w))
    free_b = tuple(w for _, _, _, j1, j2 in edits for w in stored[j1:j2] if is_content(w))
    out = []
    for _, i1, i2, j1, j2 in edits:
        wa = tuple(w for w in asked[i1:i2] if is_content(w))
        wb = tuple(w for w in stored[j1:j2] if is_content(w))
        if (wa or wb) and _squashed(wa) != _squashed(wb):
            out.append(Substitution(wa, wb, free_b if not wb else free_a if not wa else ()))
    return out


def crossed(asked: list[str], stored: list[str]) -> tuple[str, str] | None:
    """Two content words both texts hold (in any form, `lexicon.same_word`) that come in
    the opposite order, or None. Two orders are no crossing: the shared words' sequence
    turned around as a whole (a fronted clause: "X before Y" / "before Y, X", a rotation),
    and two words side by side in either text (a modifier moved: "a list in Python" / "a
    Python list"). Other orders swap who does what ("copy from my machine into the
    container" / "copy from the container to my machine")."""
    order: list[tuple[int, int, str]] = []  # (position in stored, in asked, word)
    taken: set[int] = set()
    for i, word in enumerate(asked):
        j = next((j for j, o in enumerate(stored) if j not in taken and same_word(word, o)),
                 None)
        if j is not None:
            taken.add(j)
            order.append((j, i, word))
    ranks = [j for j, _, _ in order]
    if ranks == sorted(ranks) or any(ranks[k:] + ranks[:k] == sorted(ranks)
                                     for k in range(1, len(ranks))):
        return None
    for x, (jx, ix, wx) in enumerate(order):
        for jy, iy, wy in order[x + 1:]:
            if jy < jx and iy - ix > 1 and jx - jy > 1:
                return f"{wx} {wy}", f"{wy} {wx}"
    return None


def unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def lexical(word: str, own: Sequence[str], other: Sequence[str],
            known: Collection[str] = frozenset()) -> bool:
    """True when `word` (of `own`) has a counterpart in `other` without asking the model:
    the same word (lexicon.same_word: stem, spelling, typo, short form; lexicon.misspelt
    against `known`, the model's whole words), a WordNet synonym (synonyms.py: a word, or
    a two-word lemma with a neighbour, "pass away" / "die"), or an acronym spelled by a run
    of words that holds it (wfh / working from home), either way."""
    if any(same_word(word, o) or misspelt(word, o, known) or synonyms(word, o)
           for o in other) or phrased(word, own, other) or _again(word, own, other):
        return True
    # A hyphenated word is its parts written apart ("mid-tenancy" / "middle of the tenancy").
    parts = [p for o in other if "-" in o for p in o.split("-") if p]
    if any(same_word(word, p) for p in parts) or ("-" in word and all(
            any(same_word(p, o) for o in other) for p in word.split("-") if p)):
        return True
    if 2 <= len(word) <= 10 and any(acronym(word, other[i:j]) for i in range(len(other))
                                   for j in range(i + 2, min(len(other), i + 6) + 1)):
        return True
    short = [o for o in other if 2 <= len(o) <= 10 and o.isalpha()]
    at = [i for i, w in enumerate(own) if w == word] if short else []
    return any(acronym(o, own[i:j]) for o in short for k in at
               for i in range(max(0, k - 5), k + 1) for j in range(k + 1, k + 7)
               if j - i >= 2 and j <= len(own))


def _again(word: str, own: Sequence[str], other: Sequence[str]) -> bool:
    """True when `word` is a verb under "re" and `other` holds the verb and "again"
    ("reapply" / "apply again"), or `word` is that verb or "again" and `other` holds the
    verb under "re"."""
    if word.startswith("re") and "again" in other:
        return any(same_word(word[2:], o) for o in other)
    redone = [o[2:] for o in other if o.startswith("re") and len(o) > 4]
    return "again" in own and any(same_word(v, w) for v in redone for w in own) and (
        word == "again" or any(same_word(v, word) for v in redone))


# Verbs that lend a sentence its verb and little meaning ("make a claim", "get paid",
# "take a dose"): one of them added on one side alone asks nothing the other does not.
# (asked.py's `_LIGHT` is another list: the verbs a "what" question names no act by.)
LIGHT = frozenset(" ".join((
    "make makes made making take takes took taken taking get gets got gotten getting give",
    "gives gave given giving have has had having do does did done doing put puts putting",
)).split())


def reworded(a: Sequence[str], b: Sequence[str]) -> bool:
    """False when word lists `a` and `b` differ in one aligned word alone (the guard's
    "one word apart"): that word is then the question, and only a synonym stands for it
    ("renew" / "replace a passport"); a verb that is a way of doing another ("raise" /
    "increase") is its counterpart where the asker reworded more than the verb."""
    return len(a) != len(b) or sum(x != y for x, y in zip(a, b, strict=True)) != 1


# The particles of English's two-word verbs ("set up", "hand in"), as WordNet lists them.
_PARTICLES = frozenset(("up", "in", "out", "off", "on", "down", "back", "over", "away"))


def _then(word: str, frame: Sequence[str]) -> str:
    """The particle after `word`'s first place in `frame` ("set up"), or ""."""
    at = list(frame).index(word) if word in frame else len(frame)
    return frame[at + 1] if at + 1 < len(frame) and frame[at + 1] in _PARTICLES else ""


def _ways(x: str, y: str, fa: Sequence[str], fb: Sequence[str]) -> bool:
    """True when verb `x` (of word list `fa`) is a way of doing `y` (of `fb`) or the other
    way round, each read alone or with the particle after it ("configure" / "set up")."""
    return kind_of(x, y) or any(kind_of(p, q, t) for p, q, t in (
        (x, y, _then(y, fb)), (y, x, _then(x, fa))) if t)


def _phrasal(x: str, y: str, fa: Sequence[str], fb: Sequence[str]) -> bool:
    """True when verbs `x` and `y`, each with the same particle after it, are two WordNet
    lemmas of one sense ("switch on" / "turn on"; "turn on" / "turn off" share none)."""
    t = _then(x, fa)
    return bool(t) and t == _then(y, fb) and phrase((x, t), (y, t))


def unaligned(subs: list[Substitution], asked: list[str], stored: list[str],
              embed: EmbedTexts, min_similarity: float,
              frames: tuple[list[str], list[str]] | None = None,
              known: Collection[str] = frozenset()) -> tuple[str, str] | None:
    """The first substitution with a word that has no counterpart among the other text's
    content words (`asked`, `stored`), as its two spans; None when every word has one.
    A word the other text holds in another form (`lexical`, against `frames`: the texts'
    whole word lists, default the content words; `known`: the model's whole words) is its
    own counterpart, and so is one verb put for another it is a way of doing
    (synonyms.kind_of) in a rewording (`reworded`); a span added on one side only (an
    inserted qualifier) is judged the same way, but for light verbs alone (`LIGHT`)."""
    if not subs:
        return None
    fa, fb = frames or (asked, stored)
    vocabulary = sorted({w for s in subs for w in (*s.asked, *s.stored)}
                        | set(asked) | set(stored))
    at: dict[str, npt.NDArray[np.float32]] = {}

    def orphan(word: str, own: list[str], other_frame: list[str],
               other: Sequence[str]) -> bool:
        if lexical(word, own, other_frame, known):
            return False
        if not other:
            return True
        if not at:
            at.update({w: unit(v) for w, v in zip(vocabulary, embed(vocabulary),
                                                     strict=True)})
        return all(float(at[word] @ at[o]) < min_similarity for o in other)

    ways = reworded(fa, fb)
    for s in subs:
        if ways and len(s.asked) == len(s.stored) == 1 and _ways(s.asked[0], s.stored[0],
                                                                 fa, fb):
            continue  # one verb a way of doing the other, put in its place
        if not (s.asked and s.stored) and all(w in LIGHT for w in (*s.asked, *s.stored)):
            continue  # "do I get paid" / "will I be paid": a light verb, no content
        against_b = s.free if not s.stored else stored
        against_a = s.free if not s.asked else asked
        if any(orphan(w, fa, fb, against_b) for w in s.asked) or any(
                orphan(w, fb, fa, against_a) for w in s.stored):
            return " ".join(s.asked), " ".join(s.stored)
    return None


def disjoint(asked: list[str], stored: list[str], embed: EmbedTexts,
             min_similarity: float) -> bool:
    """True when no content word of `asked` has a counterpart among `stored`'s (the same
    word in any form, `lexical`, or a cosine of the words embedded alone at or above
    `min_similarity`): the two texts then share a frame of function words at most ("how
    can I ..."), and whatever their score, they ask about different things. False when
    either side has no content word (nothing to compare)."""
    if not asked or not stored:
        return False
    if any(lexical(a, asked, stored) for a in asked):
        return False
    vocabulary = sorted(set(asked) | set(stored))
    at = {w: unit(v) for w, v in zip(vocabulary, embed(vocabulary), strict=True)}
    return all(float(at[a] @ at[b]) < min_similarity for a in asked for b in stored)


def _similarities(words: Sequence[str], embed: EmbedTexts) -> dict[tuple[str, str], float]:
    vocabulary = sorted(set(words))
    at = {w: unit(v) for w, v in zip(vocabulary, embed(vocabulary), strict=True)}
    return {(x, y): float(at[x] @ at[y]) for x in vocabulary for y in vocabulary}


def swapped(subs: list[Substitution], embed: EmbedTexts,
            min_similarity: float) -> tuple[str, str] | None:
    """Two one-word substitutions of a minimal edit whose words trade places: each asked
    word is closer to the other substitution's stored word than to its own ("a new puppy
    to my older cat" / "a new kitten to my older dog": puppy is nearer dog, cat nearer
    kitten). The frame is kept and its two arguments exchanged for their counterparts,
    which `crossed` cannot see (it matches the same words only), and each word still has a
    counterpart, which the content slot asks. None when no two substitutions cross."""
    ones = [s for s in subs if len(s.asked) == 1 and len(s.stored) == 1]
    if len(ones) < 2:
        return None
    sim = _similarities([w for s in ones for w in (*s.asked, *s.stored)], embed)
    for i, x in enumerate(ones):
        for y in ones[i + 1:]:
            (ax,), (bx,), (ay,), (by,) = x.asked, x.stored, y.asked, y.stored
            if min(sim[ax, by], sim[ay, bx]) >= min_similarity and sim[ax, by] > sim[
                    ax, bx] and sim[ay, bx] > sim[ay, by]:
                return f"{ax} {ay}", f"{bx} {by}"
    return None


# Words that ask for a thing by its noun: "how many connections", "what paint finish".
_HOW = frozenset(("many", "much"))
_WHAT = frozenset(("what", "which"))


def asked_nouns(words: Sequence[str], is_content: Callable[[str], bool]) -> list[str]:
    """The noun phrase a question asks about, where its question word names it: the
    content words (up to four) after "how many" / "how much", or after an opening "what"
    / "which" ("what paint finish"), with what a measure is of ("how many hours of
    sleep" asks about sleep too); [] where the question word asks of a verb ("how much
    does it cost", "what causes ...")."""
    start = 1 if len(words) > 1 and words[0] in _WHAT else None
    for i in range(len(words) - 1):
        if words[i] == "how" and words[i + 1] in _HOW:
            start = i + 2
            break
    if start is None:
        return []
    run: list[str] = []
    at = start
    while at < len(words) and len(run) < 4:
        if is_content(words[at]):
            run.append(words[at])
        elif not (run and words[at] == "of"):  # a measure of a thing: "hours of sleep"
            break
        at += 1
    return run if at < len(words) else []


def attribute(asked: list[str], stored: list[str], is_content: Callable[[str], bool],
              embed: EmbedTexts, min_similarity: float) -> tuple[str, str] | None:
    """Both questions ask for a thing by its noun ("how many connections" / "how much
    memory", "what is the price" is no such noun) and no word of one noun phrase has a
    counterpart in the other's (the same word in any form, or embedded alone at or above
    `min_similarity`): they ask for two properties, however much of the rest they share
    ("... can Postgres handle" / "... does each Postgres connection use"). A question that
    asks with a verb or another question word ("how long", "when") is left to the other
    slots: "how many days" and "when" can ask one thing."""
    na, nb = asked_nouns(asked, is_content), asked_nouns(stored, is_content)
    if not na or not nb or any(lexical(w, na, nb) for w in na):
        return None
    sim = _similarities([*na, *nb], embed)
    if all(sim[x, y] < min_similarity for x in na for y in nb):
        return " ".join(na), " ".join(nb)
    return None


def other_act(verbs: tuple[str, str], embed: EmbedTexts, min_similarity: float,
              ways: bool = True, frames: tuple[Sequence[str], Sequence[str]] = ((), ())
              ) -> tuple[str, str] | None:
    """The main verbs of two questions that ask one subject the same thing ("can my
    manager refuse ..." / "can my manager force ..."), or None when they are counterparts
    (embedded alone at or above `min_similarity`): with the subject and the question kept,
    the verb is what is asked about, and two acts are two questions. With `ways` (the
    questions are reworded), one verb a way of doing the other is one act too (`frames`:
    the two word lists, where a verb's particle is read: "set up")."""
    x, y = verbs
    if same_sense(x, y) or synonyms(x, y) or _phrasal(x, y, *frames) or (
            ways and _ways(x, y, *frames)):
        return None
    sim = _similarities([x, y], embed)
    return (x, y) if sim[x, y] < min_similarity else None
