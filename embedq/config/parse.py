"""The variable table and how one variable's text becomes a checked value."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from embedq.errors import ConfigError


@dataclass(frozen=True)
class Variable:
    """One `EMBEDQ_*` variable: the group and field it sets, its type and bounds."""

    name: str
    group: str
    field: str
    kind: str  # the field's annotation: "int", "float | None", "tuple[str, ...]", ...
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None

    @property
    def base(self) -> str:
        return self.kind.removesuffix(" | None")

    @property
    def optional(self) -> bool:
        return self.kind.endswith(" | None")

    def bounds(self) -> str:
        """The accepted values, for messages and the docs."""
        if self.choices:
            return ", ".join(self.choices[:-1]) + " or " + self.choices[-1] \
                if len(self.choices) > 1 else self.choices[0]
        if self.minimum is not None and self.maximum is not None:
            return f"from {_num(self.minimum)} to {_num(self.maximum)}"
        if self.minimum is not None:
            return f"at least {_num(self.minimum)}"
        return {"bool": "true or false", "int": "an integer", "float": "a number"}.get(
            self.base, "text")


def _num(x: float) -> str:
    return f"{int(x):_}" if float(x).is_integer() else f"{x:g}"


def variables(groups: dict[str, type]) -> dict[str, Variable]:
    table: dict[str, Variable] = {}
    for group, kind in groups.items():
        prefix = getattr(kind, "PREFIX", "")
        for f in fields(kind):
            meta = f.metadata
            name = "EMBEDQ_" + (meta.get("env") or f"{prefix}{f.name}".upper())
            if name in table:
                raise RuntimeError(f"two settings map to {name}")
            table[name] = Variable(name, group, f.name, str(f.type), f.default,
                                   meta.get("min"), meta.get("max"), meta.get("choices"))
    return table


def parse_value(var: Variable, raw: str) -> Any:
    """`raw` as `var`'s type, checked against its bounds; ConfigError naming `var`."""
    text = raw.strip()
    if var.optional and not text:
        return None
    base = var.base
    if base == "bool":
        value: Any = _bool(var, text)
    elif base == "int":
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise ConfigError(f"{var.name}={raw!r} is not an integer: use "
                              f"{var.bounds()}") from None
    elif base == "float":
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"{var.name}={raw!r} is not a number: use "
                              f"{var.bounds()}") from None
    elif base == "tuple[str, ...]":
        value = tuple(part.strip() for part in raw.split(",") if part.strip())
    else:
        value = raw
    check_value(var, value)
    return value


def _bool(var: Variable, text: str) -> bool:
    value = text.lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{var.name}={text!r} is not a boolean: use true or false")


def check_value(var: Variable, value: Any) -> None:
    """ConfigError naming `var` and its range, unless `value` is within it."""
    if value is None and var.optional:
        return
    if var.choices and value not in var.choices:
        raise ConfigError(f"{var.name}={value!r} is unknown: use {var.bounds()}")
    if var.base in {"int", "float"} and not isinstance(value, bool):
        number = float(value)
        if math.isnan(number) or (var.minimum is not None and number < var.minimum) or (
                var.maximum is not None and number > var.maximum):
            raise ConfigError(f"{var.name}={value!r} is out of range: use {var.bounds()}")
