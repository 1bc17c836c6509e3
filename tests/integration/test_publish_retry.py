"""A broker that drops out under a request: the publish is tried again, not answered 503.

The service here reaches the broker (the cluster's Redis) through a proxy the test cuts,
while its hot store and the worker use Redis directly: the broker link alone is down.
Celery's own publish retry gives up after about 0.6 s; a Redis restart takes longer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis import Redis

from embedq import coordination
from embedq.errors import BrokerUnavailable
from embedq.fingerprint import fingerprint
from tests.conftest import Cluster
from tests.integration.test_api_support import TcpProxy

pytestmark = pytest.mark.integration

OUTAGE_S = 1.5  # longer than Celery's own retry, shorter than EMBEDQ_PUBLISH_RETRY_S


@pytest.fixture
def broker_proxy(cluster: Cluster) -> Iterator[TcpProxy]:
    redis = Redis.from_url(cluster.env["EMBEDQ_REDIS_URL"])
    host = redis.connection_pool.connection_kwargs.get("host", "127.0.0.1")
    port = redis.connection_pool.connection_kwargs.get("port", 6379)
    redis.close()
    proxy = TcpProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.stop()


def proxied_service(cluster: Cluster, proxy: TcpProxy, **overrides: Any) -> Any:
    db = cluster.env["EMBEDQ_REDIS_URL"].rsplit("/", 1)[1]
    return cluster.service(broker_url=f"redis://127.0.0.1:{proxy.port}/{db}", **overrides)


def test_a_broker_back_within_the_retry_window_gets_the_vector(
    cluster: Cluster, broker_proxy: TcpProxy, salt: str
) -> None:
    service = proxied_service(cluster, broker_proxy, publish_retry_s=10)
    restore = threading.Timer(OUTAGE_S, broker_proxy.start)  # down when the request starts
    restore.start()
    try:
        started = time.monotonic()
        result = service.embed([f"{salt} published late"], timeout_s=60)
    finally:
        restore.cancel()
        service.close()
    outcome = result.outcomes[0]
    assert outcome.error is None, outcome.error
    assert outcome.source == "computed" and outcome.vector is not None
    assert time.monotonic() - started >= OUTAGE_S  # it did wait for the broker


def test_a_broker_down_past_the_window_is_503_and_frees_the_claim(
    cluster: Cluster, broker_proxy: TcpProxy, salt: str
) -> None:
    text = f"{salt} never published"
    service = proxied_service(cluster, broker_proxy, publish_retry_s=1)
    try:
        with pytest.raises(BrokerUnavailable, match="retry"):
            service.embed([text], timeout_s=60)
        fp = fingerprint(service.spec(), text)
        assert coordination.claim_holders(service.hot, [fp]) == [None], "the claim was kept"
    finally:
        service.close()
    # Nothing blocks the retry: a caller with a working broker gets the vector at once.
    direct = cluster.service()
    try:
        again = direct.embed([text], timeout_s=60).outcomes[0]
    finally:
        direct.close()
    assert again.error is None and again.source == "computed"
