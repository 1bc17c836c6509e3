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

One exception, by configuration: with EMBEDQ_TENANT_ISOLATION=strict the spec carries
the tenant, and `fields` gains `"tenant": str`, so each tenant's texts have keys of their
own (its own cache entries, claims and computations). A spec without a tenant encodes
exactly as above: the shared fingerprints do not change. The tenant travels in the
spec's JSON (`to_json`), so a worker recomputing a fingerprint gets the same key.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from numbers import Integral

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
    tenant: str | None = None  # strict tenant isolation only; None: shared fingerprints

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise InvalidInput(f"dtype {self.dtype!r} is not supported: use float32", "dtype")
        dims = self.dimensions
        if dims is not None:
            # A numpy integer is taken as the int it holds; a string, float or bool is not
            # a width ("8" compared with 1 ended in a TypeError).
            if not isinstance(dims, Integral) or isinstance(dims, bool) or dims < 1:
                raise InvalidInput(f"dimensions must be a positive integer, not {dims!r}",
                                   "dimensions")
            object.__setattr__(self, "dimensions", int(dims))
        if not isinstance(self.normalize, bool):  # "false" would have normalized
            raise InvalidInput(f"normalize must be true or false, not {self.normalize!r}",
                               "normalize")

    def to_json(self) -> dict[str, object]:
        """The spec as a message carries it; `tenant` only when set, so a shared spec's
        JSON is what it was before tenants existed."""
        data = asdict(self)
        if self.tenant is None:
            del data["tenant"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, object]) -> EncodeSpec:
        dims = data.get("dimensions")
        return cls(
            model=str(data["model"]),
            revision=str(data["revision"]),
            dimensions=int(dims) if isinstance(dims, int) else None,
            normalize=bool(data.get("normalize", True)),
            dtype=str(data.get("dtype", "float32")),
            tenant=str(data["tenant"]) if data.get("tenant") is not None else None,
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
    head, tail = _template(spec)
    return head + digest.encode("ascii") + tail


# The digest is the last key of the sorted JSON ("text_sha256" sorts after "tenant"), so
# a spec's encoding is one prefix and one suffix around it, made once per spec: a job of
# 20,000 texts spent a fifth of its submission in json.dumps of the same fields.
_DIGEST_AT = "0" * 64


@functools.lru_cache(maxsize=1024)
def _template(spec: EncodeSpec) -> tuple[bytes, bytes]:
    fields: dict[str, object] = {
        "dimensions": spec.dimensions,
        "dtype": spec.dtype,
        "model": spec.model,
        "normalize": spec.normalize,
        "revision": spec.revision,
        "text_sha256": _DIGEST_AT,
    }
    if spec.tenant is not None:
        fields["tenant"] = spec.tenant
    body = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    head, tail = f"{SCHEME}\n{body}".encode("ascii").rsplit(_DIGEST_AT.encode(), 1)
    return head, tail


def fingerprint(spec: EncodeSpec, text: str) -> str:
    """The fingerprint of embedding `text` under `spec` (64 hex characters)."""
    return hashlib.sha256(canonical_encoding(spec, text_digest(text))).hexdigest()


def space_of(model: str, revision: str, dimensions: int | None) -> str:
    """The vector space a semantic-cache entry lives in: entries of two spaces are never
    compared."""
    body = json.dumps({"model": model, "revision": revision, "dimensions": dimensions},
                      sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:32]
