"""How embedq's commands log: one format, and only what that format prints is collected.

The serving processes log a line per authenticated request (the audit trail) and the
workers one per task and batch, so a record's cost is paid thousands of times a second.
Python's logging gathers, for every record, the caller's file and line (a walk up the
stack), the thread's name, the process's id and the multiprocessing process's name, none
of which this format prints; the logging HOWTO's "Optimization" section names the
switches that skip them. The timestamp's text is kept for the second it names.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class StampFormatter(logging.Formatter):
    """The standard `asctime` (`2026-12-07 23:16:05,123`), formatted once a second."""

    def __init__(self, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self._stamp: tuple[int, str] = (-1, "")  # (second, its text): replaced whole

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        stamp = self._stamp
        if stamp[0] != second:
            stamp = (second, time.strftime(self.default_time_format,
                                           self.converter(record.created)))
            self._stamp = stamp
        if self.default_msec_format is None:
            return stamp[1]
        return self.default_msec_format % (stamp[1], record.msecs)


def setup_logging(level: int | str, stream: TextIO | None = None) -> None:
    """The root logger at `level`, one handler on `stream` (default stderr) with FORMAT,
    records collecting only what FORMAT prints. A process whose root logger already has
    handlers (an application that set logging up itself, a test runner) is left as it is,
    as `logging.basicConfig` leaves it."""
    if logging.getLogger().handlers:
        return
    if isinstance(level, str):
        level = getattr(logging, level.upper(), logging.INFO)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(StampFormatter())
    logging.basicConfig(level=level, handlers=[handler])
    logging._srcfile = None  # type: ignore[attr-defined]  # no caller's file and line
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
