"""Every SQL statement about jobs, in one place: rows in, progress out.

Progress is the sum over a job's chunk rows; a chunk turns `done` in one UPDATE guarded by
`status <> 'done'`, so a chunk that ran twice is counted once. State changes of a job
are compare-and-set on (status, generation): of two processes that race to dispatch or
close the same job, exactly one wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from embedq.errors import NotFound
from embedq.jobs.items import ItemRow, write_items
from embedq.limits import plausible_id
from embedq.models import ChunkStatus, Database, Embedding, Job, JobChunk, JobItem, JobStatus

PAGE_ROWS = 2000
FAILURES_PER_STATEMENT = 500  # fingerprints in one UPDATE's IN list (SQLite's bound: 999+)


def even_cut(ranges: Sequence[tuple[int, int]], pieces: int) -> list[tuple[int, int]]:
    """`ranges` (disjoint [start, stop) item ranges, in order) cut into about `pieces`
    ranges of near-equal length, none crossing a gap: adjacent ranges are joined into
    runs first, and each run gets pieces in proportion to its length (at least one, so a
    run shorter than the others may make more than `pieces`)."""
    runs: list[tuple[int, int]] = []
    for a, b in ranges:
        if runs and runs[-1][1] == a:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((a, b))
    ranges = runs
    lengths = [b - a for a, b in ranges]
    total = sum(lengths)
    shares = [max(1, pieces * n // total) for n in lengths]
    # Pieces go where they shorten the longest piece, and come from where the shortest
    # would grow least, until there are `pieces` (or every run has one).
    while sum(shares) < pieces:
        i = max(range(len(shares)), key=lambda j: lengths[j] / shares[j])
        shares[i] += 1
    while sum(shares) > pieces and max(shares) > 1:
        i = min((j for j in range(len(shares)) if shares[j] > 1),
                key=lambda j: lengths[j] / (shares[j] - 1))
        shares[i] -= 1
    out: list[tuple[int, int]] = []
    for (a, b), k in zip(ranges, shares, strict=True):
        k = min(k, b - a)
        bounds = [a + (b - a) * i // k for i in range(k + 1)]
        out.extend(itertools.pairwise(bounds))
    return out


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    cached: int
    coalesced: int
    failed: int
    encoded: int
    chunks: int
    chunks_done: int

    def to_json(self) -> dict[str, int]:
        return {
            "total": self.total, "done": self.done, "cached": self.cached,
            "coalesced": self.coalesced, "failed": self.failed, "encoded": self.encoded,
            "chunks": self.chunks, "chunks_done": self.chunks_done,
        }


@dataclass(frozen=True)
class ChunkCounts:
    encoded: int = 0
    done: int = 0
    cached: int = 0
    coalesced: int = 0
    failed: int = 0

    def to_json(self) -> dict[str, int]:
        return {"encoded": self.encoded, "done": self.done, "cached": self.cached,
                "coalesced": self.coalesced, "failed": self.failed}


@dataclass(frozen=True)
class ResultRow:
    index: int
    id: str | None
    vector: bytes | None
    error: str | None


def not_found(job_id: str) -> NotFound:
    return NotFound(f"job {job_id!r} does not exist: GET /v1/jobs (or `embedq jobs list`) "
                    "lists the jobs")


class JobStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- creating
    def create(self, job: Job) -> None:
        with self.db.session() as s:
            s.add(job)

    def add(self, job_id: str, items: Sequence[ItemRow],
            chunks: Sequence[dict[str, Any]]) -> None:
        """Insert a page of items and the chunks they close, in one transaction, and note
        the moment on the job (`progress_at`): a job whose loading stopped (its submitter
        died) is found by that moment and failed (`fail_stale_loading`)."""
        with self.db.session() as s:
            if items:
                write_items(s, items)
            if chunks:
                s.execute(insert(JobChunk), list(chunks))
            s.execute(update(Job).where(Job.id == job_id, Job.loaded.is_(False))
                      .values(progress_at=utcnow()))

    @staticmethod
    def delete(s: Session, job_id: str) -> None:
        """The job and what is stored under it, in `s`'s transaction: its items carry no
        foreign key to cascade from the job (migration 0011), nor does SQLite cascade."""
        for column in (JobItem.job_id, JobChunk.job_id, Job.id):
            s.execute(delete(column.table).where(column == job_id))

    def seal(self, job_id: str, total: int, chunks: int, error: str | None) -> None:
        values: dict[str, Any] = {"loaded": True, "total": total, "chunks": chunks,
                                  "error": error}
        if total == 0:
            values.update(status=JobStatus.FAILED, finished_at=utcnow())
        with self.db.session() as s:
            s.execute(update(Job).where(Job.id == job_id).values(**values))

    # --- reading
    def queued_inputs(self, tenant: str) -> int:
        """Inputs of `tenant`'s unfinished jobs (queued or running): a loaded job's total,
        and the items stored so far of one still loading."""
        active = (Job.tenant == tenant, Job.status.in_(JobStatus.active()))
        with self.db.session() as s:
            loaded = s.scalar(select(func.coalesce(func.sum(Job.total), 0))
                              .where(*active, Job.loaded.is_(True))) or 0
            loading = s.scalar(select(func.count()).select_from(JobItem)
                               .join(Job, Job.id == JobItem.job_id)
                               .where(*active, Job.loaded.is_(False))) or 0
        return int(loaded) + int(loading)

    def get(self, job_id: str, tenant: str | None = None) -> Job:
        """The job; NotFound when there is none, or it is not `tenant`'s (None: any).
        Another tenant's job is answered exactly like a missing one, and so is an id that
        cannot exist (a NUL, a lone surrogate, a megabyte: it never reaches a query)."""
        job = None
        if plausible_id(job_id):
            with self.db.session() as s:
                job = s.get(Job, job_id)
        if job is None or (tenant is not None and job.tenant != tenant):
            raise not_found(job_id)
        return job

    def owner(self, job_id: str, tenant: str | None = None) -> str:
        """The job's tenant, read without loading the rest of its row (which an older
        release may have stored unreadable); NotFound as `get`."""
        owner = None
        if plausible_id(job_id):
            with self.db.session() as s:
                owner = s.scalar(select(Job.tenant).where(Job.id == job_id))
        if owner is None or (tenant is not None and owner != tenant):
            raise not_found(job_id)
        return owner

    def progress(self, job: Job, running: dict[int, int] | None = None) -> Progress:
        """The job's counts from its chunk rows; with `running` (chunk -> items with a
        vector so far, `HotStore.chunk_progress`), `done` also counts those of chunks
        still pending, so it moves while a chunk runs (a done chunk's row counts alone)."""
        with self.db.session() as s:
            row = s.execute(
                select(
                    func.coalesce(func.sum(JobChunk.done), 0),
                    func.coalesce(func.sum(JobChunk.cached), 0),
                    func.coalesce(func.sum(JobChunk.coalesced), 0),
                    func.coalesce(func.sum(JobChunk.failed), 0),
                    func.coalesce(func.sum(JobChunk.encoded), 0),
                    func.count().filter(JobChunk.status == ChunkStatus.DONE),
                ).where(JobChunk.job_id == job.id)
            ).one()
            under_way = list(s.scalars(select(JobChunk.chunk).where(
                JobChunk.job_id == job.id, JobChunk.status != ChunkStatus.DONE,
                JobChunk.chunk.in_(list(running))))) if running else []
        done, cached, coalesced, failed, encoded, chunks_done = (int(v or 0) for v in row)
        if running:
            done = min(job.total, done + sum(running[c] for c in under_way))
        return Progress(job.total, done, cached, coalesced, failed, encoded, job.chunks,
                        chunks_done)

    def recent(self, limit: int = 50, status: str | None = None,
               tenant: str | None = None, after: str | None = None) -> list[str]:
        """Ids of jobs newest first (`tenant`'s, in `status`, when given), from the one
        after the id `after` (NotFound for an id that is not `tenant`'s). Ids only: a
        reader loads each row on its own, so one unreadable row spoils no page."""
        query = select(Job.id).order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
        if status:
            query = query.where(Job.status == status)
        if tenant is not None:
            query = query.where(Job.tenant == tenant)
        if after is not None:
            self.owner(after, tenant)
            with self.db.session() as s:
                at = s.scalar(select(Job.created_at).where(Job.id == after))
            query = query.where((Job.created_at < at) | ((Job.created_at == at)
                                                         & (Job.id < after)))
        with self.db.session() as s:
            return list(s.scalars(query))

    def ids_in(self, statuses: Sequence[str]) -> list[str]:
        """Ids of loaded jobs in `statuses`, oldest first (the tick loads each on its own)."""
        with self.db.session() as s:
            return list(s.scalars(
                select(Job.id).where(Job.status.in_(statuses), Job.loaded.is_(True))
                .order_by(Job.created_at)
            ))

    def fail_stale_loading(self, deadline: datetime, now: datetime, error: str) -> list[str]:
        """Fail every queued job still loading whose last page of inputs was stored before
        `deadline` (its submitter died mid-submit: nothing would ever seal it); their ids.
        Each is a guarded UPDATE, so a loader that stored a page meanwhile keeps its job."""
        stale = (Job.status == JobStatus.QUEUED, Job.loaded.is_(False),
                 func.coalesce(Job.progress_at, Job.created_at) < deadline)
        with self.db.session() as s:
            ids = list(s.scalars(select(Job.id).where(*stale)))
        failed = []
        for job_id in ids:
            with self.db.session() as s:
                done = s.execute(update(Job).where(Job.id == job_id, *stale).values(
                    status=JobStatus.FAILED, finished_at=now, error=error))
            if getattr(done, "rowcount", 0):
                failed.append(job_id)
        return failed

    def pending_chunks(self, job_id: str, limit: int) -> list[int]:
        """Chunks not done yet (sent in a wave or not), in order."""
        with self.db.session() as s:
            return list(s.scalars(
                select(JobChunk.chunk).where(
                    JobChunk.job_id == job_id, JobChunk.status != ChunkStatus.DONE
                ).order_by(JobChunk.chunk).limit(limit)
            ))

    def sent_chunks(self, job_id: str) -> int:
        """Chunks sent in a wave that have not finished."""
        sent = (JobChunk.job_id == job_id, JobChunk.status == ChunkStatus.SENT)
        with self.db.session() as s:
            return int(s.scalar(select(func.count()).where(*sent)) or 0)

    def next_wave(self, job_id: str, width: int, min_texts: int, max_texts: int
                  ) -> list[int]:
        """Up to `width` chunks not done for the next wave, in input order, marked sent.
        One still marked sent from an earlier wave lost its message (a wave is closed
        only once all its chunks are done), so it is sent again.

        When at most two waves' worth of chunks are left (a small job, or a big one's
        tail), the pending chunks are first cut again into equal ones, as many as fill
        whole waves of `width` (each at most `max_texts` and at least `min_texts` texts):
        a chord waits for its slowest chunk, so unequal chunks leave workers idle, and a
        wave wider than the chunks left leaves them unused. Pending chunks have no work
        started, so cutting them again moves nothing that ran; the job's row is locked
        meanwhile, so of two dispatchers the second sees the first one's cut."""
        with self.db.session() as s:
            job = s.execute(select(Job).where(Job.id == job_id).with_for_update()).scalar_one()
            pending = list(s.scalars(
                select(JobChunk).where(JobChunk.job_id == job_id,
                                       JobChunk.status != ChunkStatus.DONE)
                .order_by(JobChunk.start)
            ))
            if pending and len(pending) <= 2 * width:
                pending = self._recut(s, job, pending, width, min_texts, max_texts)
            wave = [c.chunk for c in pending[:width]]
            s.execute(update(JobChunk).where(JobChunk.job_id == job_id, JobChunk.chunk.in_(wave))
                      .values(status=ChunkStatus.SENT))
            return wave

    def _recut(self, s: Session, job: Job, pending: list[JobChunk], width: int,
               min_texts: int, max_texts: int) -> list[JobChunk]:
        total = sum(c.stop - c.start for c in pending)
        waves = -(-total // (width * max_texts))
        pieces = max(1, min(width * waves, total // max(1, min_texts)))
        cut = even_cut([(c.start, c.stop) for c in pending], pieces)
        if cut == [(c.start, c.stop) for c in pending]:
            return pending
        tokens = {id(c): c.tokens for c in pending}
        first = (s.scalar(select(func.max(JobChunk.chunk)).where(JobChunk.job_id == job.id))
                 or 0) + 1
        fresh: list[JobChunk] = []
        for n, (start, stop) in enumerate(cut):
            source = next(c for c in pending if c.start <= start < c.stop)
            share = tokens[id(source)] * (stop - start) // (source.stop - source.start)
            fresh.append(JobChunk(job_id=job.id, chunk=first + n, start=start, stop=stop,
                                  tokens=share, status=ChunkStatus.PENDING))
        for c in pending:
            s.delete(c)
        s.flush()
        s.add_all(fresh)
        job.chunks += len(fresh) - len(pending)
        return fresh

    def chunk(self, job_id: str, chunk: int) -> JobChunk:
        with self.db.session() as s:
            row = s.get(JobChunk, (job_id, chunk))
        if row is None:
            raise NotFound(f"job {job_id!r} has no chunk {chunk}")
        return row

    def chunk_items(self, job_id: str, start: int, stop: int) -> list[tuple[str, str]]:
        """(fingerprint, text) of the items in [start, stop), in input order."""
        with self.db.session() as s:
            rows = s.execute(
                select(JobItem.fingerprint, JobItem.text).where(
                    JobItem.job_id == job_id, JobItem.index >= start, JobItem.index < stop
                ).order_by(JobItem.index)
            )
            return [(fp, text) for fp, text in rows]

    def results(self, job_id: str, offset: int, limit: int) -> Iterator[ResultRow]:
        """Items in input order from `offset`, each with its vector or error; paged."""
        index = offset
        end = offset + limit
        while index < end:
            page = min(PAGE_ROWS, end - index)
            with self.db.session() as s:
                rows = list(s.execute(
                    select(JobItem.index, JobItem.external_id, Embedding.vector, JobItem.error)
                    .outerjoin(Embedding, Embedding.fingerprint == JobItem.fingerprint)
                    .where(JobItem.job_id == job_id, JobItem.index >= index)
                    .order_by(JobItem.index).limit(page)
                ))
            for i, ext, vec, err in rows:
                yield ResultRow(i, ext, bytes(vec) if vec is not None else None, err)
            if len(rows) < page:
                return
            index = rows[-1][0] + 1

    # --- state changes (compare-and-set)
    def transition(self, job_id: str, from_status: Sequence[str], at_generation: int | None,
                   **values: Any) -> bool:
        """Set `values` if the job is in one of `from_status` (and at `at_generation`)."""
        stmt = update(Job).where(Job.id == job_id, Job.status.in_(from_status))
        if at_generation is not None:
            stmt = stmt.where(Job.generation == at_generation)
        with self.db.session() as s:
            result = s.execute(stmt.values(**values))
        return bool(getattr(result, "rowcount", 0))

    def finish_chunk(self, job_id: str, chunk: int, counts: ChunkCounts) -> bool:
        """Record a chunk's counts once; False when it was already done (a second run)."""
        now = utcnow()
        with self.db.session() as s:
            result = s.execute(
                update(JobChunk).where(
                    JobChunk.job_id == job_id, JobChunk.chunk == chunk,
                    JobChunk.status != ChunkStatus.DONE,
                ).values(status=ChunkStatus.DONE, finished_at=now, **counts.to_json())
            )
            won = bool(getattr(result, "rowcount", 0))
            if won:
                s.execute(update(Job).where(Job.id == job_id).values(progress_at=now))
        return won

    def record_failures(self, job_id: str, start: int, stop: int,
                        errors: dict[str, str]) -> None:
        """Each failed fingerprint's message on its items of the slice [start, stop): one
        UPDATE per distinct message (a chunk that failed whole, for one reason, is one
        statement, not one per text)."""
        by_message: dict[str, list[str]] = {}
        for fp, message in errors.items():
            by_message.setdefault(message, []).append(fp)
        with self.db.session() as s:
            for message, fps in by_message.items():
                for i in range(0, len(fps), FAILURES_PER_STATEMENT):
                    s.execute(update(JobItem).where(
                        JobItem.job_id == job_id, JobItem.index >= start,
                        JobItem.index < stop,
                        JobItem.fingerprint.in_(fps[i:i + FAILURES_PER_STATEMENT]),
                    ).values(error=message).execution_options(synchronize_session=False))
