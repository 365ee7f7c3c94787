"""Review 40 (api): ``well_formed`` let a ``ReleaseRequest.model_construct(...)`` through
unvalidated when each text field was an instance of ``str``, a subclass included. A
region whose class answers ``==`` with True passed ``region_known`` (``region in
names``) while the ledger recorded and charged its own text: a release in region
'zzz', which no policy declares and whose budget no declared region shares; the audit
called the ledger sound. Validation turns a subclass into plain text; now the fast path
accepts only plain text within the fields' lengths, and re-validates anything else."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from tests.factories import policy


class _AnyRegion(str):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


def _constructed(**fields: object) -> dl.ReleaseRequest:
    base: dict[str, object] = {
        "epoch": 0,
        "metric": "loss",
        "region": "north",
        "cohort": 100,
        "edges_version": None,
        "policy_version": None,
        "release_id": None,
    }
    return dl.ReleaseRequest.model_construct(**{**base, **fields})


def test_a_str_subclass_region_cannot_pass_for_a_declared_one(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy()
    request = _constructed(region=_AnyRegion("zzz"))
    with dl.Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        assert not ledger.check(request, 50.0).approved
        with pytest.raises(dl.ReleaseRefused, match="region_known"):
            ledger.release(request, 50.0)
        with pytest.raises(dl.ReleaseRefused, match="region_known"):
            ledger.release_round([(request, 50.0)])
        assert len(ledger) == 0
    assert not (tmp_path / "l.db").exists()


@pytest.mark.parametrize(
    "fields",
    [{"metric": ""}, {"region": "n" * 65}, {"release_id": "x" * 129}, {"edges_version": ""}],
)
def test_a_constructed_request_is_held_to_the_fields_lengths(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy()
    with (
        dl.Ledger.open(tmp_path / "l.db", p, mode="create") as ledger,
        pytest.raises(dl.InvalidInput, match="invalid ReleaseRequest"),
    ):
        ledger.release(_constructed(**fields), 50.0)
