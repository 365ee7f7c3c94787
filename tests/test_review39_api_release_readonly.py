"""Review 39 (api): a Release's vector (``noisy_sum``, ``value``, ``per_client``) was a
read-only copy that owned its memory, so ``setflags(write=True)`` made it writeable again
and the frozen release's value, interval and ``as_dict`` changed under it (the ledger's
entry did not). Now the array lies over immutable bytes: it cannot be made writeable."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from tests.factories import policy


def test_a_release_vector_cannot_be_made_writeable(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        pol = policy()
    request = dl.ReleaseRequest(
        epoch=0, metric="hist5", region="north", cohort=100, edges_version="h5/v1"
    )
    with dl.Ledger.open(tmp_path / "l.db", pol, mode="create") as ledger:
        rel = ledger.release(request, np.array([10.0, 20.0, 30.0, 40.0, 0.0]))
        before = rel.as_dict()["value"]
        for array in (rel.noisy_sum, rel.value, rel.per_client):
            assert isinstance(array, np.ndarray)
            with pytest.raises(ValueError, match="WRITEABLE"):
                array.setflags(write=True)
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 999.0
        assert rel.as_dict()["value"] == before
        assert list(ledger.entries()[-1].draft.output) == before
