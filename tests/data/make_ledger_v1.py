"""How tests/data/ledger-v1.db was made: by dpledger 0.1 (commit ccd9adf), not by this code.

It is a real schema-1 ledger for the migration tests: seven releases over three epochs,
regional and global, a scalar, histograms and a signed vector, and a policy version change
at epoch 2 (spatial-eval 1.0.0, then 1.1.0 with epoch_epsilon 5). To make it again::

    git worktree add --detach /tmp/dpledger-0.1 ccd9adf
    PYTHONPATH=/tmp/dpledger-0.1 python tests/data/make_ledger_v1.py /tmp/dpledger-0.1 out.db

Not run by the test suite (it needs the old checkout); kept so the fixture can be rebuilt.
"""

import sys
from pathlib import Path

import numpy as np

from dpledger import Ledger, Policy, ReleaseRequest  # dpledger 0.1, from PYTHONPATH

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


ledger = Ledger.open(out, first)
ledger.release(request(0, "clipped_mean_loss", "eu-west", 2400), 2400 * 1.2)
ledger.release(
    request(0, "error_histogram", "eu-west", 2400, edges_version="abs-error-m/v1"),
    np.full(7, 2400 * 40 / 7 * 0.9),
)
ledger.release(request(0, "along_across_ratio", "*", 9000), 9000 * 1.3)
ledger.release(request(0, "clipped_mean_loss", "na", 3000), 3000 * 1.0)
ledger.release(request(1, "calibration_gap", "eu-east", 2500), np.linspace(-50, 50, 10))
ledger.release(
    request(1, "coverage", "apac", 900, edges_version="coverage-cells/v1"),
    np.array([200.0, 300, 100, 150, 100, 50]),
)
Ledger.open(out, second).release(request(2, "clipped_mean_loss", "eu-west", 2400), 2400 * 1.1)
