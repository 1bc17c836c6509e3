"""WordNet synonyms in the guard and the content slot (semantic/synonyms.py).

The reader is tested twice: on a WordNet folder written here (index, exception and data
lines in WordNet's own format, so each rule's logic is checked whatever is installed), and
on Debian's wordnet-base, which `make test` installs (absent: skipped on a laptop, a
failure with CI set). The sentence pairs are written for these tests, none from the
labelled splits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedq.config import Settings
from embedq.encoders.hashing import HashingEncoder
from embedq.errors import ConfigError
from embedq.semantic import synonyms
from embedq.semantic.align import Substitution, lexical, other_act, unaligned
from embedq.semantic.grammar import past
from embedq.semantic.guard import contrast
from embedq.semantic.lexicon import spelling
from embedq.semantic.lookup import refusal
from embedq.semantic.numerals import tokens
from embedq.semantic.store import Entry, utcnow
from embedq.semantic.synonyms import DEBIAN, WordNet, load
from embedq.semantic.verify import Check, Verifier
from tests.support import require


@pytest.fixture
def restore_wordnet() -> Iterator[None]:
    """`use` is process-wide: put back what the process had."""
    saved, configured = dict(synonyms._active), synonyms._configured[0]
    yield
    with synonyms._active_lock:
        synonyms._active.clear()
        synonyms._active.update(saved)
        synonyms._configured[0] = configured


# A synset as the fixture writes it: lexicographer file, words, and the places (in the
# same list) of its hypernyms.
Synset = tuple[int, list[str], tuple[int, ...]]


def _data_line(synset: Synset, pos: str, offsets: list[int], at: int) -> str:
    """offset, lex_filenum, ss_type, w_cnt (hex), word lex_id ..., p_cnt, pointers, gloss
    (offsets 8 digits wide, so a line's length does not depend on them)."""
    lexfile, words, up = synset
    listed = " ".join(f"{w} 0" for w in words)
    pointers = "".join(f" @ {offsets[h]:08d} {pos} 0000" for h in up)
    return (f"{at:08d} {lexfile:02d} {pos} {len(words):02x} {listed} {len(up):03d}"
            f"{pointers} | a gloss  \n")


def _write(root: Path, name: str, pos: str, synsets: list[Synset],
           exceptions: str = "") -> None:
    """data.NAME with the synsets at their real byte offsets, index.NAME listing each
    word's synsets, NAME.exc with `exceptions`."""
    header = "  1 This is a header line of a WordNet data file.\n"
    offsets, at = [], len(header)
    for synset in synsets:  # the lengths first: every offset is 8 digits
        offsets.append(at)
        at += len(_data_line(synset, pos, [0] * len(synsets), 0).encode("latin-1"))
    data = header + "".join(_data_line(x, pos, offsets, offsets[i])
                            for i, x in enumerate(synsets))
    index: dict[str, list[int]] = {}
    for (_, words, _), offset in zip(synsets, offsets, strict=True):
        for w in words:
            index.setdefault(w, []).append(offset)
    (root / f"data.{name}").write_text(data, encoding="latin-1")
    lines = [f"{w} {pos} {len(o)} 0 {len(o)} 0 " + " ".join(f"{x:08d}" for x in o)
             for w, o in sorted(index.items())]
    (root / f"index.{name}").write_text(header + "\n".join(lines) + "\n", encoding="latin-1")
    (root / f"{name}.exc").write_text(exceptions, encoding="latin-1")


@pytest.fixture
def small(tmp_path: Path) -> WordNet:
    _write(tmp_path, "noun", "n", [
        (6, ["pill", "tablet"], ()), (28, ["time_unit", "unit_of_time"], ()),
        (28, ["minute", "min"], (1,)), (28, ["second", "sec"], (1,)),
        (28, ["hour", "hr"], (1,)),
        (28, ["minute", "moment", "second"], ()),  # "an indefinitely short time"
        (7, ["hour", "minute"], ()),  # "distance measured by the time taken"
        (23, ["pile", "heap"], ()),  # "a large number or amount": no unit
        (5, ["cat"], ()), (5, ["dog"], ()), (6, ["mouse", "mice"], ()),
        (4, ["find", "discovery"], ()),
        (18, ["employer"], ()), (14, ["council"], ()),  # a person; a body of people
        (18, ["router"], ()), (6, ["router"], ())],  # a woodworker first, also a device
        exceptions="mice mouse\n")
    _write(tmp_path, "verb", "v", [
        (31, ["find", "detect"], ()), (36, ["do", "make"], ()),
        (30, ["die", "pass_away"], ()), (30, ["pass", "elapse"], ()),
        # verbs of one lemma each: "raise" is a way to "increase", both of "change" ways
        (30, ["change"], ()), (30, ["increase"], (4,)), (30, ["decrease"], (4,)),
        (30, ["raise"], (5,)), (30, ["set_up"], ()), (30, ["configure"], (8,)),
        (30, ["switch_on", "turn_on"], ()), (30, ["switch_off", "turn_off"], ())],
        exceptions="found find\n")
    _write(tmp_path, "adj", "a", [])
    _write(tmp_path, "adv", "r", [])
    return load(tmp_path)


def test_words_of_one_sense_are_synonyms_in_any_inflection(small: WordNet) -> None:
    assert small.synonyms("pill", "tablet")
    assert small.synonyms("pills", "tablets")  # detached -s
    assert small.synonyms("detected", "found")  # -ed, and the exception list's "found"
    assert small.synonyms("finds", "detecting")
    assert small.synonyms("find", "discovery")  # a noun sense of a word that is a verb too


def test_siblings_measures_and_function_words_are_not(small: WordNet) -> None:
    assert not small.synonyms("cat", "dog")  # two synsets, no shared sense
    assert not small.synonyms("pill", "pill")  # the same word is no pair
    assert not small.synonyms("pills", "pill")  # nor two forms of it
    # "minute" / "hour" and "minute" / "second" share senses, but each is a unit of time:
    # the unit and time slots own them; a quantity word is no unit
    assert small.measure("minutes") and small.measure("hour")
    assert not small.synonyms("minute", "hour")
    assert not small.synonyms("minutes", "seconds")
    assert not small.measure("pile") and small.synonyms("pile", "heap")
    assert not small.synonyms("do", "make")  # a function word
    assert not small.synonyms("pill", "tab-let")  # not a word


def test_a_two_word_lemma_is_a_synonym_of_one_word(small: WordNet) -> None:
    assert small.phrase_synonym(("pass", "away"), "die")
    assert small.phrase_synonym(("passed", "away"), "died")  # the first word inflects
    assert not small.phrase_synonym(("pass", "away"), "elapse")  # "pass" alone is
    assert not small.phrase_synonym(("pass", "away"), "pass")


def test_two_two_word_lemmas_of_one_sense_are_synonyms(small: WordNet) -> None:
    assert small.phrase_synonym(("switch", "on"), ("turn", "on"))
    assert small.phrase_synonym(("switched", "on"), ("turning", "on"))
    assert not small.phrase_synonym(("turn", "on"), ("turn", "off"))  # two senses
    assert not small.phrase_synonym(("turn", "on"), ("turn", "on"))  # one lemma is no pair


def test_the_content_slot_reads_synonyms_and_phrases_as_counterparts(
        restore_wordnet: None, small: WordNet) -> None:
    synonyms.use(str(small.root))
    assert lexical("detected", ["i", "detected", "leak"], ["i", "found", "leak"])
    assert lexical("died", ["when", "he", "died"], ["when", "he", "passed", "away"])
    assert lexical("passed", ["when", "he", "passed", "away"], ["when", "he", "died"])
    assert not lexical("elapsed", ["time", "elapsed"], ["time", "died"])
    synonyms.use(synonyms.OFF)
    assert not lexical("detected", ["i", "detected", "leak"], ["i", "found", "leak"])


def test_the_act_check_reads_synonyms_as_one_act(restore_wordnet: None,
                                                 small: WordNet) -> None:
    # "can I detect it" / "can I find it" ask one subject one act; the hashing encoder
    # places the two verbs apart, so only the lexicon can say so
    def encode(texts: list[str]) -> list[np.ndarray]:
        return list(HashingEncoder().encode(texts))

    synonyms.use(str(small.root))
    assert other_act(("detected", "found"), encode, 0.5) is None
    synonyms.use(synonyms.OFF)
    assert other_act(("detected", "found"), encode, 0.5) == ("detected", "found")


def test_the_act_check_reads_two_phrasal_verbs_of_one_sense_as_one_act(
        restore_wordnet: None, small: WordNet) -> None:
    def encode(texts: list[str]) -> list[np.ndarray]:
        return list(HashingEncoder().encode(texts))

    def frame(verb: str, particle: str) -> list[str]:
        return ["how", "do", "i", verb, particle, "subtitles"]

    synonyms.use(str(small.root))
    assert other_act(("switch", "turn"), encode, 0.5,
                     frames=(frame("switch", "on"), frame("turn", "on"))) is None
    # another particle on one side is another lemma: "switch on" / "turn off"
    assert other_act(("switch", "turn"), encode, 0.5,
                     frames=(frame("switch", "on"), frame("turn", "off"))) == (
        "switch", "turn")


def test_explain_names_the_synonyms_a_hit_was_read_with(restore_wordnet: None,
                                                        small: WordNet) -> None:
    synonyms.use(str(small.root))
    now = utcnow()
    stored = Entry(id=1, namespace="ns", query="can I take two tablets a day", payload=None,
                   metadata={}, created_at=now, expires_at=None, hit_count=0,
                   last_hit_at=None)
    trace: list[Check] = []
    verifier = Verifier(lambda texts: list(HashingEncoder().encode(texts)))
    assert refusal("can I take two pills a day", stored, 0.9, 0.62, None, guard=True,
                   verifier=verifier, trace=trace) == (None, None)
    checks = {c.name: c for c in trace}
    assert checks["guard"] == Check("guard", "pass", "WordNet synonyms: pills / tablets")
    assert checks["content"] == Check("content", "pass", "WordNet synonyms: pills / tablets")
    synonyms.use(synonyms.OFF)
    assert refusal("can I take two pills a day", stored, 0.9, 0.62, None, guard=True,
                   verifier=verifier)[0] == "guard"


def test_a_verb_is_a_kind_of_the_verb_it_is_a_way_of_doing(small: WordNet) -> None:
    assert small.kind_of("raise", "increase") and small.kind_of("increase", "raise")
    assert small.kind_of("raised", "increases")  # in any inflection
    assert small.kind_of("decrease", "change")
    assert not small.kind_of("increase", "decrease")  # siblings: two ways to change
    assert not small.kind_of("raise", "change")  # a way of a way: two steps up
    assert not small.kind_of("raise", "raised")  # two forms of one verb
    assert not small.kind_of("pill", "tablet")  # nouns
    assert not small.synonyms("raise", "increase")  # no sense shared


def test_the_content_slot_and_the_act_check_read_a_way_of_doing_as_counterpart(
        restore_wordnet: None, small: WordNet) -> None:
    def encode(texts: list[str]) -> list[np.ndarray]:
        return list(HashingEncoder().encode(texts))

    one_for_one = [Substitution(("raise",), ("increase",))]
    asked, stored = ["landlord", "raise", "rent"], ["landlord", "increase", "rent"]
    # the whole questions: reworded ("can my landlord raise the rent" / "is my landlord
    # allowed to increase the rent"), and one word apart
    reworded = (["can", "my", "landlord", "raise", "rent"],
                ["is", "my", "landlord", "allowed", "to", "increase", "rent"])
    one_apart = (["can", "my", "landlord", "raise", "rent"],
                 ["can", "my", "landlord", "increase", "rent"])
    synonyms.use(str(small.root))
    assert unaligned(one_for_one, asked, stored, encode, 0.99, frames=reworded) is None
    assert other_act(("raised", "increased"), encode, 0.99) is None
    # one word apart, the verb is the question: a synonym only stands for it
    assert unaligned(one_for_one, asked, stored, encode, 0.99, frames=one_apart) == (
        "raise", "increase")
    assert other_act(("raised", "increased"), encode, 0.99, ways=False) == (
        "raised", "increased")
    assert unaligned([Substitution(("decrease",), ("increase",))], ["decrease", "rent"],
                     ["increase", "rent"], encode, 0.99, frames=reworded) == (
        "decrease", "increase")  # siblings
    # a verb with a word added is no one-for-one substitution
    assert unaligned([Substitution(("raise", "fee"), ("increase",))], [*asked, "fee"],
                     stored, encode, 0.99, frames=reworded) == ("raise fee", "increase")
    assert synonyms.note(asked, stored) == (
        "one verb a way of doing the other: raise / increase")
    # a two-word verb is read with its particle: "configure" is a way to "set up"
    set_up = [Substitution(("configure",), ("set",))]
    assert unaligned(set_up, ["configure", "voicemail"], ["set", "voicemail"], encode, 0.99,
                     frames=(["how", "can", "i", "configure", "voicemail"],
                             ["how", "do", "i", "set", "up", "voicemail"])) is None
    assert unaligned(set_up, ["configure", "voicemail"], ["set", "voicemail"], encode, 0.99,
                     frames=(["how", "can", "i", "configure", "voicemail"],
                             ["how", "do", "i", "set", "voicemail", "up"])) == (
        "configure", "set")  # "set" alone is no way of configuring
    assert other_act(("configure", "set"), encode, 0.99, True,
                     (["configure", "voicemail"], ["set", "up", "voicemail"])) is None
    synonyms.use(synonyms.OFF)
    assert unaligned(one_for_one, asked, stored, encode, 0.99, frames=reworded) == (
        "raise", "increase")
    assert other_act(("raised", "increased"), encode, 0.99) == ("raised", "increased")


def test_a_party_is_a_person_or_a_body_of_people_and_never_a_thing(small: WordNet) -> None:
    assert small.party("employer") and small.party("employers") and small.party("council")
    assert not small.party("router")  # also an artifact: "can my router ..." names a thing
    assert not small.party("pill") and not small.party("cat")
    assert not small.party("landlord")  # not in this WordNet at all


def test_a_folder_without_wordnet_is_named_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no WordNet database .*wordnet-base.*off"):
        load(tmp_path)
    env = {**os.environ, "EMBEDQ_SEMANTIC_WORDNET": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"EMBEDQ_SEMANTIC_WORDNET=.*no WordNet database"):
        Settings.from_env(env)
    assert Settings.from_env({**env, "EMBEDQ_SEMANTIC_WORDNET": "off"}).semantic.wordnet == "off"


def test_off_reads_no_synonyms(restore_wordnet: None, small: WordNet) -> None:
    assert synonyms.use(synonyms.OFF) is None
    assert not synonyms.synonyms("pills", "tablets")
    assert contrast("can I take two pills a day", "can I take two tablets a day") is not None
    synonyms.use(str(small.root))
    assert synonyms.synonyms("pills", "tablets")
    assert contrast("can I take two pills a day", "can I take two tablets a day") is None


def test_a_configured_wordnet_is_read_on_the_first_pair_that_asks(
        restore_wordnet: None, small: WordNet) -> None:
    synonyms.configure(str(small.root))
    assert not synonyms._active  # configuring reads nothing
    assert synonyms.synonyms("pills", "tablets")  # the first pair reads the small one
    assert synonyms.active() is not None and synonyms.active().root == small.root
    synonyms.configure(synonyms.OFF)
    assert not synonyms.synonyms("pills", "tablets")


def _debian() -> WordNet:
    if not (DEBIAN / "index.noun").is_file():
        require("Debian's wordnet-base (make wordnet)", FileNotFoundError(DEBIAN))
    net = synonyms.use(synonyms.AUTO)
    assert net is not None
    return net


def test_debian_wordnet_tells_synonyms_from_siblings_and_opposites(
        restore_wordnet: None) -> None:
    net = _debian()
    for x, y in (("pills", "tablets"), ("detect", "find"), ("build", "make"),
                 ("mistake", "error"), ("exterior", "outside"), ("pile", "heap")):
        assert net.synonyms(x, y), (x, y)
    # the comparison's spelling (lexicon.spelling: one l) is looked up with WordNet's two
    assert net.synonyms(spelling("weedkiller"), "herbicide")
    assert net.synonyms(spelling("travelled"), "journeyed")
    assert net.phrase_synonym(("pass", "away"), "die")
    assert net.phrase_synonym(("worked", "out"), "calculated")
    for x, y in (("create", "delete"), ("cat", "dog"), ("raise", "lower"),
                 ("address", "name"), ("minutes", "hours"), ("seconds", "minutes"),
                 ("foot", "metre"), ("pound", "kilo"),
                 ("upgrade", "downgrade"), ("read", "write"), ("train", "plane")):
        assert not net.synonyms(x, y), (x, y)
    for x, y in (("raise", "increase"), ("disclose", "tell"), ("wrap", "cover"),
                 ("delete", "remove"), ("prevent", "stop")):
        assert net.kind_of(x, y), (x, y)
    assert net.kind_of("configure", "set", "up") and not net.kind_of("configure", "set")
    for x, y in (("increase", "decrease"), ("open", "close"), ("buy", "sell"),
                 ("send", "receive"), ("upload", "download"), ("lend", "borrow"),
                 ("start", "stop"), ("import", "export"), ("cancel", "pause")):
        assert not net.kind_of(x, y), (x, y)
    for word in ("employer", "landlord", "insurer", "tenants", "council", "company"):
        assert net.party(word), word
    for word in ("router", "phone", "network", "policy", "flight", "bank", "app"):
        assert not net.party(word), word


def test_the_guard_lets_a_synonym_through_and_still_refuses_a_sibling(
        restore_wordnet: None) -> None:
    _debian()
    assert contrast("how do I detect duplicate rows in a sheet",
                    "how do I find duplicate rows in a sheet") is None
    assert contrast("how do I delete duplicate rows in a sheet",
                    "how do I find duplicate rows in a sheet") == (
        "one word apart: 'delete' vs 'find'")


def test_the_guard_still_refuses_a_verb_put_for_a_way_of_doing_it(
        restore_wordnet: None) -> None:
    # one word apart, "refund" a way to "pay": the guard reads no kind_of, only synonyms
    net = _debian()
    assert net.kind_of("refund", "pay")
    assert contrast("how do I refund the booking fee", "how do I pay the booking fee") == (
        "one word apart: 'refund' vs 'pay'")


def test_the_guard_lets_one_phrasal_verb_said_another_way_through(
        restore_wordnet: None) -> None:
    # one word apart, but with the particle both share, two lemmas of one sense
    _debian()
    assert contrast("how do I switch on subtitles", "how do I turn on subtitles") is None
    # and `explain` names them
    said = synonyms.note(["how", "do", "i", "switch", "on", "subtitles"],
                         ["how", "do", "i", "turn", "on", "subtitles"])
    assert said is not None and said.startswith("WordNet synonyms: switch on / turn on;")
    for asked, stored, why in (
            ("how do I turn on subtitles", "how do I turn off subtitles", "'on' vs 'off'"),
            ("how do I log in", "how do I log out", "'in' vs 'out'"),
            ("how do I sign up", "how do I sign in", "'up' vs 'in'"),
            ("how do I turn up the heating", "how do I turn down the heating",
             "'up' vs 'down'")):
        assert contrast(asked, stored) == f"one word apart: {why}", (asked, stored)


def test_a_participle_is_a_verbs_inflection_where_wordnet_is_read(
        restore_wordnet: None) -> None:
    # "has brown patches" owns them: "brown" ends as "shown" does, but is no inflection
    _debian()
    assert not past(tokens("my lawn has brown patches after the dog wees on it"))
    assert not past(tokens("my flat has kitchen appliances included"))
    assert past(tokens("has the parcel shown up yet"))
    assert past(tokens("has my claim for the stolen bike been accepted"))
    assert past(tokens("my card has broken"))
    synonyms.use(synonyms.OFF)  # without WordNet, the ending alone
    assert past(tokens("my lawn has brown patches after the dog wees on it"))
