"""The hot store on Redis: one round trip per call (MGET, a pipeline or a Lua script from
`lua/`), pub/sub for "done". Calls over many fingerprints are scripts: one command
whatever the key count, so the client does not build and parse thousands of replies while
it holds the GIL that online work needs.

On a Redis Cluster (`redis+cluster://`) each call is one command per bucket of hash slots
(`buckets`), pipelined: about one round trip to each master. The counters are one hash
per bucket, summed on read; "done" goes out on each bucket's sharded channel.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

from redis.exceptions import RedisError

from embedq import stages
from embedq.config.cluster_url import is_cluster
from embedq.coordination import layout
from embedq.coordination.buckets import Buckets
from embedq.coordination.redis_link import (
    POOL_MAX_CONNECTIONS,
    bounded_client,
    map_redis_errors,
)
from embedq.coordination.redis_shared import SharedKeys
from embedq.coordination.store import (
    COUNTERS,
    BatchRecord,
    Claimed,
    Hold,
    HotStore,
    Interest,
    Leased,
    Settled,
    bucket_index,
    check_interest,
)

log = logging.getLogger(__name__)


def lua(name: str) -> str:
    """The body of `lua/<name>.lua`, shipped with the package."""
    return resources.files("embedq.coordination").joinpath(f"lua/{name}.lua").read_text()


SCRIPTS = ("claim", "lease", "release_if_owner", "extend", "count_attempts",
           "drop_unwanted", "incr_many", "wanted", "drop_stale", "drop")


class RedisHotStore(SharedKeys, HotStore):
    remote = True

    def __init__(self, url: str, socket_timeout_s: float = 10.0,
                 connect_timeout_s: float = 5.0,
                 max_connections: int = POOL_MAX_CONNECTIONS) -> None:
        """Every call is bounded (`redis_link.bounded_client`): past `socket_timeout_s`
        without an answer, or without a free connection, it fails with
        BrokerUnavailable (retryable)."""
        super().__init__()
        self.url = url
        self.client: Any = bounded_client(url, socket_timeout_s, connect_timeout_s,
                                          max_connections)
        self.cluster = is_cluster(url)
        self.buckets = Buckets(self.client, layout.CLUSTER_BUCKETS if self.cluster else 1)
        # This process's counters go to one bucket's stats hash, drawn once: the writes
        # of many processes spread over the masters.
        self._home = self.buckets.tags[random.randrange(self.buckets.count)]
        self._scripts = {name: self.client.register_script(lua(name)) for name in SCRIPTS}
        # Sent whole inside pipelines (a registered script there costs a SCRIPT EXISTS
        # round trip of its own); each is a few hundred bytes.
        self._bodies = {name: lua(name) for name in SCRIPTS}
        self._listener_thread: threading.Thread | None = None
        self._listen_tags: set[str] = set()  # the buckets whose "done" is listened to
        self._closing = threading.Event()

    def _run(self, script: str, keys_: list[str], args: list[Any]) -> Any:
        with map_redis_errors():
            return self._scripts[script](keys=keys_, args=args)

    def _run_each(self, script: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """One script call per bucket: one call on one Redis, pipelined on a cluster."""
        if len(calls) == 1:
            return [self._run(script, *calls[0])]
        with map_redis_errors():
            return self.buckets.eval_each(self._bodies[script], calls)

    def _each_bucket(self, fps: list[str], groups: dict[str, list[int]],
                     kinds: tuple[str, ...], *args: Any) -> list[tuple[list[str], list[Any]]]:
        """One script call per bucket (`lua/`): its stats hash as the one key, then the
        bucket's prefix of each of `kinds`, `args` and the bucket's fingerprints packed."""
        return [([layout.stats(t)], [*(layout.kind_prefix(k, t) for k in kinds), *args,
                                     layout.packed([fps[i] for i in idx])])
                for t, idx in groups.items()]

    def _mget(self, fps: list[str], *names: Any) -> list[list[Any]]:
        with map_redis_errors():
            return self.buckets.mget(fps, *names)

    # --- hot vectors and outcomes
    def vectors(self, fps: list[str]) -> list[bytes | None]:
        return self._mget(fps, layout.vector)[0] if fps else []

    def settled(self, fps: list[str]) -> Settled:
        out = Settled({}, {}, [])
        if not fps:
            return out
        vecs, errs = self._mget(fps, layout.vector, layout.failure)
        for fp, vec, err in zip(fps, vecs, errs, strict=True):
            if vec is not None:
                out.vectors[fp] = vec
            elif err is not None:
                out.failures[fp] = json.loads(err)
            else:
                out.pending.append(fp)
        return out

    def record_batch(self, batch: BatchRecord) -> None:
        """One round trip, and one more before it when `batch.wanted` is not empty: the
        fingerprints some caller waits for, so that only their vectors are sent (a bulk
        batch of 2,048 ships 3 MB of vectors to Redis otherwise, nearly always for
        nothing). A caller whose interest lands between the two finds the vector in the
        durable store once the claim is freed, as any waiter for an orphan does."""
        with map_redis_errors():
            wanted = self._wanted(list(batch.wanted)) if batch.wanted else []
            tag = self.buckets.tag
            pipe = self.client.pipeline(transaction=False)
            for vectors, ttl_s in batch.vectors:
                for fp, blob in vectors.items():
                    pipe.set(layout.vector(fp, tag(fp)), blob, ex=ttl_s)
            for fp in wanted:
                pipe.set(layout.vector(fp, tag(fp)), batch.wanted[fp], ex=batch.wanted_ttl_s)
            for fp, info in batch.failures.items():
                pipe.set(layout.failure(fp, tag(fp)), json.dumps(info),
                         ex=batch.failure_ttl_s)
            self._queue_drop(pipe, ((layout.ATTEMPTS, batch.forget_attempts),
                                    (layout.CLAIM, batch.free_claims)))
            self._queue_done(pipe, batch.done)
            self._queue_incr(pipe, batch.counts)
            for observed in batch.observations:
                for name, value in observed.items():
                    key = layout.histogram(name)
                    pipe.hincrby(key, str(bucket_index(name, value)), 1)
                    pipe.hincrbyfloat(key, "sum", float(value))
                    pipe.hincrby(key, "count", 1)
            if len(pipe):
                pipe.execute()

    def _wanted(self, fps: list[str]) -> list[str]:
        groups = self.buckets.groups(fps)
        found = self._run_each("wanted", self._each_bucket(fps, groups, (layout.INTEREST,)))
        return [fps[idx[int(i) - 1]] for idx, got in zip(groups.values(), found, strict=True)
                for i in got]

    def _queue_drop(self, pipe: Any, kinds: tuple[tuple[str, list[str]], ...]) -> None:
        """Delete each (kind, fingerprints) pair's keys: one script a bucket (EVAL, as in
        `_queue_incr`), its fingerprints packed."""
        by_tag: dict[str, list[str]] = {}
        for kind, fps in kinds:
            for tag, idx in self.buckets.groups(fps).items() if fps else ():
                by_tag.setdefault(tag, []).extend(
                    (layout.kind_prefix(kind, tag), layout.packed([fps[i] for i in idx])))
        for tag, args in by_tag.items():
            pipe.execute_command("EVAL", self._bodies["drop"], 1, layout.stats(tag), *args)

    def _queue_done(self, pipe: Any, fps: list[str]) -> None:
        if not fps:
            return
        if self.buckets.count == 1:
            pipe.publish(layout.done_channel(), ",".join(fps))
            return
        for tag, idx in self.buckets.groups(fps).items():
            pipe.execute_command("SPUBLISH", layout.done_channel(tag),
                                 ",".join(fps[i] for i in idx))

    def _queue_incr(self, pipe: Any, counts: dict[str, int]) -> None:
        # EVAL, not the registered script: a pipeline holding one first asks SCRIPT
        # EXISTS, a round trip of its own, and this body is a few dozen bytes.
        flat = [x for kv in counts.items() if kv[1] for x in kv]
        if flat:
            pipe.execute_command("EVAL", self._bodies["incr_many"], 1, layout.stats(self._home),
                                 *flat)

    # --- claims and run leases
    def claim(self, fps: list[str], owner: str, ttl_ms: int,
              interest: Interest | None = None) -> Claimed:
        check_interest(interest)
        pairs = [(fp, caller) for fp, callers in (interest.callers if interest else {}).items()
                 for caller in callers]
        if not fps and not pairs:
            return Claimed([], [])
        tag = self.buckets.tag
        by_tag: dict[str, tuple[list[int], list[tuple[str, str]]]] = {}
        for i, fp in enumerate(fps):
            by_tag.setdefault(tag(fp), ([], []))[0].append(i)
        for fp, caller in pairs:
            by_tag.setdefault(tag(fp), ([], []))[1].append((fp, caller))
        kinds = (layout.CLAIM, layout.INTEREST, layout.FAILURE)
        calls = [([layout.stats(t)],
                  [*(layout.kind_prefix(k, t) for k in kinds), owner, ttl_ms,
                   interest.ttl_ms if interest else 1, layout.packed([fps[i] for i in idx]),
                   layout.packed([fp for fp, _ in mine]), *(caller for _, caller in mine)])
                 for t, (idx, mine) in by_tag.items()]
        flags = [bool(r) for r in self.buckets.scatter(
            [idx for idx, _ in by_tag.values()], self._run_each("claim", calls), len(fps))]
        return Claimed([fp for fp, ok in zip(fps, flags, strict=True) if ok],
                       [fp for fp, ok in zip(fps, flags, strict=True) if not ok])

    def lease(self, fps: list[str], owner: str, ttl_ms: int) -> Leased:
        out = Leased({}, {}, [])
        if not fps:
            return out
        groups = self.buckets.groups(fps)
        replies = self._run_each("lease", self._each_bucket(
            fps, groups, (layout.RUN, layout.VECTOR, layout.ATTEMPTS), owner, ttl_ms))
        for fp, g in zip(fps, self.buckets.scatter(groups.values(), replies, len(fps)),
                         strict=True):
            if isinstance(g, bytes):
                out.stored[fp] = g
            elif g is None:
                out.held.append(fp)
            else:
                out.won[fp] = int(g)
        return out

    def holders(self, hold: Hold, fps: list[str]) -> list[str | None]:
        if not fps:
            return []
        raw = self._mget(fps, lambda fp, t: layout.held(hold, fp, t))[0]
        return [r.decode() if r else None for r in raw]

    def release(self, hold: Hold, fps: list[str], owner: str | None = None) -> None:
        if not fps:
            return
        groups = self.buckets.groups(fps)
        if owner is not None:
            self._run_each("release_if_owner", self._each_bucket(fps, groups, (str(hold),),
                                                                 owner))
        else:
            self._run_each("drop", self._each_bucket(fps, groups, (str(hold),)))

    def extend_leases(self, fps: list[str], ttl_ms: int) -> None:
        if fps:
            self._run_each("extend", self._each_bucket(
                fps, self.buckets.groups(fps), (layout.RUN,), ttl_ms))

    # --- attempts
    def count_attempts(self, fps: list[str], ttl_s: int) -> list[int]:
        if not fps:
            return []
        groups = self.buckets.groups(fps)
        replies = self._run_each("count_attempts", self._each_bucket(
            fps, groups, (layout.ATTEMPTS,), ttl_s))
        return [int(n) for n in self.buckets.scatter(groups.values(), replies, len(fps))]

    def forget_attempts(self, fps: list[str]) -> None:
        if fps:
            self.record_batch(BatchRecord(forget_attempts=fps))

    def attempts(self, fps: list[str]) -> list[int]:
        if not fps:
            return []
        return [int(r or 0) for r in self._mget(fps, layout.attempts)[0]]

    # --- interest
    def unwant(self, callers: dict[str, list[str]]) -> None:
        if not callers:
            return
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for fp, ids in callers.items():
                pipe.zrem(layout.interest(fp, self.buckets.tag(fp)), *ids)
            pipe.execute()

    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        if not owners:
            return []
        groups = self.buckets.groups([fp for fp, _ in owners])
        calls = []
        for t, idx in groups.items():
            names = [layout.stats(t)]
            for i in idx:
                names += [layout.interest(owners[i][0], t), layout.claim(owners[i][0], t)]
            calls.append((names, [owners[i][1] for i in idx]))
        flags = self.buckets.scatter(groups.values(), self._run_each("drop_unwanted", calls),
                                     len(owners))
        return list(dict.fromkeys(fp for (fp, _), f in zip(owners, flags, strict=True) if f))

    # --- counters
    def incr(self, counts: dict[str, int]) -> None:
        flat = [x for kv in counts.items() if kv[1] for x in kv]
        if flat:
            self._run("incr_many", [layout.stats(self._home)], flat)

    def counters(self) -> dict[str, int]:
        """The stats hash; on a cluster each bucket's, summed."""
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for tag in self.buckets.tags:
                pipe.hgetall(layout.stats(tag))
            hashes = pipe.execute()
        out = {name: 0 for name in COUNTERS}
        for raw in hashes:
            for k, v in raw.items():
                out[k.decode()] = out.get(k.decode(), 0) + int(v)
        return out

    def ping(self) -> None:
        with map_redis_errors():
            self.client.ping()

    # --- notifications
    def _start_listening(self, fps: list[str] | None) -> None:
        tags = (set(self.buckets.tags) if fps is None or self.buckets.count == 1
                else {self.buckets.tag(fp) for fp in fps})
        with self._lock:
            self._listen_tags |= tags
            if self._listener_thread is not None:
                return
            self._listener_thread = threading.Thread(
                target=self._listen, name="embedq-done-listener", daemon=True)
            self._listener_thread.start()

    def _listen(self) -> None:
        """Deliver "done" notifications; reconnect forever. Waiters also poll, so a
        notification lost during a reconnect costs latency, never correctness."""
        while not self._closing.is_set():
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                read = self._subscribe_done(pubsub)
                while not self._closing.is_set():
                    msg = read()
                    if msg and msg.get("type") in ("message", "smessage"):
                        with stages.timed("notify"):
                            self._dispatch(msg["data"].decode().split(","))
            except Exception as exc:  # the listener outlives any failure; waiters poll
                if self._closing.is_set():
                    return  # close() pulled the connection from under the read
                if isinstance(exc, RedisError | OSError | ValueError):
                    log.warning("done-listener lost Redis (%s); reconnecting", exc)
                else:
                    log.exception("done-listener failed; reconnecting")
                self._closing.wait(0.5)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _subscribe_done(self, pubsub: Any) -> Callable[[], Any]:
        """Subscribe to "done"; the function that reads the next notification (or None).
        On a cluster: the sharded channel of each bucket some listener waits on, each on
        its master, subscribed here as buckets are added (this thread owns the
        connection); redis-py polls the masters in turn, so each poll waits briefly."""
        if self.buckets.count == 1:
            pubsub.subscribe(layout.done_channel())
            return lambda: pubsub.get_message(timeout=1.0)
        heard: set[str] = set()

        def read() -> Any:
            with self._lock:
                new = self._listen_tags - heard
            if new:
                pubsub.ssubscribe(*[layout.done_channel(tag) for tag in sorted(new)])
                heard.update(new)
            return pubsub.get_sharded_message(timeout=0.02)
        return read

    def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(Exception):
            self.client.close()
