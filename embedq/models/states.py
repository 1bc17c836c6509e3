"""The states a job, a chunk and a priority can be in: one spelling each.

They are `StrEnum`s, so a member is equal to its value and is stored, compared and
serialized as that plain string: rows written before the enums existed read back
unchanged, and JSON output stays `"succeeded"`, never `"JobStatus.SUCCEEDED"`.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    # Finished with some items failed (e.g. NaN vectors); `progress.failed` says how many.
    SUCCEEDED_WITH_ERRORS = "succeeded_with_errors"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @classmethod
    def final(cls) -> frozenset[JobStatus]:
        """The states a job never leaves."""
        return frozenset({cls.SUCCEEDED, cls.SUCCEEDED_WITH_ERRORS, cls.FAILED, cls.CANCELLED})

    @classmethod
    def active(cls) -> tuple[JobStatus, ...]:
        """The states `embedq beat` looks after: waiting to start, or running."""
        return (cls.QUEUED, cls.RUNNING)


class ChunkStatus(StrEnum):
    PENDING = "pending"
    # In a wave on the broker: its message was sent and it has not finished. Any status
    # but `done` is work left (a lost message's chunk is sent again by a later wave).
    SENT = "sent"
    DONE = "done"


class Priority(StrEnum):
    ONLINE = "online"
    BULK = "bulk"


class Lane(IntEnum):
    """A worker's batching lane; online work is served first (lower sorts first)."""

    ONLINE = 0
    BULK = 1
