"""`python -m embedq.cli`: the same as the `embedq` command."""

import sys

from embedq.cli import main

sys.exit(main())
