"""The collector in a long-running process (embedq/heap.py): startup's objects frozen out
of its walks, the youngest generation's threshold raised, and `embedq serve` doing so once
its startup is done."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.errors import ConfigError
from embedq.heap import settle


@pytest.fixture
def collector() -> Iterator[tuple[int, int, int]]:
    """The process's collector as it was, put back afterwards."""
    before = gc.get_threshold()
    gc.unfreeze()
    yield before
    gc.unfreeze()
    gc.set_threshold(*before)


def test_settle_freezes_what_is_alive_and_raises_the_young_threshold(
        collector: tuple[int, int, int]) -> None:
    alive = [object() for _ in range(10)]
    settle(12_345)
    assert gc.get_threshold() == (12_345, *collector[1:])
    assert gc.get_freeze_count() > len(alive)


def test_zero_leaves_the_collector_as_python_has_it(collector: tuple[int, int, int]) -> None:
    settle(0)
    assert gc.get_threshold() == collector and gc.get_freeze_count() == 0


def test_the_setting_defaults_to_ten_thousand_and_refuses_a_negative() -> None:
    assert Settings.from_env({}).worker.gc_gen0 == 10_000
    assert Settings.from_env({"EMBEDQ_GC_GEN0": "0"}).worker.gc_gen0 == 0
    with pytest.raises(ConfigError, match="EMBEDQ_GC_GEN0"):
        Settings.from_env({"EMBEDQ_GC_GEN0": "-1"})


def test_serve_settles_its_collector_once_started(collector: tuple[int, int, int],
                                                  tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from embedq.api.app import create_app

    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_GC_GEN0": "7777",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").status_code == 200
        assert gc.get_threshold()[0] == 7777 and gc.get_freeze_count() > 0


@pytest.mark.parametrize("own_process", [True, False])
def test_an_embedded_worker_settles_the_collector_only_in_a_process_of_its_own(
        collector: tuple[int, int, int], tmp_path: Path, own_process: bool) -> None:
    """A CLI command's embedded deployment (`embedq bulk`, the GPU check's job) settles
    once its worker started; a library caller's (`Client`) leaves the process as it is."""
    from embedq.deployment import Deployment

    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_GC_GEN0": "7777",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    deployment = Deployment.from_settings(settings, own_process=own_process)
    try:
        assert gc.get_freeze_count() == 0  # nothing before the worker starts
        deployment.ensure_worker()
        if own_process:
            assert gc.get_threshold()[0] == 7777 and gc.get_freeze_count() > 0
        else:
            assert gc.get_threshold() == collector and gc.get_freeze_count() == 0
    finally:
        deployment.close()
