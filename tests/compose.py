"""docker-compose.yml as compose reads it, without a Docker engine: the YAML (anchors
merged), then each string interpolated from a .env (`${VAR}`, `${VAR:-default}`,
`${VAR:?error}`, `${VAR:+word}`, `$$`). Shared by the compose checks (unit) and the test
that runs compose's Flower command against a real Redis (integration)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.promql import ROOT

COMPOSE = ROOT / "docker-compose.yml"
EMBEDQ_SERVICES = ("migrate", "worker", "api", "beat", "flower")
# What a .env beside the compose file holds (docs/operations.md, Deploying).
DOTENV = {"REDIS_PASSWORD": "ab12", "EMBEDQ_API_KEYS": "key-one,key-two"}
REFERENCE = re.compile(r"(?<!\$)\$\{(\w+)(?:(:?[-?+])([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """compose's interpolation of `text` from `env`; a missing required variable fails."""

    def one(match: re.Match[str]) -> str:
        name, op, word = match.group(1), match.group(2) or "", match.group(3) or ""
        value = env.get(name)
        unset = value is None or (op.startswith(":") and value == "")
        if op.endswith("?") and unset:
            raise AssertionError(f"compose refuses to start: {word}")
        if op.endswith("-") and unset:
            return word
        if op.endswith("+"):
            return "" if unset else word
        return value or ""

    return REFERENCE.sub(one, text).replace("$$", "$")


def compose(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The compose file as compose reads it: YAML first, then each string interpolated."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return interpolate(node, env or DOTENV) if isinstance(node, str) else node

    loaded: dict[str, Any] = walk(yaml.safe_load(COMPOSE.read_text()))
    return loaded


def service_env(name: str, env: dict[str, str] | None = None) -> dict[str, str]:
    return {k: str(v) for k, v in compose(env)["services"][name].get("environment", {}).items()}
