"""The cyclic garbage collector in a long-running process (`embedq serve`, `embedq worker`,
and a CLI command that runs an embedded worker: `embedq bulk`, the GPU check's job).

CPython collects its youngest generation every 700 container allocations and, every 100
of those, walks every object the process holds, with the interpreter lock held. What a
server holds is mostly what its imports and its startup made (SQLAlchemy, Celery, FastAPI,
the tokenizer, the model), which lives as long as the process. Measured on `embedq serve`
under 50 one-text clients (hashing encoder, online misses encoded in the API), the
collector took 19% of the miss phase's wall time and 21% of the hit phase's, while the
requests waited for the lock.

`settle(gen0)` runs once startup is done: one collection, then `gc.freeze()` moves every
object alive into a permanent generation no collection walks, and the youngest
generation's threshold becomes `gen0` (EMBEDQ_GC_GEN0, default 10,000), so a young
collection runs every few hundred requests instead of every few. What requests leave
behind in cycles is still collected; only the startup's objects are never walked again
(one that later becomes garbage in a cycle stays: startup objects are not dropped).
`gen0` 0 leaves Python's collector as it is.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def settle(gen0: int) -> None:
    """Freeze what the process holds now out of the collector's walks and raise the
    youngest generation's threshold to `gen0`; 0: change nothing."""
    if gen0 <= 0:
        return
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, gen2)
    log.debug("collector settled: %d objects frozen, thresholds %s", gc.get_freeze_count(),
              gc.get_threshold())
