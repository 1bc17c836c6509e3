"""The encoder contract and the vector rules every encoder's output must pass."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from embedq.errors import InvalidVector
from embedq.fingerprint import EncodeSpec

Matrix = npt.NDArray[np.float32]


class Encoder(ABC):
    """Turns texts into raw vectors. Implementations are loaded once per process."""

    name: str
    revision: str
    dimension: int
    max_seq_length: int

    @abstractmethod
    def encode(self, texts: list[str]) -> Matrix:
        """Raw (not normalized, full width) float32 vectors, one row per text, in order."""

    @abstractmethod
    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens each text costs the model, after truncation to `max_seq_length`."""

    def raw_tokens(self, texts: list[str]) -> list[int]:
        """Tokens before truncation (to report or refuse inputs over the window)."""
        return self.count_tokens(texts)

    def add_checkpoint(self, hook: Callable[[], None]) -> int:
        """Call `hook` between the model's steps (its layers) while a batch encodes, so
        a batcher can run urgent work inside a long batch. Every hook is called on every
        step, in the encoding thread; each decides whether the batch is its own.

        Returns how many steps a batch has (hooks run before each), 0 when this encoder
        has none to pause between (the batcher then preempts only between batches).
        """
        return 0

    def remove_checkpoint(self, hook: Callable[[], None]) -> None:
        """Stop calling `hook` (a batcher that stops); encoders without steps hold none."""
        return None

    def warm_up(self) -> None:
        """Run one forward pass so the first real batch does not pay for lazy init."""
        self.encode(["embedq warm-up"])

    def spec(self, dimensions: int | None = None, normalize: bool = True) -> EncodeSpec:
        return EncodeSpec(self.name, self.revision, dimensions, normalize)


def finish_vector(raw: npt.NDArray[np.floating], spec: EncodeSpec, native_dim: int) -> Matrix:
    """Apply `spec` to one raw row: check it, truncate to `dimensions`, renormalize.

    Raises InvalidVector for NaN/Inf, a wrong width, or a zero vector that cannot be
    normalized: such a vector is never cached.
    """
    row = np.asarray(raw, dtype=np.float32)
    if row.ndim != 1 or row.shape[0] != native_dim:
        raise InvalidVector(
            f"encoder returned a vector of shape {row.shape}, expected ({native_dim},)"
        )
    if not np.isfinite(row).all():
        raise InvalidVector("encoder returned NaN or Inf for this text; it was not cached")
    if spec.dimensions is not None:
        if spec.dimensions > native_dim:
            raise InvalidVector(
                f"dimensions={spec.dimensions} is wider than the model's {native_dim}"
            )
        row = row[: spec.dimensions]
    if spec.normalize:
        norm = float(np.linalg.norm(row))
        if norm == 0.0 or not np.isfinite(norm):
            raise InvalidVector("encoder returned a zero vector; it cannot be normalized")
        row = row / norm
    return np.ascontiguousarray(row, dtype=np.float32)
