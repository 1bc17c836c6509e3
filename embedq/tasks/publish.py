"""Publishing work: online messages carry (fingerprint, text) pairs and a spec.

A message with one text takes that text's fingerprint as its Celery task id. When one
request brings many misses they are packed, `message_max_texts` to a message, with an id
derived from their fingerprints: per-message overhead would otherwise cost more than the
model on short texts (see the README's design notes).

A message may name the claim `owner` of the call that queued it: its producer registered
its callers' interest with its claims (`HotStore.claim`), so a worker may drop the texts
nobody waits for any more. A message without one (an older producer) is always encoded.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from amqp.exceptions import AMQPError
from celery import Celery
from kombu.exceptions import OperationalError as KombuOperationalError

from embedq.coordination.redis_link import OUT_OF_MEMORY, out_of_memory
from embedq.errors import BrokerLoginRefused, BrokerOutOfMemory, BrokerUnavailable
from embedq.fingerprint import EncodeSpec
from embedq.tasks import names

log = logging.getLogger("embedq.service")


def message_id(fps: list[str]) -> str:
    if len(fps) == 1:
        return fps[0]
    return "pack-" + hashlib.sha256("".join(fps).encode()).hexdigest()[:40]


def pack_messages(pairs: list[tuple[str, str]], per_message: int
                  ) -> list[list[tuple[str, str]]]:
    """(fingerprint, text) pairs in messages of at most `per_message`, in their order
    (the service hands them over shortest first: `embedq.service.shortest_first`)."""
    per_message = max(1, per_message)
    return [pairs[i : i + per_message] for i in range(0, len(pairs), per_message)]


# What a failed link to the broker raises: kombu's error, the socket's, and py-amqp's own
# (RabbitMQ refusing a login raises AccessRefused, not a kombu error).
BROKER_ERRORS: tuple[type[BaseException], ...] = (KombuOperationalError, OSError, AMQPError)
# How brokers say a login was refused (RabbitMQ's reply, Redis's AUTH answers).
_REFUSED_LOGIN = ("ACCESS_REFUSED", "invalid username-password pair", "WRONGPASS",
                  "NOAUTH")

# Celery's own `task_publish_retry_policy`: a failed publish is retried on a new link.
DEFAULT_PUBLISH_RETRIES = 3


def retry_policy(app: Celery, budget_s: float | None) -> dict[str, Any] | None:
    """Celery's publish retries cut to what fits in `budget_s` (None: Celery's policy).

    On a link gone silent each try ends only at the Redis broker's socket timeout, and
    each of Celery's retries reconnects and waits as long again: with its default three,
    a publish blocked until the silence ended (10 s in the silent-link fault) and
    answered past the request's deadline. Tries that fit in the budget are kept; the
    caller retries within its own deadline. AMQP links keep Celery's policy."""
    if budget_s is None:
        return None
    socket_timeout = (app.conf.broker_transport_options or {}).get("socket_timeout")
    if not socket_timeout:
        return None
    tries = int(max(0.0, budget_s) // float(socket_timeout))
    return {"max_retries": max(0, min(DEFAULT_PUBLISH_RETRIES, tries - 1)),
            "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def publish_embed(
    app: Celery,
    spec: EncodeSpec,
    groups: list[list[tuple[str, str]]],
    queue: str,
    ids: list[str] | None = None,
    owner: str | None = None,
    budget_s: float | None = None,
) -> list[str]:
    """Publish one message per group over one producer connection; return task ids.
    `owner`: the claim owner whose callers' interest decides whether the texts are
    still wanted when a worker reaches them. `budget_s`: how long the publish may
    retry a failing link (`retry_policy`)."""
    sent: list[str] = []
    policy = retry_policy(app, budget_s)
    try:
        with app.producer_or_acquire() as producer:
            for n, group in enumerate(groups):
                task_id = ids[n] if ids else message_id([fp for fp, _ in group])
                payload: dict[str, Any] = {
                    "spec": spec.to_json(),
                    "items": [[fp, text] for fp, text in group],
                }
                if owner is not None:
                    payload["owner"] = owner
                # The message's own summary for logs and monitors (Flower, `celery
                # events`), not a repr of its texts: the users' texts stay out of them, and
                # the repr was a fifth of a publish's CPU. Its outcome reaches callers
                # through the hot store, never Celery's result backend: without
                # `ignore_result` here (the task's own flag is not read by `send_task`),
                # every publish subscribed this process to the task's result channel
                # and every AsyncResult unsubscribed it, two Redis commands a message.
                app.send_task(
                    names.EMBED, args=[payload], task_id=task_id, queue=queue,
                    producer=producer, argsrepr=f"<{len(group)} texts, spec {spec.model}>",
                    kwargsrepr="{}", retry_policy=policy, ignore_result=True,
                )
                sent.append(task_id)
    except BROKER_ERRORS as exc:
        raise broker_error(exc) from exc
    return sent


def warm_broker(app: Celery, queues: list[str]) -> None:
    """Do now what a process's first publish does on its way: load the result backend,
    open the producer pool's broker connection and declare `queues` on it. A first publish
    took 45 ms against 5 ms after it, and several callers' first publishes at once queued
    behind each other's imports (a new process's first requests 200-250 ms, the later ones
    under 200 ms, in `embedq bench scale`). Raises BrokerUnavailable."""
    try:
        app.backend  # noqa: B018 - Celery loads its result backend on first use
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)
            for name in queues:
                producer.maybe_declare(app.amqp.queues[name])
    except BROKER_ERRORS as exc:
        raise broker_error(exc) from exc


def check_login(app: Celery) -> None:
    """Connect to the broker as a first publish would: BrokerLoginRefused when it refuses
    the credentials (a process started on them would only fail, the worker in a
    traceback); a broker not reachable yet is logged and left to Celery's reconnects."""
    try:
        warm_broker(app, [])
    except BrokerLoginRefused:
        raise
    except BrokerUnavailable as exc:
        log.warning("the broker is not reachable yet (%s): connecting when it is", exc)


def broker_error(exc: BaseException, then: str = "retry shortly") -> BrokerUnavailable:
    """What a failed publish means: Redis out of memory, or a login the broker refused,
    said as such (no retry mends the credentials), else unreachable."""
    if out_of_memory(exc):
        return BrokerOutOfMemory(OUT_OF_MEMORY)
    if any(said in str(exc) for said in _REFUSED_LOGIN):
        return BrokerLoginRefused(f"the broker refused the login of EMBEDQ_BROKER_URL "
                                  f"({exc}): fix the user and password in it")
    return BrokerUnavailable(f"the broker is unreachable ({exc}); {then}")
