"""Redis out of memory, recognized wherever it surfaces.

A Redis past its `maxmemory` with the noeviction policy refuses every write (and every
command inside MULTI); redis-py raises OutOfMemoryError, and kombu re-raises it as its
own error with the server's words in the message. Both are said as what they are: Redis
out of memory, not unreachable (`OUT_OF_MEMORY`, docs/operations.md).
"""

from __future__ import annotations

from redis.exceptions import OutOfMemoryError as RedisOutOfMemoryError  # type: ignore[attr-defined]

__all__ = ["OUT_OF_MEMORY", "RedisOutOfMemoryError", "out_of_memory"]

OUT_OF_MEMORY = (
    "Redis is out of memory: its used memory is over its maxmemory and its policy "
    "(noeviction) refuses every write, so nothing was stored or queued; retry after the "
    "Retry-After seconds, and have the operator free memory or raise maxmemory "
    "(docs/operations.md, Redis out of memory)")


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is Redis refusing a write for
    maxmemory (redis-py's OutOfMemoryError; kombu re-raises it as its own error with the
    server's words in the message)."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chains are short; a cycle must not loop here
        if seen is None:
            return False
        if isinstance(seen, RedisOutOfMemoryError) or "used memory > 'maxmemory'" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
