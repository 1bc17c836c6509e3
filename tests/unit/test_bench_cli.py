"""`embedq bench NAME`: one subcommand per benchmark with only the options it reads, every
invocation the docs show still parses, and an unknown name is refused naming the real ones."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from embedq.cli import build_parser
from tests.support import ROOT

BENCHMARKS = ("bulk", "http", "dify", "coalesce", "semantic", "threshold", "backends", "gpu",
              "pipeline")
# The docs' current commands (history.md keeps past ones as they were run).
DOCUMENTED = [ROOT / "README.md", ROOT / "Makefile",
              *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "history.md")]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embedq.cli", "bench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def documented_invocations() -> list[str]:
    found = set()
    for path in DOCUMENTED:
        for match in re.finditer(r"embedq bench [a-z][^`#|)\n;]*", path.read_text()):
            found.add(match.group(0).strip())
    return sorted(found)


def test_a_benchmarks_help_lists_its_options_only() -> None:
    done = bench("pipeline", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: embedq bench pipeline" in done.stdout
    for option in ("--n", "--file", "--json"):
        assert option in done.stdout
    for other in ("--texts", "--url", "--api-key", "--entries", "--index-entries",
                  "--pairs-file", "--via-jobs", "--lodo"):  # dify's, semantic's, gpu's, ...
        assert other not in done.stdout, other


def test_bench_help_names_every_benchmark() -> None:
    done = bench("--help")
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in BENCHMARKS)
    assert "--texts" not in done.stdout  # the options are each benchmark's own


def test_an_unknown_benchmark_is_refused_naming_the_real_ones() -> None:
    done = bench("pipelines")
    assert done.returncode == 2
    assert "invalid choice: 'pipelines'" in done.stderr
    assert all(f"'{name}'" in done.stderr for name in BENCHMARKS)


def test_another_benchmarks_option_is_refused() -> None:
    done = bench("pipeline", "--texts", "5")
    assert done.returncode == 2 and "unrecognized arguments: --texts 5" in done.stderr


def test_pipeline_refuses_no_online_rounds_before_it_starts_anything() -> None:
    done = bench("pipeline", "--rounds", "0")
    assert done.returncode == 2
    assert "argument --rounds: 0 is below 1: give 1 or more" in done.stderr


@pytest.mark.parametrize("line", documented_invocations())
def test_every_documented_invocation_parses(line: str) -> None:
    # `[--opt V]` is optional in the docs; `N` stands for a number.
    words = [w if w != "N" else "1000" for w in line.replace("[", "").replace("]", "").split()]
    try:
        args = build_parser().parse_args(words[1:])
    except SystemExit as exc:
        raise AssertionError(f"`{line}` no longer parses") from exc
    assert args.command == "bench" and args.kind == words[2]


def test_defaults_are_those_of_the_flat_parser() -> None:
    parse = build_parser().parse_args
    bulk = parse(["bench", "bulk"])
    assert (bulk.n, bulk.file, bulk.via_jobs, bulk.online_rate, bulk.json) == (
        5000, None, False, 10.0, False)
    dify = parse(["bench", "dify"])
    assert (dify.texts, dify.sequential, dify.threads, dify.url, dify.api_key) == (
        600, 60, 10, None, None)
    semantic = parse(["bench", "semantic"])
    assert (semantic.entries, semantic.queries) == (100_000, 1000)
    gpu = parse(["bench", "gpu"])
    assert (gpu.queries, gpu.index_entries, gpu.pipeline_texts, gpu.report) == (
        1000, 1_000_000, 20_000, "docs/gpu-report.md")
    threshold = parse(["bench", "threshold", "--lodo"])
    assert (threshold.lodo, threshold.pairs_file, threshold.heldout_file) == ("", None, None)
