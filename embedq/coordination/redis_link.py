"""The link to Redis: a bounded connection pool and Redis's errors translated as embedq's,
Redis out of memory among them wherever it surfaces.

A Redis past its `maxmemory` with the noeviction policy refuses every write (and every
command inside MULTI); redis-py raises OutOfMemoryError, and kombu re-raises it as its
own error with the server's words in the message. Both are said as what they are: Redis
out of memory, not unreachable (`OUT_OF_MEMORY`, docs/operations.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from queue import Empty, LifoQueue
from typing import Any

import redis
from redis.exceptions import (
    AskError,
    ClusterCrossSlotError,
    RedisClusterException,
    RedisError,
)
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError as RedisOutOfMemoryError  # type: ignore[attr-defined]
from redis.exceptions import TimeoutError as RedisTimeoutError

from embedq.config.cluster_url import is_cluster, parse_cluster_url
from embedq.errors import BrokerOutOfMemory, BrokerUnavailable

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


# Connections one process keeps to Redis. Callers past that many wait for a free one (up to
# the socket timeout) rather than being refused: 200 waiting requests in one API process
# must not fail while Redis is healthy.
POOL_MAX_CONNECTIONS = 100


class PoolExhausted(RedisError):
    """Every connection of this process's pool stayed busy for the whole wait."""


class _WaitingQueue(LifoQueue[Any]):
    """The pool's queue of idle connections; running dry says so (redis-py's own pool
    raises a ConnectionError that reads like Redis being down)."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        try:
            return super().get(block, timeout)
        except Empty:
            raise PoolExhausted(
                f"all {self.maxsize} Redis connections of this process stayed busy for "
                f"{timeout} s (Redis itself answered); the process has more concurrent "
                "callers than connections: retry shortly, or spread the load over more "
                "processes") from None


NON_LOCAL_KEY = "attempted to access a non local key"


def _not_one_redis(exc: Exception) -> BrokerUnavailable:
    return BrokerUnavailable(
        f"EMBEDQ_REDIS_URL names one Redis, but that server is a node of a Redis "
        f"Cluster (it answered {exc}): write EMBEDQ_REDIS_URL as "
        "redis+cluster://host:port[,host:port...] (docs/redis.md, Redis Cluster)")


@contextlib.contextmanager
def map_redis_errors() -> Iterator[None]:
    try:
        yield
    except PoolExhausted as exc:
        raise BrokerUnavailable(str(exc)) from exc
    except RedisAuthenticationError as exc:  # a ConnectionError no retry mends
        raise BrokerUnavailable(
            f"Redis refused the credentials of EMBEDQ_REDIS_URL ({exc}): fix the user and "
            "password in it (redis://user:password@host:port/db)") from exc
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise BrokerUnavailable(f"Redis is unreachable ({exc}); retry shortly") from exc
    except RedisOutOfMemoryError as exc:
        raise BrokerOutOfMemory(OUT_OF_MEMORY) from exc
    except (AskError, ClusterCrossSlotError) as exc:  # MOVED is an AskError
        # Only a client for one Redis sees these: the cluster client follows MOVED and
        # never sends keys of two slots.
        raise _not_one_redis(exc) from exc
    except RedisError as exc:
        if NON_LOCAL_KEY in str(exc):
            # A script sent to the node that holds its declared key formed keys of other
            # slots: the names of one Redis, whose tag is empty (layout.kind_prefix).
            raise _not_one_redis(exc) from exc
        raise BrokerUnavailable(f"Redis refused the command: {exc}") from exc
    except RedisClusterException as exc:  # redis-py's cluster errors are not RedisErrors
        if "cluster mode is not enabled" in str(exc).lower():
            raise BrokerUnavailable(
                "EMBEDQ_REDIS_URL names a Redis Cluster (redis+cluster://), but the server "
                "there runs without cluster mode: write redis://host:port/db for one "
                "Redis") from exc
        raise BrokerUnavailable(f"the Redis Cluster could not serve the command ({exc}); "
                                "retry shortly") from exc


def redis_link_options(socket_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    """redis-py connection options that bound every wait on the link."""
    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "socket_keepalive": True,
        "health_check_interval": max(1, int(socket_timeout_s)),
        "retry_on_timeout": False,
    }


def bounded_client(url: str, socket_timeout_s: float, connect_timeout_s: float,
                   max_connections: int = POOL_MAX_CONNECTIONS) -> Any:
    if is_cluster(url):
        return cluster_client(url, socket_timeout_s, connect_timeout_s, max_connections)
    return single_client(url, socket_timeout_s, connect_timeout_s, max_connections)


def single_client(url: str, socket_timeout_s: float, connect_timeout_s: float,
                  max_connections: int = POOL_MAX_CONNECTIONS) -> Any:
    """A redis-py client whose every call is bounded: a link that goes silent fails a
    command after `socket_timeout_s` instead of hanging it; keepalives and a ping before
    reusing a connection idle past the socket timeout find dead ones. At most
    `max_connections` connections; a caller past them waits for one as long as for a
    reply, then fails with PoolExhausted saying so."""
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=socket_timeout_s,
        queue_class=_WaitingQueue, **redis_link_options(socket_timeout_s, connect_timeout_s))
    client: Any = redis.Redis(connection_pool=pool)
    client.auto_close_connection_pool = True  # close() disconnects the pool too
    return client


def cluster_client(url: str, socket_timeout_s: float, connect_timeout_s: float,
                   max_connections: int = POOL_MAX_CONNECTIONS) -> Any:
    """A redis-py RedisCluster on the nodes of a `redis+cluster://` URL, bounded like
    `single_client`: `max_connections` to each node, a caller past them waiting as long as
    for a reply. It learns the slot layout from the first node that answers, follows
    MOVED replies, and after a failover asks again."""
    from redis.cluster import ClusterNode, RedisCluster

    parsed = parse_cluster_url(url)
    options = redis_link_options(socket_timeout_s, connect_timeout_s)
    options.pop("retry_on_timeout")
    with map_redis_errors():
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in parsed.nodes],
            username=parsed.username, password=parsed.password,
            max_connections=max_connections, connection_pool_class=redis.BlockingConnectionPool,
            timeout=socket_timeout_s, queue_class=_WaitingQueue, require_full_coverage=True,
            **options)
