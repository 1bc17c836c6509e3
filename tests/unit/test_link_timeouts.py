"""Every link carries its timeouts: a link that goes silent must fail a call, not hang it.

Cheap guards on the options the engine and the Celery app are built with; the behaviour
itself is proven on real servers (tests/integration/test_statement_timeout.py and the
silent-link fault scenario)."""

from __future__ import annotations

from embedq.config import Settings
from embedq.coordination.redis_store import RedisHotStore
from embedq.models.engine import DbTimeouts, make_engine
from embedq.tasks.app import (
    CHUNKS_PER_WORKER,
    MIN_BROKER_SOCKET_TIMEOUT_S,
    celery_config,
    create_app,
)
from embedq.tasks.publish import DEFAULT_PUBLISH_RETRIES, retry_policy
from embedq.tasks.redis_transport import HELD_LIMITS

REDIS = "redis://127.0.0.1:6379/0"


def cluster(**overrides: object) -> Settings:
    settings = Settings().with_overrides(broker_url=REDIS, redis_url=REDIS,
                        database_url="postgresql://u@127.0.0.1/db")
    return settings.with_overrides(**overrides)


def test_postgres_connect_args_carry_every_timeout_and_keepalives() -> None:
    settings = cluster(db_connect_timeout_s=3, db_statement_timeout_ms=4000,
                       db_lock_timeout_ms=2000, db_keepalive_idle_s=12)
    args = DbTimeouts.from_settings(settings).connect_args()
    assert args["connect_timeout"] == 3
    assert (args["keepalives"], args["keepalives_idle"], args["keepalives_interval"],
            args["keepalives_count"]) == (1, 12, 4, 3)
    assert args["tcp_user_timeout"] == 24_000
    assert args["options"] == "-c statement_timeout=4000 -c lock_timeout=2000"
    assert DbTimeouts.from_settings(settings).answer_deadline_s == 7


def test_zero_turns_server_side_timeouts_off_but_keeps_the_link_bounds() -> None:
    timeouts = DbTimeouts(statement_ms=0, lock_ms=0)
    assert "options" not in timeouts.connect_args()
    assert timeouts.connect_args()["keepalives"] == 1
    assert timeouts.answer_deadline_s is None


def test_hot_store_connections_carry_socket_timeouts() -> None:
    store = RedisHotStore(REDIS, socket_timeout_s=2.5, connect_timeout_s=1.0)
    kwargs = store.client.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (2.5, 1.0)
    assert kwargs["socket_keepalive"] is True
    assert kwargs["health_check_interval"] == 2
    store.close()


def test_sqlite_is_unaffected() -> None:
    engine = make_engine("sqlite:///:memory:", DbTimeouts())
    assert engine.dialect.name == "sqlite"
    engine.dispose()


def test_redis_broker_and_backend_carry_socket_timeouts() -> None:
    conf = celery_config(cluster(redis_socket_timeout_s=3.0, redis_connect_timeout_s=1.5))
    for options in (conf["broker_transport_options"], conf["result_backend_transport_options"]):
        assert options["socket_timeout"] == 3.0
        assert options["socket_connect_timeout"] == 1.5
        assert options["socket_keepalive"] is True
    assert conf["broker_transport_options"]["health_check_interval"] == 3
    assert conf["broker_connection_timeout"] == 1.5
    assert (conf["redis_socket_timeout"], conf["redis_socket_connect_timeout"],
            conf["redis_socket_keepalive"]) == (3.0, 1.5, True)


def test_broker_socket_timeout_stays_above_the_brpop_timeout() -> None:
    conf = celery_config(cluster(redis_socket_timeout_s=0.5))
    assert conf["broker_transport_options"]["socket_timeout"] == MIN_BROKER_SOCKET_TIMEOUT_S


def test_amqp_broker_gets_only_options_py_amqp_accepts() -> None:
    conf = celery_config(cluster(broker_url="amqp://guest@127.0.0.1//",
                                 redis_connect_timeout_s=2.0))
    transport = conf["broker_transport_options"]
    assert not {"socket_timeout", "socket_connect_timeout", "socket_keepalive"} & set(transport)
    assert conf["broker_connection_timeout"] == 2.0
    assert conf["result_backend_transport_options"]["socket_timeout"] == 10.0


def test_publish_retries_fit_the_budget_on_a_redis_broker() -> None:
    app = create_app(cluster(redis_socket_timeout_s=2.0))

    def retries(budget_s: float) -> object:
        policy = retry_policy(app, budget_s)
        return None if policy is None else policy["max_retries"]

    assert retry_policy(app, None) is None  # no budget: Celery's own policy
    assert retries(3.0) == 0  # one 2 s try fits, no retry
    assert retries(6.5) == 2
    assert retries(60.0) == DEFAULT_PUBLISH_RETRIES
    assert retries(-1.0) == 0


def test_amqp_publishes_keep_celery_retries() -> None:
    app = create_app(cluster(broker_url="amqp://guest@127.0.0.1//"))
    assert retry_policy(app, 3.0) is None


def test_the_pools_of_a_process_are_as_large_as_the_settings_say() -> None:
    from embedq.config import Settings
    from embedq.models import Database
    from embedq.models.vectors import PostgresVectors, open_vectors

    settings = Settings.from_env({
        "EMBEDQ_BROKER_URL": REDIS, "EMBEDQ_REDIS_URL": REDIS,
        "EMBEDQ_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        "EMBEDQ_DB_POOL_SIZE": "3", "EMBEDQ_DB_MAX_OVERFLOW": "2",
    })
    db = Database.from_settings(settings)  # no connection is opened until one is used
    vectors = open_vectors(db)
    assert isinstance(vectors, PostgresVectors)
    for engine in (db.engine, vectors.engine):
        assert (engine.pool.size(), engine.pool._max_overflow) == (3, 2)  # type: ignore[attr-defined]


def test_a_redis_broker_limits_the_bulk_messages_a_worker_holds() -> None:
    """Only the bulk queue is limited (to a worker's share of a wave); RabbitMQ's py-amqp
    transport gets no such option (it would not read it)."""
    options = celery_config(cluster(bulk_queue="b"))["broker_transport_options"]
    assert options[HELD_LIMITS] == {"b": CHUNKS_PER_WORKER}
    rabbit = cluster(broker_url="amqp://guest@127.0.0.1:5672//")
    assert HELD_LIMITS not in celery_config(rabbit)["broker_transport_options"]
