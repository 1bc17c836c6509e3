"""English verb forms: which words are past forms or participles, and which forms are one
verb.

The clause checks (roles.py) compare one verb across two texts ("I prune" / "I pruned",
"it makes" / "it made") and tell a perfect's participle from a noun after "have" ("I have
paid" is a perfect, "do I have cover" is not). Regular verbs show it in their ending
(-ed); the irregular ones are the closed class English grammar lists with their past and
participle (`_IRREGULAR`); a form that is also its base ("put", "cut", "read") is no past.
"""

from __future__ import annotations

from functools import lru_cache

from embedq.semantic.lexicon import same_word

# base past participle, for the common irregular verbs of English.
_IRREGULAR = tuple(tuple(entry.split()) for entry in str.split("""
be was been; begin began begun; break broke broken; bring brought brought; build built
built; buy bought bought; catch caught caught; choose chose chosen; come came come; cut
cut cut; do did done; draw drew drawn; drink drank drunk; drive drove driven; eat ate
eaten; fall fell fallen; feel felt felt; find found found; fly flew flown; forget forgot
forgotten; freeze froze frozen; get got got; give gave given; go went gone; grow grew
grown; have had had; hear heard heard; hide hid hidden; hold held held; keep kept kept;
know knew known; lay laid laid; lead led led; leave left left; lend lent lent; let let let;
lose lost lost; make made made; mean meant meant; meet met met; pay paid paid; put put put;
read read read; ride rode ridden; ring rang rung; rise rose risen; run ran run; say said
said; see saw seen; sell sold sold; send sent sent; set set set; shake shook shaken; shut
shut shut; sing sang sung; sit sat sat; sleep slept slept; speak spoke spoken; spend spent
spent; stand stood stood; steal stole stolen; stick stuck stuck; swim swam swum; take took
taken; teach taught taught; tear tore torn; tell told told; think thought thought; throw
threw thrown; understand understood understood; wake woke woken; wear wore worn; win won
won; write wrote written""", ";"))
IRREGULAR = _IRREGULAR
_BASE_OF = {form: base for base, *forms in _IRREGULAR for form in forms}
_PAST_FORMS = frozenset(past for base, past, _ in _IRREGULAR if past != base)
_PARTICIPLES = frozenset(part for base, _, part in _IRREGULAR if part != base)


def _regular(word: str) -> bool:
    return len(word) > 4 and word.endswith("ed") and not word.endswith("eed")


def past_form(word: str) -> bool:
    """True when `word` is a verb's simple past: regular -ed, or an irregular past."""
    return _regular(word) or word in _PAST_FORMS


def participle(word: str) -> bool:
    """True when `word` can be a past participle (after "have" or "be")."""
    return _regular(word) or word in _PARTICIPLES


def _root(word: str) -> str:
    if word in _BASE_OF:
        word = _BASE_OF[word]
    else:
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
    word = word.removesuffix("e")
    return word[:-1] if len(word) > 2 and word[-1] == word[-2] else word


@lru_cache(maxsize=65536)
def same_verb(x: str, y: str) -> bool:
    """One verb in two forms: lexicon.same_word, an irregular form and its base ("made" /
    "makes"), or one root once the inflection, a final "e" and a doubled consonant are
    dropped ("prune" / "pruned", "stop" / "stopped")."""
    return same_word(x, y) or _root(x) == _root(y)
