"""Review 42 diff 2: edges of the review-42 printing and client-argument fixes.

- ``outward`` rounded the largest doubles up past the double range and printed ``inf``:
  a finite bar of 1.7976931348623157e308 showed as ``± inf`` (value_with_bar's bar, a
  derived interval's end). It now prints the decimal (``1.798e+308``).
- The CLI printed a vector release's coordinates to 4 significant digits (value_with_bar's
  default) where the scalar kept ``.6g``'s 6 and numpy's former text 4 decimals: a sum of
  206.1598 beside a bar of 48 showed as ``206.2``, contrary to "at least the former
  digits" (tests/test_review42_sta_value_precision.py). Now at least 6 significant digits
  and 4 decimals, as before, and more where the bar asks.
- ``contribution_reply(extra=[...])`` (a list, as the merged fixes refused typed for
  data/bounds/data_for) raised ``AttributeError`` in every evaluate handler.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from decimal import Decimal

import numpy as np
import pytest
from factories import BASE

import dpledger as dl
from dpledger._printed import outward, value_with_bar
from dpledger.cli.main import release_text

BIGGEST = 1.7976931348623157e308


@pytest.mark.parametrize("spec", [".3g", ".4g", " .4g", ".6g"])
def test_rounding_up_past_the_largest_double_is_no_inf(spec: str) -> None:
    up, down = outward(BIGGEST, spec, True), outward(-BIGGEST, spec, False)
    assert "inf" not in up
    assert "inf" not in down
    assert Decimal(up.strip()) >= Decimal(BIGGEST)
    assert Decimal(down.strip()) <= Decimal(-BIGGEST)
    assert value_with_bar(1.0, BIGGEST)[1] == "1.8e+308"  # .3g up: 1.80e+308


def _vector_release() -> dl.Release:
    text = BASE.format(version="1", neighbouring="replace", epoch_epsilon="10",
                       eval_fraction="1", scalar_eps="1",
                       edges20=", ".join(str(float(i)) for i in range(1, 20)))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(text, source="t.toml")
    with dl.Ledger.open(":memory:", policy, mode="create") as ledger:
        req = dl.ReleaseRequest(epoch=0, metric="hist5", region="north", cohort=1000,
                                edges_version="h5/v1")  # fmt: skip
        return ledger.release(req, np.array([100.0, 200.0, 300.0, 250.0, 150.0]))


@pytest.mark.parametrize(
    "sums",
    [
        [84.6634, 206.1598, 308.6182, 218.9435, 143.1198],
        [12.3456, 1234.5678, 0.5, 123456.789, -3.25],
        [0.012345678, 0.5, 1.0, 2.0, 3.0],
    ],
)
def test_cli_vector_keeps_its_former_digits(sums: list[float]) -> None:
    rel = dataclasses.replace(_vector_release(), noisy_sum=np.array(sums))
    line = release_text(rel).splitlines()[1]
    shown = np.array([float(x) for x in line.split("[")[1].rstrip("]").split()])
    former = np.fromstring(  # numpy's former text: precision 4
        np.array2string(rel.value, precision=4, threshold=sys.maxsize).strip("[]"), sep=" "
    )
    value = np.asarray(rel.value)
    assert (np.abs(shown - value) <= np.abs(former - value)).all(), line  # never coarser
    assert (np.abs(shown - value) <= rel.error_bar / 100).all()
