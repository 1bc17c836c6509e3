"""A broker that drops out under a request: the publish is tried again, not answered 503.

The service here reaches the broker (the cluster's Redis) through a proxy the test cuts,
while its hot store and the worker use Redis directly: the broker link alone is down.
Celery's own publish retry gives up after about 0.6 s; a Redis restart takes longer, so
the link comes back only once a whole publish has failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from redis import Redis

from embedq.coordination.store import Hold
from embedq.errors import BrokerUnavailable
from embedq.fingerprint import fingerprint
from embedq.service import EmbedResult
from tests import support
from tests.conftest import Cluster
from tests.integration.test_api_support import TcpProxy

pytestmark = pytest.mark.integration

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
    cluster: Cluster, broker_proxy: TcpProxy, salt: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = proxied_service(cluster, broker_proxy, publish_retry_s=10)
    got: list[EmbedResult] = []
    caller = threading.Thread(  # the broker is down when the request starts
        target=lambda: got.append(service.embed([f"{salt} published late"], timeout_s=60)))
    try:
        with caplog.at_level(logging.WARNING, logger="embedq.service"):
            caller.start()
            # Back only once a whole publish (Celery's own retries included) has failed.
            support.wait_until(lambda: any("trying again" in r.getMessage()
                                           for r in caplog.records), 30,
                               "the service trying the publish again")
            broker_proxy.start()
            caller.join(timeout=60)
    finally:
        service.close()
    assert not caller.is_alive() and got, "the caller did not return"
    outcome = got[0].outcomes[0]
    assert outcome.error is None, outcome.error
    assert outcome.source == "computed" and outcome.vector is not None


def test_a_broker_down_past_the_window_is_503_and_frees_the_claim(
    cluster: Cluster, broker_proxy: TcpProxy, salt: str
) -> None:
    text = f"{salt} never published"
    service = proxied_service(cluster, broker_proxy, publish_retry_s=1)
    try:
        with pytest.raises(BrokerUnavailable, match="retry"):
            service.embed([text], timeout_s=60)
        fp = fingerprint(service.spec(), text)
        assert service.hot.holders(Hold.CLAIM, [fp]) == [None], "the claim was kept"
    finally:
        service.close()
    # Nothing blocks the retry: a caller with a working broker gets the vector at once.
    direct = cluster.service()
    try:
        again = direct.embed([text], timeout_s=60).outcomes[0]
    finally:
        direct.close()
    assert again.error is None and again.source == "computed"
