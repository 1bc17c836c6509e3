"""The executor seam: where a claimed miss is encoded.

The service claims its misses and hands the winners to its `Executor`, chosen once by the
deployment: the queue (`embedq.tasks.executor.QueueExecutor`: one message per pack of
texts, for the online queue's workers) or this process (`embedq.workers.local`:
EMBEDQ_ONLINE_ENCODE=local, the batcher of a model loaded here). The service does not
know which: it waits for what `start` did not settle like for any claim.

Each claimed text travels with one `Ticket`: the claim owner (whose callers' interest
decides whether the text is still wanted when its batch is about to encode) and, when
the requests wait in this process, their group and where to hand the vector early.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from embedq.coordination.interest import RequestGroup
from embedq.errors import EmbedqError
from embedq.fingerprint import EncodeSpec

Settled = dict[str, bytes | EmbedqError]


@dataclass(frozen=True, eq=False)
class Ticket:
    """What a claimed text carries from the call that claimed it to its batch.

    `owner`: the claim owner (a job's chunk claims under its own id and sends no ticket:
    its texts are always encoded). `group`: the requests waiting in this process; while
    all are present the text is wanted without asking the store. `answer(fp, vector)`:
    hands the validated vector to them before the writes (the claim stays held until the
    writes are done, so a request for the same text meanwhile joins the computation)."""

    owner: str
    group: RequestGroup | None = None
    answer: Callable[[str, bytes], None] | None = None

    def present(self) -> bool:
        """The text is wanted by a request in this process (no store round trip)."""
        return self.group is not None and self.group.present()


class Executor(Protocol):
    def warm_up(self) -> None:
        """Open the links `start` uses, so a first call does not pay for them; raises
        Unavailable when one is down."""
        ...

    def start(self, spec: EncodeSpec, pairs: list[tuple[str, str]], ticket: Ticket,
              deadline: float) -> Settled:
        """Have the claimed (fingerprint, text) pairs encoded, waiting at most until
        `deadline` (`time.monotonic()`); return the outcomes settled by then (the queue:
        none). What is not settled reaches the hot store like any claim's outcome.
        Raises when the work could not be handed on at all; the claims are freed
        first, so no other caller waits out their ttl."""
        ...
