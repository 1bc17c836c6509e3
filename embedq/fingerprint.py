"""Fingerprints: one sha256 that is at once cache key, claim key and Celery task id.

Encoding, scheme version 1 (change `SCHEME` whenever the encoding changes, so old keys
can never be mistaken for new ones):

    fingerprint = sha256_hex(b"embedq-fp/1\\n" + canonical_json(fields))
    fields      = {"dimensions": int | null,     # null: the model's native width
                   "dtype": "float32",
                   "model": str,                 # model name exactly as configured
                   "normalize": bool,
                   "revision": str,              # model revision (weights identity)
                   "text_sha256": sha256_hex(text.encode("utf-8"))}
    canonical_json = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                                ensure_ascii=True)

Everything that changes the vector is in it; nothing else is (no request ids, users or
sources), so the same request built in any process on any machine gives the same key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from embedq.errors import InvalidInput

SCHEME = "embedq-fp/1"
DTYPES = ("float32",)


@dataclass(frozen=True)
class EncodeSpec:
    """Everything besides the text that determines a vector."""

    model: str
    revision: str
    dimensions: int | None = None
    normalize: bool = True
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise InvalidInput(f"dtype {self.dtype!r} is not supported: use float32", "dtype")
        if self.dimensions is not None and self.dimensions < 1:
            raise InvalidInput("dimensions must be a positive integer", "dimensions")

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> EncodeSpec:
        dims = data.get("dimensions")
        return cls(
            model=str(data["model"]),
            revision=str(data["revision"]),
            dimensions=int(dims) if isinstance(dims, int) else None,
            normalize=bool(data.get("normalize", True)),
            dtype=str(data.get("dtype", "float32")),
        )


def text_digest(text: str) -> str:
    """sha256 hex of the UTF-8 bytes of `text`; raises InvalidInput for unencodable text."""
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            "text is not valid Unicode (it contains a lone surrogate): send UTF-8 text",
            "input",
        ) from exc
    return hashlib.sha256(raw).hexdigest()


def canonical_encoding(spec: EncodeSpec, digest: str) -> bytes:
    fields = {
        "dimensions": spec.dimensions,
        "dtype": spec.dtype,
        "model": spec.model,
        "normalize": spec.normalize,
        "revision": spec.revision,
        "text_sha256": digest,
    }
    body = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"{SCHEME}\n{body}".encode("ascii")


def fingerprint(spec: EncodeSpec, text: str) -> str:
    """The fingerprint of embedding `text` under `spec` (64 hex characters)."""
    return hashlib.sha256(canonical_encoding(spec, text_digest(text))).hexdigest()
