"""Why a job's texts failed, said on the job itself.

Each failed item keeps its own message (`JobItem.error`, written by
`JobStore.record_failures`; `embedq jobs export` shows it beside its text). A job that ends
with failures also says why in its own `error` (`Dispatcher.finish`), so that `embedq jobs
status`, `GET /v1/jobs/{id}`, the Batch API's `errors` and `embedq bulk --wait` name the
cause without an export: how many texts failed and the commonest message, word for word
(a worker serving another model revision, a vector with NaN, ...), and how many other
messages there are. Before this a job whose every text failed for one fixable reason
showed `failed` with `error: None`, and the reason was only in the worker's log.

`unserved` says it before the texts run: `embedq bulk` warns when no live worker on the
job's queue serves its model at its revision (the job waits for one, or the workers there
would fail its texts), naming what to start and how to cancel.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from embedq.coordination.store import serving
from embedq.models import Database, Job, JobItem

# A job's error is a summary, not an export: one message in full (they are written to say
# what to do), cut here only if a message is unreasonably long.
MAX_MESSAGE_CHARS = 1500


def failure_summary(db: Database, job_id: str, failed: int, total: int) -> str | None:
    """"3 of 10 texts failed; 3 with: <message>" (and how many other messages), or None
    when no item of the job holds a message (none failed, or their rows are gone)."""
    if failed <= 0:
        return None
    with db.session() as s:
        rows = s.execute(
            select(JobItem.error, func.count())
            .where(JobItem.job_id == job_id, JobItem.error.is_not(None))
            .group_by(JobItem.error)
            .order_by(func.count().desc(), JobItem.error)
        ).all()
    if not rows:
        return None
    message, count = rows[0]
    text = str(message)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "..."
    summary = f"{failed} of {total} texts failed; {int(count)} with: {text}"
    if len(rows) > 1:
        others = sum(int(c) for _, c in rows[1:])
        summary += (f" (and {others} with {len(rows) - 1} other message(s): `embedq jobs "
                    f"export {job_id} --out FILE.jsonl` shows each text's)")
    return summary


def unserved(job: Job, queue: str, workers: dict[str, dict[str, Any]]) -> str | None:
    """What to do when no live worker (`workers`: `HotStore.live_workers`) that consumes
    `queue` serves the job's model at its revision, or None when one does. A worker that
    takes a chunk of a revision it does not serve fails its texts, each with a message
    that says so; said at submission, the job can be cancelled before that."""
    served = serving(workers, queue, job.model, job.revision)
    if served is None:
        return None
    start = ("start `embedq worker` with the EMBEDQ_MODEL, EMBEDQ_MODEL_REVISION and "
             "EMBEDQ_TIERS this job was submitted with")
    if not served:
        return f"no live worker consumes the queue {queue!r}: the job waits for one; {start}"
    return (f"the live workers on the queue {queue!r} serve {', '.join(served)}, not "
            f"{job.model}@{job.revision}, and would fail this job's texts: {start}, or give "
            f"each revision its own EMBEDQ_BULK_QUEUE; `embedq jobs cancel {job.id}` stops "
            "what has not run yet")
