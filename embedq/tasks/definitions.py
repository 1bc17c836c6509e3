"""The tasks themselves: thin wrappers that unpack a JSON payload and call the runtime."""

from __future__ import annotations

from typing import Any

from celery import Celery, Task

from embedq.config import Settings
from embedq.errors import Unavailable
from embedq.tasks import bulk, names
from embedq.workers import runtime


def register(app: Celery, settings: Settings) -> None:
    @app.task(  # type: ignore[untyped-decorator]
        name=names.EMBED,
        shared=False,
        bind=True,
        ignore_result=True,
        acks_late=True,
        reject_on_worker_lost=True,
        autoretry_for=(Unavailable,),
        retry_backoff=1,
        retry_backoff_max=30,
        max_retries=30,
    )
    def embed(task: Task, payload: dict[str, Any]) -> dict[str, int]:
        """Embed the (fingerprint, text) pairs of one online message."""
        return runtime.current().handle_embed(payload)

    del embed
    bulk.register(app, settings)
