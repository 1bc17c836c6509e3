"""The Celery app: JSON only, late acks, bounded redelivery, online before bulk.

Settings here answer the pitfalls in ARCHITECTURE.md:
- acks_late + reject_on_worker_lost: a killed worker's messages are redelivered; the
  worker counts attempts per fingerprint itself and dead-letters after max_attempts.
- visibility_timeout is set on the broker and result backend transports, above the
  longest buffer + batch time; duplicate deliveries are fenced by run leases and the
  durable store's primary key.
- unacked_restore_interval x throttle 1: a dead worker's messages come back after
  visibility_timeout + restore_interval_s, not ~100 s later; the sweep's mutex expires
  within the visibility timeout (`restore_mutex_expire_s`), not after kombu's 300 s.
- queue_order_strategy=priority: a worker always drains `online` before `bulk`.
- a worker holds at most CHUNKS_PER_WORKER messages of a bulk queue (`held_limits`), the
  share of a job's wave each worker is dispatched for: with its prefetch alone (its
  thread count) one worker could take three of a wave's chunks and another one.
- worker_cancel_long_running_tasks_on_connection_loss=False: a broker blip does not
  abandon running batches.
- a Redis broker goes through `redis_transport` (kombu's, with a fix that keeps a worker
  alive when Redis vanishes while it holds unacked messages).
- every broker and result-backend link is bounded (`link_timeouts`): a broker that goes
  silent fails a publish after the socket timeout instead of hanging it, and a consumer's
  stale BRPOP connection is dropped after brpop_timeout + health_check_interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from celery import Celery
from kombu.entity import Exchange, Queue

from embedq.config import Settings
from embedq.config.cluster_url import is_cluster
from embedq.tasks import names, redis_transport

# kombu sends BRPOP with a 1 s server-side timeout on a socket that carries this timeout
# too; one at or below it would time out replies that are on their way.
BRPOP_TIMEOUT_S = 1.0
MIN_BROKER_SOCKET_TIMEOUT_S = 2 * BRPOP_TIMEOUT_S
# A job's wave holds this many chunks per live worker (embedq.jobs.dispatch), and a worker
# holds at most this many messages of a bulk queue at once: each takes its share of a
# wave, and one that finishes a chunk while another still runs takes the next.
CHUNKS_PER_WORKER = 2


def link_timeouts(settings: Settings) -> dict[str, Any]:
    """Socket options for a Redis broker's transport: every command bounded, keepalives
    on, and kombu's health check (which also drops a BRPOP connection whose reply is
    overdue) every socket timeout. Only redis:// takes them: py-amqp would reject them."""
    socket_timeout_s = max(settings.links.redis_socket_timeout_s, MIN_BROKER_SOCKET_TIMEOUT_S)
    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": settings.links.redis_connect_timeout_s,
        "socket_keepalive": True,
        "health_check_interval": max(1, int(socket_timeout_s)),
    }


def held_limits(settings: Settings) -> dict[str, int]:
    """The most unacknowledged messages one worker holds of each bulk queue (those of
    every served model too). Online queues have none: their messages are small, and a
    worker batches many at once."""
    bulk = [settings.queue.bulk_queue]
    deployment = settings.deployment
    if deployment.model.models is not None:
        bulk += [deployment.for_model(entry.name).queue.bulk_queue
                 for entry in deployment.served_models()]
    return dict.fromkeys(bulk, CHUNKS_PER_WORKER)


def restore_mutex_expire_s(settings: Settings) -> int:
    """How long kombu's restore sweep may hold its mutex: a few sweeps, within the
    visibility timeout. A sweep takes milliseconds; a sweeper that failed or died holding
    the mutex (Redis out of memory refused its writes) would otherwise block every other
    sweep for kombu's default of 300 s, and a dead worker's messages with it. Two sweeps
    at once are harmless: each restore is a WATCH transaction on the unacked hash."""
    queue = settings.queue
    return max(1, min(queue.visibility_timeout_s, max(2, 5 * queue.restore_interval_s)))


def exchange_name(queue_name: str) -> str:
    return f"embedq.{queue_name}"


def queue(name: str) -> Queue:
    """A queue with its own direct exchange and routing key.

    A bare `Queue(name)` is bound to Celery's default exchange with the default routing
    key, so the online and the bulk queue shared one binding and every message was put on
    both: each task ran twice (fenced, but paid for), and a chord header that ran twice
    was counted twice, so its callback could miss the count and never run. The exchange
    names are new, so bindings an older version left in a broker route nothing here.
    """
    return Queue(name, Exchange(exchange_name(name), type="direct"),  # type: ignore[no-untyped-call]
                 routing_key=name)


@dataclass(frozen=True)
class Transports:
    """Where tasks and results travel, and each link's options: `broker_transport` None
    takes the transport from the broker URL's scheme; `redis_backend` holds the socket
    options Celery's Redis result backend reads from its own settings."""

    broker_transport: str | None
    broker_options: dict[str, Any]
    backend: str | None
    backend_options: dict[str, Any]
    redis_backend: dict[str, Any]


def transports(settings: Settings) -> Transports:
    """The broker's and the result backend's links: embedded, the in-memory ones; else a
    Redis broker through `redis_transport` and every Redis link bounded (`link_timeouts`)."""
    transport: dict[str, Any] = {
        "visibility_timeout": settings.queue.visibility_timeout_s,
        "queue_order_strategy": "priority",
        "unacked_restore_interval": settings.queue.restore_interval_s,
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": restore_mutex_expire_s(settings),
    }
    backend_transport: dict[str, Any] = {"visibility_timeout": settings.queue.visibility_timeout_s}
    redis_backend: dict[str, Any] = {}
    broker_transport: str | None = None  # None: from the URL's scheme
    backend: str | None
    if settings.embedded:
        backend = "cache+memory://"
        transport["polling_interval"] = 0.005  # the memory transport polls; Redis blocks
    else:
        # Celery's result backend cannot use a Redis Cluster: with one (a cluster is
        # accepted only with a redis:// broker, config.rules) results go to the broker.
        backend = (settings.links.broker_url if is_cluster(settings.links.redis_url)
                   else settings.links.redis_url)
        links = link_timeouts(settings)
        if settings.links.broker_url.startswith(("redis://", "rediss://")):
            transport.update(links)
            transport[redis_transport.HELD_LIMITS] = held_limits(settings)
            broker_transport = redis_transport.TRANSPORT
        backend_transport.update(links)
        # Celery's Redis result backend reads its socket options from these settings.
        redis_backend = {
            "redis_socket_timeout": links["socket_timeout"],
            "redis_socket_connect_timeout": links["socket_connect_timeout"],
            "redis_socket_keepalive": True,
        }
    return Transports(broker_transport, transport, backend, backend_transport, redis_backend)


def queue_names(settings: Settings) -> list[str]:
    """The queues of these settings, then with EMBEDQ_MODELS every model's own."""
    names = [settings.queue.online_queue, settings.queue.bulk_queue]
    deployment = settings.deployment
    if deployment.model.models is not None:
        for entry in deployment.served_models():
            own = deployment.for_model(entry.name).queue
            names += [q for q in (own.online_queue, own.bulk_queue) if q not in names]
    return names


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings for `settings` (a None value keeps Celery's default:
    `create_app` leaves it out); the links' options come from `transports`."""
    links = transports(settings)
    return {
        "broker_url": settings.links.broker_url,
        "broker_transport": links.broker_transport,
        "result_backend": links.backend,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": links.broker_options,
        "result_backend_transport_options": links.backend_options,
        **links.redis_backend,
        "broker_connection_timeout": settings.links.redis_connect_timeout_s,
        "visibility_timeout": settings.queue.visibility_timeout_s,
        "result_expires": 3600,
        "task_default_queue": settings.queue.online_queue,
        "task_default_exchange": exchange_name(settings.queue.online_queue),
        "task_default_routing_key": settings.queue.online_queue,
        "task_queues": [queue(name) for name in queue_names(settings)],
        "task_routes": {
            names.EMBED: {"queue": settings.queue.online_queue},
            names.BULK_CHUNK: {"queue": settings.queue.bulk_queue},
            names.CLOSE_JOB: {"queue": settings.queue.bulk_queue},
        },
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "task_send_sent_event": False,
        "broker_heartbeat": 0 if settings.links.broker_url.startswith("amqp") else None,
    }


def create_app(settings: Settings) -> Celery:
    """A Celery app for these settings. Producers send tasks by name; a worker binds the
    task bodies to it with `embedq.workers.bodies.register`."""
    app = Celery("embedq", set_as_current=False)
    app.conf.update({k: v for k, v in celery_config(settings).items() if v is not None})
    return app
