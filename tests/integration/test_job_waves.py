"""A job uses the workers there are: each wave is as wide as the live workers on the
job's queue (their heartbeats), and the last waves' pending chunks are cut again into
equal ones that fill whole waves, so a worker started while a job waits or runs takes
part in it and none idles behind a larger chunk."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.jobs.dispatch import MIN_CHUNK_TEXTS, workers_on
from embedq.jobs.service import JobService
from embedq.jobs.store import even_cut
from embedq.models import JobChunk
from embedq.service import EmbeddingService
from embedq.tasks.app import CHUNKS_PER_WORKER
from tests import support
from tests.integration.test_jobs import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def env(redis_url: str, pg_url: str, tmp_path: Path) -> dict[str, str]:
    return support.cluster_env(
        redis_url, pg_url, ledger_path=tmp_path / "ledger.txt",
        online_queue=f"online-waves-{tmp_path.name}", bulk_queue=f"bulk-waves-{tmp_path.name}",
        job_chunk_max_texts=400, job_wave_chunks=1,
    )


class HeldJobs(JobService):
    """Jobs submitted unstarted, cancelled afterwards: the database is the session's, and
    a job left queued would be started by a later test's tick."""

    held: list[str]

    def hold(self, texts: list[str]) -> str:
        job_id = self.submit(texts, start=False)
        self.held.append(job_id)
        return job_id


@pytest.fixture
def jobs(env: dict[str, str]) -> Iterator[HeldJobs]:
    service = EmbeddingService(support.settings_from(env))
    held = HeldJobs(service)
    held.held = []
    yield held
    for job_id in held.held:
        held.cancel(job_id)
    service.close()


def ranges(jobs: JobService, job_id: str) -> list[tuple[int, int, int]]:
    with jobs.store.db.session() as s:
        rows = s.query(JobChunk).filter_by(job_id=job_id).order_by(JobChunk.start).all()
        return [(c.start, c.stop, c.tokens) for c in rows]


def test_the_last_waves_chunks_are_cut_again_into_equal_ones(jobs: HeldJobs,
                                                              salt: str) -> None:
    texts = [f"{salt} item {i}" for i in range(1000)]  # chunks of 400, 400 and 200
    job_id = jobs.hold(texts)
    assert [(a, b) for a, b, _ in ranges(jobs, job_id)] == [(0, 400), (400, 800),
                                                            (800, 1000)]
    tokens = sum(t for _, _, t in ranges(jobs, job_id))
    wave = jobs.store.next_wave(job_id, 4, MIN_CHUNK_TEXTS, 400)
    assert len(wave) == 4
    after = ranges(jobs, job_id)
    assert [(a, b) for a, b, _ in after] == [(i * 250, (i + 1) * 250) for i in range(4)]
    assert abs(sum(t for _, _, t in after) - tokens) <= len(after)  # shares rounded down
    assert jobs.store.get(job_id).chunks == 4
    assert jobs.store.next_wave(job_id, 4, MIN_CHUNK_TEXTS, 400) == wave  # already even


def test_a_job_too_big_for_one_wave_is_cut_into_whole_waves(jobs: HeldJobs,
                                                            salt: str) -> None:
    job_id = jobs.hold([f"{salt} item {i}" for i in range(1000)])
    wave = jobs.store.next_wave(job_id, 2, MIN_CHUNK_TEXTS, 400)
    # 1,000 texts in chunks of at most 400: two waves of two, 250 each.
    assert [(a, b) for a, b, _ in ranges(jobs, job_id)] == [(i * 250, (i + 1) * 250)
                                                            for i in range(4)]
    assert len(wave) == 2


def test_chunks_are_never_cut_below_the_smallest_size(jobs: HeldJobs, salt: str) -> None:
    job_id = jobs.hold([f"{salt} small {i}" for i in range(2 * MIN_CHUNK_TEXTS - 1)])
    assert len(jobs.store.next_wave(job_id, 16, MIN_CHUNK_TEXTS, 400)) == 1


def test_an_even_cut_keeps_to_each_range_and_covers_it() -> None:
    cut = even_cut([(0, 100), (150, 160)], 5)
    assert cut[0][0] == 0 and cut[-1] == (150, 160)
    assert all(b > a for a, b in cut)
    covered = sum(b - a for a, b in cut)
    assert covered == 110 and len(cut) == 5
    assert max(b - a for a, b in cut[:4]) - min(b - a for a, b in cut[:4]) <= 1


def bulk_chunks_run(log: Path) -> int:
    text = log.read_text(errors="replace")
    return len(re.findall(r"Task embedq\.bulk_chunk\[[^\]]+\] succeeded", text))


def test_a_worker_started_before_the_next_wave_takes_part(env: dict[str, str],
                                                          jobs: JobService, tmp_path: Path,
                                                          salt: str) -> None:
    queue = jobs.settings.queue.bulk_queue
    count = workers_on(jobs.service.hot)
    one = support.WorkerProcess(env, tmp_path / "one.log").start()
    two: support.WorkerProcess | None = None
    try:
        support.wait_until(lambda: count(queue) == 1, 60, "the first worker's heartbeat")
        assert jobs.dispatcher.wave_width(queue) == CHUNKS_PER_WORKER
        two = support.WorkerProcess(env, tmp_path / "two.log").start()
        support.wait_until(lambda: count(queue) == 2, 60, "the second worker's heartbeat")
        assert jobs.dispatcher.wave_width(queue) == 2 * CHUNKS_PER_WORKER
        texts = [f"{salt} wide {i}" for i in range(800)]  # two chunks as submitted
        state = wait_for(jobs, jobs.submit(texts))
        assert state["status"] == "succeeded" and state["progress"]["done"] == 800
        assert state["progress"]["chunks"] == 2 * CHUNKS_PER_WORKER  # cut to fill it
        assert bulk_chunks_run(tmp_path / "one.log") >= 1
        assert bulk_chunks_run(tmp_path / "two.log") >= 1
    finally:
        for worker in (one, two):
            if worker is not None:
                worker.stop()
    passes = support.ledger_counts(tmp_path / "ledger.txt")
    assert sum(passes.values()) == 800  # every text computed once, split or not


def bulk_chunks_received(log: Path) -> int:
    text = log.read_text(errors="replace")
    return len(re.findall(r"Task embedq\.bulk_chunk\[[^\]]+\] received", text))


@pytest.mark.parametrize("only_bulk", [False, True], ids=["both-queues", "bulk-only"])
def test_a_worker_holds_at_most_its_share_of_a_wave(redis_url: str, pg_url: str,
                                                    tmp_path: Path, salt: str,
                                                    only_bulk: bool) -> None:
    """A wave of four chunks and one worker: it takes CHUNKS_PER_WORKER of them, and the
    rest stay on the bulk queue, for any other worker to take, until one of its own is
    done. With only its prefetch (its 32 threads) it took all four, and a worker started
    meanwhile, or one that finished early, had none of them (three chunks on one worker and
    one on another held 8 workers at 0.64-0.67 linearity in `embedq bench scale`). A
    worker consuming only the bulk queue has no queue left to wait on while it holds its
    share, and still takes the next chunk within a BRPOP timeout of finishing one."""
    import redis

    bulk = f"bulk-held-{tmp_path.name}"
    env = support.cluster_env(
        redis_url, pg_url, ledger_path=tmp_path / "ledger.txt",
        online_queue=f"online-held-{tmp_path.name}", bulk_queue=bulk,
        job_chunk_max_texts=400, job_wave_chunks=4,
    )
    service = EmbeddingService(support.settings_from(env))
    jobs = JobService(service)
    queued = redis.Redis.from_url(redis_url)
    log = tmp_path / "worker.log"
    worker = support.WorkerProcess(env, log, *(["--queues", bulk] if only_bulk else [])
                                   ).start()
    try:
        # Four chunks of 100 (MIN_CHUNK_TEXTS 64), each opening with a batch that sleeps:
        # the worker's first two chunks run for seconds while the others wait.
        texts = [f"{salt} held {i}" + (" [[sleep:3]]" if i % 100 == 0 else "")
                 for i in range(400)]
        job_id = jobs.submit(texts)
        support.wait_until(lambda: bulk_chunks_received(log) >= 2
                           and queued.llen(bulk) == 2, 30, "the worker's first two chunks")
        for _ in range(10):  # a second: still two held, two on the queue
            assert bulk_chunks_received(log) == CHUNKS_PER_WORKER
            assert queued.llen(bulk) == 4 - CHUNKS_PER_WORKER
            time.sleep(0.1)
        support.wait_until(lambda: bulk_chunks_run(log) >= 1, 60, "its first chunk done")
        done_at = time.monotonic()
        support.wait_until(lambda: bulk_chunks_received(log) >= 3, 60, "its third chunk")
        taken_s = time.monotonic() - done_at
        state = wait_for(jobs, job_id)
        assert state["status"] == "succeeded" and state["progress"]["done"] == 400
        assert state["progress"]["chunks"] == 4
        assert bulk_chunks_run(log) == 4
    finally:
        worker.stop()
        service.close()
        queued.close()
    assert sum(support.ledger_counts(tmp_path / "ledger.txt").values()) == 400
    assert taken_s < 3  # a BRPOP timeout (1 s) and the log's poll, with room to spare


def test_progress_moves_while_a_chunk_runs(redis_url: str, pg_url: str, tmp_path: Path,
                                           salt: str) -> None:
    """A chunk notes its items with a vector after each slice, so `done` moves before any
    chunk row is done (a 2,000-text job once sat at 0% for 35 s, then jumped to 100%)."""
    env = support.cluster_env(
        redis_url, pg_url, ledger_path=tmp_path / "ledger.txt",
        online_queue=f"online-progress-{tmp_path.name}",
        bulk_queue=f"bulk-progress-{tmp_path.name}",
        job_chunk_max_texts=1200, job_wave_chunks=1,
    )
    service = EmbeddingService(support.settings_from(env))
    jobs = JobService(service)
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        # Two chunks of 600 (two slots of one worker), three slices each; each chunk's
        # last slice holds a text whose batch sleeps, so it ends seconds after the rest.
        texts = [f"{salt} progress {i}" for i in range(1200)]
        texts[599] += " [[sleep:4]]"
        texts[1199] += " [[sleep:4]]"
        job_id = jobs.submit(texts)
        seen: list[dict[str, int]] = []

        def moved() -> bool:
            progress = jobs.describe(job_id)["progress"]
            seen.append(progress)
            return progress["chunks_done"] == 0 and progress["done"] >= 256

        support.wait_until(moved, 60, "progress before any chunk was done", interval_s=0.05)
        state = wait_for(jobs, job_id)
        assert state["status"] == "succeeded" and state["progress"]["done"] == 1200
        dones = [p["done"] for p in seen]
        assert dones == sorted(dones) and max(dones) <= 1200
    finally:
        worker.stop()
        service.close()
