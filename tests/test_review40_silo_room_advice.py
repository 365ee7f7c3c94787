"""Review 40 (silo): the clipping check's refusal under ``add_remove`` at the doubles'
limit (an aggregate beyond the noise's room: far more records than the planned cohort
were summed) told the caller "truncate to it" — to cut the silos' records down to the
planned cohort. The docs say never to (docs/privacy-model.md, "Never truncate to the
planned cohort"; tests/test_review_priv_truncation.py): where truncation binds, one more
person pushes another's record out, twice the charged change. The reason now says to
plan a cohort at or above the count. Deterministic (refused before any draw)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

from dpledger import Ledger, Policy, ReleaseRequest

RECORD = """
name = "huge-records"
version = "1"
privacy_unit = "record"
max_records_per_person = 1
neighbouring = "add_remove"
epoch_epsilon = "4"
allocation = "pooled"
[regions]
names = ["a"]
[metrics.huge]
kind = "scalar_mean"
epsilon = "1e-300"  # scale 1e300: the planned cohort's sums and noise fit a double
target = 1e300
clip = { low = "0", high = "1", source = "test" }
"""


def test_the_room_refusal_never_advises_truncating(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = Policy.from_toml(RECORD)
    request = ReleaseRequest(epoch=0, metric="huge", region="a", cohort=100)
    with Ledger.open(tmp_path / "r.db", policy, mode="create") as ledger:
        verdict = ledger.check(request, np.array([sys.float_info.max]))
    (failed,) = verdict.failures
    assert failed.name == "clipping_bounds"
    said = " ".join(failed.reason.split())
    assert "records than the declared cohort were summed" in said
    assert "summed: truncate to it" not in said
    assert "plan a cohort at or above the count" in said
    assert "never truncate" in said
