"""`embedq bulk`, `embedq jobs list|status|cancel|export`, `embedq beat`: thin commands."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedq.argtypes import at_least
from embedq.config import Settings
from embedq.errors import BadInputFile, InvalidInput, NothingToEmbed
from embedq.models import DEFAULT_TENANT, JobStatus, Priority

if TYPE_CHECKING:
    from embedq.jobs.service import JobService

FINAL = JobStatus.final()
TICK_SKEW_S = 60.0  # clock skew between beat's host and the workers' that ticks survive
# A job that ended with failed items exits 1, like one that failed: the caller must look.
OK = (JobStatus.SUCCEEDED, JobStatus.QUEUED, JobStatus.RUNNING)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bulk", help="embed a file as a bulk job (JSONL, CSV or plain text)")
    p.add_argument("file", help="JSONL, CSV or text (one text a line); .gz is read as gzip")
    p.add_argument("--model", default=None)
    p.add_argument("--precision", default=None, metavar="TIER",
                   help="a served tier (EMBEDQ_TIERS, e.g. int8); default "
                        "EMBEDQ_JOB_PRECISION, else the first tier")
    p.add_argument("--format", choices=["jsonl", "csv", "text"], default=None,
                   help="default: from the file name")
    p.add_argument("--text-field", default="text")
    p.add_argument("--id-field", default="id")
    p.add_argument("--off-peak", default=None, metavar="HH:MM-HH:MM",
                   help="run only inside this daily window (EMBEDQ_JOB_TIMEZONE)")
    p.add_argument("--timezone", default=None, help="time zone of --off-peak")
    p.add_argument("--not-before", default=None, metavar="ISO-8601",
                   help="do not start before this moment")
    p.add_argument("--now", action="store_true", help="ignore the off-peak window")
    p.add_argument("--priority", choices=[x.value for x in Priority], default="bulk")
    p.add_argument("--from-line", type=at_least(1), default=1,
                   help="skip the lines before this one (resubmit after fixing a bad line)")
    p.add_argument("--out", default=None, help="export when done: .parquet, .npy or .jsonl")
    p.add_argument("--wait", action="store_true", help="show progress until the job ends")
    p.add_argument("--json", action="store_true", help="print the final state as JSON")
    p.add_argument("--tenant", default=None,
                   help="the tenant the job belongs to (default: default)")
    p.add_argument("--callback-url", default=None, metavar="URL",
                   help="POST the final state here, signed (needs EMBEDQ_CALLBACK_SECRET)")
    p.set_defaults(func=cmd_bulk)

    p = sub.add_parser("jobs", help="list, inspect, cancel and export jobs")
    jobs_sub = p.add_subparsers(dest="jobs_command", required=True)
    q = jobs_sub.add_parser("list", help="recent jobs")
    q.add_argument("--limit", type=at_least(1), default=20)
    q.add_argument("--status", default=None)
    q.add_argument("--json", action="store_true")
    q.add_argument("--tenant", default=None,
                   help="act as this tenant (default: admin, every tenant's jobs)")
    q.set_defaults(func=cmd_jobs_list)
    q = jobs_sub.add_parser("status", help="one job's status and progress")
    q.add_argument("id")
    q.add_argument("--tenant", default=None,
                   help="act as this tenant (default: admin, every tenant's jobs)")
    q.add_argument("--wait", action="store_true")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_jobs_status)
    q = jobs_sub.add_parser("cancel", help="cancel what has not run yet")
    q.add_argument("id")
    q.add_argument("--tenant", default=None,
                   help="act as this tenant (default: admin, every tenant's jobs)")
    q.set_defaults(func=cmd_jobs_cancel)
    q = jobs_sub.add_parser("export", help="write ids and vectors in input order")
    q.add_argument("id")
    q.add_argument("--out", required=True, help=".parquet, .npy (+ .ids.jsonl) or .jsonl")
    q.add_argument("--tenant", default=None,
                   help="act as this tenant (default: admin, every tenant's jobs)")
    q.set_defaults(func=cmd_jobs_export)

    p = sub.add_parser("beat", help="periodic job tick: windows, pauses, stalled jobs")
    p.set_defaults(func=cmd_beat)


def _jobs() -> Any:
    from embedq.deployment import Deployment

    return Deployment.from_settings(Settings.from_env(), own_process=True).jobs()


def _parse_moment(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"--not-before {raw!r} is not ISO-8601, e.g. 2026-12-01T01:00+00:00",
                           "not_before") from None
    return moment


def _tenant(args: argparse.Namespace) -> str | None:
    """--tenant, checked; None: act as admin over every tenant."""
    from embedq.tenants import check_tenant

    return None if args.tenant is None else check_tenant(args.tenant)


def _unserved(jobs: JobService, job_id: str) -> str | None:
    """`failures.unserved` for a job just submitted to a cluster; None also when the live
    workers cannot be read (the job is stored either way)."""
    from embedq.errors import Unavailable
    from embedq.jobs.failures import unserved

    job = jobs.get(job_id)
    try:
        workers = jobs.service.hot.live_workers()
    except Unavailable:
        return None
    return unserved(job, jobs.dispatcher.queue_of(job), workers)


def _what_was_kept(exc: BadInputFile, jobs: JobService, job_id: str) -> BadInputFile:
    """`exc` (raised while the job loaded) with what became of the lines before it."""
    said = exc.args[0].split(": ", 1)[-1]
    if isinstance(exc, NothingToEmbed):
        return NothingToEmbed(f"{said} (job {job_id} failed, nothing stored)", exc.line)
    kept = jobs.describe(job_id)["progress"]["total"]
    if not kept:
        return BadInputFile(f"{said}. No text before it was saved (job {job_id} failed): fix "
                            "the line and submit the file again", exc.line)
    return BadInputFile(f"{said}. The {kept} texts before it are saved in job {job_id}, which "
                        f"runs; fix the line and submit the rest with --from-line {exc.line}",
                        exc.line)


def cmd_bulk(args: argparse.Namespace) -> int:
    from embedq.jobs.readers import read_records

    path = Path(args.file)
    if args.out:
        from embedq.jobs.export import export_format

        export_format(Path(args.out))  # a name no export takes is refused before the job
    jobs = _jobs()
    records = read_records(path, args.format, args.text_field, args.id_field, args.from_line,
                           jobs.settings.jobs.max_line_bytes)
    saved: list[str] = []
    embedded = jobs.settings.embedded
    try:
        job_id = jobs.submit(
            records, model=args.model, precision=args.precision, priority=args.priority,
            window=None if args.now else args.off_peak, timezone=args.timezone,
            not_before=_parse_moment(args.not_before), source=path.name,
            on_saved=saved.append, callback_url=args.callback_url,
            tenant=_tenant(args) or DEFAULT_TENANT,
        )
    except BadInputFile as exc:
        if not saved:
            raise
        raise _what_was_kept(exc, jobs, saved[0]) from exc
    print(f"job {job_id} submitted ({jobs.describe(job_id)['progress']['total']} texts)",
          file=sys.stderr)
    warning = None if embedded else _unserved(jobs, job_id)
    if warning:
        print(f"embedq: warning: {warning}", file=sys.stderr)
    state: dict[str, Any] = jobs.describe(job_id)
    if args.wait or embedded:
        from embedq.cli.progress import wait

        state = wait(jobs, job_id)
    if state.get("error"):
        print(f"job {job_id} {state['status']}: {state['error']}", file=sys.stderr)
    if args.out and state["status"] in FINAL:
        from embedq.jobs.export import export

        n = export(jobs.store, job_id, args.out)
        print(f"exported {n} rows to {args.out}", file=sys.stderr)
    elif args.out:
        print(f"the job is {state['status']}: export later with "
              f"`embedq jobs export {job_id} --out {args.out}`", file=sys.stderr)
    if args.json:
        print(json.dumps(state))
    else:
        print(job_id)
    return 0 if state["status"] in OK else 1


def cmd_jobs_list(args: argparse.Namespace) -> int:
    rows = _jobs().list(args.limit, args.status, _tenant(args))
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no jobs" + (f" {args.status}" if args.status else "") +
              ": `embedq bulk FILE` submits one", file=sys.stderr)
    for r in rows:
        p = r["progress"]
        print(f"{r['id']}  {r['status']:<21} {r['priority']:<6} {p['done']:>9,}/{p['total']:<9,} "
              f"failed={p['failed']:<6} {r['created_at']}  {r['source'] or ''}")
    return 0


def cmd_jobs_status(args: argparse.Namespace) -> int:
    jobs = _jobs()
    state = jobs.describe(args.id, _tenant(args))
    if args.wait:
        from embedq.cli.progress import wait

        state = wait(jobs, args.id)
    if args.json:
        print(json.dumps(state))
    else:
        for key, value in state.items():
            if key == "progress":
                value = ", ".join(f"{k}={v:,}" for k, v in value.items())
            print(f"{key:<13} {value}")
    return 0


def cmd_jobs_cancel(args: argparse.Namespace) -> int:
    jobs = _jobs()
    if jobs.cancel(args.id, _tenant(args)):
        print(f"job {args.id} cancelled; chunks already done keep their vectors")
        return 0
    print(f"job {args.id} is {jobs.get(args.id).status}: nothing to cancel", file=sys.stderr)
    return 1


def cmd_jobs_export(args: argparse.Namespace) -> int:
    from embedq.jobs.export import export

    jobs = _jobs()
    jobs.get(args.id, _tenant(args))  # another tenant's job: not found
    n = export(jobs.store, args.id, args.out)
    print(f"exported {n} rows to {args.out}", file=sys.stderr)
    return 0


def tick_expires_s(settings: Settings) -> float:
    """How long a tick waits for a worker before it is dropped. The expiry is a moment by
    beat's clock that workers compare with theirs, so it tolerates that much clock skew
    between hosts (10 s dropped every tick on a host 10 s ahead); at most this many
    seconds of ticks queue up while no worker runs (each is harmless: compare-and-set)."""
    return max(settings.jobs.tick_s, TICK_SKEW_S)


def cmd_beat(args: argparse.Namespace) -> int:
    """Celery beat with an in-memory schedule (no shelve file): one tick every job_tick_s."""
    from embedq.cli import cluster_settings
    from embedq.tasks import names
    from embedq.tasks.app import create_app

    settings = cluster_settings("beat", "embedded `embedq bulk` runs its job itself")
    app = create_app(settings)
    app.conf.beat_schedule = {
        "embedq-jobs-tick": {"task": names.JOBS_TICK, "schedule": settings.jobs.tick_s,
                             "options": {"queue": settings.queue.online_queue,
                                         "expires": tick_expires_s(settings)}},
    }
    beat = app.Beat(scheduler="celery.beat:Scheduler", loglevel=args.loglevel.upper(),
                    max_interval=min(settings.jobs.tick_s, 5.0))
    beat.run()
    return 0
