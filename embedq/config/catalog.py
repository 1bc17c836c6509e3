"""EMBEDQ_MODELS: the models one deployment serves, and the aliases that name them.

    EMBEDQ_MODELS=small=all-MiniLM-L6-v2,large=/models/bge-base@v1.5:fp32+int8
    EMBEDQ_MODELS=@/etc/embedq/models.txt      (one entry a line, # starts a comment)
    EMBEDQ_MODEL_ALIASES=query=small,docs=large

Each entry is `NAME=SOURCE[@REVISION][:TIER+TIER...]`: the name clients send as `model`,
the model folder or package name (what EMBEDQ_MODEL takes), an optional pinned revision
(what EMBEDQ_MODEL_REVISION takes) and the entry's tiers (default EMBEDQ_TIERS), the
default tier first. The first entry is the default model unless the alias `default`
names another. Each model gets queues of its own, `<EMBEDQ_ONLINE_QUEUE>.<NAME>` and
`<EMBEDQ_BULK_QUEUE>.<NAME>`, served by `embedq worker --model NAME`.

Without EMBEDQ_MODELS the deployment serves EMBEDQ_MODEL alone, on the configured queues,
exactly as before: `served_entries` then gives one entry named like EMBEDQ_MODEL.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from embedq.config.groups import DEFAULT_MODEL, TIER_NAMES
from embedq.errors import ConfigError

if TYPE_CHECKING:
    from embedq.config import Settings

# A name travels in `model`, in queue names and in a tier suffix (`small:int8`).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
EXAMPLE = "small=all-MiniLM-L6-v2,large=/models/bge-base@v1.5:fp32+int8"
DEFAULT_ALIAS = "default"


@dataclass(frozen=True)
class ModelEntry:
    """One served model as EMBEDQ_MODELS lists it."""

    name: str
    source: str  # a model folder or name, as EMBEDQ_MODEL takes it
    revision: str | None = None  # None: derived from the model's files
    tiers: tuple[str, ...] | None = None  # None: EMBEDQ_TIERS


def parse_models(text: str) -> tuple[ModelEntry, ...]:
    """The entries of EMBEDQ_MODELS (inline, or `@FILE`); ConfigError saying what to write."""
    return _parse(text.strip())


@functools.lru_cache(maxsize=32)
def _parse(text: str) -> tuple[ModelEntry, ...]:
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"EMBEDQ_MODELS={text!r} names a models file that cannot be "
                              f"read ({exc}): give the path of a file with one "
                              "NAME=SOURCE[@REVISION][:TIERS] entry a line") from None
        parts = [line.split("#", 1)[0].strip() for line in lines]
    else:
        parts = [part.strip() for part in text.split(",")]
    entries = [_entry(part) for part in parts if part]
    if not entries:
        raise ConfigError(f"EMBEDQ_MODELS={text!r} lists no model: write NAME=SOURCE entries "
                          f"separated by commas, e.g. {EXAMPLE}, or unset it")
    names = [e.name for e in entries]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"EMBEDQ_MODELS lists the model name {name!r} twice: give each "
                              "model its own name")
    same = [(a, b) for i, a in enumerate(entries) for b in entries[i + 1:]
            if (a.source, a.revision) == (b.source, b.revision)]
    if same:
        a, b = same[0]
        raise ConfigError(
            f"EMBEDQ_MODELS lists {a.name!r} and {b.name!r} with the same source "
            f"{a.source!r} and revision: they would compute the same vectors under two "
            f"names. Keep one and name it twice with EMBEDQ_MODEL_ALIASES ({b.name}="
            f"{a.name}), or pin a different @REVISION on each")
    return tuple(entries)


def _entry(part: str) -> ModelEntry:
    name, sep, rest = part.partition("=")
    name, rest = name.strip(), rest.strip()
    if not sep or not rest:
        raise ConfigError(f"EMBEDQ_MODELS entry {part!r} is not NAME=SOURCE: write each "
                          f"model as NAME=SOURCE[@REVISION][:TIER+TIER], e.g. {EXAMPLE}")
    check_name(name, "EMBEDQ_MODELS")
    tiers: tuple[str, ...] | None = None
    head, colon, tail = rest.rpartition(":")
    if colon and head and "/" not in tail and "\\" not in tail:
        tiers = tuple(t.strip() for t in tail.split("+"))
        if not tiers or any(t not in TIER_NAMES for t in tiers) or len(set(tiers)) < len(tiers):
            raise ConfigError(
                f"EMBEDQ_MODELS entry {part!r} ends in :{tail}, which is not a list of tiers: "
                "write the model's tiers after a colon joined by +, each once, the default "
                "first (e.g. :fp32+int8), among fp32, int8 and fp16")
        rest = head
    source, at, revision = rest.rpartition("@")
    if not at:
        source, revision = rest, ""
    if not source.strip() or (at and not revision.strip()):
        raise ConfigError(f"EMBEDQ_MODELS entry {part!r} has an empty source or revision: "
                          "write NAME=SOURCE or NAME=SOURCE@REVISION")
    return ModelEntry(name, source.strip(), revision.strip() or None, tiers)


def check_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"{where} has the name {name!r}: a model or alias name is letters, digits, '.', "
            "'_' and '-' (at most 64, starting with a letter or digit), since it is sent "
            "as `model` and names the model's queues")
    return name


def parse_aliases(text: str, models: tuple[str, ...]) -> dict[str, str]:
    """EMBEDQ_MODEL_ALIASES as {alias: model name}; each target must be a listed model."""
    aliases: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        alias, sep, target = (s.strip() for s in part.partition("="))
        if not sep or not target:
            raise ConfigError(f"EMBEDQ_MODEL_ALIASES entry {part!r} is not ALIAS=MODEL: write "
                              "e.g. query=small,docs=large")
        check_name(alias, "EMBEDQ_MODEL_ALIASES")
        if alias in models:
            raise ConfigError(f"EMBEDQ_MODEL_ALIASES names {alias!r}, which is a model's own "
                              "name: give the alias another name")
        if target not in models:
            raise ConfigError(f"EMBEDQ_MODEL_ALIASES maps {alias!r} to {target!r}, which is "
                              f"not served: use one of {', '.join(models)} (EMBEDQ_MODELS)")
        aliases[alias] = target
    return aliases


def served_entries(s: Settings) -> tuple[ModelEntry, ...]:
    """The served models, the first the default unless the `default` alias says another."""
    if s.model.models is None:
        return (ModelEntry(s.model.model, s.model.model, s.model.model_revision),)
    return parse_models(s.model.models)


def default_model(s: Settings) -> str:
    """The name of the default model as configured: the `default` alias of
    EMBEDQ_MODEL_ALIASES, else the first served model."""
    entries = served_entries(s.deployment)
    aliases = parse_aliases(s.deployment.model.model_aliases, tuple(e.name for e in entries))
    return aliases.get(DEFAULT_ALIAS, entries[0].name)


def for_model(s: Settings, entry: ModelEntry) -> Settings:
    """The settings one model is served with: its source, revision and tiers, and with
    EMBEDQ_MODELS its own queues (`online.<name>`, `bulk.<name>`)."""
    if s.model.models is None:
        return s
    model = replace(s.model, model=entry.source, model_revision=entry.revision,
                    tiers=entry.tiers or s.model.tiers)
    queue = replace(s.queue, online_queue=f"{s.queue.online_queue}.{entry.name}",
                    bulk_queue=f"{s.queue.bulk_queue}.{entry.name}")
    return replace(s, model=model, queue=queue, base=s)


def check_models(s: Settings, check_one: Callable[[Settings], None]) -> None:
    """EMBEDQ_MODELS and EMBEDQ_MODEL_ALIASES against each other and the single-model
    settings; `check_one(settings)` checks one model's settings (`rules._check_model`)."""
    if s.base is not None:  # one model's settings, derived from checked ones
        check_one(s)
        return
    if s.model.models is None:
        if s.model.model_aliases.strip():
            parse_aliases(s.model.model_aliases, (s.model.model,))
        check_one(s)
        return
    if s.model.model != DEFAULT_MODEL or s.model.model_revision:
        raise ConfigError(
            "EMBEDQ_MODELS and EMBEDQ_MODEL (or EMBEDQ_MODEL_REVISION) are both set: list "
            "every model in EMBEDQ_MODELS with its @REVISION (the first is the default) and "
            "unset EMBEDQ_MODEL and EMBEDQ_MODEL_REVISION")
    entries = parse_models(s.model.models)
    parse_aliases(s.model.model_aliases, tuple(e.name for e in entries))
    for entry in entries:
        try:
            check_one(for_model(s, entry))
        except ConfigError as exc:
            raise ConfigError(f"EMBEDQ_MODELS model {entry.name!r}: {exc}") from None
