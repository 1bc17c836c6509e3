"""A deterministic encoder for tests and for `bench pipeline`: vectors derived from sha256
of the text.

Same text, same vector, in any process; different texts, unrelated vectors (components
uniform in [-1, 1), so two texts' cosine is about N(0, 1/dimension)). Fast enough that
tests and benches measure embedq and not a model: one sha256 a text, then the whole
matrix by integer arithmetic in numpy (a splitmix64 mix of the text's seed and the
column), about 4 microseconds a text at 384 dimensions in batches of 256; exact in
float32, so the same on every machine. Revision hashing-v2 (v1 drew each row from a numpy
generator seeded per text, 13-30 microseconds a text, which `bench pipeline` counted as a
fifth of its worker's CPU).
"""

from __future__ import annotations

import hashlib

import numpy as np

from embedq.encoders.base import Encoder, Matrix

REVISION = "hashing-v2"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
BLOCK_ROWS = 256  # rows mixed at once: their uint64 temporaries stay in cache


def _seeds(texts: list[str]) -> np.ndarray:
    return np.array([int.from_bytes(hashlib.sha256(t.encode("utf-8")).digest()[:8], "little")
                     for t in texts], dtype=np.uint64)


def hashed_matrix(texts: list[str], dimension: int) -> Matrix:
    """Row i: `dimension` values uniform in [-1, 1) from text i's sha256 (splitmix64 of
    seed + (column + 1) * golden ratio; the top 24 bits, scaled exactly)."""
    columns = (np.arange(1, dimension + 1, dtype=np.uint64) * _GOLDEN)[None, :]
    seeds = _seeds(texts)
    out = np.empty((len(texts), dimension), dtype=np.float32)
    for start in range(0, len(texts), BLOCK_ROWS):
        out[start:start + BLOCK_ROWS] = _mixed(seeds[start:start + BLOCK_ROWS], columns)
    return out


def _mixed(seeds: np.ndarray, columns: np.ndarray) -> Matrix:
    x = seeds[:, None] + columns  # wraps modulo 2**64, as splitmix64 does
    x ^= x >> np.uint64(30)
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    top: Matrix = (x >> np.uint64(40)).astype(np.float32)  # 24 bits: exact in float32
    top *= np.float32(2.0 ** -23)
    top -= np.float32(1.0)
    return top


class HashingEncoder(Encoder):
    def __init__(self, name: str = "hashing", dimension: int = 384) -> None:
        self.name = name
        self.revision = REVISION
        self.dimension = dimension
        self.max_seq_length = 256

    def encode(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return hashed_matrix(texts, self.dimension)

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [min(self.max_seq_length, 2 + len(t.split())) for t in texts]

    def raw_tokens(self, texts: list[str]) -> list[int]:
        return [2 + len(t.split()) for t in texts]
