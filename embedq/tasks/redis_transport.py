"""kombu's Redis transport, with two fixes and a limit: a consumer that loses Redis while
it holds unacknowledged messages survives the reconnect, one whose Redis is out of memory
keeps running and loses no message (`QoS`), and a consumer holds at most so many messages
of a queue at once (`HELD_LIMITS`), and is woken when an ack gives it room again.

kombu 5.7 / Celery 5.7: on a lost link Celery calls `Connection.collect()`, whose channel
close can fail half-way (the BRPOP read raises while Redis is down) and which then detaches
the transport from its connection (`transport.client = None`). Two calls then build a Redis
client from the detached transport and raise AttributeError, which Celery treats as an
"Unrecoverable error" and the worker stops: the `close()` that follows, putting the
channel's unacked messages back, and, after the reconnect, the ack of each task that was
still running on the old channel.

A channel detached from its transport leaves its unacked messages alone instead: they stay
in Redis's unacked hash, and the visibility sweep (`visibility_timeout` +
`unacked_restore_interval`) returns them to their queue, as for a worker that was killed.
A task that finished meanwhile is then delivered again and answered from the durable store.

The limit: a worker's prefetch is its thread count (32), so one worker could reserve three
of a wave's chunks while another got one, and the job waited for the first (its one
upstream slot ran three chunks one batch at a time). A channel that holds a queue's limit
of unacknowledged messages leaves that queue out of its BRPOP (`Channel._brpop_start`):
the next message stays in Redis for a consumer with room for it, and this one takes it
again from its next BRPOP once one of its messages is acked. A BRPOP sent while held back
also waits on the channel's own wake key, which an ack (or reject) of a held-back queue's
message pushes to: that BRPOP returns at once and the next one takes the queue again.
Without it the queue came back only when the BRPOP timed out (`brpop_timeout`, 1 s): a
worker whose two chunks of a wave finished together took the wave's next chunk, or its
chord callback, 0.6-0.7 s later (one worker's 1,600 texts in `bench scale`: 12.2 s
instead of 11). BRPOPs of 0.1 s while held back cost 8 workers 1-2% of their texts/s
(ten wake-ups a second each); the wake key costs one LPUSH per ack of a held-back queue.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis, virtual
from kombu.utils import json
from kombu.utils.encoding import bytes_to_str
from redis import exceptions as redis_exceptions

from embedq.coordination.redis_link import out_of_memory

log = logging.getLogger(__name__)

# Transport option: {queue name: the most unacknowledged messages from it that one channel
# holds at once}. embedq's queues route by their own names (`tasks.app.queue`), so a
# message's routing key names the queue it came from, through redelivery and retries.
HELD_LIMITS = "embedq_held_limits"


class QoS(redis.QoS):  # type: ignore[misc]
    """kombu's QoS, made to survive Redis out of memory (maxmemory with noeviction, which
    refuses every write and every command inside MULTI, deletions included):

    - acks and rejects remove their record with a plain pipeline (ZREM + HDEL, which
      Redis allows at maxmemory: they free memory), not a MULTI, which Redis refuses
      whole; kombu's ack failed there, and the worker stopped ("Unrecoverable error"),
      holding the restore sweep's mutex when it died mid-sweep;
    - a message popped then (BRPOP is allowed) whose unacknowledged record Redis refuses
      (ZADD + HSET) runs without its record instead of being dropped: only a worker that
      dies while running it loses it, and the claim's ttl (online) or beat's stall rescue
      (jobs) bounds what that costs (docs/operations.md);
    - a requeue Redis refuses (the task met the same outage and its retry could not be
      published) leaves this channel's hold on the message: one with its record is put
      back by the visibility sweep; one without (popped during the outage) is kept here
      and pushed back at each sweep tick until Redis takes it (`requeue_parked`). Held,
      either would count against the queue's held limit forever and the worker would
      stop taking that queue;
    - a restore sweep that Redis refuses (its mutex, its requeue) waits for the next one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        # Messages running without their unacknowledged record, and messages without one
        # whose requeue Redis refused, waiting for it to take writes: {tag: message}.
        self.unrecorded: dict[Any, Any] = {}
        self.parked: dict[Any, Any] = {}

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        if pipe:
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as client:
                yield client.pipeline(transaction=False)

    def append(self, message: Any, delivery_tag: Any) -> None:
        try:
            super().append(message, delivery_tag)  # type: ignore[no-untyped-call]
        except redis_exceptions.RedisError as exc:
            if not out_of_memory(exc):
                raise
            log.warning("Redis is out of memory: message %s runs without its redelivery "
                        "record (it was popped already; refusing it would lose it)",
                        delivery_tag)
            self.unrecorded[delivery_tag] = message
            virtual.QoS.append(self, message, delivery_tag)  # type: ignore[no-untyped-call]

    def ack(self, delivery_tag: Any) -> None:
        queue = self._queue_of(delivery_tag)
        self.unrecorded.pop(delivery_tag, None)
        super().ack(delivery_tag)  # type: ignore[no-untyped-call]
        self.channel.wake(queue)

    def _queue_of(self, delivery_tag: Any) -> str:
        """The queue a delivered message came from (its routing key), or ''."""
        message = self._delivered.get(delivery_tag)
        return "" if message is None else str(message.delivery_info.get("routing_key"))

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        queue = self._queue_of(delivery_tag)
        try:
            self._reject(delivery_tag, requeue)
        finally:
            self.channel.wake(queue)

    def _reject(self, delivery_tag: Any, requeue: bool) -> None:
        message = self.unrecorded.pop(delivery_tag, None)
        if requeue and message is not None:
            # kombu requeues from the Redis record, and this message has none.
            self.parked[delivery_tag] = message
            self.requeue_parked()
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            return
        try:
            super().reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]
        except redis_exceptions.RedisError as exc:
            if not (requeue and out_of_memory(exc)):
                raise
            # The requeue (a MULTI with LPUSH) is refused whole: the message keeps its
            # unacknowledged record in Redis, and the visibility sweep requeues it later.
            log.warning("Redis is out of memory: message %s stays unacknowledged; the "
                        "visibility sweep puts it back once Redis takes writes", delivery_tag)
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]

    def requeue_parked(self) -> None:
        """Push the parked messages back on their queues, each once Redis takes it; one
        it refuses stays parked."""
        for tag, message in list(self.parked.items()):
            try:
                self.channel.push_back(message)
            except redis_exceptions.RedisError as exc:
                if not out_of_memory(exc):
                    raise
                continue
            self.parked.pop(tag, None)
            log.info("message %s, popped while Redis was out of memory, is back on its queue",
                     tag)

    def held(self) -> Counter[str]:
        """Unacknowledged messages on this channel, by routing key. kombu's record of
        them: only the consuming thread (this one) changes it; task threads ack by
        marking a tag dirty, so a dirty tag is acked already."""
        dirty = self._dirty
        return Counter(str(message.delivery_info.get("routing_key"))
                       for tag, message in list(self._delivered.items()) if tag not in dirty)

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        try:
            self.requeue_parked()
            super().restore_visible(*args, **kwargs)  # type: ignore[no-untyped-call]
        except redis_exceptions.RedisError as exc:
            if not out_of_memory(exc):
                raise
            log.warning("Redis is out of memory: unacknowledged messages are restored by a "
                        "later sweep, once it takes writes again")


class _Skipping:
    """A channel's queue cycle without the queues in `skip`, plus its wake key (when any
    queue is left to wait on), for one BRPOP."""

    def __init__(self, cycle: Any, skip: set[str], wake: str) -> None:
        self.cycle, self.skip, self.wake = cycle, skip, wake

    def consume(self, n: int) -> list[str]:
        queues = [q for q in self.cycle.consume(n) if q not in self.skip]
        return [*queues, self.wake] if queues else []


class Channel(redis.Channel):  # type: ignore[misc]
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        options = self.connection.client.transport_options
        self.held_limits: dict[str, int] = dict(options.get(HELD_LIMITS) or {})
        # The queues the BRPOP in flight leaves out; an ack of one of theirs wakes it.
        self.held_back: frozenset[str] = frozenset()
        self.wake_key = f"embedq.wake.{uuid.uuid4().hex}"

    def full_queues(self) -> set[str]:
        """The queues whose limit of unacknowledged messages this channel holds."""
        if not self.held_limits:
            return set()
        held = self.qos.held()
        return {q for q, limit in self.held_limits.items() if held[q] >= limit}

    def _brpop_start(self, timeout: Any = None) -> None:
        full = self.full_queues()
        self.held_back = frozenset(full)
        if not full:
            super()._brpop_start(timeout)  # type: ignore[no-untyped-call]
            return
        # kombu builds the BRPOP from the queues its cycle hands out: hand out the others
        # and the wake key. With none left it sends none, and its event loop asks again
        # at its next turn (a worker consuming only a bulk queue took its next chunk at once).
        cycle = self._queue_cycle
        self._queue_cycle = _Skipping(cycle, full, self.wake_key)
        try:
            super()._brpop_start(timeout)  # type: ignore[no-untyped-call]
        finally:
            self._queue_cycle = cycle
        if not self._in_poll:
            self.held_back = frozenset()  # no BRPOP sent: nothing to wake

    def _brpop_read(self, **options: Any) -> Any:
        """kombu's read, but a reply from the wake key is read as no message (kombu then
        raises Empty, and the next BRPOP takes the queue that has room again)."""
        if not self.held_back:
            return super()._brpop_read(**options)  # type: ignore[no-untyped-call]
        client = self.client
        parse = client.parse_response
        wake = self.wake_key

        def parse_or_wake(connection: Any, command: str, **kwargs: Any) -> Any:
            reply = parse(connection, command, **kwargs)
            key = bytes_to_str(reply[0]) if reply else ""  # type: ignore[no-untyped-call]
            if key.split(self.sep, 1)[0].endswith(wake):
                return None
            return reply

        client.parse_response = parse_or_wake
        try:
            return super()._brpop_read(**options)  # type: ignore[no-untyped-call]
        finally:
            del client.parse_response  # the client's own method again

    def wake(self, queue: str) -> None:
        """Called as a message of `queue` is acked or rejected: if the BRPOP in flight
        leaves `queue` out, push to its wake key (at most one waiting, gone in a minute
        if no BRPOP takes it). One Redis refuses (out of memory) leaves the BRPOP to time
        out, as without the key."""
        if queue not in self.held_back:
            return
        try:
            with self.conn_or_acquire() as client:
                client.pipeline(transaction=False).lpush(self.wake_key, 1).ltrim(
                    self.wake_key, 0, 0).expire(self.wake_key, 60).execute()
        except redis_exceptions.RedisError as exc:
            log.debug("wake-up of a held-back BRPOP refused (%s): it times out instead", exc)

    def push_back(self, message: Any) -> None:
        """Put a message back on its queue, marked redelivered, where kombu's requeue puts
        it (LPUSH) from a message's record, but from the message itself (and raising what Redis
        refuses, where kombu's logs it and goes on)."""
        payload = message._raw
        payload.get("headers", {})["redelivered"] = True
        payload.get("properties", {}).get("delivery_info", {})["redelivered"] = True
        info = message.delivery_info
        with self.conn_or_acquire() as client:
            queues = self._lookup(info["exchange"], info["routing_key"])  # type: ignore[no-untyped-call]
            for queue in queues:
                priority = self._get_message_priority(payload, reverse=False)  # type: ignore[no-untyped-call]
                key = self._q_for_pri(queue, priority)  # type: ignore[no-untyped-call]
                client.lpush(key, json.dumps(payload))  # type: ignore[no-untyped-call]

    def _detached(self) -> bool:
        return getattr(self.connection, "client", None) is None

    def close(self) -> None:
        if self._detached():
            self.do_restore = False
        super().close()  # type: ignore[no-untyped-call]

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        if self._detached():
            log.info("message %s finished after its broker link was lost; the visibility "
                     "sweep will deliver it again (answered from the durable store)",
                     delivery_tag)
            return
        super().basic_ack(delivery_tag, multiple)  # type: ignore[no-untyped-call]

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if self._detached():
            return  # the visibility sweep requeues it
        super().basic_reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]


class Transport(redis.Transport):  # type: ignore[misc]
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"

__all__ = ["HELD_LIMITS", "TRANSPORT", "Channel", "QoS", "Transport"]
