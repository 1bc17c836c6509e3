"""argparse value types the CLI and the benches share.

A number out of range is refused when the command line is read, naming the option and
what to give, before anything loads or starts: `serve --port 99999` loaded the model and
then hung with nothing said, `demo --lines 0` ran a demo of no texts, `bench bulk --n 0`
ended in a traceback and `jobs list --limit -5` listed every job but the last five.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

MAX_PORT = 65_535


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def at_least(minimum: int) -> Callable[[str], int]:
    """A whole number of `minimum` or more."""

    def parse(text: str) -> int:
        value = _integer(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}: give {minimum} "
                                             "or more")
        return value

    return parse


def port(text: str) -> int:
    """A TCP port to listen on, 1 to 65535."""
    value = _integer(text)
    if not 1 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port: give 1 to {MAX_PORT}")
    return value


def device_pace(text: str) -> tuple[float, float]:
    """`MS,US`: a stand-in device's forward pass, MS milliseconds a call and US
    microseconds a text, both zero or more."""
    parts = text.split(",")
    try:
        fixed_ms, per_text_us = (float(p) for p in parts) if len(parts) == 2 else (-1, -1)
    except ValueError:
        fixed_ms = per_text_us = -1
    if not (0 <= fixed_ms < float("inf") and 0 <= per_text_us < float("inf")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not MS,US: give the milliseconds a forward pass takes and the "
            "microseconds each text adds, e.g. 2,8")
    return fixed_ms, per_text_us
