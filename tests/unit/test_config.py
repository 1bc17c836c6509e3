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
    assert s.embedded and s.links.redis_url is None
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
    assert not s.embedded and s.model.normalize is False and s.model.dimensions == 128
    assert s.worker.batch_wait_ms == 2.5 and s.api.keys == ("a", "b", "c")


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
    in_code = Settings().with_overrides(encoder="upstream", upstream_url="http://127.0.0.1:9/v1",
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
    assert model_identity(settings) == ("not-a-folder", "hashing-v2")
    assert load_encoder(settings).revision == "hashing-v2"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMBEDQ_MAX_ATTEMPTS": "0"}, r"EMBEDQ_MAX_ATTEMPTS=0 is out of range: use from 1 to"),
        ({"EMBEDQ_RUN_LEASE_MS": "0"}, r"EMBEDQ_RUN_LEASE_MS=0 is out of range: use from 100"),
        ({"EMBEDQ_SEMANTIC_INDEX": "bogus"}, r"EMBEDQ_SEMANTIC_INDEX='bogus' is unknown: use "
                                             r"faiss or exact"),
        ({"EMBEDQ_SEMANTIC_THRESHOLD": "1.5"}, r"EMBEDQ_SEMANTIC_THRESHOLD=1.5 .* from -1 to 1"),
        ({"EMBEDQ_SEMANTIC_THRESHOLD": "nan"}, r"EMBEDQ_SEMANTIC_THRESHOLD=nan is out of range"),
        ({"EMBEDQ_CLAIM_TTL_MS": "999"}, r"EMBEDQ_CLAIM_TTL_MS=999 .* from 1_000"),
        ({"EMBEDQ_JOB_TIMEZONE": "Mars/Olympus"}, r"EMBEDQ_JOB_TIMEZONE='Mars/Olympus'"),
        ({"EMBEDQ_BATCH_WINDOW": "1am-6am"}, r"EMBEDQ_BATCH_WINDOW='1am-6am' .* HH:MM-HH:MM"),
        ({"EMBEDQ_BATCH_WINDOW": "01:00-01:00"}, r"two different times"),
        ({"EMBEDQ_CALLBACK_BACKOFF_S": "60", "EMBEDQ_CALLBACK_BACKOFF_MAX_S": "10"},
         r"EMBEDQ_CALLBACK_BACKOFF_MAX_S=10 is below EMBEDQ_CALLBACK_BACKOFF_S=60"),
        ({"EMBEDQ_TENANT_ISOLATION": "loose"}, r"use shared or strict"),
        ({"EMBEDQ_DIMENSIONS": "0"}, r"EMBEDQ_DIMENSIONS=0 is out of range"),
        ({"EMBEDQ_SEMANTIC_MEMORY_MB": "0"}, r"EMBEDQ_SEMANTIC_MEMORY_MB=0 .* from 1 to"),
        ({"EMBEDQ_SEMANTIC_MEMORY_MB": "1.5g"}, r"MEMORY_MB='1.5g' is not an integer"),
        ({"EMBEDQ_SEMANTIC_HOT_LOOKUPS_PER_S": "0"}, r"HOT_LOOKUPS_PER_S=0.0 .* from 0.001"),
    ],
)
def test_every_value_is_checked_against_its_range_at_start(env: dict[str, str],
                                                            message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_an_unknown_variable_is_refused_naming_the_closest_setting() -> None:
    with pytest.raises(ConfigError, match=r"EMBEDQ_BATCH_MAX_TEXT is not an embedq setting "
                                          r"\(did you mean EMBEDQ_BATCH_MAX_TEXTS\?\)"):
        Settings.from_env({"EMBEDQ_BATCH_MAX_TEXT": "64"})
    with pytest.raises(ConfigError, match="EMBEDQ_NONSENSE is not an embedq setting: fix"):
        Settings.from_env({"EMBEDQ_NONSENSE": "1"})


def test_variables_that_are_not_settings_are_let_through() -> None:
    Settings.from_env({"EMBEDQ_LOGLEVEL": "info", "EMBEDQ_TEST_REDIS_URL": "redis://x",
                       "EMBEDQ_FAULTS_QUICK": "1", "EMBEDQ_FUZZ_SEED": "3"})


def test_settings_are_grouped_and_each_variable_sets_one_field() -> None:
    s = Settings.from_env({"EMBEDQ_SEMANTIC_THRESHOLD": "0.7", "EMBEDQ_CLAIM_TTL_MS": "5000",
                           "EMBEDQ_UPSTREAM_CONCURRENCY": "3", "EMBEDQ_CONCURRENCY": "4",
                           "EMBEDQ_MAX_INPUTS": "10", "EMBEDQ_BATCH_WINDOW": "01:00-06:00"})
    assert s.semantic.threshold == 0.7 and s.queue.claim_ttl_ms == 5000
    assert s.upstream.concurrency == 3 and s.worker.concurrency == 4
    assert s.api.max_inputs == 10 and s.jobs.batch_window == "01:00-06:00"


def test_overrides_in_code_are_checked_against_their_ranges() -> None:
    s = Settings().with_overrides(claim_ttl_ms=2000, semantic_index="exact")
    assert s.queue.claim_ttl_ms == 2000 and s.semantic.index == "exact"
    with pytest.raises(ConfigError, match="EMBEDQ_MAX_ATTEMPTS=0 is out of range"):
        Settings().with_overrides(max_attempts=0)
    with pytest.raises(TypeError, match="'batch_max_text' is not a setting"):
        Settings().with_overrides(batch_max_text=3)


def test_the_configuration_doc_lists_every_variable() -> None:
    from embedq.config import VARIABLES

    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    missing = [name for name in VARIABLES if f"`{name}`" not in doc]
    assert missing == []
