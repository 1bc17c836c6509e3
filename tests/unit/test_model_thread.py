"""Every forward pass of a worker runtime, its warm-up included, runs on one thread: the
batcher's. (A torch model whose first pass ran on the loading thread paid for that
thread's OpenMP team on every later call: a one-text encode took 8.5-9.3 ms instead of
6.8-7.3 ms on 2 cores: docs/history.md.)"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.encoders.hashing import HashingEncoder
from embedq.workers import chunk
from embedq.workers.items import ONLINE, Item
from embedq.workers.outcome import wait_all
from embedq.workers.runtime import WorkerRuntime


class ThreadRecordingEncoder(HashingEncoder):
    """The hashing encoder, noting the thread of each call (warm-up calls included)."""

    def __init__(self, fail_warm_up: bool = False) -> None:
        super().__init__()
        self.threads: list[int] = []
        self.fail_warm_up = fail_warm_up

    def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        self.threads.append(threading.get_ident())
        if self.fail_warm_up:
            raise RuntimeError("the model cannot run here")
        return super().encode(texts)


def embedded(tmp_path: Path) -> Settings:
    return Settings.from_env({"EMBEDQ_DATA_DIR": str(tmp_path), "EMBEDQ_ENCODER": "hashing",
                              "EMBEDQ_MODEL": "hashing"})


def test_warm_up_and_batches_run_on_the_batcher_thread(tmp_path: Path) -> None:
    encoder = ThreadRecordingEncoder()
    runtime = WorkerRuntime(embedded(tmp_path), encoder=encoder, heartbeat=False)
    try:
        assert len(encoder.threads) == 1  # warmed before the constructor returned
        assert encoder.threads[0] != threading.get_ident()
        item = Item("fp-1", "one text", encoder.spec(), ONLINE)
        runtime.batcher.submit([item])
        assert not wait_all([item.future], timeout=10)
        assert encoder.threads == [encoder.threads[0]] * 2
    finally:
        runtime.close()


def test_a_failed_warm_up_stops_the_runtime_with_its_error(tmp_path: Path) -> None:
    encoder = ThreadRecordingEncoder(fail_warm_up=True)
    with pytest.raises(RuntimeError, match="the model cannot run here"):
        WorkerRuntime(embedded(tmp_path), encoder=encoder, heartbeat=False)
    assert len(encoder.threads) == 1


@pytest.mark.parametrize(("batch_texts", "slice_texts"), [(None, 256), (16, 64), (100, 256)])
def test_a_chunks_first_slices_hold_at_most_four_batches(
        tmp_path: Path, batch_texts: int | None, slice_texts: int) -> None:
    """Small batches (an upstream's 16 texts) get small first slices, so eight workers
    starting their chunks together do not set up 32 batches of work each in one burst;
    the slices after them are SLICE_TEXTS."""
    env = {"EMBEDQ_DATA_DIR": str(tmp_path), "EMBEDQ_ENCODER": "hashing",
           "EMBEDQ_MODEL": "hashing"}
    if batch_texts is not None:
        env["EMBEDQ_BATCH_MAX_TEXTS"] = str(batch_texts)
    encoder = ThreadRecordingEncoder()
    runtime = WorkerRuntime(Settings.from_env(env), encoder=encoder, heartbeat=False)
    try:
        first = chunk.first_slice_texts(runtime, encoder.spec())
        assert first == slice_texts
        other = replace(encoder.spec(), revision="not-served-here")
        assert chunk.first_slice_texts(runtime, other) == chunk.SLICE_TEXTS
        bounds = chunk._bounds(1000, first)
        assert [stop - start for start, stop in bounds[:3]] == [first, first, 256]
        assert bounds[0][0] == 0 and bounds[-1][1] == 1000
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))  # no gap or overlap
    finally:
        runtime.close()
