"""Input files for bulk jobs: JSONL, CSV or plain text (one text a line), optionally .gz.

Readers stream: they hold one line at a time, and never more than EMBEDQ_MAX_LINE_BYTES
of it, so a 10 GB file (or one endless line) costs no more memory than a small one. Each
yields `Record(line, id, text)`; the first line that cannot be read raises BadInputFile
naming it, after every record before it was yielded (and stored).
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from embedq.config import Settings
from embedq.errors import BadInputFile, InputFileTooLarge, InvalidInput, NothingToEmbed

FORMATS = ("jsonl", "csv", "text")
DEFAULT_MAX_LINE_BYTES = Settings().jobs.max_line_bytes
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
             ".txt": "text", ".text": "text"}


@dataclass(frozen=True)
class Record:
    line: int  # 1-based physical line in the file
    id: str | None
    text: str


def detect_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return _SUFFIXES.get(suffixes[-1] if suffixes else "", "text")


def _open(path: Path) -> IO[bytes]:
    if not path.exists():
        raise InvalidInput(f"input file {str(path)!r} does not exist", "file")
    if path.is_dir():
        raise InvalidInput(f"input {str(path)!r} is a directory: give a file", "file")
    if path.suffix.lower() == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def line_too_long_message(max_line_bytes: int) -> str:
    return (f"the line is longer than {max_line_bytes} bytes (EMBEDQ_MAX_LINE_BYTES): one "
            "input a line, each at most EMBEDQ_MAX_INPUT_CHARS characters; split the text, "
            "or raise the setting")


def _lines(fh: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """Decoded lines without their line ending; a non-UTF-8 line raises naming it, and so
    does a line longer than `max_line_bytes`, once that many bytes of it were read (so a
    file of one endless line costs no more memory than the limit)."""
    n = 0
    while raw := fh.readline(max_line_bytes + 2):  # the line and its \r\n
        n += 1
        content = raw.removesuffix(b"\n").removesuffix(b"\r")
        if len(content) > max_line_bytes:
            raise InputFileTooLarge(line_too_long_message(max_line_bytes), n)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInputFile(
                f"not valid UTF-8 (byte {exc.start + 1}): re-encode the file as UTF-8", n
            ) from None
        if n == 1:
            line = line.removeprefix("\ufeff")
        yield n, line.rstrip("\r\n")


def read_records(
    path: str | Path,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str = "id",
    from_line: int = 1,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Record]:
    """Stream the records of `path`, starting at physical line `from_line`; a line past
    `max_line_bytes` (EMBEDQ_MAX_LINE_BYTES) raises InputFileTooLarge naming it, and a
    file with no text from `from_line` on NothingToEmbed."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InvalidInput(f"format {fmt!r} is unknown: use jsonl, csv or text", "format")
    reader = {"jsonl": _jsonl, "csv": _csv, "text": _plain}[fmt]
    seen = kept = last = 0
    with _open(path) as fh:
        for record in reader(_lines(fh, max_line_bytes), text_field, id_field):
            seen, last = seen + 1, record.line
            if record.line >= from_line:
                kept += 1
                yield record
    if seen == 0:
        raise NothingToEmbed(f"the file {path.name!r} holds no texts: nothing to embed", 1)
    if kept == 0:
        raise NothingToEmbed(
            f"--from-line {from_line} is past the last text of {path.name!r} (line "
            f"{last}): nothing to embed; give a line up to {last}", from_line)


def _jsonl(lines: Iterator[tuple[int, str]], text_field: str, id_field: str
           ) -> Iterator[Record]:
    for n, line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInputFile(f"not a JSON object ({exc.msg}): one object per line", n) from None
        if not isinstance(row, dict):
            raise BadInputFile("not a JSON object: one object per line", n)
        yield Record(n, _id(row.get(id_field)), _field_text(row.get(text_field), text_field, n))


def _csv(lines: Iterator[tuple[int, str]], text_field: str, id_field: str
         ) -> Iterator[Record]:
    numbers: list[int] = []

    def feed() -> Iterator[str]:
        for n, line in lines:
            numbers.append(n)
            yield line

    reader = csv.DictReader(feed())
    try:
        header = reader.fieldnames
        if header is None:
            return
        if text_field not in header:
            raise BadInputFile(
                f"the CSV header {header} has no column {text_field!r}: "
                "name the text column with --text-field", numbers[-1] if numbers else 1,
            )
        for row in reader:
            n = numbers[-1]
            if None in row:
                raise BadInputFile("more fields than the header names", n)
            yield Record(n, _id(row.get(id_field)), _field_text(row.get(text_field), text_field, n))
    except csv.Error as exc:
        raise BadInputFile(f"not valid CSV ({exc})", numbers[-1] if numbers else 1) from None


def _plain(lines: Iterator[tuple[int, str]], _text_field: str, _id_field: str
           ) -> Iterator[Record]:
    for n, line in lines:
        if line.strip():
            yield Record(n, str(n), line)


def _id(value: object) -> str | None:
    return None if value is None else str(value)


def _field_text(value: object, field: str, n: int) -> str:
    if value is None:
        raise BadInputFile(f"no field {field!r}: name the text field with --text-field", n)
    if not isinstance(value, str):
        raise BadInputFile(f"field {field!r} is {type(value).__name__}, not a string", n)
    if not value.strip():
        raise BadInputFile(f"field {field!r} is empty: remove the line or give it text", n)
    return value
