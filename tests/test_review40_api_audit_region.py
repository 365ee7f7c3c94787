"""Review 40 (api): ``verify`` did not check an entry's region against its recorded policy.
Before this review's fix to ``well_formed`` a ``model_construct`` request whose region was
a ``str`` subclass equal to everything was recorded under a region no policy declares
('zzz'), and the audit called the ledger sound: its spend counts against no declared
region's budget. Such an entry (any ledger an earlier dpledger wrote) is a problem now.
The entry is made here by letting ``Regions.admits`` accept anything while it is written."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.policy.regions import Regions
from tests.factories import policy


def test_an_entry_in_an_undeclared_region_is_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy(version="r40-audit")  # its own: the approval caches keep what admits said
    path = tmp_path / "l.db"
    with dl.Ledger.open(path, p, mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=9), 5.0)
        assert ledger.verify().ok
        with monkeypatch.context() as m:
            m.setattr(Regions, "admits", lambda self, region: True)
            ledger.release(dl.ReleaseRequest(epoch=0, metric="loss", region="zzz", cohort=9), 5.0)
    with dl.Ledger.open(path, p, mode="read") as ledger:
        report = ledger.verify()
    assert not report.ok
    assert report.problems == (
        "entry 2: region 'zzz' is not a region of its policy r40-audit: no declared region's "
        "budget holds its spend",
    )
