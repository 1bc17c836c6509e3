"""The import direction between embedq's packages, pinned.

Each package sits in one layer; a module may import from lower layers only, never from
its own layer's other packages or from above. The table is the architecture: a new
package must be placed in it, and an upward import fails here with the line that made it.
Every import counts, including those inside functions (a lazy import is still a
dependency) and those only for type checking.
"""

from __future__ import annotations

import ast
from pathlib import Path

import embedq

PACKAGE = Path(embedq.__file__).parent

# Lowest first. "__init__" is the package's public API (embedq/__init__.py).
LAYERS: list[set[str]] = [
    {"errors", "version", "singleflight", "stages"},
    {"config", "fingerprint", "corpus"},
    {"models", "encoders", "limits"},
    {"coordination", "testing"},
    {"tenants"},
    {"tasks"},
    {"jobs"},
    {"workers", "service"},
    {"deployment", "semantic"},
    {"client", "api", "mcp"},
    {"__init__", "demo", "bench"},
    {"cli"},
]
LAYER_OF = {name: n for n, layer in enumerate(LAYERS) for name in layer}


def part_of(module: str) -> str:
    """The top-level part of embedq a module belongs to (`embedq.coordination.store` ->
    coordination)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, embedq module) for every import in the file, resolved to its target."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("embedq")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "embedq":  # `from embedq import coordination`: the module
                found += [(node.lineno, f"embedq.{a.name}") for a in node.names]
            elif node.module.startswith("embedq."):
                found.append((node.lineno, node.module))
    return found


def source_modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if "migrations" in rel.parts:
            continue  # Alembic scripts: run by Alembic, never imported by embedq
        out.append((".".join(rel.parts).removesuffix(".__init__"), path))
    return out


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {part_of(module) for module, _ in source_modules()}
    assert parts - set(LAYER_OF) == set(), "place the new package in LAYERS"
    assert set(LAYER_OF) - parts == set(), "LAYERS names a part that no longer exists"


def test_imports_point_down_the_layers() -> None:
    upward = []
    for module, path in source_modules():
        source = part_of(module)
        for line, target in imports(path):
            dest = part_of(target)
            if dest == source:
                continue
            if dest not in LAYER_OF:
                # `from embedq import __version__`-style names are attributes of the root.
                dest = "__init__"
            if LAYER_OF[dest] >= LAYER_OF[source]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} {source} -> {dest}")
    assert upward == []


def test_the_guard_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a coordination module importing the service is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from embedq.service import EmbeddingService\n")
    assert imports(bad) == [(2, "embedq.service")]
    assert LAYER_OF[part_of("embedq.service")] > LAYER_OF[part_of("embedq.coordination.bad")]


def graph() -> dict[str, set[str]]:
    """Package -> the packages it imports (what the guard checks, for reading)."""
    edges: dict[str, set[str]] = {}
    for module, path in source_modules():
        source = part_of(module)
        targets = {part_of(t) for _, t in imports(path)}
        edges.setdefault(source, set()).update(t for t in targets if t != source)
    return edges


if __name__ == "__main__":  # `python -m tests.unit.test_architecture` prints the graph
    edges = graph()
    for layer in reversed(LAYERS):
        for name in sorted(layer):
            deps = sorted(edges.get(name, set()), key=lambda d: -LAYER_OF.get(d, 99))
            print(f"L{LAYER_OF[name]:<2} {name:<13} -> {', '.join(deps) or '-'}")
