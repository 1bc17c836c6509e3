"""Claimed misses encoded by the online queue's workers: published, one message per pack."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from celery import Celery

from embedq import stages
from embedq.config import Settings
from embedq.coordination.executor import Settled, Ticket
from embedq.coordination.store import Hold, HotStore
from embedq.encoders.catalog import Catalog
from embedq.errors import EmbedqError, Unavailable
from embedq.fingerprint import EncodeSpec
from embedq.tasks.publish import pack_messages, publish_embed, warm_broker

log = logging.getLogger("embedq.service")

PUBLISH_RETRY_INTERVAL_S = 0.25


class QueueExecutor:
    """The `Executor` that queues: `before_publish` runs first (the embedded deployment
    starts its worker there on first use)."""

    def __init__(self, app: Celery, settings: Settings, hot: HotStore,
                 before_publish: Callable[[], None] | None = None,
                 catalog: Catalog | None = None) -> None:
        self.app = app
        self.settings = settings
        self.hot = hot
        self.before_publish = before_publish
        self.catalog = catalog if catalog is not None else Catalog(settings)

    def queue_of(self, spec: EncodeSpec) -> str:
        """The online queue of the model that computes `spec` (with EMBEDQ_MODELS each
        model has its own), else the configured one."""
        served = self.catalog.route(spec.model, spec.revision)
        return served.online_queue if served is not None else self.settings.queue.online_queue

    def warm_up(self) -> None:
        """Open the broker connection and declare the online queues a first publish would."""
        queues = {served.online_queue for served in self.catalog.models.values()}
        warm_broker(self.app, sorted(queues))

    @stages.timed("publish")
    def start(self, spec: EncodeSpec, pairs: list[tuple[str, str]], ticket: Ticket,
              deadline: float) -> Settled:
        """Publish the work; nothing is settled here.

        A failed publish is tried again every PUBLISH_RETRY_INTERVAL_S for up to
        `publish_retry_s` (never past the request's deadline): a broker restarting under
        the request is a blip, not an answer. If it still fails, the claims are freed and
        the error is raised: the caller answers at once (503). Each publish retries a
        failing link only as long as the window has left (`publish.retry_policy`): on a
        silent link Celery's own retries would outlast it. When the claims cannot be
        freed either, the hot store went down with the broker (one Redis for both,
        restarting): the caller then waits like any waiter, riding the outage out until
        its deadline, and its wait re-queues what lost its claim (a restarted Redis lost
        them all)."""
        if self.before_publish is not None:
            self.before_publish()
        fps = [fp for fp, _ in pairs]
        groups = pack_messages(pairs, self.settings.queue.message_max_texts)
        give_up_at = min(deadline, time.monotonic() + self.settings.queue.publish_retry_s)
        while True:
            try:
                publish_embed(self.app, spec, groups, self.queue_of(spec),
                              owner=ticket.owner, budget_s=give_up_at - time.monotonic())
                log.info("leader start: queued %d fingerprints (first %s)", len(fps),
                         fps[0][:12])
                return {}
            except EmbedqError as exc:
                if time.monotonic() + PUBLISH_RETRY_INTERVAL_S < give_up_at:
                    log.warning("publish failed (%s): trying again", exc)
                    time.sleep(PUBLISH_RETRY_INTERVAL_S)
                    continue
                try:
                    self.hot.release(Hold.CLAIM, fps)  # do not block these for a claim ttl
                except Unavailable as gone:
                    log.warning("publish failed (%s) and the hot store is down too (%s): "
                                "waiting for it to come back", exc, gone)
                    return {}
                raise
