"""What several scenarios share: a worker environment with short timeouts, stored
fingerprints, and the recovery bound derived from the settings."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from sqlalchemy import select

from embedq.config import Settings
from embedq.coordination.waiting import REQUEST
from embedq.models import Database, Embedding
from tests import support

QUICK_ENV = "EMBEDQ_FAULTS_QUICK"


def scaled(full: int, quick: int) -> int:
    """A scenario's size: `quick` under EMBEDQ_FAULTS_QUICK=1 (`make test`), else `full`
    (conftest.py says which scenarios take one)."""
    return quick if os.environ.get(QUICK_ENV) == "1" else full


def fault_env(redis_url: str, pg_url: str, tmp: Path, tag: str, **extra: Any) -> dict[str, str]:
    """A cluster environment on queues of this scenario's own, with a ledger in `tmp`.

    Short visibility timeout, restore sweep and run lease keep a scenario's recovery in
    seconds; the values are the scenario's, and its bound is computed from them.
    """
    settings: dict[str, Any] = {
        "ledger_path": tmp / "ledger.txt",
        "online_queue": f"fault-online-{tag}",
        "bulk_queue": f"fault-bulk-{tag}",
        "visibility_timeout_s": 4,
        "restore_interval_s": 1,
        "run_lease_ms": 3000,
        "concurrency": 16,
    }
    settings.update(extra)
    return support.cluster_env(redis_url, pg_url, **settings)


def digest(text: str) -> str:
    """The ledger's key for a text (what the faulty encoder writes per forward pass)."""
    return hashlib.sha256(text.encode()).hexdigest()


def stored(db: Database, fps: list[str]) -> set[str]:
    with db.session() as s:
        return set(s.scalars(select(Embedding.fingerprint).where(Embedding.fingerprint.in_(fps))))


def recovery_bound_s(settings: Settings, worker_start_s: float, batch_s: float) -> float:
    """Longest a waiter can wait for work a dead worker held, from the moment it died:

    the unacked message comes back after the visibility timeout plus one restore sweep;
    a replacement worker has to start; the dead runner's lease has to lapse before the
    redelivered copy may run; the batch then runs; the waiter sees the result on its next
    poll at the latest.
    """
    return (settings.queue.visibility_timeout_s + settings.queue.restore_interval_s + worker_start_s
            + settings.queue.run_lease_ms / 1000 + batch_s + REQUEST.poll_s)
