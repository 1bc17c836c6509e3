"""docker-compose.yml as shipped: every EMBEDQ_* variable it sets or reads is a setting and
its services' settings load; callbacks reach the services that accept and send them;
Prometheus scrapes /metrics with a key the API accepts, from the file compose writes; and
the balanced profile's HAProxy fronts three replicas that still require keys.

No Docker engine is needed: the file is read as compose reads it (tests/compose.py), and
the shell lines it runs are run by sh."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from embedq.api.auth import bearer_token, key_matches
from embedq.bench.haproxy import default_config
from embedq.config import OTHER_VARIABLES, VARIABLES, Settings
from tests.compose import COMPOSE, DOTENV, EMBEDQ_SERVICES, REFERENCE, compose, service_env
from tests.promql import PROMETHEUS


def test_every_embedq_variable_compose_sets_or_reads_is_a_setting() -> None:
    text = COMPOSE.read_text()
    named = {m.group(1) for m in REFERENCE.finditer(text)}
    for service in yaml.safe_load(text)["services"].values():
        named |= set(service.get("environment", {}))
    embedq = {n for n in named if n.startswith("EMBEDQ_")}
    assert {"EMBEDQ_CALLBACK_SECRET", "EMBEDQ_CALLBACK_ALLOW", "EMBEDQ_API_KEYS"} <= embedq
    unknown = sorted(n for n in embedq if n not in VARIABLES and n not in OTHER_VARIABLES)
    assert unknown == [], "not embedq settings: " + ", ".join(unknown)


@pytest.mark.parametrize("name", EMBEDQ_SERVICES)
def test_each_embedq_service_loads_its_settings_from_a_minimal_dotenv(name: str) -> None:
    env = service_env(name)
    settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("EMBEDQ_")})
    assert settings.links.broker_url == "redis://:ab12@redis-broker:6379/0"
    assert settings.callbacks.secret is None  # callbacks off until a secret is set


def test_compose_refuses_to_start_without_the_keys() -> None:
    with pytest.raises(AssertionError, match="set EMBEDQ_API_KEYS"):
        compose({"REDIS_PASSWORD": "ab12"})


@pytest.mark.parametrize("name", ["api", "worker", "beat"])
def test_the_callback_secret_and_allow_list_reach_who_accepts_and_sends_jobs(name: str) -> None:
    # The API checks a callback_url against them; workers and beat sign and deliver.
    env = service_env(name, {**DOTENV, "EMBEDQ_CALLBACK_SECRET": "s3cret",
                             "EMBEDQ_CALLBACK_ALLOW": "hooks.example.com,*.corp"})
    settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("EMBEDQ_")})
    assert settings.callbacks.secret == "s3cret"
    assert settings.callbacks.allow == "hooks.example.com,*.corp"


def scrape_key_file(env: dict[str, str], tmp: Path) -> Path:
    """Run what compose's prometheus service runs before Prometheus itself, with its
    tmpfs at `tmp`; the path of the key file Prometheus then reads."""
    config = yaml.safe_load(PROMETHEUS.read_text())
    (job,) = config["scrape_configs"]
    path = Path(job["authorization"]["credentials_file"])
    service = compose(env)["services"]["prometheus"]
    assert str(path.parent) in service["tmpfs"]  # written to memory, never to a volume
    assert service["entrypoint"] == ["/bin/sh", "-c"]
    script = service["command"][0]
    before_prometheus = script[: script.index("exec /bin/prometheus")].replace(
        str(path.parent), str(tmp)).rstrip().removesuffix("&&")
    done = subprocess.run(["sh", "-c", before_prometheus], env=service["environment"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return tmp / path.name


def test_prometheus_sends_a_bearer_key_the_api_accepts(tmp_path: Path) -> None:
    job = yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"][0]
    assert job["authorization"]["type"] == "Bearer"  # the only scheme auth.py reads
    key = scrape_key_file(DOTENV, tmp_path).read_text()
    assert key == "key-one"
    header = f"{job['authorization']['type']} {key}".encode()
    token = bearer_token({"headers": [(b"authorization", header)]})
    api = Settings.from_env({k: v for k, v in service_env("api").items()
                             if k.startswith("EMBEDQ_")})
    assert token is not None and key_matches(token, api.api.keys)
    assert (tmp_path / "api-key").stat().st_mode & 0o077 == 0  # readable by its owner only


def test_prometheus_uses_its_own_key_when_one_is_given(tmp_path: Path) -> None:
    # E.g. a key of `embedq keys create --tenant ops --scopes admin`, in the database.
    env = {**DOTENV, "PROMETHEUS_API_KEY": "ops-admin-key"}
    assert scrape_key_file(env, tmp_path).read_text() == "ops-admin-key"


def test_the_balanced_profile_puts_haproxy_before_three_keyed_replicas() -> None:
    # deploy/haproxy.cfg's default server addresses are the compose services' names.
    services = compose()["services"]
    haproxy = services["haproxy"]
    assert haproxy["profiles"] == ["balanced"]
    assert "./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in haproxy["volumes"]
    text = default_config().read_text()
    hosts = set(re.findall(r'"\$\{BALANCER_API_\d-([\w-]+):8000\}"', text))
    assert hosts == {"api", "api-2", "api-3"}
    assert set(haproxy["depends_on"]) == hosts
    for name in hosts:
        assert service_env(name)["EMBEDQ_API_KEYS"] == "key-one,key-two"  # keys stay on
    assert services["api-2"]["profiles"] == services["api-3"]["profiles"] == ["balanced"]
    assert services["api-2"]["ports"] == []  # reached through the balancer only
