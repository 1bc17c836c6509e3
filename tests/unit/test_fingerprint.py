"""Fingerprints change with everything that changes the vector, and nothing else."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from embedq.errors import InvalidInput
from embedq.fingerprint import EncodeSpec, canonical_encoding, fingerprint, text_digest

BASE = EncodeSpec("all-MiniLM-L6-v2", "sha256:abc", None, True, "float32")


def test_fingerprint_is_64_hex_characters() -> None:
    fp = fingerprint(BASE, "hello")
    assert len(fp) == 64 and int(fp, 16) >= 0


def test_one_byte_of_text_changes_the_fingerprint() -> None:
    assert fingerprint(BASE, "hello") != fingerprint(BASE, "hellp")
    assert fingerprint(BASE, "hello") != fingerprint(BASE, "hello ")


@pytest.mark.parametrize(
    "other",
    [
        EncodeSpec("other-model", "sha256:abc"),
        EncodeSpec("all-MiniLM-L6-v2", "sha256:def"),
        EncodeSpec("all-MiniLM-L6-v2", "sha256:abc", dimensions=128),
        EncodeSpec("all-MiniLM-L6-v2", "sha256:abc", normalize=False),
    ],
    ids=["model", "revision", "dimensions", "normalize"],
)
def test_every_spec_field_changes_the_fingerprint(other: EncodeSpec) -> None:
    assert fingerprint(BASE, "hello") != fingerprint(other, "hello")


def test_same_request_in_another_process_gives_the_same_fingerprint() -> None:
    code = (
        "from embedq.fingerprint import EncodeSpec, fingerprint;"
        "print(fingerprint(EncodeSpec('all-MiniLM-L6-v2', 'sha256:abc'), 'héllo wörld'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "123"})
    assert out.stdout.strip() == fingerprint(BASE, "héllo wörld")


def test_encoding_is_documented_canonical_json() -> None:
    raw = canonical_encoding(BASE, text_digest("x"))
    assert raw.startswith(b"embedq-fp/1\n{\"dimensions\":null,\"dtype\":\"float32\"")
    assert b" " not in raw.split(b"\n", 1)[1]


def test_lone_surrogate_is_a_clear_input_error() -> None:
    with pytest.raises(InvalidInput, match="UTF-8"):
        fingerprint(BASE, "bad \ud800 text")


def test_spec_rejects_unknown_dtype_and_bad_dimensions() -> None:
    with pytest.raises(InvalidInput, match="float32"):
        EncodeSpec("m", "r", dtype="int8")
    with pytest.raises(InvalidInput, match="positive"):
        EncodeSpec("m", "r", dimensions=0)


@pytest.mark.parametrize("dims", ["8", 8.0, True])
def test_a_width_that_is_not_a_whole_number_is_refused_not_a_type_error(dims: object) -> None:
    with pytest.raises(InvalidInput, match=f"positive integer, not {dims!r}"):
        EncodeSpec("m", "r", dimensions=dims)  # type: ignore[arg-type]


def test_a_numpy_width_is_the_int_it_holds_and_keeps_the_fingerprint() -> None:
    import numpy as np

    spec = EncodeSpec("m", "r", dimensions=np.int64(8))  # type: ignore[arg-type]
    assert type(spec.dimensions) is int and spec == EncodeSpec("m", "r", dimensions=8)
    assert fingerprint(spec, "t") == fingerprint(EncodeSpec("m", "r", dimensions=8), "t")


def test_normalize_must_be_a_bool() -> None:
    with pytest.raises(InvalidInput, match="normalize must be true or false, not 'false'"):
        EncodeSpec("m", "r", normalize="false")  # type: ignore[arg-type]


def test_a_spec_without_a_tenant_keeps_the_shared_fingerprint_and_message() -> None:
    """Strict tenant isolation must not move a single shared key: the encoding of a spec
    without a tenant is pinned byte for byte, and its message JSON has no tenant field."""
    spec = EncodeSpec("m", "r1", None, True)
    assert fingerprint(spec, "hello") == hashlib.sha256(
        b'embedq-fp/1\n{"dimensions":null,"dtype":"float32","model":"m","normalize":true,'
        b'"revision":"r1","text_sha256":"' + hashlib.sha256(b"hello").hexdigest().encode()
        + b'"}').hexdigest()
    assert spec.to_json() == {"model": "m", "revision": "r1", "dimensions": None,
                              "normalize": True, "dtype": "float32"}


def test_a_tenant_gives_its_own_fingerprint_and_travels_in_the_spec() -> None:
    alice, bob = (EncodeSpec("m", "r1", tenant=t) for t in ("alice", "bob"))
    shared = EncodeSpec("m", "r1")
    assert len({fingerprint(s, "hello") for s in (alice, bob, shared)}) == 3
    again = EncodeSpec.from_json(json.loads(json.dumps(alice.to_json())))
    assert again == alice and fingerprint(again, "hello") == fingerprint(alice, "hello")
    assert EncodeSpec.from_json(shared.to_json()).tenant is None


def _reference(spec: EncodeSpec, digest: str) -> bytes:
    """The encoding as its definition writes it: the fields' sorted JSON, every time."""
    fields: dict[str, object] = {"dimensions": spec.dimensions, "dtype": spec.dtype,
                                 "model": spec.model, "normalize": spec.normalize,
                                 "revision": spec.revision, "text_sha256": digest}
    if spec.tenant is not None:
        fields["tenant"] = spec.tenant
    body = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"embedq-fp/1\n{body}".encode("ascii")


@pytest.mark.parametrize("spec", [
    BASE,
    EncodeSpec("m", "r", 128, False),
    EncodeSpec('quo"te \\ ünï 😀', "0" * 64, None, True, tenant="t\n" + "0" * 64),
    EncodeSpec("m", "r", tenant="acme"),
])
def test_the_encoding_made_once_per_spec_is_the_defined_json_byte_for_byte(
        spec: EncodeSpec) -> None:
    """canonical_encoding keeps a per-spec prefix and suffix around the digest; fields
    that hold what the digest's placeholder looks like do not move it."""
    for text in ("x", "héllo", "0" * 64):
        digest = text_digest(text)
        assert canonical_encoding(spec, digest) == _reference(spec, digest)
        assert fingerprint(spec, text) == hashlib.sha256(_reference(spec, digest)).hexdigest()
