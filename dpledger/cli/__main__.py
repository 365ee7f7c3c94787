"""``python -m dpledger.cli``: the ``dpledger`` command."""

import sys

from dpledger.cli.main import main

sys.exit(main())
