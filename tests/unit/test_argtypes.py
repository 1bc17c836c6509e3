"""A number a command cannot use is refused when the command line is read, naming the
option and what to give (embedq.argtypes), and the limits themselves are accepted."""

from __future__ import annotations

import pytest

from embedq.cli import build_parser

REFUSED = [
    (["serve", "--port", "99999"], "argument --port: 99999 is not a TCP port: give 1 to 65535"),
    (["serve", "--port", "0"], "argument --port: 0 is not a TCP port"),
    (["mcp", "--port", "abc"], "argument --port: 'abc' is not a whole number"),
    (["jobs", "list", "--limit", "-5"], "argument --limit: -5 is below 1: give 1 or more"),
    (["demo", "--lines", "0"], "argument --lines: 0 is below 1: give 1 or more"),
    (["bulk", "in.jsonl", "--from-line", "0"], "argument --from-line: 0 is below 1"),
    (["worker", "--concurrency", "-1"], "argument --concurrency: -1 is below 0: give 0 or more"),
    (["bench", "bulk", "--n", "0"], "argument --n: 0 is below 1"),
    (["bench", "pipeline", "--rounds", "0"], "argument --rounds: 0 is below 1"),
    (["bench", "scale", "--workers", "1", "0"], "argument --workers: 0 is below 1"),
    (["bench", "semantic", "--writers", "-2"], "argument --writers: -2 is below 0"),
    (["bench", "dify", "--threads", "1.5"], "argument --threads: '1.5' is not a whole number"),
    (["bench", "pipeline", "--device", "2"], "argument --device: '2' is not MS,US"),
    (["bench", "pipeline", "--device", "2,-1"], "argument --device: '2,-1' is not MS,US"),
    (["bench", "pipeline", "--device", "a,b"], "e.g. 2,8"),
    (["bench", "pipeline", "--device", "inf,1"], "argument --device: 'inf,1' is not MS,US"),
]


@pytest.mark.parametrize(("argv", "said"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_number_out_of_range_is_refused_naming_the_option(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    assert said in capsys.readouterr().err


ACCEPTED = [
    (["serve", "--port", "1"], "port", 1),
    (["mcp", "--port", "65535"], "port", 65535),
    (["bulk", "in.jsonl", "--from-line", "1"], "from_line", 1),
    (["worker", "--concurrency", "0"], "concurrency", 0),
    (["bench", "gpu", "--pipeline-texts", "0"], "pipeline_texts", 0),
    (["bench", "scale", "--workers", "1", "8"], "workers", [1, 8]),
    (["bench", "pipeline", "--device", "0,0"], "device", (0.0, 0.0)),
    (["bench", "pipeline", "--device", "2,8.5"], "device", (2.0, 8.5)),
]


@pytest.mark.parametrize(("argv", "name", "value"), ACCEPTED,
                         ids=[" ".join(a) for a, _, _ in ACCEPTED])
def test_the_limits_themselves_are_accepted(argv: list[str], name: str, value: object) -> None:
    assert getattr(build_parser().parse_args(argv), name) == value
