"""Vectors as JSON (embedq/wire.py): every writer gives each float32 as the shortest
decimal that reads back as it, the same text whichever way the vector leaves."""

from __future__ import annotations

import json

import numpy as np

from embedq import wire


def sample_vectors() -> list[np.ndarray]:
    """Vectors whose floats are hard to write: random ones, extremes, tiny values, signed
    zeros, a subnormal, and a strided view (orjson hands it back to `wire`)."""
    rng = np.random.default_rng(11)
    return [
        rng.standard_normal(384).astype(np.float32),
        np.array([1e-38, -3.4e38, 0.0, -0.0, 1e-7, 0.1, 1e-45], dtype=np.float32),
        rng.standard_normal(16).astype(np.float32)[::2],  # strided
    ]


def assert_float32_text(got: list[float], v: np.ndarray) -> None:
    """`got` (parsed JSON) holds each float of `v` as its shortest decimal (numpy's own
    repr), and reads back into float32 as `v` bit for bit (-0.0 kept too)."""
    assert got == [float(np.format_float_positional(x, unique=True, trim="-")) for x in v]
    read = np.array(got, dtype=np.float32)
    assert read.tobytes() == np.ascontiguousarray(v, np.float32).tobytes()


def test_each_float_is_its_shortest_decimal_and_reads_back_bit_for_bit() -> None:
    for v in sample_vectors():
        from_list = wire.floats(v)
        assert_float32_text(from_list, v)
        assert_float32_text(wire.floats(np.asarray(v, "<f4").tobytes()), v)
        assert_float32_text(json.loads(wire.dumps({"embedding": v}))["embedding"], v)
        assert json.loads(json.dumps(from_list)) == from_list  # json.dumps prints them so
    swapped = sample_vectors()[0].astype(">f4")  # not this machine's byte order
    assert wire.floats(swapped) == wire.floats(sample_vectors()[0])


def test_the_text_is_the_short_one() -> None:
    text = wire.dumps([np.array([0.1, 0.019155025], dtype=np.float32)])
    assert text == b"[[0.1,0.019155025]]"
    assert json.dumps(wire.floats(np.array([0.1], dtype=np.float32))) == "[0.1]"
