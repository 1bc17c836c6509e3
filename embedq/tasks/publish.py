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
from typing import Any

from celery import Celery
from kombu.exceptions import OperationalError as KombuOperationalError

from embedq.coordination.redis_link import OUT_OF_MEMORY, out_of_memory
from embedq.errors import BrokerOutOfMemory, BrokerUnavailable
from embedq.fingerprint import EncodeSpec
from embedq.tasks import names


def message_id(fps: list[str]) -> str:
    if len(fps) == 1:
        return fps[0]
    return "pack-" + hashlib.sha256("".join(fps).encode()).hexdigest()[:40]


def plan_messages(fps: list[str], per_message: int) -> list[list[str]]:
    per_message = max(1, per_message)
    return [fps[i : i + per_message] for i in range(0, len(fps), per_message)]


def publish_embed(
    app: Celery,
    spec: EncodeSpec,
    groups: list[list[tuple[str, str]]],
    queue: str,
    ids: list[str] | None = None,
    owner: str | None = None,
) -> list[str]:
    """Publish one message per group over one producer connection; return task ids.
    `owner`: the claim owner whose callers' interest decides whether the texts are
    still wanted when a worker reaches them."""
    sent: list[str] = []
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
                # the repr was a fifth of a publish's CPU.
                app.send_task(
                    names.EMBED, args=[payload], task_id=task_id, queue=queue,
                    producer=producer, argsrepr=f"<{len(group)} texts, spec {spec.model}>",
                    kwargsrepr="{}",
                )
                sent.append(task_id)
    except (KombuOperationalError, OSError) as exc:
        raise broker_error(exc) from exc
    return sent


def broker_error(exc: BaseException, then: str = "retry shortly") -> BrokerUnavailable:
    """What a failed publish means: Redis out of memory said as such, else unreachable."""
    if out_of_memory(exc):
        return BrokerOutOfMemory(OUT_OF_MEMORY)
    return BrokerUnavailable(f"the broker is unreachable ({exc}); {then}")
