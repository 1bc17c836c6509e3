"""Synonyms: two words WordNet lists in one sense ("pills" / "tablets", "detect" /
"find", "build" / "make") are one word to the guard (guard.contrast) and each other's
counterpart in the verifier's content slot (align.lexical), as a spelling, a typo or a
British / American pair is.

Why a lexicon: the model places a synonym and a sibling alike ("change" / "switch" and
"create" / "delete" both near 0.7 embedded alone), so neither the guard (one word apart)
nor the content slot can tell "how do I detect duplicate rows" / "... find ..." from
"... delete ...". WordNet groups words by sense (synsets), written by lexicographers and
fitted to none of the bench's pairs: two words that share a synset are one sense of both;
siblings ("cat" / "dog"), antonyms ("raise" / "lower") and two attributes ("address" /
"name") do not share one. A shared sense makes the pair no conflict of its own; every
other slot (number, negation, order, direction, time, grammar, clause and question
checks) still reads the texts as written.

A verb that is a way of doing another (its direct hypernym: "raise" / "increase";
`kind_of`) is its counterpart where a rewording puts one for the other (align.py), never
to the guard: "pay the fee" / "refund the fee" stay two questions one word apart.

Its database is Debian's `wordnet-base` (WordNet 3.0 in /usr/share/wordnet), which the
set-up installs; `EMBEDQ_SEMANTIC_WORDNET` names another folder of the same files, or
"off". With "auto" (the default) and no database there, no pair is synonymous (fewer
paraphrases found, never more hits) and the process logs it once. Only the index files
are read, on the first pair a process verifies (about 1 s and 30 MB, once per process);
a sense's hypernyms are read from the data file at its offset when a pair asks.

Left out, because a sense shared there is not one question:
  - units: a word with a sense that is a kind of "unit of measurement" or "time unit"
    ("minute" / "second" share "a moment"; "foot", "pound"): the number, unit and time
    slots own those words. A quantity word ("pile" / "heap") is no unit;
  - function words (`_CLOSED`): auxiliaries, pronouns, particles, quantifiers, question
    words ("do" / "make" share a synset, "in" is an inch);
  - phrases of three words or more ("kick the bucket"): single words and two-word lemmas
    ("pass away"; "switch on" / "turn on", with the particle both texts share) are read.
"""

from __future__ import annotations

import logging
import re
import threading
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

AUTO = "auto"
OFF = "off"
DEBIAN = Path("/usr/share/wordnet")
_FILES = (("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r"))
_POS = "nvar"  # _FILES' parts of speech, in order
_VERB = _POS.index("v")
# lexicon.spelling writes "weedkiller" and "travelled" with one l, WordNet with two.
_ONE_L = re.compile(r"([a-z]{3,}[^l])l(ed|ing|er|ers|ery|ment|ments|s)?")
# Lexicographer files of noun senses (WordNet's lexnames): artifacts, groups, persons.
_ARTIFACT, _GROUP, _PERSON = 6, 14, 18
# The synsets whose kinds are units: of measurement (metre, pound) and of time (minute).
_UNIT_ROOTS = ("unit_of_measurement", "time_unit")
# WordNet's detachment rules (its `morphy`): an inflected ending and its base's.
_DETACH = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
          ("shes", "sh"), ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
_CLOSED = frozenset(" ".join((
    "i me my mine you your yours we our us he him his she her it its they them their this that "
    "these those is are was were be been being am do does did done doing can could will would "
    "shall should may might must have has had having get gets got what which who whom whose when "
    "where why how there here then now so very too also just only still already not no yes all "
    "any some each every both either neither more most less least much many few other another "
    "such own same in on at by of off up down out over under into onto from to for with about "
    "as than like near back away again ever well please ok okay one",
)).split())


def _two_words(lemma: str) -> bool:
    """A phrase lemma of two words ("roll_back", "pass_away")."""
    first, _, second = lemma.partition("_")
    return first.isalpha() and second.isalpha()


def _exceptions(path: Path) -> dict[str, list[str]]:
    """An exception list: each irregular form and its bases ("found find")."""
    listed: dict[str, list[str]] = {}
    with open(path, encoding="latin-1") as lines:
        for line in lines:
            if line.strip():
                inflected, *bases = line.split()
                listed.setdefault(inflected, []).extend(bases)
    return listed


def _parts(line: str) -> tuple[str, str, list[str]]:
    """An index line's lemma, part of speech and synset offsets (most frequent first)."""
    fields = line.split()
    pointers = int(fields[3])
    return fields[0], fields[1], fields[6 + pointers:]


class WordNet:
    """WordNet's index read once: each word's (and two-word lemma's) senses shared with
    another, and the exception lists; the data files are read at a sense's offset when
    asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._exceptions = {pos: _exceptions(root / f"{name}.exc") for name, pos in _FILES}
        # Two passes over the index: the senses' counts, then each word's senses shared
        # with another word (a list only for a word that keeps one). A sense is one int
        # (its offset * 4 + its part of speech's place in _POS), all of them in one array;
        # a word keeps where its run starts * 64 + its length.
        # Every verb sense is kept too: `kind_of` reads a verb's own senses' hypernyms.
        shared = Counter(s for _, s in self._read_index())
        kept: dict[str, list[int]] = {}  # a lemma may be a noun and a verb: both
        for lemma, senses in self._read_index(grouped=True):
            mine = [s for s in senses if shared[s] > 1 or s % 4 == _VERB]
            if mine:
                kept.setdefault(lemma, []).extend(mine)
        del shared
        self._unit_roots = frozenset(
            int(o) * 4 for lemma, _, offsets in map(_parts, self._lines("noun"))
            if lemma in _UNIT_ROOTS for o in offsets)
        self._all = array("Q")
        self._at: dict[str, int] = {}
        for lemma, senses in kept.items():
            self._at[lemma] = len(self._all) * 64 + min(len(senses), 63)
            self._all.extend(senses[:63])
        self._lock = threading.Lock()
        self._nouns: tuple[bytes, array[int]] | None = None  # index.noun, read on first use

    def _read_index(self, grouped: bool = False) -> Iterator[Any]:
        """(lemma, sense) for each sense of each lemma of one or two words, or with
        `grouped` (lemma, its senses)."""
        for name, pos in _FILES:
            place = _POS.index(pos)
            for line in self._lines(name):
                lemma, _, offsets = _parts(line)
                if not (lemma.isalpha() or _two_words(lemma)):
                    continue
                senses = [int(o) * 4 + place for o in offsets]
                if grouped:
                    yield lemma, senses
                else:
                    yield from ((lemma, s) for s in senses)

    def _lines(self, name: str) -> Iterator[str]:
        """The lines of index.NAME, its licence's header lines left out."""
        with open(self.root / f"index.{name}", encoding="latin-1") as index:
            yield from (line for line in index if line.strip() and not line.startswith(" "))

    def __len__(self) -> int:
        return len(self._at)

    def _senses(self, lemma: str) -> Sequence[int]:
        at = self._at.get(lemma)
        return () if at is None else self._all[at // 64:at // 64 + at % 64]

    @lru_cache(maxsize=16384)  # noqa: B019 - one WordNet per process, never freed
    def bases(self, word: str, then: str = "") -> frozenset[tuple[str, str]]:
        """The (part of speech, lemma) pairs `word` may inflect (any of WordNet's endings
        or exceptions, either spelling of -ise / -ize and of -l / -ll), those with a kept
        sense; with
        `then`, the two-word lemmas of `word` followed by `then` ("worked out": work_out)."""
        found: set[tuple[str, str]] = set()
        forms = {word, word[:-3] + "ise"} if word.endswith("ize") else {word}
        forms |= {m.expand(r"\1ll\2") for m in [_ONE_L.fullmatch(word)] if m}
        for form in forms:
            for pos, rules in _DETACH.items():
                bases = {form, *self._exceptions[pos].get(form, ())}
                bases |= {form[:-len(end)] + base for end, base in rules
                          if form.endswith(end) and len(form) > len(end) + 1}
                if then:
                    bases = {f"{b}_{then}" for b in bases}
                found |= {(pos, b) for b in bases
                          if any(_POS[s % 4] == pos for s in self._senses(b))}
        return frozenset(found)

    def senses(self, word: str, then: str = "") -> frozenset[int]:
        """The kept senses of `word`'s bases (with `then`, its two-word lemmas): those
        shared with another word, and every verb sense."""
        return frozenset(s for pos, b in self.bases(word, then) for s in self._senses(b)
                         if _POS[s % 4] == pos)

    @lru_cache(maxsize=8192)  # noqa: B019 - one WordNet per process, never freed
    def _synset(self, sense: int) -> tuple[int, tuple[int, ...]]:
        """A sense's lexicographer file and its hypernyms, read at its offset."""
        name = _FILES[sense % 4][0]
        with self._lock, open(self.root / f"data.{name}", "rb") as data:
            data.seek(sense // 4)
            fields = data.readline().split(b" | ")[0].split()
        at = 4 + 2 * int(fields[3], 16)
        pointers = [fields[at + 1 + 4 * i:at + 5 + 4 * i] for i in range(int(fields[at]))]
        up = tuple(int(o) * 4 + _POS.index(p.decode().replace("s", "a"))
                   for sym, o, p, _ in pointers if sym in (b"@", b"@i"))
        return int(fields[1]), up

    @lru_cache(maxsize=8192)  # noqa: B019 - one WordNet per process, never freed
    def _unit(self, sense: int, depth: int = 16) -> bool:
        """True when `sense` is a unit of measurement or of time, or one of its kinds."""
        if sense in self._unit_roots:
            return True
        return depth > 0 and any(self._unit(h, depth - 1) for h in self._synset(sense)[1])

    def _any_unit(self, senses: frozenset[int]) -> bool:
        return any(self._unit(s) for s in senses if s % 4 == 0)  # nouns only

    def measure(self, word: str) -> bool:
        """True when one of `word`'s senses is a unit of measurement or of time
        ("minute", "hour", "metre"), not a quantity word ("pile", "heap")."""
        return self._any_unit(self.senses(word))

    def _apart(self, x: str, y: str) -> bool:
        """True when `x` and `y` are two open-class words, not two forms of one word
        ("stoped" / "stopped": lexicon.py's), the pairs synonyms and kind_of judge."""
        return x != y and x not in _CLOSED and y not in _CLOSED and x.isalpha() and \
            y.isalpha() and not {b for _, b in self.bases(x)} & {b for _, b in self.bases(y)}

    def synonyms(self, x: str, y: str) -> bool:
        """True when `x` and `y` share a sense and neither is a unit."""
        return self._apart(x, y) and bool(self.senses(x) & self.senses(y)) and not (
            self.measure(x) or self.measure(y))

    @lru_cache(maxsize=8192)  # noqa: B019 - one WordNet per process, never freed
    def kind_of(self, x: str, y: str, then: str = "") -> bool:
        """True when a verb sense of one of `x` and `y` (with `then`, the two-word lemma of
        `y` and `then`: "set up") is, in WordNet, a way of doing a verb sense of the other:
        its direct hypernym ("raise" / "increase", "configure" / "set up"). Siblings
        ("increase" / "decrease") and antonyms are not; nor two forms of one verb."""
        if not self._apart(x, y):
            return False
        vx = {s for s in self.senses(x) if s % 4 == _VERB}
        vy = {s for s in self.senses(y, then) if s % 4 == _VERB}
        return any(h in vy for s in vx for h in self._synset(s)[1]) or any(
            h in vx for s in vy for h in self._synset(s)[1])

    @lru_cache(maxsize=8192)  # noqa: B019 - one WordNet per process, never freed
    def party(self, word: str) -> bool:
        """True when `word`'s commonest noun sense names a person or a body of people
        (lexicographer files noun.person, noun.group: "employer", "landlord", "insurer",
        "council") and none of its senses is an artifact ("router" is a woodworker first,
        "network" a group: both also things, so neither is read as a party)."""
        senses = self._noun_senses(word)
        if not senses:
            return False
        files = [self._synset(s)[0] for s in senses]
        return files[0] in (_PERSON, _GROUP) and _ARTIFACT not in files

    def _noun_senses(self, word: str) -> tuple[int, ...]:
        """Every noun sense of `word` or of its singular, commonest first (read from the
        index file's lines, which are sorted, by bisection)."""
        if self._nouns is None:
            with self._lock:
                if self._nouns is None:
                    raw = (self.root / "index.noun").read_bytes()
                    starts = array("L", [0])
                    starts.extend(m.end() for m in re.finditer(rb"\n(?=.)", raw, re.DOTALL))
                    self._nouns = (raw, starts)
        raw, starts = self._nouns
        forms = [word, *self._exceptions["n"].get(word, ()), *(
            word[:-len(end)] + base for end, base in _DETACH["n"]
            if word.endswith(end) and len(word) > len(end) + 1)]
        for form in forms:
            key = form.encode("latin-1", "replace") + b" "
            at = bisect_left(starts, key, key=lambda s: raw[s:s + len(key)])
            if at < len(starts) and raw.startswith(key, starts[at]):
                end = raw.find(b"\n", starts[at])
                line = raw[starts[at]:end if end >= 0 else None]
                _, _, offsets = _parts(line.decode("latin-1"))
                return tuple(int(o) * 4 for o in offsets)
        return ()

    def phrase_synonym(self, phrase: Sequence[str], word: str | Sequence[str]) -> bool:
        """True when `phrase` is a lemma ("pass away") of a sense of `word` ("die", not in
        it) or of another two-word lemma ("switch on" / "turn on"), neither a unit."""
        others = [word] if isinstance(word, str) else list(word)
        if not all(w.isalpha() for w in (*phrase, *others)) or others == list(phrase) or (
                len(others) == 1 and (others[0] in phrase or others[0] in _CLOSED)):
            return False
        lemma, theirs = self.senses(*phrase), self.senses(*others)
        return bool(lemma & theirs) and not (self._any_unit(theirs) or self._any_unit(lemma))


def load(root: Path) -> WordNet:
    """WordNet from `root`; a clear error when its files are not there."""
    missing = [f"index.{n}" for n, _ in _FILES if not (root / f"index.{n}").is_file()]
    if missing:
        raise FileNotFoundError(
            f"no WordNet database in {root} (missing {', '.join(missing)}): install "
            f"Debian's wordnet-base, or set EMBEDQ_SEMANTIC_WORDNET=off to run without "
            f"synonyms")
    return WordNet(root)


_active: dict[str, WordNet | None] = {}
_active_lock = threading.Lock()
_configured = [AUTO]  # what `active` loads when nothing is loaded yet (`configure`)


def configure(setting: str) -> None:
    """Name the WordNet (AUTO, OFF or a folder) this process reads, loaded on the first
    pair that asks (a process that never verifies a candidate never reads it)."""
    with _active_lock:
        _configured[0] = setting
        if _active and setting not in _active:
            _active.clear()


def use(setting: str = AUTO) -> WordNet | None:
    """The process's WordNet for `setting` (AUTO, OFF or a folder), loaded once and used
    by `synonyms` and `phrased` from then on; AUTO without Debian's database is None,
    logged once."""
    with _active_lock:
        if setting not in _active:
            if setting == OFF:
                net = None
            elif setting == AUTO and not (DEBIAN / "index.noun").is_file():
                log.warning("no WordNet database in %s: the semantic cache reads no "
                            "synonyms (install Debian's wordnet-base)", DEBIAN)
                net = None
            else:
                net = load(DEBIAN if setting == AUTO else Path(setting))
            _active.clear()
            _active[setting] = net
        return _active[setting]


def active() -> WordNet | None:
    """The WordNet `use` loaded, or the configured one (AUTO unless `configure` named
    another), loaded now."""
    with _active_lock:
        if _active:
            return next(iter(_active.values()))
        setting = _configured[0]
    return use(setting)


def phrased(word: str, own: Sequence[str], other: Sequence[str]) -> bool:
    """True when `word` and a neighbour of it in `own` are a two-word lemma synonymous
    with a word of `other` ("roll back" / "revert") or with two neighbours there ("switch
    on" / "turn on"), or two neighbours in `other` are one synonymous with `word`; False
    without a WordNet."""
    net = active()
    if net is None:
        return False
    at = [i for i, w in enumerate(own) if w == word]
    mine = [own[i - 1:i + 1] for i in at if i > 0] + [
        own[i:i + 2] for i in at if i + 1 < len(own)]
    pairs = [other[j:j + 2] for j in range(len(other) - 1)]
    return any(net.phrase_synonym(p, o) for p in mine for o in [*other, *pairs]) or any(
        net.phrase_synonym(pair, word) for pair in pairs)


def party(word: str) -> bool:
    """`WordNet.party` in the process's WordNet; False without one."""
    net = active()
    return net is not None and word.isalpha() and net.party(word)


def kind_of(x: str, y: str, then: str = "") -> bool:
    """`WordNet.kind_of` in the process's WordNet; False without one."""
    net = active()
    return net is not None and net.kind_of(x, y, then)


def synonyms(x: str, y: str) -> bool:
    """`WordNet.synonyms` in the process's WordNet (`use`); False without one."""
    net = active()
    return net is not None and net.synonyms(x, y)


def note(a: Sequence[str], b: Sequence[str]) -> str | None:
    """The synonyms (and verbs that are ways of doing others) a pair of word lists is read
    with, for `explain` ("WordNet synonyms: detect / find"), or None."""
    only_a = [w for w in dict.fromkeys(a) if w not in b]
    only_b = [w for w in dict.fromkeys(b) if w not in a]
    found = [f"{x} / {y}" for x in only_a for y in only_b if synonyms(x, y)]
    two_a, two_b = [a[i:i + 2] for i in range(len(a) - 1)], [b[j:j + 2] for j in range(len(b) - 1)]
    found += [f"{' '.join(p)} / {' '.join([y] if isinstance(y, str) else y)}" for p in two_a
              for y in [*only_b, *two_b] if phrase(p, y)]
    found += [f"{x} / {' '.join(q)}" for q in two_b for x in only_a if phrase(q, x)]
    ways = [f"{x} / {y}" for x in only_a for y in only_b if kind_of(x, y)]
    said = ([f"WordNet synonyms: {', '.join(found)}"] if found else []) + (
        [f"one verb a way of doing the other: {', '.join(ways)}"] if ways else [])
    return "; ".join(said) or None


def phrase(phrase: Sequence[str], word: str | Sequence[str]) -> bool:
    """`WordNet.phrase_synonym` in the process's WordNet; False without one."""
    net = active()
    return net is not None and net.phrase_synonym(phrase, word)

