"""Settings come from EMBEDQ_* variables, with clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.encoders import load_encoder, model_identity
from embedq.encoders.upstream import UpstreamEncoder
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
        ({"EMBEDQ_PUBLISH_RETRY_S": "-1"}, "EMBEDQ_PUBLISH_RETRY_S"),
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


def test_a_hub_model_without_a_revision_is_refused() -> None:
    with pytest.raises(ConfigError, match="EMBEDQ_MODEL_REVISION") as refused:
        Settings.from_env({"EMBEDQ_MODEL": "sentence-transformers/all-mpnet-base-v2"})
    assert "sentence-transformers/all-mpnet-base-v2" in str(refused.value)
    in_code = Settings().with_overrides(model="sentence-transformers/all-mpnet-base-v2")
    with pytest.raises(ConfigError, match="EMBEDQ_MODEL_REVISION"):
        model_identity(in_code)  # a Settings built in code skips validate()


def test_a_hub_model_with_a_revision_is_that_revision() -> None:
    commit = "e8c3b32edf5434bc2275fc9bab85f82640a19130"
    settings = Settings.from_env({"EMBEDQ_MODEL": "sentence-transformers/all-mpnet-base-v2",
                                  "EMBEDQ_MODEL_REVISION": commit})
    assert model_identity(settings) == ("sentence-transformers/all-mpnet-base-v2", commit)


def test_a_model_folder_is_pinned_by_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    name, first = model_identity(Settings.from_env({"EMBEDQ_MODEL": str(folder)}))
    assert name == str(folder) and first.startswith("sha256:")
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text('{"hidden_size": 16}')
    assert model_identity(Settings.from_env({"EMBEDQ_MODEL": str(other)}))[1] != first


def test_an_upstream_model_without_a_revision_is_refused() -> None:
    env = {"EMBEDQ_ENCODER": "upstream", "EMBEDQ_UPSTREAM_URL": "http://127.0.0.1:9/v1",
           "EMBEDQ_UPSTREAM_MODEL": "text-embedding-3-small"}
    with pytest.raises(ConfigError, match="EMBEDQ_MODEL_REVISION") as refused:
        Settings.from_env(env)
    assert "text-embedding-3-small" in str(refused.value)
    in_code = Settings(encoder="upstream", upstream_url="http://127.0.0.1:9/v1",
                       upstream_model="text-embedding-3-small")
    with pytest.raises(ConfigError, match="EMBEDQ_MODEL_REVISION"):
        model_identity(in_code)
    with pytest.raises(ConfigError, match="EMBEDQ_MODEL_REVISION"):
        UpstreamEncoder(in_code)
    pinned = Settings.from_env({**env, "EMBEDQ_MODEL_REVISION": "2024-01-25"})
    assert model_identity(pinned) == ("text-embedding-3-small", "2024-01-25")
    assert UpstreamEncoder(pinned).revision == "2024-01-25"


@pytest.mark.parametrize("encoder", ["hashing", "faulty"])
def test_test_encoders_need_no_revision(encoder: str) -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": encoder, "EMBEDQ_MODEL": "not-a-folder"})
    assert model_identity(settings) == ("not-a-folder", "hashing-v1")
    assert load_encoder(settings).revision == "hashing-v1"
