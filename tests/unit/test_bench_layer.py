"""embedq.bench is the top layer: only the CLI imports it, so no production module can
pull benchmark code (or an import cycle through it) in."""

from __future__ import annotations

import ast
from pathlib import Path

import embedq

PACKAGE = Path(embedq.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_only_the_cli_imports_the_bench_package() -> None:
    importers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if not path.is_relative_to(PACKAGE / "bench")
        and any(n == "embedq.bench" or n.startswith("embedq.bench.") for n in _imports(path))
    )
    assert importers == ["cli/__init__.py"]


def test_the_bench_modules_are_all_in_one_package() -> None:
    strays = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*bench*.py")
                    if not p.is_relative_to(PACKAGE / "bench"))
    assert strays == []
