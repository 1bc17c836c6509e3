"""Settings come from EMBEDQ_* variables, with clear errors for bad values."""

from __future__ import annotations

import pytest

from embedq.config import Settings
from embedq.encoders import model_identity
from embedq.errors import ConfigError
from embedq.models.engine import normalize_url


def test_defaults_are_embedded() -> None:
    s = Settings.from_env({})
    assert s.embedded and s.redis_url is None
    assert s.resolved_database_url.startswith("sqlite:///")


def test_values_are_parsed_by_type() -> None:
    s = Settings.from_env({
        "EMBEDQ_BROKER_URL": "redis://127.0.0.1:6379/0",
        "EMBEDQ_REDIS_URL": "redis://127.0.0.1:6379/0",
        "EMBEDQ_NORMALIZE": "false",
        "EMBEDQ_DIMENSIONS": "128",
        "EMBEDQ_BATCH_WAIT_MS": "2.5",
        "EMBEDQ_API_KEYS": "a, b,,c",
    })
    assert not s.embedded and s.normalize is False and s.dimensions == 128
    assert s.batch_wait_ms == 2.5 and s.api_keys == ("a", "b", "c")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMBEDQ_NORMALIZE": "maybe"}, "EMBEDQ_NORMALIZE"),
        ({"EMBEDQ_CONCURRENCY": "lots"}, "EMBEDQ_CONCURRENCY"),
        ({"EMBEDQ_ENCODER": "word2vec"}, "EMBEDQ_ENCODER"),
        ({"EMBEDQ_BROKER_URL": "redis://127.0.0.1:6379/0"}, "EMBEDQ_REDIS_URL"),
        ({"EMBEDQ_REDIS_URL": "redis://127.0.0.1:6379/0"}, "EMBEDQ_BROKER_URL"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_database_urls_as_users_write_them() -> None:
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"
    with pytest.raises(ConfigError, match="postgresql or sqlite"):
        normalize_url("mysql://u@h/db")
    with pytest.raises(ConfigError, match="not a database URL"):
        normalize_url("not a url")


def test_default_model_revision_comes_from_its_files() -> None:
    name, revision = model_identity(Settings.from_env({}))
    assert name == "all-MiniLM-L6-v2" and revision.startswith("sha256:")
    pinned = Settings.from_env({"EMBEDQ_MODEL_REVISION": "v2"})
    assert model_identity(pinned) == ("all-MiniLM-L6-v2", "v2")
