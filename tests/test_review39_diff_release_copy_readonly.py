"""Review 39 (diff): 2d51317 put a Release's vector over immutable bytes, so that
``setflags(write=True)`` is refused and the frozen release's value cannot change under it;
but a pickled or deep-copied Release (as a DerivedRelease now pickles, cd3bdb8) got an
array owning its memory again: ``setflags(write=True)`` worked and the copy's ``value``,
``as_dict`` and intervals changed. A copy's vector is read-only too."""

from __future__ import annotations

import copy
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL

import dpledger as dl


def test_a_copied_release_cannot_be_changed(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.load(str(SPATIAL))
    request = dl.ReleaseRequest(epoch=0, metric="calibration_gap", region="na", cohort=2000)
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        release = ledger.release(request, np.zeros(10))
    for copied in (pickle.loads(pickle.dumps(release)), copy.deepcopy(release)):
        assert np.array_equal(copied.noisy_sum, release.noisy_sum)
        assert copied.as_dict() == release.as_dict()
        with pytest.raises(ValueError, match="WRITEABLE"):
            copied.noisy_sum.setflags(write=True)
