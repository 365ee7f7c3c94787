"""Review (hrev): under ``add_remove`` the aggregate check admits any finite sum (the count
is private), but ``noise_range`` bounds the aggregate by the declared cohort × magnitude.
An aggregate above that bound passes both checks, and then about half the draws overflow:
InternalError ("please report it"; CLI exit 3), uncharged, decided by the private
aggregate and the noise. The outcome of an approved check must not depend on the draw.
Fixed: the clipping check leaves the noise room below a double's limit (noise_room)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
from _stores import ONE_REGION_HEAD

from dpledger import Policy, ReleaseRequest
from dpledger.errors import InvalidAggregate
from dpledger.ledger import Ledger

POLICY = (
    ONE_REGION_HEAD.format(name="ar", nb="add_remove")
    + """[metrics.big]
kind = "scalar_mean"
epsilon = "1e-288"          # scale 1e300: noise_range passes (691 scales fit a double)
clip = { low = "0", high = "1e12", source = "t" }
"""
)


def test_an_approved_add_remove_release_never_overflows(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = Policy.from_toml(POLICY)
    req = ReleaseRequest(epoch=0, metric="big", region="a", cohort=100)
    aggregate = sys.float_info.max  # finite: admitted under add_remove
    with Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        assert not ledger.check(req, aggregate).approved  # refused before any draw
        for _ in range(12):  # never an InternalError after a draw: always this refusal
            with pytest.raises(InvalidAggregate, match="clipping_bounds"):
                ledger.release(req, aggregate)
