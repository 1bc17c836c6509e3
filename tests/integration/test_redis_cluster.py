"""Coordination on a Redis Cluster, end to end: a real worker encodes with its claims,
leases, vectors and notifications on a 3-master cluster (the broker stays one Redis), and
a master handing its slots to its replica mid-run loses no text."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from embedq.coordination import layout
from embedq.coordination.redis_store import RedisHotStore
from embedq.coordination.store import Hold
from embedq.fingerprint import fingerprint
from embedq.models import Embedding
from embedq.service import EmbeddingService, EmbedResult
from embedq.testing.redis_cluster import LocalRedisCluster
from tests import support

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def on_cluster(redis_url: str, pg_url: str, redis_cluster: LocalRedisCluster,
               tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[EmbeddingService, Path]]:
    """A worker and a service whose coordination store is the cluster; the broker (and
    Celery's results) one Redis."""
    tmp = tmp_path_factory.mktemp("on-cluster")
    ledger = tmp / "ledger.txt"
    env = support.cluster_env(redis_url, pg_url, ledger_path=ledger,
                              online_queue="cluster-online", bulk_queue="cluster-bulk")
    env["EMBEDQ_REDIS_URL"] = redis_cluster.url
    worker = support.WorkerProcess(env, tmp / "worker.log").start()
    service = EmbeddingService(support.settings_from(env))
    try:
        yield service, ledger
    finally:
        service.close()
        service.hot.close()  # its done-listener, before the cluster stops
        worker.stop()


def rows(service: EmbeddingService, fps: list[str]) -> int:
    with service.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Embedding).where(
            Embedding.fingerprint.in_(fps))) or 0)


def test_texts_embed_through_a_worker_with_coordination_on_the_cluster(
        on_cluster: tuple[EmbeddingService, Path], salt: str) -> None:
    service, ledger = on_cluster
    texts = [f"{salt} on the cluster {i}" for i in range(40)]
    first = service.embed(texts + texts[:5], timeout_s=60)
    for text, vec in zip(texts, first.vectors(), strict=False):
        np.testing.assert_allclose(vec, support.hashing_vector(text), rtol=1e-5, atol=1e-6)
    again = service.embed(texts, timeout_s=60)
    assert {o.source for o in again.outcomes} <= {"local", "hot", "durable"}
    passes = support.ledger_counts(ledger)
    assert [passes.get(support.text_digest(t)) for t in texts] == [1] * len(texts)
    fps = [fingerprint(service.spec(), t) for t in texts]
    assert rows(service, fps) == len(texts)
    assert service.hot.holders(Hold.CLAIM, fps) == [None] * len(fps)  # freed once stored


def test_a_master_failing_over_mid_run_loses_no_text(
        on_cluster: tuple[EmbeddingService, Path], redis_cluster: LocalRedisCluster,
        salt: str) -> None:
    service, ledger = on_cluster
    hot = service.hot
    assert isinstance(hot, RedisHotStore)
    texts = [f"{salt} failover {i} [[sleep:0.1]]" for i in range(400)]
    fps = [fingerprint(service.spec(), t) for t in texts]
    replica = redis_cluster.replica_ports[0]
    moved_slots = set(_slots_of(redis_cluster, _master_of(redis_cluster, replica)))
    results: list[EmbedResult] = []
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for start in range(0, len(texts), 50):  # requests, as a client sends them
                results.append(service.embed(texts[start:start + 50], timeout_s=90))
        except BaseException as exc:  # the assertion below reports it
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    support.wait_until(lambda: len(support.ledger_counts(ledger)) > 0 and any(
        support.text_digest(t) in support.ledger_counts(ledger) for t in texts), 30,
        "the run starting")
    done = support.ledger_counts(ledger)
    assert sum(support.text_digest(t) in done for t in texts) < len(texts)  # mid-run
    redis_cluster.failover()
    producer.join(timeout=120)
    assert not producer.is_alive() and not errors, errors
    vectors = [v for r in results for v in r.vectors()]
    assert len(vectors) == len(texts)
    for text, vec in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vec, support.hashing_vector(text), rtol=1e-5, atol=1e-6)
    assert rows(service, fps) == len(texts)  # the primary key: one row each
    passes = support.ledger_counts(ledger)
    twice = [fp for t, fp in zip(texts, fps, strict=True)
             if passes.get(support.text_digest(t), 0) > 1]
    assert all(passes.get(support.text_digest(t), 0) >= 1 for t in texts)
    assert max(passes.get(support.text_digest(t), 0) for t in texts) <= 2
    # A duplicate forward pass only where the master that handed over held the slot.
    assert all(hot.client.keyslot(layout.claim(fp, hot.buckets.tag(fp))) in moved_slots
               for fp in twice), twice


def _master_of(cluster: LocalRedisCluster, replica: int) -> int:
    info = cluster.cli(replica, "INFO", "replication")
    return int(info.split("master_port:", 1)[1].split()[0])


def _slots_of(cluster: LocalRedisCluster, port: int) -> Iterator[int]:
    for line in cluster.cli(port, "CLUSTER", "NODES").splitlines():
        parts = line.split()
        if "myself" in parts[2]:
            for span in parts[8:]:
                lo, _, hi = span.partition("-")
                yield from range(int(lo), int(hi or lo) + 1)
