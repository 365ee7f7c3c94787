"""``Release.with_aggregate_error`` takes a real number >= 0 (numpy's included), and
refuses anything else with :class:`InvalidInput` naming ``sum_error``: it raised TypeError
for None, a list or an array, OverflowError for 10**400, and coerced True and "1"."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from test_published import SMALL

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.errors import InvalidInput
from dpledger.types import nonnegative_real


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> object:
    path = tmp_path_factory.mktemp("ae") / "l.db"
    with Ledger.open(path, Policy.from_toml(SMALL), mode="create") as ledger:
        req = ReleaseRequest(epoch=0, metric="mean_loss", region="all", cohort=1000)
        return ledger.release(req, 500.0)


@pytest.mark.parametrize(
    "bad",
    [None, [1.0], np.array([1.0, 2.0]), np.array(1.0), 10**400, -(10**5000), True, "1",
     -1.0, math.nan, math.inf, 1j],
    ids=["None", "list", "array", "0-d array", "10**400", "-10**5000", "True", "str", "-1",
         "nan", "inf", "complex"],
)  # fmt: skip
def test_a_bad_sum_error_is_refused_naming_it(release: object, bad: object) -> None:
    with pytest.raises(InvalidInput, match="sum_error must be"):
        release.with_aggregate_error(bad)  # type: ignore[attr-defined]


@pytest.mark.parametrize("good", [1, 1.0, Fraction(1), np.float64(1.0), np.int64(1)], ids=repr)
def test_numbers_of_every_real_type_are_taken(release: object, good: object) -> None:
    base = release.with_aggregate_error(1.0)  # type: ignore[attr-defined]
    assert release.with_aggregate_error(good).error_bar == base.error_bar  # type: ignore[attr-defined]


def test_the_shared_check_names_its_argument() -> None:
    with pytest.raises(InvalidInput, match="aggregate_error must be finite and >= 0, got an int"):
        nonnegative_real(10**400, "aggregate_error")
    assert nonnegative_real(np.float32(0.5), "x") == 0.5
