"""``python -m dpledger.cli``: the ``dpledger`` command."""

import sys

from dpledger.cli import run

sys.exit(run())
