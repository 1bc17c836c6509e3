"""The import direction between embedq's packages, pinned.

Each package sits in one layer; a module may import from lower layers only, never from
its own layer's other packages or from above. The table is the architecture: a new
package must be placed in it, and an upward import fails here with the line that made it.
Every import counts, including those inside functions (a lazy import is still a
dependency) and those only for type checking.

The size rule is pinned here too: no module over 400 lines, no function over 60 unless
its docstring says why ("Long because ...").
"""

from __future__ import annotations

import ast
from pathlib import Path

import embedq

PACKAGE = Path(embedq.__file__).parent

# Lowest first. "__init__" is the package's public API (embedq/__init__.py).
LAYERS: list[set[str]] = [
    {"errors", "version", "singleflight", "stages", "heap", "argtypes", "wire"},
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


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def oversized(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The size rule's breaches in one file: the module over MAX_MODULE_LINES lines, and
    every function (async, method and nested included) over MAX_FUNCTION_LINES lines whose
    docstring does not say why ("Long because ...")."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(root).as_posix()
    found = []
    if (lines := text.count("\n")) > MAX_MODULE_LINES:
        found.append(f"{name}: module {lines} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            reason = "long because" in (ast.get_docstring(node) or "").lower()
            if length > MAX_FUNCTION_LINES and not reason:
                found.append(f"{name}:{node.name} function {length} lines")
    return found


def test_no_module_over_400_lines_and_no_function_over_60() -> None:
    """Split along the seams: a module over 400 lines, or a function over 60 whose
    docstring has no sentence saying why it is long ("Long because ..."), fails here."""
    breaches = [b for path in sorted(PACKAGE.rglob("*.py")) for b in oversized(path)]
    assert breaches == [], "\n".join(breaches)


def test_the_size_rule_sees_a_long_function_and_its_excuse(tmp_path: Path) -> None:
    """The checker itself: 61 lines fail, 61 lines with a reason pass, and so do 60."""
    body = "".join(f"    x = {n}\n" for n in range(60))
    probe = tmp_path / "probe.py"
    probe.write_text(
        f"def long():\n{body}\n\ndef excused():\n    \"\"\"Long because: a table.\"\"\"\n{body}"
        f"\n\ndef fits():\n{body[: body.rindex('    x')]}"
    )
    assert oversized(probe, tmp_path) == ["probe.py:long function 61 lines"]
    probe.write_text("\n" * 401)
    assert oversized(probe, tmp_path) == ["probe.py: module 401 lines"]


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
