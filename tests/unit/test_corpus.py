"""The bundled corpus: everything it reads ships in the package, and the held-out split
shares nothing with the split that tests and tuning use."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import embedq
from embedq import corpus
from embedq.errors import ConfigError

PACKAGE = Path(embedq.__file__).resolve().parent
# sha256 over "id\ttext\n" of each line of the former embedq/data/debian-2000.jsonl.gz.
DEMO_SLICE_SHA256 = "2261176c7125d21e2cdf31642bb1d148d9cbd8044780ff78969a0292b17fc01b"


@pytest.mark.parametrize("split", ["tune", "heldout"])
def test_every_default_path_is_a_file_inside_the_package(split: corpus.Split) -> None:
    path = corpus.default_path(split).resolve()
    assert path.is_relative_to(PACKAGE)
    assert path.is_file()


def test_the_splits_are_all_the_paths_there_are() -> None:
    assert set(corpus.SPLITS) == {"tune", "heldout"}
    assert all(p.resolve().is_relative_to(PACKAGE) for p in corpus.SPLITS.values())


def test_an_unknown_split_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="tune, heldout"):
        corpus.default_path("train")  # type: ignore[arg-type]


def test_heldout_and_tune_share_no_id_and_no_text() -> None:
    tune = list(corpus.iter_corpus(split="tune"))
    heldout = list(corpus.iter_corpus(split="heldout"))
    assert (len(tune), len(heldout)) == (8000, 2000)
    assert not {i for i, _ in tune} & {i for i, _ in heldout}
    assert not {t for _, t in tune} & {t for _, t in heldout}


def test_the_first_2000_tune_lines_are_the_former_demo_slice() -> None:
    # `make demo` and older figures used these 2,000 lines: they must not drift.
    digest = hashlib.sha256()
    for pid, text in corpus.iter_corpus(limit=2000):
        digest.update(f"{pid}\t{text}\n".encode())
    assert digest.hexdigest() == DEMO_SLICE_SHA256


def test_load_texts_cycles_a_short_file(tmp_path: Path) -> None:
    src = tmp_path / "three.jsonl"
    src.write_text("".join(f'{{"id": "{i}", "text": "t{i}"}}\n' for i in range(3)))
    assert corpus.load_texts(7, src) == ["t0", "t1", "t2", "t0", "t1", "t2", "t0"]
