"""Fingerprints grouped by the hash slot of their keys, for the Redis store.

On a Redis Cluster a script or a multi-key command may only touch one hash slot, so the
store splits a call over many fingerprints into one call per bucket (`layout.bucket`)
and sends them in one pipeline: redis-py writes each master's share before it reads any
reply, so a batch costs about one round trip to each master whatever its size. On one
Redis there is one bucket, whose tag is empty: one call, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from embedq.coordination import layout

Namer = Callable[[str, str], str]  # (fingerprint, tag) -> key name


class Buckets:
    def __init__(self, client: Any, count: int) -> None:
        self.client = client
        self.count = count
        self.tags = [layout.bucket_tag(b, count) for b in range(count)]

    def tag(self, fp: str) -> str:
        return self.tags[layout.bucket(fp, self.count)]

    def groups(self, fps: list[str]) -> dict[str, list[int]]:
        """Tag -> the indices in `fps` of the fingerprints of that bucket."""
        if self.count == 1:
            return {"": list(range(len(fps)))}
        out: dict[str, list[int]] = {}
        for i, fp in enumerate(fps):
            out.setdefault(self.tag(fp), []).append(i)
        return out

    def mget(self, fps: list[str], *names: Namer) -> list[list[Any]]:
        """Per namer, the value of each fingerprint's key, in the order of `fps`."""
        if self.count == 1:
            flat = self.client.mget([name(fp, "") for name in names for fp in fps])
            return [flat[k * len(fps):(k + 1) * len(fps)] for k in range(len(names))]
        groups = self.groups(fps)
        pipe = self.client.pipeline(transaction=False)
        for tag, idx in groups.items():
            pipe.execute_command("MGET", *[name(fps[i], tag) for name in names for i in idx])
        out: list[list[Any]] = [[None] * len(fps) for _ in names]
        for idx, got in zip(groups.values(), pipe.execute(), strict=True):
            for k in range(len(names)):
                for j, i in enumerate(idx):
                    out[k][i] = got[k * len(idx) + j]
        return out

    @staticmethod
    def scatter(groups: Iterable[list[int]], replies: list[Any], size: int) -> list[Any]:
        """Per-bucket replies (one item per index of its group) back in the order of the
        `size` fingerprints the groups were cut from."""
        out: list[Any] = [None] * size
        for idx, reply in zip(groups, replies, strict=True):
            for i, item in zip(idx, reply, strict=True):
                out[i] = item
        return out

    def eval_each(self, body: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Run one script per (keys, args) in one pipeline; the replies in call order.
        The body travels whole (a few hundred bytes a call): a replica promoted by a
        failover may not have loaded it, and a NOSCRIPT inside a pipeline would leave
        the calls before it run and the rest not."""
        pipe = self.client.pipeline(transaction=False)
        for keys_, args in calls:
            pipe.execute_command("EVAL", body, len(keys_), *keys_, *args)
        return list(pipe.execute())
