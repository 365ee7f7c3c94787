"""Review 40 (api): ``Ledger.verify(expected_head=...)`` refused an anchor read back the way
one is kept outside the database: a JSON pair comes back as a list, and an entry id read
from a CSV with pandas is a numpy integer — both "expected_head must be an (entry_id,
64-hex entry_hash) pair", though they are one. They are read as the pair they hold now;
a bool id, a negative one, or a three-element list is still refused."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from tests.factories import policy

REQUEST = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100)


def test_an_anchor_read_back_from_json_or_a_dataframe_is_a_pair(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy()
    with dl.Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        first = ledger.release(REQUEST, 50.0)
        ledger.release(REQUEST, 50.0)
        kept = json.loads(json.dumps([first.entry_id, first.entry_hash]))
        assert ledger.verify(expected_head=kept).ok
        assert ledger.verify(expected_head=(np.int64(first.entry_id), first.entry_hash)).ok
        assert not ledger.verify(expected_head=[first.entry_id, "0" * 64]).ok
        for bad in ([True, first.entry_hash], [-1, first.entry_hash], [1, first.entry_hash, 2]):
            with pytest.raises(dl.InvalidInput, match="expected_head"):
                ledger.verify(expected_head=bad)  # type: ignore[arg-type]
