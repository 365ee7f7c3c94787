"""How tests/data/ledger-v2.db was made: by dpledger at commit 4ebc3b0 (schema 2).

A real schema-2 ledger for the schema-3 migration tests: releases over three epochs with
and without release ids, a principal, a round, a global release, and a policy version
change at epoch 2 (spatial-eval 1.0.0, then 1.1.0 with epoch_epsilon 5). To make it again::

    git worktree add --detach /tmp/dpledger-s2 4ebc3b0
    PYTHONPATH=/tmp/dpledger-s2 python tests/data/make_ledger_v2.py /tmp/dpledger-s2 out.db

Not run by the test suite (it needs the old checkout); kept so the fixture can be rebuilt.
"""

import sys
from pathlib import Path

import numpy as np

from dpledger import Ledger, Policy, ReleaseRequest  # schema-2 dpledger, from PYTHONPATH

old, out = Path(sys.argv[1]), sys.argv[2]
text = (old / "policies" / "spatial-eval.toml").read_text()
first = Policy.from_toml(text)
second = Policy.from_toml(
    text.replace('version = "1.0.0"', 'version = "1.1.0"').replace(
        'epoch_epsilon = "4.0"', 'epoch_epsilon = "5.0"'
    )
)


def request(epoch: int, metric: str, region: str, cohort: int, **kw: str) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric=metric, region=region, cohort=cohort, **kw)


with Ledger.open(out, first, mode="create") as ledger:
    ledger.release(request(0, "clipped_mean_loss", "eu-west", 2400, release_id="e0/eu-west/loss"),
                   2400 * 1.2)  # fmt: skip
    ledger.release(
        request(0, "error_histogram", "eu-west", 2400, edges_version="abs-error-m/v1"),
        np.full(7, 2400 * 40 / 7 * 0.9),
        principal="maps-team",
    )
    ledger.release(request(0, "along_across_ratio", "*", 9000), 9000 * 1.3)
    ledger.release_round(
        [
            (request(1, "clipped_mean_loss", r, 3000, release_id=f"e1/{r}/loss"), 3000 * 1.0)
            for r in ("na", "apac", "eu-east")
        ]
    )
    ledger.release(request(1, "calibration_gap", "eu-east", 2500), np.linspace(-50, 50, 10))
with Ledger.open(out, second) as ledger:
    ledger.release(request(2, "clipped_mean_loss", "eu-west", 2400, release_id="e2/eu-west/loss"),
                   2400 * 1.1)  # fmt: skip
