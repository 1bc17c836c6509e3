"""A deterministic encoder for tests: vectors derived from sha256 of the text.

Same text, same vector, in any process; different texts, unrelated vectors. Fast enough
that tests measure embedq and not a model.
"""

from __future__ import annotations

import hashlib

import numpy as np

from embedq.encoders.base import Encoder, Matrix


class HashingEncoder(Encoder):
    def __init__(self, name: str = "hashing", dimension: int = 384) -> None:
        self.name = name
        self.revision = "hashing-v1"
        self.dimension = dimension
        self.max_seq_length = 256

    def _row(self, text: str) -> Matrix:
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        return rng.standard_normal(self.dimension).astype(np.float32)

    def encode(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._row(t) for t in texts])

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [min(self.max_seq_length, 2 + len(t.split())) for t in texts]

    def raw_tokens(self, texts: list[str]) -> list[int]:
        return [2 + len(t.split()) for t in texts]
