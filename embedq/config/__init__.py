"""Settings: the one place that reads the environment.

Every setting has an embedded default, so a fresh checkout runs with no servers at all
(SQLite, an in-process broker and store, a worker thread started by the command). The
same code runs on Redis + Postgres + many workers by setting:

    EMBEDQ_BROKER_URL    redis://..., amqp://... (RabbitMQ), or memory:// (embedded)
    EMBEDQ_REDIS_URL     redis://...  hot store, claims, counters; unset = in-process
    EMBEDQ_DATABASE_URL  postgresql://... or sqlite:///path; unset = SQLite in the data dir

`Settings.from_env()` builds one frozen object of value objects, one per concern
(`embedq.config.groups`), and checks everything at once, before anything starts: each
value against its range or choices (the error names the variable and the range), the
checks between values, and every `EMBEDQ_*` variable against the known ones (a typo is
refused naming the closest). Nothing else reads `os.environ` for settings.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from embedq.config.catalog import ModelEntry, for_model, served_entries
from embedq.config.groups import (
    DEFAULT_MODEL,
    EMBEDDED_BROKER,
    GROUPS,
    ApiSettings,
    CallbackSettings,
    JobSettings,
    Links,
    ModelSettings,
    QueueSettings,
    SemanticSettings,
    TenantSettings,
    UpstreamSettings,
    WorkerSettings,
    data_dir_of,
)
from embedq.config.parse import Variable, check_value, parse_value, variables
from embedq.config.rules import check_across
from embedq.errors import ConfigError

__all__ = ["DEFAULT_MODEL", "EMBEDDED_BROKER", "VARIABLES", "ModelEntry", "Settings",
           "Variable"]

# Variables of embedq's that are not settings: the CLI's log level, the compose file's
# Redis memory, and those of the test suite (by prefix).
OTHER_VARIABLES = frozenset({"EMBEDQ_LOGLEVEL", "EMBEDQ_CACHE_MAXMEMORY"})
TEST_PREFIXES = ("EMBEDQ_TEST_", "EMBEDQ_FAULT", "EMBEDQ_FUZZ_")


@dataclass(frozen=True)
class Settings:
    """All of embedq's configuration, one value object per concern."""

    links: Links = field(default_factory=Links)
    model: ModelSettings = field(default_factory=ModelSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    tenants: TenantSettings = field(default_factory=TenantSettings)
    semantic: SemanticSettings = field(default_factory=SemanticSettings)
    jobs: JobSettings = field(default_factory=JobSettings)
    callbacks: CallbackSettings = field(default_factory=CallbackSettings)
    # The deployment's settings one model's were derived from (`for_model`); None: these.
    base: Settings | None = field(default=None, repr=False, compare=False)

    @property
    def deployment(self) -> Settings:
        """The deployment's settings: those every model's settings derive from."""
        return self.base if self.base is not None else self

    @property
    def embedded(self) -> bool:
        """True when no servers are configured: broker and hot store live in this process."""
        return self.links.broker_url.startswith("memory://")

    @property
    def resolved_database_url(self) -> str:
        if self.links.database_url:
            return self.links.database_url
        return f"sqlite:///{self.links.data_dir / 'embedq.db'}"

    def served_models(self) -> tuple[ModelEntry, ...]:
        """The served models (EMBEDQ_MODELS, else EMBEDQ_MODEL alone), the first listed
        first (`embedq.config.catalog`)."""
        return served_entries(self.deployment)

    def for_model(self, name: str) -> Settings:
        """The settings model `name` is served with (its source, revision, tiers and
        queues); ConfigError naming the served models for another name."""
        deployment = self.deployment
        for entry in served_entries(deployment):
            if entry.name == name:
                return for_model(deployment, entry)
        names = ", ".join(e.name for e in served_entries(deployment))
        raise ConfigError(f"model {name!r} is not served: use one of {names} "
                          "(EMBEDQ_MODELS lists the served models)")

    def unpinned_model(self) -> ConfigError | None:
        """The error for a model whose vectors can change under its name while
        EMBEDQ_MODEL_REVISION does not pin it, else None (`rules.unpinned_model`)."""
        from embedq.config.rules import unpinned_model

        return unpinned_model(self)

    def validate(self) -> None:
        """The checks between settings (each value's own range is checked when it is
        set); raises ConfigError naming the variables and what to change."""
        check_across(self)

    def value(self, name: str) -> Any:
        """The value of the setting named like its variable without `EMBEDQ_` in lower
        case (`max_inputs`)."""
        var = VARIABLES[f"EMBEDQ_{name.upper()}"]
        return getattr(getattr(self, var.group), var.field)

    def with_overrides(self, **changes: Any) -> Settings:
        """These settings with some changed, each named as its variable without
        `EMBEDQ_` in lower case (`claim_ttl_ms=1000`); each value is checked against its
        range or choices, not against the other settings (`validate` does that)."""
        by_group: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            var = VARIABLES.get(f"EMBEDQ_{name.upper()}")
            if var is None:
                raise TypeError(f"{name!r} is not a setting{_closest(name.upper())}")
            check_value(var, value)
            by_group.setdefault(var.group, {})[var.field] = value
        return replace(self, **{group: replace(getattr(self, group), **values)
                                for group, values in by_group.items()})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build and check settings from `EMBEDQ_*` variables; raise ConfigError naming
        a bad one (or an unknown one, with the closest real name)."""
        env = os.environ if env is None else env
        unknown = sorted(name for name in env if name.startswith("EMBEDQ_")
                         and name not in VARIABLES and name not in OTHER_VARIABLES
                         and not name.startswith(TEST_PREFIXES))
        if unknown:
            raise ConfigError(f"{unknown[0]} is not an embedq setting"
                              f"{_closest(unknown[0][len('EMBEDQ_'):])}: fix or unset it "
                              "(docs/configuration.md lists every setting)")
        values: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
        values["links"]["data_dir"] = data_dir_of(env)
        for name, var in VARIABLES.items():
            raw = env.get(name)
            if raw is not None and var.field != "data_dir":
                values[var.group][var.field] = parse_value(var, raw)
        settings = cls(**{g: kind(**values[g]) for g, kind in GROUPS.items()})
        settings.validate()
        return settings


def _closest(name: str) -> str:
    close = difflib.get_close_matches(f"EMBEDQ_{name}", list(VARIABLES), n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


VARIABLES: dict[str, Variable] = variables(GROUPS)
