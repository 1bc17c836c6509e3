"""The Debian package-description corpus used by the demo, tests and benchmarks.

The full corpus lives beside the repository in ../shared/data; a 2,000-line random slice
ships inside the package so `make demo` works anywhere.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

BUNDLED = Path(__file__).resolve().parent / "data" / "debian-2000.jsonl.gz"
SHARED = (
    Path(__file__).resolve().parents[2]
    / "shared" / "data" / "debian-package-descriptions.jsonl.gz"
)


def default_path(need: int = 0) -> Path:
    """The full corpus when it is present (or when more than the slice is needed)."""
    if SHARED.exists() and (need > 2000 or not BUNDLED.exists()):
        return SHARED
    return BUNDLED if BUNDLED.exists() else SHARED


def iter_corpus(
    path: str | Path | None = None, limit: int | None = None
) -> Iterator[tuple[str, str]]:
    """(id, text) pairs from a JSONL(.gz) file with `id` and `text` fields."""
    source = Path(path) if path else default_path(limit or 0)
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        for n, line in enumerate(fh):
            if limit is not None and n >= limit:
                return
            row = json.loads(line)
            yield str(row.get("id", n)), str(row["text"])


def load_texts(n: int, path: str | Path | None = None) -> list[str]:
    """The first `n` texts, cycling through the file if it is shorter."""
    texts = [t for _, t in iter_corpus(path, limit=n)]
    if not texts:
        raise ValueError("the corpus is empty")
    while len(texts) < n:
        texts.extend(texts[: n - len(texts)])
    return texts
