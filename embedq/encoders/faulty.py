"""A hashing encoder with fault injection and a forward-pass ledger, for tests.

Markers inside a text trigger faults when that text is encoded:

    [[nan]]        that row comes back NaN
    [[inf]]        that row comes back with +Inf in it
    [[wrongdim]]   the whole batch comes back one column short (a model that answers a
                   batch with the wrong width: every row of it is refused)
    [[kill]]       the process SIGKILLs itself (a poison text)
    [[sleep:S]]    the batch sleeps S seconds before returning

When `ledger_path` is set, every encoded text appends one line `<sha256 of text>` to that
file before the faults fire: a record of forward passes kept outside the system under test.
Each warm-up appends one line `warm-up <ledger bytes>` to `<ledger_path>.warmup` instead
(the ledger's size when the model warmed up: 0 if no text was encoded before), so the
ledger counts only real work and a test can see what ran before the warm-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import time

import numpy as np

from embedq.encoders.base import Matrix
from embedq.encoders.hashing import HashingEncoder

_SLEEP = re.compile(r"\[\[sleep:([0-9.]+)\]\]")


class FaultyEncoder(HashingEncoder):
    def __init__(self, name: str = "hashing", ledger_path: str | None = None) -> None:
        super().__init__(name)
        self.ledger_path = ledger_path

    def encode(self, texts: list[str]) -> Matrix:
        if self.ledger_path and texts:
            lines = "".join(hashlib.sha256(t.encode()).hexdigest() + "\n" for t in texts)
            with open(self.ledger_path, "a", encoding="ascii") as ledger:
                ledger.write(lines)
                ledger.flush()
                os.fsync(ledger.fileno())
        for text in texts:
            if "[[kill]]" in text:
                os.kill(os.getpid(), signal.SIGKILL)
        delay = max((float(m.group(1)) for t in texts for m in _SLEEP.finditer(t)), default=0)
        if delay:
            time.sleep(delay)
        out = super().encode(texts)
        for i, text in enumerate(texts):
            if "[[nan]]" in text:
                out[i, :] = np.nan
            if "[[inf]]" in text:
                out[i, 0] = np.inf
        if any("[[wrongdim]]" in t for t in texts):
            out = np.ascontiguousarray(out[:, :-1])
        return out

    def warm_up(self) -> None:
        """No forward pass (the ledger counts only real work); records the warm-up in
        `<ledger_path>.warmup` with the ledger's size at that moment."""
        if self.ledger_path:
            done = os.path.getsize(self.ledger_path) if os.path.exists(self.ledger_path) else 0
            with open(self.ledger_path + ".warmup", "a", encoding="ascii") as record:
                record.write(f"warm-up {done}\n")
                record.flush()
                os.fsync(record.fileno())
