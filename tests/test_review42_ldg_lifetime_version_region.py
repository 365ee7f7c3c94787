"""Review 42 (ldg): ``Ledger.lifetime(region)`` (``dpledger ledger lifetime --region``)
refused a region of a policy version the ledger recorded, when opened with another
version that lacks it and nothing was released in it: "unknown region 'west'; this
policy's regions: ['north', 'south']" — yet its clients lost every global release, and
``entries``/``spent`` know the name. A recorded version's region is now known (the
message lists every known policy's regions); a typo is still refused."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import dpledger as dl

POLICY = """
name = "u"
version = "{v}"
neighbouring = "replace"
epoch_epsilon = "4"
allocation = "pooled"
[regions]
names = [{regions}]
[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def test_a_recorded_versions_region_has_a_lifetime(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        v1 = dl.Policy.from_toml(POLICY.format(v="1", regions='"north", "south"'))
        v2 = dl.Policy.from_toml(POLICY.format(v="2", regions='"north", "west"'))
    db = tmp_path / "l.db"
    with dl.Ledger.open(db, v2, mode="create") as ledger:
        r = dl.ReleaseRequest(epoch=0, metric="loss", region="*", cohort=9, policy_version="2")
        ledger.release(r, 5.0)
    with dl.Ledger.open(db, v1, mode="read") as ledger:
        life = ledger.lifetime("west")
        assert (life.releases, life.epsilon_basic) == (1, Fraction(1, 10))
        with pytest.raises(dl.InvalidInput, match=r"unknown region 'wst'.*'west'"):
            ledger.lifetime("wst")
