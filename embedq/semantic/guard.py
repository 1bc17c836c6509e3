"""The contrast guard: two questions one word apart are usually two different questions.

Sentence embeddings score minimal edits as near-duplicates: with all-MiniLM-L6-v2,
"how do I enable two-factor authentication" / "... disable ..." scores 0.88 and "convert a
string to an integer" / "convert an integer to a string" 0.997, above most true
paraphrases. No cosine threshold separates those from paraphrases (README, semantic
cache), so a candidate at or above the threshold is still refused when, compared word by
word (case folded, articles dropped), its query and the asked one

  * differ in exactly one aligned word that is not the same word inflected
    (open/close, monthly/yearly, key/value, Windows/Mac), or
  * hold the same words in another order (string to integer / integer to string).

Rewordings change more than one word ("how do I open an account" / "how to create an
account"), so they pass. A refused near-paraphrase costs a
recomputation; a false hit would have returned a wrong answer: a cache errs towards the
first. The guard is lexical and tuned for English; `EMBEDQ_SEMANTIC_CONTRAST_GUARD=false`
turns it off.
"""

from __future__ import annotations

from collections.abc import Collection

from embedq.semantic.lexicon import misspelt, same_word
from embedq.semantic.numerals import tokens
from embedq.semantic.synonyms import phrase, synonyms
from embedq.semantic.vocabulary import reconcile

ARTICLES = frozenset({"a", "an", "the"})


def words(text: str) -> list[str]:
    """The words of `text` as the checks compare them (numerals.tokens), articles dropped."""
    return [w for w in tokens(text) if w not in ARTICLES]


def stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


_CONJUNCTIONS = frozenset(("and", "but", "or"))
QUESTION_WORDS = frozenset(("why", "how", "when", "where", "what", "which", "who"))
_AUXILIARIES = frozenset(" ".join((
    "is are am was were do does did can could will would shall should may might must has",
    "have had")).split())


def _without(ws: list[str], k: int) -> list[str]:
    return ws[:k] + ws[k + 1:]


def tagged(a: list[str], b: list[str]) -> bool:
    """True when one side opens with a question word and the other ends with it, the
    question asked as a tag ("why was I charged" / "I was charged, why"), the rest the
    same words or the same with one auxiliary on the subject's other side ("was my
    transfer declined" / "my transfer was declined"): a question and its statement form
    ask one thing once the question word is there."""
    if len(a) != len(b) or len(a) < 3:
        return False
    for x, y in ((a, b), (b, a)):
        if x[0] in QUESTION_WORDS and y[-1] == x[0]:
            rx, ry = x[1:], y[:-1]
            if rx == ry:
                return True
            # the verifier's order slot reads singulars: "does" comes as "doe"
            return any((w in _AUXILIARIES or f"{w}s" in _AUXILIARIES)
                       and _without(rx, i) == _without(ry, j)
                       for i, w in enumerate(rx) for j, v in enumerate(ry) if v == w)
    return False


def moved(a: list[str], b: list[str]) -> bool:
    """True when `b` is `a` with one block of two words or more moved past another of two
    words or more ("can I X before Y" / "before Y, can I X"), or with the two sides of an
    "and", "but" or "or" exchanged: a clause fronted, which keeps who does what to whom;
    or a question asked as a tag (`tagged`). Two single words exchanged (string to
    integer / integer to string) is not a move."""
    if tagged(a, b):
        return True
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    j = next((k for k in range(n - i) if a[-1 - k] != b[-1 - k]), n - i)
    ma, mb = a[i:len(a) - j], b[i:len(b) - j]
    if len(ma) != len(mb):
        return False
    if any(ma[k:] + ma[:k] == mb for k in range(2, len(ma) - 1)):
        return True
    # the sides of a conjunction may begin or end with a word both share, which the
    # window of differing words leaves out ("per workspace or per user")
    return any(_exchanged(a[i - p:len(a) - j + q], b[i - p:len(b) - j + q])
               for p in range(min(i, 2) + 1) for q in range(min(j, 2) + 1))


def _exchanged(ma: list[str], mb: list[str]) -> bool:
    """True when `mb` is `ma` with the two sides of an "and", "but" or "or" exchanged."""
    return any(w in _CONJUNCTIONS and [*ma[k + 1:], w, *ma[:k]] == mb
               for k, w in enumerate(ma) if 0 < k < len(ma) - 1)


def contrast(asked: str, stored: str, known: Collection[str] = frozenset()) -> str | None:
    """Why `asked` and `stored` are one word (or one word order) apart, or None. Two
    forms of one word (lexicon.same_word: a spelling, a typo, an abbreviation; and
    lexicon.misspelt against `known`, the model's whole words) are no difference, nor is
    a British / American pair (vocabulary.reconcile: "flat" / "apartment"), nor are two
    WordNet synonyms (synonyms.py: "pills" / "tablets") or phrasal verbs (`_one_lemma`:
    "switch on" / "turn on"), nor is a moved clause (`moved`)."""
    a, b = reconcile(words(asked), words(stored))

    def same(x: str, y: str) -> bool:
        return same_word(x, y) or misspelt(x, y, known) or synonyms(x, y)

    if len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True)):
        return None
    if sorted(a) == sorted(b):
        if moved(a, b):
            return None
        return f"same words reordered: {' '.join(a)!r} vs {' '.join(b)!r}"
    if len(a) != len(b):
        return None
    differing = [k for k, (x, y) in enumerate(zip(a, b, strict=True)) if not same(x, y)]
    if len(differing) != 1 or _one_lemma(a, b, differing[0]):
        return None
    k = differing[0]
    return f"one word apart: {a[k]!r} vs {b[k]!r}"


def _one_lemma(a: list[str], b: list[str], k: int) -> bool:
    """True when the words at `k` make, with the word both share before or after them, two
    WordNet lemmas of one sense: one phrasal verb said with another verb ("switch on" /
    "turn on") or another particle ("fill in" / "fill out"). "Turn on" / "turn off" and
    "log in" / "log out" share none."""
    return any(i >= 0 and i + 2 <= len(a) and a[i + 1 - (i < k)] == b[i + 1 - (i < k)]
               and phrase(a[i:i + 2], b[i:i + 2]) for i in (k - 1, k))


def contrasting(asked: str, stored: str, known: Collection[str] = frozenset()) -> bool:
    """True when `asked` and `stored` are one word (or one word order) apart."""
    return contrast(asked, stored, known) is not None
