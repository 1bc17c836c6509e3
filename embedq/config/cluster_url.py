"""EMBEDQ_REDIS_URL naming a Redis Cluster: `redis+cluster://[user:password@]host:port[,...]`.

The coordination store runs on a cluster (docs/redis.md, "Redis Cluster"); Celery's
broker and result backend cannot, so they stay on one Redis or RabbitMQ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from embedq.errors import ConfigError

SCHEME = "redis+cluster://"
EXAMPLE = "redis+cluster://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000"
_NODE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$")


@dataclass(frozen=True)
class ClusterURL:
    """The seed nodes a client asks for the cluster's layout, and the credentials."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None


def is_cluster(url: str | None) -> bool:
    return bool(url) and str(url).lower().startswith(SCHEME)


def parse_cluster_url(url: str) -> ClusterURL:
    """The nodes and credentials of a `redis+cluster://` URL; a ConfigError saying how to
    write it for anything else."""
    if not is_cluster(url):
        raise ConfigError(f"EMBEDQ_REDIS_URL={url!r} does not name a Redis Cluster: write "
                          f"{EXAMPLE}")
    rest = url[len(SCHEME):]
    username = password = None
    if "@" in rest:
        creds, rest = rest.rsplit("@", 1)
        user, _, secret = creds.partition(":")
        username, password = unquote(user) or None, unquote(secret) or None
    hosts, _, path = rest.partition("/")
    if path not in ("", "0") or "?" in hosts:
        raise ConfigError(
            f"EMBEDQ_REDIS_URL names a Redis Cluster with /{path}: a cluster has only "
            f"database 0 and takes no options; write {EXAMPLE}")
    nodes: list[tuple[str, int]] = []
    for part in hosts.split(","):
        match = _NODE.match(part.strip())
        port = int(match.group(2)) if match else 0
        if not match or not 0 < port < 65536:
            raise ConfigError(
                f"EMBEDQ_REDIS_URL has {part.strip()!r} among its cluster nodes, which "
                f"is not host:port (a port 1-65535): list one or more nodes of the "
                f"cluster separated by commas, e.g. {EXAMPLE}")
        nodes.append((match.group(1).strip("[]"), port))
    return ClusterURL(tuple(nodes), username, password)


def check_redis_url(url: str) -> None:
    """Refuse an EMBEDQ_REDIS_URL that is neither one Redis nor a cluster."""
    lowered = url.lower()
    if lowered.startswith(("redis://", "rediss://", "unix://")):
        return
    if is_cluster(url):
        parse_cluster_url(url)
        return
    raise ConfigError(
        f"EMBEDQ_REDIS_URL={url!r} is not a Redis URL: use redis://host:port/db (one "
        f"Redis; rediss:// with TLS) or {EXAMPLE} (a Redis Cluster)")
