"""The tasks themselves: thin wrappers that unpack a JSON payload and call the runtime.

They are Celery shared tasks, defined once per process and bound to every embedq app when
it is finalized (producers only need their names; workers run them).
"""

from __future__ import annotations

from typing import Any

from celery import Celery, Task, shared_task

from embedq.config import Settings
from embedq.errors import Unavailable
from embedq.tasks import bulk, names  # noqa: F401 - importing bulk defines the job tasks
from embedq.workers import runtime


@shared_task(  # type: ignore[untyped-decorator]
    name=names.EMBED,
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
    queue = (task.request.delivery_info or {}).get("routing_key")
    return runtime.current(queue).handle_embed(payload)


def register(app: Celery, settings: Settings) -> None:
    """Bind the shared tasks to `app` (they register on finalize; this makes it explicit)."""
    app.finalize()
    del settings
