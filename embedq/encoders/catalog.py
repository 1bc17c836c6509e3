"""The served models as producers and workers see them: names, identities, queues.

`Catalog(settings)` holds one `ServedModel` per entry of EMBEDQ_MODELS (or EMBEDQ_MODEL
alone), each with the settings it is served with, the model name its fingerprints carry
and one revision per tier; none loads weights. It answers two questions:

- `resolve(name)`: which model a request's `model` names: a model's name, its
  fingerprint name (the source) when only one model has it, or an alias (EMBEDQ_MODEL_ALIASES,
  plus the aliases switched at run time that `switched` returns, which win);
- `route(model, revision)`: which served model computes a spec's vectors, so its work goes
  to that model's queues.

The fingerprint names the source and its revision, never the catalog's name: renaming a
model, or moving a single-model deployment to EMBEDQ_MODELS, keeps every cached vector.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from embedq.config import Settings
from embedq.config.catalog import DEFAULT_ALIAS, parse_aliases
from embedq.encoders import model_identity
from embedq.encoders.tiers import TIERS
from embedq.errors import UnknownModel


@dataclass(frozen=True)
class ServedModel:
    """One served model: its name, settings, fingerprint name and revision per tier."""

    name: str
    settings: Settings
    model: str  # as fingerprints name it
    revisions: dict[str, str]  # tier -> revision, the default tier first

    @property
    def tiers(self) -> tuple[str, ...]:
        return self.settings.model.tiers

    @property
    def default_tier(self) -> str:
        return self.settings.model.tiers[0]

    @property
    def online_queue(self) -> str:
        return self.settings.queue.online_queue

    @property
    def bulk_queue(self) -> str:
        return self.settings.queue.bulk_queue

    def label(self, tier: str) -> str:
        """How clients name `tier` of this model: the bare name for its default tier,
        else `<name>:<tier>`."""
        return self.name if tier == self.default_tier else f"{self.name}:{tier}"


def identities(settings: Settings) -> tuple[str, dict[str, str]]:
    """(fingerprint model name, {tier: revision}) of one model's settings."""
    revisions = {t: model_identity(settings, t)[1] for t in settings.model.tiers}
    return model_identity(settings)[0], revisions


class Catalog:
    """The served models of `settings`; `switched()`: aliases set at run time
    (`embedq models switch`), read on every resolve (the caller caches it)."""

    def __init__(self, settings: Settings,
                 switched: Callable[[], Mapping[str, str]] | None = None) -> None:
        settings = settings.deployment  # a model's settings name their deployment's
        self.settings = settings
        self.several = settings.model.models is not None  # each model on its own queues
        self.models: dict[str, ServedModel] = {}
        for entry in settings.served_models():
            served = settings.for_model(entry.name)
            model, revisions = identities(served)
            # Alone, a model is named as its fingerprints name it (as it always was).
            name = entry.name if self.several else model
            self.models[name] = ServedModel(name, served, model, revisions)
        self.configured = parse_aliases(settings.model.model_aliases, tuple(self.models))
        self.switched = switched
        self._routes = {(m.model, r): m for m in self.models.values()
                        for r in m.revisions.values()}

    def aliases(self) -> dict[str, str]:
        """Alias -> model name: `default` (the first model unless set), the configured
        ones, then those switched at run time (a switch to a model no longer listed is
        ignored)."""
        out = {DEFAULT_ALIAS: next(iter(self.models)), **self.configured}
        if self.switched is not None:
            out.update({a: m for a, m in self.switched().items() if m in self.models})
        return out

    @property
    def default(self) -> ServedModel:
        return self.models[self.aliases()[DEFAULT_ALIAS]]

    def resolve(self, name: str | None) -> ServedModel:
        """The model a request names (None: the default); UnknownModel listing the names."""
        if name is None:
            return self.default
        if name in self.models:
            return self.models[name]
        aliases = self.aliases()
        if name in aliases:
            return self.models[aliases[name]]
        by_source = [m for m in self.models.values() if name in {m.model, m.settings.model.model}]
        if len(by_source) == 1:
            return by_source[0]
        if not self.several:
            raise UnknownModel(f"model {name!r} is not served here: use "
                               f"{self.default.name!r} (GET /v1/models lists the models)",
                               "model")
        names = ", ".join([*self.models, *(a for a in aliases if a not in self.models)])
        raise UnknownModel(f"model {name!r} is not served here: use one of {names} "
                           "(GET /v1/models lists the models and aliases)", "model")

    def split(self, name: str | None) -> tuple[ServedModel, str | None]:
        """The model and the tier suffix of a name (`small:int8` -> small, int8)."""
        if name is not None:
            base, sep, tail = name.rpartition(":")
            if sep and tail in TIERS:
                return self.resolve(base), tail
        return self.resolve(name), None

    def route(self, model: str, revision: str) -> ServedModel | None:
        """The served model whose fingerprints name `model` at `revision`, if any."""
        return self._routes.get((model, revision))

    def names(self) -> list[str]:
        return list(self.models)
