"""`python -m embedq.cli`: the same as the `embedq` command."""

from embedq.cli import run

run()
