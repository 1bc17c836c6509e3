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
