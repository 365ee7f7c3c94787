"""How tests/data/ledger-long-edges.db was made: by dpledger at commit c12a5f8 (schema 3).

A ledger recorded under a policy that dpledger accepted then and refuses for new policies
now: one metric's ``edges_version`` is 200 characters (a request can carry at most 128, so
that metric was never released; the others were). To make it again::

    git worktree add --detach /tmp/dpledger-c12 c12a5f8
    PYTHONPATH=/tmp/dpledger-c12 python tests/data/make_ledger_long_edges.py out.db

Not run by the test suite (it needs the old checkout); kept so the fixture can be rebuilt.
"""

import sys

from dpledger import Ledger, Policy, ReleaseRequest  # dpledger at c12a5f8, from PYTHONPATH

TEXT = """
name = "long-edges"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"

[regions]
names = ["north", "south"]

[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = { low = "0", high = "2", source = "fixture" }

[metrics.hist]
kind = "histogram"
epsilon = "0.1"
edges = [1.0, 2.0]
edges_version = "EDGES"
cap_per_client = "1"
""".replace("EDGES", "v" * 200)

with Ledger.open(sys.argv[1], Policy.from_toml(TEXT), mode="create") as ledger:
    for region in ("north", "south"):
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region=region, cohort=100), 50.0)
