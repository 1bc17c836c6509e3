"""A broker that drops out under a request: the publish is tried again, not answered 503.

The service here reaches the broker (the cluster's Redis) through a proxy the test cuts,
while its hot store and the worker use Redis directly: the broker link alone is down.
Celery's own publish retry gives up after about 0.6 s; a Redis restart takes longer, so
the link comes back only once a whole publish has failed. A link that goes silent instead
(packets dropped) costs each try a socket timeout: Celery's retries are then cut to the
request's publish window, or one publish would block until the silence ends.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from redis import Redis

from embedq.coordination.store import Hold
from embedq.errors import BrokerUnavailable
from embedq.fingerprint import fingerprint
from embedq.service import EmbedResult
from tests import support
from tests.conftest import Cluster, proxied_service
from tests.faults.silent_proxy import SilentProxy
from tests.integration.test_api_support import TcpProxy

pytestmark = pytest.mark.integration

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


def test_a_silent_broker_link_is_503_within_the_publish_window(
    cluster: Cluster, salt: str
) -> None:
    redis = Redis.from_url(cluster.env["EMBEDQ_REDIS_URL"])
    kwargs = redis.connection_pool.connection_kwargs
    redis.close()
    proxy = SilentProxy(kwargs.get("host", "127.0.0.1"), kwargs.get("port", 6379)).start()
    db = cluster.env["EMBEDQ_REDIS_URL"].rsplit("/", 1)[1]
    service = cluster.service(broker_url=f"redis://127.0.0.1:{proxy.port}/{db}",
                              publish_retry_s=2, redis_socket_timeout_s=2)
    got: list[BaseException | EmbedResult] = []

    def call() -> None:
        try:
            got.append(service.embed([f"{salt} published into silence"], timeout_s=60))
        except BrokerUnavailable as exc:
            got.append(exc)

    silence_s = 20  # longer than any bound here: the answer comes while the link is silent
    caller = threading.Thread(target=call)
    try:
        proxy.silence()
        started = time.monotonic()
        caller.start()
        caller.join(timeout=silence_s)
        answered_s = time.monotonic() - started
        proxy.resume()
        caller.join(timeout=60)
    finally:
        proxy.close()
        service.close()
    assert got and isinstance(got[0], BrokerUnavailable), got
    # Within the window (2 s) and the try in flight at its end (one 2 s socket timeout).
    # Celery's default retries (three, each a socket timeout) answered at 6.3 s here: one
    # publish outlasted the whole window, as in the silent-link fault scenario.
    assert answered_s < 4.5, f"the publish blocked {answered_s:.1f} s on a silent link"
