"""What the batcher handles: items (one text to embed, with the outcome its caller waits
on), the room a producer reserves, and batches (distinct texts, who waits on each, and
what encoding them gave)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from embedq.coordination.executor import Ticket
from embedq.encoders import Matrix
from embedq.fingerprint import EncodeSpec
from embedq.models.states import Lane
from embedq.workers.outcome import Outcome

ONLINE = Lane.ONLINE
BULK = Lane.BULK


@dataclass(eq=False)
class Item:
    """One text to embed under one spec, and the future its task thread waits on."""

    fp: str
    text: str
    spec: EncodeSpec
    lane: int = ONLINE
    alone: bool = False
    tokens: int = 0
    future: Outcome[bytes] = field(default_factory=Outcome)
    seq: int = 0
    # From the call that claimed the text (None: a job's chunk, always encoded); a retry
    # keeps it (`dataclasses.replace`).
    ticket: Ticket | None = None


@dataclass(eq=False)
class Room:
    """Room reserved in a lane for a producer's next submit (see `Batcher.reserve`)."""

    lane: int
    size: int


@dataclass
class Batch:
    """Distinct texts, the items that wait on each, and the outcome of encoding them."""

    texts: list[str]
    waiters: list[list[Item]]
    tokens: int
    lane: int = ONLINE
    started: float = 0.0
    paused: float = 0.0  # seconds this batch stood aside for online batches
    encode_s: float = 0.0  # seconds the model spent on this batch's own forward pass
    raw: Matrix | None = None
    error: BaseException | None = None


# Writes the batches encoded since its last call (one or more), resolving each item.
Sink = Callable[[list[Batch]], None]
AttemptHook = Callable[[list[str]], None]
# Given a batch's items just before they encode, returns those to encode; it resolves
# the future of each item it leaves out.
KeepHook = Callable[[list[Item]], list[Item]]




def batch_of(items: list[Item]) -> Batch:
    """One batch: distinct texts in cut order and the items waiting on each."""
    by_text: dict[str, list[Item]] = {}
    for item in items:
        by_text.setdefault(item.text, []).append(item)
    texts = list(by_text)
    return Batch(
        texts=texts,
        waiters=[by_text[t] for t in texts],
        tokens=max(i.tokens for i in items) * len(texts),
        lane=min(i.lane for i in items),
        started=time.perf_counter(),
    )
