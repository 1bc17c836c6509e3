"""`--file` of the demo and the benches (embedq.corpus): a file that is not there, a line
that is no {"text": ...} object and a file of no text each say so (they ended in
FileNotFoundError, JSONDecodeError or ValueError tracebacks); blank lines are skipped."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from embedq.corpus import iter_corpus, load_texts
from embedq.errors import InvalidInput


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file; give a JSONL"):
        list(iter_corpus(tmp_path / "nope.jsonl"))


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"title": "x"}', '{"text": 5}'])
def test_a_line_that_is_no_text_object_names_its_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"text": "fine"}\n\n' + line + "\n")
    with pytest.raises(InvalidInput, match=r"f.jsonl line 3: not a JSON object with a "):
        list(iter_corpus(path))


def test_blank_lines_are_skipped_and_ids_default_to_the_row(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write('{"text": "a"}\n\n{"id": "x", "text": "b"}\n{"text": "c"}\n')
    assert list(iter_corpus(path, limit=2)) == [("0", "a"), ("x", "b")]
    assert load_texts(5, path) == ["a", "b", "c", "a", "b"]


def test_a_file_of_no_text_and_one_that_is_no_gzip_say_so(tmp_path: Path) -> None:
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    with pytest.raises(InvalidInput, match="holds no texts"):
        load_texts(3, blank)
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_text('{"text": "plain, not gzip"}\n')
    with pytest.raises(InvalidInput, match="cannot be read"):
        list(iter_corpus(fake))
