"""Review (priv): under add_remove the docs tell the caller to make the planned cohort
bound the count by truncating to it ("select or truncate to it", docs/privacy-model.md;
"a silo keeps at most its planned count of records (truncate before summing …)"; the
cross-silo notebook keeps each hospital's first QUOTA records). Where the truncation
binds, adding one person pushes another person's record out: the truncated sum moves by
two records, while the ledger charges the add_remove sensitivity of one. The notebook
calls this "protected only at 2ε", but the ledger records ε. Deterministic (no noise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpledger import Policy
from dpledger.mechanisms import policy_sensitivity
from dpledger.metrics.records import record_confusion

POLICY = Path(__file__).resolve().parents[1] / "policies" / "cross-silo.toml"
QUOTA = 3  # the planned record count of the one silo: public, fixed before the round


def _truncated_sum(y_true: list[int], y_pred: list[int]) -> np.ndarray:
    """The documented procedure: keep the silo's first QUOTA records, then sum."""
    kept = slice(0, QUOTA)
    return record_confusion(y_true[kept], y_pred[kept], n_classes=10).total()


def test_adding_one_person_moves_a_truncated_sum_by_at_most_the_charged_sensitivity() -> None:
    policy = Policy.load(POLICY)
    charged = policy_sensitivity(policy, "digits_confusion")  # add_remove, one record
    # D: the silo lists three patients (one record each), at its quota
    d = _truncated_sum([0, 1, 2], [0, 1, 2])
    # D': one more patient, admitted first (listed by admission time, their own fact)
    d2 = _truncated_sum([7, 0, 1, 2], [7, 0, 1, 2])
    moved = float(np.abs(d - d2).sum())
    assert moved <= charged, f"one person moved the sum by {moved}, charged Δ = {charged}"
