"""A service warmed up (as `embedq serve` does at start) answers its first request on the
links it already opened: the broker connection and the Postgres pool are open before any
request, and the first publish opens no new broker connection. A broker down at warm-up
is logged, not raised: the first request connects, as it would without a warm-up."""

from __future__ import annotations

import logging
import time

import pytest

from tests.conftest import Cluster, proxied_service
from tests.integration.test_api_support import TcpProxy

pytestmark = pytest.mark.integration


def test_warm_up_opens_the_links_the_first_request_uses(
    cluster: Cluster, broker_proxy: TcpProxy, salt: str
) -> None:
    broker_proxy.start()
    service = proxied_service(cluster, broker_proxy)
    try:
        assert broker_proxy.accepted == 0  # nothing connects the broker at construction
        service.warm_up()
        opened = broker_proxy.accepted
        assert opened >= 1
        assert service.durable.engine.pool.checkedin() >= 1  # a pooled Postgres connection
        result = service.embed([f"{salt} first request after a warm-up"], timeout_s=60)
        assert result.outcomes[0].vector is not None
        assert broker_proxy.accepted == opened  # the publish took the warm connection
    finally:
        service.close()


def test_warm_up_with_the_broker_down_logs_and_the_first_request_connects(
    cluster: Cluster, broker_proxy: TcpProxy, salt: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = proxied_service(cluster, broker_proxy, publish_retry_s=10)
    try:
        with caplog.at_level(logging.WARNING, logger="embedq.service"):
            started = time.monotonic()
            service.warm_up()  # the proxy is not listening yet: the broker is down
        assert time.monotonic() - started < 10
        assert any("warm-up" in r.getMessage() and "first request will connect" in
                   r.getMessage() for r in caplog.records), caplog.text
        broker_proxy.start()
        result = service.embed([f"{salt} first request after a failed warm-up"],
                               timeout_s=60)
        assert result.outcomes[0].vector is not None
        assert broker_proxy.accepted >= 1
    finally:
        service.close()
