"""The Debian package-description corpus used by the demo, tests and benchmarks.

Two slices of the Debian 12 package descriptions (gzip JSONL, `{"id", "text"}`) ship in
`embedq/data`; nothing here reads outside the package. A bench that wants a larger corpus
takes `--file`.

* split `"tune"` (the default), `debian-tune.jsonl.gz`, 8,000 lines: what the tests, the
  demo and the tuning of thresholds and settings use. Its first 2,000 lines are the former
  `debian-2000` slice byte for byte (so `make demo` shows the same texts); the other 6,000
  are further lines of the full corpus drawn at random (seed 15).
* split `"heldout"`, `debian-heldout.jsonl.gz`, 2,000 lines: reserved for speed
  benchmarks; nothing was tuned on them. Drawn at random from the lines of the full corpus
  past its first 20,000 (which earlier benches read) that are in neither the tune slice
  nor share a text with it: the two splits have no id and no text in common.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from embedq.errors import ConfigError, InvalidInput

Split = Literal["tune", "heldout"]

DATA = Path(__file__).resolve().parent / "data"
SPLITS: dict[str, Path] = {
    "tune": DATA / "debian-tune.jsonl.gz",
    "heldout": DATA / "debian-heldout.jsonl.gz",
}


def default_path(split: Split = "tune") -> Path:
    """The bundled file of this split."""
    try:
        return SPLITS[split]
    except KeyError:
        raise ConfigError(
            f"unknown corpus split {split!r}: use one of {', '.join(SPLITS)}"
        ) from None


def iter_corpus(
    path: str | Path | None = None, limit: int | None = None, split: Split = "tune"
) -> Iterator[tuple[str, str]]:
    """(id, text) pairs from a JSONL(.gz) file with `id` and `text` fields (default: the
    bundled file of `split`), at most `limit`; blank lines are skipped. A file that is not
    there or a line that is no such object is an InvalidInput naming it (`--file`)."""
    source = Path(path) if path else default_path(split)
    if not source.is_file():
        raise InvalidInput(f"--file {source}: no such file; give a JSONL(.gz) file of "
                           '{"text": ...} lines', "file")
    opener = gzip.open if source.suffix == ".gz" else open
    yielded = 0
    try:
        with opener(source, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
            for n, line in enumerate(fh, 1):
                if limit is not None and yielded >= limit:
                    return
                if not line.strip():
                    continue
                yield _row(source, n, line)
                yielded += 1
    except (OSError, UnicodeDecodeError, EOFError) as exc:  # not gzip, not UTF-8
        raise InvalidInput(f"--file {source}: cannot be read ({exc}); give a JSONL(.gz) "
                           "file in UTF-8", "file") from exc


def _row(source: Path, n: int, line: str) -> tuple[str, str]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        row = None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str):
        raise InvalidInput(f"--file {source.name} line {n}: not a JSON object with a "
                           '"text" string; the file takes one {"text": ...} object a line',
                           "file")
    return str(row.get("id", n - 1)), row["text"]


def load_texts(n: int, path: str | Path | None = None, split: Split = "tune") -> list[str]:
    """The first `n` texts, cycling through the file if it is shorter."""
    texts = [t for _, t in iter_corpus(path, limit=n, split=split)]
    if not texts:
        raise InvalidInput(f"--file {path}: holds no texts", "file")
    while len(texts) < n:
        texts.extend(texts[: n - len(texts)])
    return texts
