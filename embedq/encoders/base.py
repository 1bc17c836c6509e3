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
    # A call whose time hardly grows with its texts (a remote API: the round trip and its
    # queue dominate). A batcher then never shrinks bulk batches for online texts: a
    # smaller batch would not free the encoder sooner, it would only multiply the calls.
    flat_cost: bool = False

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


def finish_rows(raw: npt.NDArray[np.floating], spec: EncodeSpec, native_dim: int
                ) -> tuple[Matrix, list[str | None]]:
    """Apply `spec` to every row of a batch at once: check each, truncate to
    `dimensions`, renormalize. Returns the finished rows and, per row, None or why it is
    refused (NaN/Inf, a zero vector that cannot be normalized, a wrong width): such a
    vector is never cached. One matrix operation per step, not one per row."""
    rows = np.asarray(raw, dtype=np.float32)
    n = rows.shape[0] if rows.ndim >= 1 else 0
    if rows.ndim != 2 or rows.shape[1] != native_dim:
        shape = tuple(rows.shape[1:]) if rows.ndim >= 1 else ()
        return rows, [f"encoder returned a vector of shape {shape}, expected "
                      f"({native_dim},)"] * n
    if spec.dimensions is not None and spec.dimensions > native_dim:
        return rows, [f"dimensions={spec.dimensions} is wider than the model's "
                      f"{native_dim}"] * n
    finite: npt.NDArray[np.bool_] = np.asarray(np.isfinite(rows).all(axis=1))
    if spec.dimensions is not None:
        rows = rows[:, : spec.dimensions]
    zero: npt.NDArray[np.bool_] = np.zeros(n, dtype=bool)
    if spec.normalize:
        with np.errstate(invalid="ignore", over="ignore"):
            norms = np.linalg.norm(rows, axis=1)
        zero = np.asarray(finite & ~((norms > 0) & np.isfinite(norms)))
        scale = np.where(zero | ~finite, np.float32(1.0), norms).astype(np.float32)
        rows = np.asarray(rows / scale[:, None], dtype=np.float32)
    reasons: list[str | None] = [
        None if ok else ("encoder returned NaN or Inf for this text; it was not cached"
                         if not fin else "encoder returned a zero vector; it cannot be "
                         "normalized")
        for ok, fin in zip(np.asarray(finite & ~zero).tolist(), finite.tolist(), strict=True)]
    return np.ascontiguousarray(rows, dtype=np.float32), reasons


def finish_vector(raw: npt.NDArray[np.floating], spec: EncodeSpec, native_dim: int) -> Matrix:
    """Apply `spec` to one raw row (`finish_rows` for one); raises InvalidVector saying
    why a refused row is refused."""
    rows, reasons = finish_rows(np.asarray(raw, dtype=np.float32).reshape(1, -1)
                                if np.ndim(raw) == 1 else np.asarray(raw), spec, native_dim)
    if len(reasons) != 1 or reasons[0] is not None:
        raise InvalidVector(reasons[0] if len(reasons) == 1 and reasons[0] else
                            f"encoder returned a vector of shape {np.shape(raw)}, "
                            f"expected ({native_dim},)")
    return np.ascontiguousarray(rows[0], dtype=np.float32)
