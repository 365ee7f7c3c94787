"""Review 40 (planning): ``compare_units`` printed bars no release prints.

``dpledger plan --compare-units`` (``compare_units``) computed each bar from the noise
scale alone, without what a release's bar adds on the sum (OpenDP's 2**-40 grid, the
doubles' rounding): at a per-record clip of 1e-12 its record-level bar was 9% below the
one a release over every silo prints. And it compared a release over more records than
any release accepts (silos summing past 1e9): the ledger refuses that cohort. Bars are
now the releases' own; such a federation is refused with a reason. Deterministic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from dpledger.errors import InvalidInput
from dpledger.planning.units import client_twin, compare_units

POLICY = """
name = "u"
version = "1"
privacy_unit = "record"
max_records_per_person = 2
neighbouring = "{nb}"
definition = "pure"
epoch_epsilon = "4"
eval_fraction = "0.25"
[regions]
names = ["a", "b"]
[metrics.m]
kind = "scalar_mean"
epsilon = "0.5"
clip = {{ low = "0", high = "{cap}", source = "t" }}
[metrics.v]
kind = "vector_sum"
epsilon = "0.5"
dimension = 1000
cap_per_record = "{cap}"
nonnegative = true
"""
SILOS = {"a": 1000, "b": 3000}


def _policy(nb: str, cap: str) -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dl.Policy.from_toml(POLICY.format(nb=nb, cap=cap), source="t.toml")


def _sum_bar(ledger: dl.Ledger, metric: str, cohort: int) -> float:
    """The half-width on the released sum of one release over every silo."""
    request = dl.ReleaseRequest(epoch=0, metric=metric, region=dl.ALL, cohort=cohort)
    release = ledger.release(request, 0.0 if metric == "m" else np.zeros(1000))
    return release.error_bar * cohort if metric == "m" else release.error_bar


@pytest.mark.parametrize("nb", ["replace", "add_remove"])
@pytest.mark.parametrize("cap", ["1e-12", "1e-9", "1"])
def test_bars_are_what_the_releases_print(tmp_path: Path, nb: str, cap: str) -> None:
    policy = _policy(nb, cap)
    records = sum(SILOS.values())
    rows = {r.metric: r for r in compare_units(policy, SILOS)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        twin = client_twin(policy, max(SILOS.values()))
    with (
        dl.Ledger.open(tmp_path / "record.db", policy, mode="create") as by_record,
        dl.Ledger.open(tmp_path / "client.db", twin, mode="create") as by_client,
    ):
        for metric in ("m", "v"):
            row = rows[metric]
            assert row.record_bar == _sum_bar(by_record, metric, records) / records
            # the twin releases over the silos as its clients; the bar on the same mean
            client = _sum_bar(by_client, metric, len(SILOS)) / records
            assert row.client_bar == pytest.approx(client, rel=1e-12, abs=0)


def test_a_federation_past_the_largest_cohort_is_refused() -> None:
    with pytest.raises(InvalidInput, match="above the largest cohort a release accepts"):
        compare_units(_policy("replace", "1"), {"a": 10**9, "b": 1})
