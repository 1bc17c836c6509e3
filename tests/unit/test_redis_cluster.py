"""The coordination store on a Redis Cluster: the URL, the key layout, and the other users
of the coordination Redis (rate limits, daily quotas). The store's contract itself runs
on the cluster with the other stores (test_hot_store)."""

from __future__ import annotations

import threading

import pytest
import redis

from embedq.bench.scale_cluster import measure
from embedq.config import Settings
from embedq.config.cluster_url import parse_cluster_url
from embedq.coordination import layout
from embedq.coordination.redis_store import RedisHotStore
from embedq.coordination.store import BatchRecord, Interest
from embedq.coordination.waiters import Waiters
from embedq.errors import BrokerUnavailable, ConfigError, DailyLimitReached, RateLimited
from embedq.tasks.app import celery_config
from embedq.tenants.principal import Principal
from embedq.tenants.quota import TextQuota
from embedq.tenants.ratelimit import RateLimiter
from embedq.testing.redis_cluster import LocalRedisCluster
from tests import support

BROKER = "redis://127.0.0.1:6379/0"


def test_a_cluster_url_lists_its_nodes_and_credentials() -> None:
    got = parse_cluster_url("redis+cluster://app:s%40cret@10.0.0.1:7000,[::1]:7001,redis-c:7002")
    assert got.nodes == (("10.0.0.1", 7000), ("::1", 7001), ("redis-c", 7002))
    assert (got.username, got.password) == ("app", "s@cret")


@pytest.mark.parametrize(("url", "says"), [
    ("redis+cluster://10.0.0.1", "is not host:port"),
    ("redis+cluster://10.0.0.1:7000,", "is not host:port"),
    ("redis+cluster://10.0.0.1:70000", "a port 1-65535"),
    ("redis+cluster://10.0.0.1:7000/2", "only database 0"),
    ("http://10.0.0.1:7000", "is not a Redis URL"),
])
def test_a_wrong_redis_url_is_refused_saying_how_to_write_it(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Settings.from_env({"EMBEDQ_BROKER_URL": BROKER, "EMBEDQ_REDIS_URL": url})


def test_celery_stays_off_the_cluster() -> None:
    cluster = "redis+cluster://10.0.0.1:7000,10.0.0.2:7000"
    settings = Settings.from_env({"EMBEDQ_BROKER_URL": BROKER, "EMBEDQ_REDIS_URL": cluster})
    assert celery_config(settings)["result_backend"] == BROKER  # chord counters
    with pytest.raises(ConfigError, match="Celery's Redis transport cannot use"):
        Settings.from_env({"EMBEDQ_BROKER_URL": cluster, "EMBEDQ_REDIS_URL": cluster})
    with pytest.raises(ConfigError, match="use a redis:// broker"):
        Settings.from_env({"EMBEDQ_BROKER_URL": "amqp://guest@127.0.0.1//",
                           "EMBEDQ_REDIS_URL": cluster})


def test_a_fingerprints_keys_share_one_slot_and_buckets_spread_over_the_masters(
        redis_cluster: LocalRedisCluster) -> None:
    store = RedisHotStore(redis_cluster.url)
    try:
        fp = "ab" * 32
        tag = store.buckets.tag(fp)
        names = [layout.vector(fp, tag), layout.failure(fp, tag), layout.claim(fp, tag),
                 layout.run_lease(fp, tag), layout.interest(fp, tag), layout.attempts(fp, tag),
                 layout.stats(tag), layout.done_channel(tag)]
        slots = {store.client.keyslot(name) for name in names}
        assert len(slots) == 1
        owners = {store.client.get_node_from_key(layout.stats(t)).name
                  for t in store.buckets.tags}
        assert len(owners) == len(redis_cluster.master_ports)
        # A call over many fingerprints is one script per bucket, never CROSSSLOT.
        fps = [f"{i:064x}" for i in range(300)]
        claimed = store.claim(fps, "me", 5000, Interest({f: ["c"] for f in fps}, 5000))
        assert claimed.won == fps
    finally:
        store.close()


def test_a_url_of_the_wrong_kind_says_which_to_write(redis_cluster: LocalRedisCluster) -> None:
    # Every master: the one holding the script's declared key answers with another error
    # (a key formed in the script is not local) than the others (MOVED).
    for port in redis_cluster.master_ports:
        node = RedisHotStore(f"redis://127.0.0.1:{port}/0")
        fps = [f"fp{i}" for i in range(40)]
        with pytest.raises(BrokerUnavailable, match=r"node of a Redis Cluster.*redis\+cluster://"):
            node.claim(fps, "me", 1000)
        with pytest.raises(BrokerUnavailable, match=r"node of a Redis Cluster.*redis\+cluster://"):
            node.lease(fps, "me", 1000)
        node.close()
    support.check_redis()
    single = support.REDIS_URL.split("//", 1)[1].split("/", 1)[0]
    with pytest.raises(BrokerUnavailable, match="without cluster mode: write redis://"):
        RedisHotStore(f"redis+cluster://{single}")


def test_each_node_has_a_bounded_pool_whose_callers_wait(
        redis_cluster: LocalRedisCluster) -> None:
    store = RedisHotStore(redis_cluster.url, socket_timeout_s=3, max_connections=7)
    try:
        store.ping()
        pools = [node.redis_connection.connection_pool
                 for node in store.client.get_primaries()]
        assert len(pools) == len(redis_cluster.master_ports)
        assert all(isinstance(p, redis.BlockingConnectionPool) and p.max_connections == 7
                   and p.timeout == 3 for p in pools)
    finally:
        store.close()


def test_rate_limits_and_daily_quotas_count_on_the_cluster(
        redis_cluster: LocalRedisCluster) -> None:
    store = RedisHotStore(redis_cluster.url)
    try:
        who = Principal("t", "k", frozenset(), key_id="cluster-key", rate_per_s=1,
                        texts_per_day=3)
        limiter, quota = RateLimiter(store.client), TextQuota(store.client)
        limiter.check(who)
        with pytest.raises(RateLimited):
            limiter.check(who)
        quota.charge(who, 3)
        with pytest.raises(DailyLimitReached):
            quota.charge(who, 1)
    finally:
        store.close()


def test_the_cluster_bench_times_both_stores_without_crossslot(
        redis_cluster: LocalRedisCluster) -> None:
    support.check_redis()
    report = measure(support.REDIS_URL, redis_cluster.url, [8, 40], rounds=1)
    assert [row["fingerprints"] for row in report["sizes"]] == [8, 40]
    assert all(row[call]["single_ms"] > 0 and row[call]["cluster_ms"] > 0
               for row in report["sizes"] for call in ("claim", "batch"))
    assert report["crossslot_errors"] == 0


def test_a_lazy_listener_subscribes_to_the_buckets_it_waits_on(
        redis_cluster: LocalRedisCluster) -> None:
    """A worker waiting on some fingerprints reads only their buckets' "done" channels."""
    store = RedisHotStore(redis_cluster.url)
    try:
        mine = "aa" * 32
        other = next(f"{i:064x}" for i in range(100)
                     if store.buckets.tag(f"{i:064x}") != store.buckets.tag(mine))
        heard: list[str] = []
        waiters = Waiters(store, eager=False)
        event = threading.Event()
        waiters.register([mine], event)
        store.subscribe(heard.extend, [mine])

        def subscribers(fp: str) -> int:
            channel = layout.done_channel(store.buckets.tag(fp))
            node = store.client.get_node_from_key(channel)
            got = redis_cluster.cli(node.port, "PUBSUB", "SHARDNUMSUB", channel).split()
            return int(got[1])

        support.wait_until(lambda: subscribers(mine) == 1, 5, "the bucket's subscription")
        assert subscribers(other) == 0
        store.record_batch(BatchRecord(done=[other, mine]))
        assert event.wait(5)
        assert mine in heard and other not in heard
    finally:
        store.close()
