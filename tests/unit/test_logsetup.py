"""The commands' log set-up (embedq/cli/logsetup.py): the same lines as logging's own
formatter, records that collect only what the format prints, and a process that set
logging up itself left alone."""

from __future__ import annotations

import logging
import subprocess
import sys

from embedq.cli.logsetup import FORMAT, StampFormatter, setup_logging


def _record(created: float, msg: str = "request tenant=%s", *args: object) -> logging.LogRecord:
    record = logging.LogRecord("embedq.audit", logging.INFO, __file__, 1, msg,
                               args or ("acme",), None)
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    return record


def test_lines_are_those_of_the_standard_formatter() -> None:
    ours, standard = StampFormatter(), logging.Formatter(FORMAT)
    # Within a second, across seconds, a minute and a day, and back in time (a clock set
    # back): each stamp is that record's own.
    for created in (1_796_000_000.001, 1_796_000_000.999, 1_796_000_001.5, 1_796_000_059.9,
                    1_796_000_060.0, 1_796_086_400.25, 1_796_000_000.75):
        record = _record(created)
        assert ours.format(record) == standard.format(_record(created)), created
    assert ours.formatTime(_record(1_796_000_000.5), "%H") == \
        standard.formatTime(_record(1_796_000_000.5), "%H")


def test_a_fresh_process_logs_the_format_without_the_unprinted_fields() -> None:
    code = (
        "import logging, sys\n"
        "from embedq.cli.logsetup import setup_logging\n"
        "setup_logging('info')\n"
        "records = []\n"
        "class Keep(logging.Handler):\n"
        "    def emit(self, record): records.append(record)\n"
        "logging.getLogger().addHandler(Keep())\n"
        "logging.getLogger('embedq.audit').info('request tenant=%s', 'acme')\n"
        "r = records[0]\n"
        "print(r.process, r.threadName, r.processName, r.funcName, r.lineno, sep='|')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "None|None|None|(unknown function)|0"
    line = done.stderr.strip()
    assert line.endswith(" INFO embedq.audit: request tenant=acme"), line
    stamp = line.split(" INFO ")[0]
    assert len(stamp) == len("2026-12-07 23:16:05,123") and stamp[19] == ","


def test_a_process_with_handlers_is_left_as_it_is() -> None:
    root = logging.getLogger()
    kept = logging.NullHandler()
    root.addHandler(kept)  # the test runner's own handlers may be there too
    try:
        before = (list(root.handlers), root.level, logging.logThreads, logging.logProcesses)
        setup_logging("debug")
        after = (list(root.handlers), root.level, logging.logThreads, logging.logProcesses)
        assert after == before
        assert logging._srcfile is not None  # type: ignore[attr-defined]
    finally:
        root.removeHandler(kept)
