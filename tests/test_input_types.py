"""Inputs read by their type, never their values, on every path (audit 6).

- G1: ``release_regression`` refuses a metric declared ``nonnegative = true`` before the
  spend (Σ(y − c) is signed: the ledger's nonnegative check would refuse, uncharged, on
  the private sum's sign, and a nonnegative metric's L2 charge is too small for it);
- G2: ``FixedPoint.encode`` / ``exact_sum`` / ``decode`` refuse what is not real numbers
  (bool, text, complex, Decimal, masked, an integer past the doubles) with ``InvalidInput``;
- G3: a bool beside numbers in a list is refused, as a lone bool is;
- G4: the derived releases read Python integers past 64 bits as numbers, as
  ``Ledger.release`` does (one unit above 2**64 decided a refusal, uncharged);
- G5: ``keep_per_person`` refuses person ids that are neither integers nor text (NaN, None).
"""

from __future__ import annotations

import decimal
import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpledger as dl
from dpledger.approval.aggregate import as_float64
from dpledger.errors import InvalidInput
from dpledger.ledger.derived import release_confusion, release_regression
from dpledger.metrics import flam_regression as fr
from dpledger.metrics._reading import as_real
from dpledger.metrics._segments import as_labels
from dpledger.metrics.records import keep_per_person
from dpledger.metrics.secure_sum import FixedPoint, exact_sum

RELATIONS = ("replace", "add_remove")


def _policy(relation: str, *, reg_nonnegative: bool, cap: str = "1") -> dl.Policy:
    return dl.Policy.from_toml(
        f"""
name = "types"
version = "1"
neighbouring = "{relation}"
epoch_epsilon = "400"
eval_fraction = "0.25"
[regions]
names = ["all"]
[metrics.reg]
kind = "vector_sum"
epsilon = "1"
dimension = 5
cap_per_client = "{cap}"
nonnegative = {"true" if reg_nonnegative else "false"}
[metrics.conf]
kind = "vector_sum"
epsilon = "1"
dimension = 4
cap_per_client = "{cap}"
nonnegative = true
"""
    )


_KW: dict[str, Any] = {"y_bounds": (0.0, 10.0), "residual_bound": 5.0, "max_samples": 1.0}


def _regression_sum(extra_y: float) -> np.ndarray:
    """Nine clients at y = ŷ = c (the shift) and one at ``extra_y``: Σ(y − c) takes its sign."""
    codec = fr.regression_codec(cap=1.0, **_KW)
    rows = [fr.regression_measures([5.0], [5.0], **_KW)] * 9
    rows.append(fr.regression_measures([extra_y], [extra_y], **_KW))
    return np.asarray(codec.encode(np.array(rows)).sum(axis=0))


@pytest.mark.parametrize("relation", RELATIONS)
def test_a_nonnegative_regression_metric_is_refused_alike_for_either_sign(
    tmp_path: Path, relation: str
) -> None:
    policy = _policy(relation, reg_nonnegative=True)
    codec = fr.regression_codec(cap=1.0, **_KW)
    req = dl.ReleaseRequest(epoch=0, metric="reg", region="all", cohort=10)
    said = set()
    for k, y in enumerate((6.0, 4.0)):  # Σ(y − c) = +1 and −1: neighbours under replace
        path = tmp_path / f"{k}.db"
        with (
            dl.Ledger.open(path, policy, mode="create") as ledger,
            pytest.raises(InvalidInput) as e,
        ):
            release_regression(ledger, req, _regression_sum(y), codec)
        said.add((type(e.value), str(e.value)))
        assert "nonnegative = false" in str(e.value)
        assert not path.exists()  # refused before the spend: no ledger was created
    assert len(said) == 1  # the same words for either sign: the policy's fact decided


@pytest.mark.parametrize("relation", RELATIONS)
def test_a_signed_regression_metric_releases_either_sign(tmp_path: Path, relation: str) -> None:
    policy = _policy(relation, reg_nonnegative=False)
    codec = fr.regression_codec(cap=1.0, **_KW)
    req = dl.ReleaseRequest(epoch=0, metric="reg", region="all", cohort=10)
    for k, y in enumerate((6.0, 4.0)):
        with dl.Ledger.open(tmp_path / f"{k}.db", policy, mode="create") as ledger:
            out = release_regression(ledger, req, _regression_sum(y), codec)
            assert out.release.charge.amount == 1
            assert ledger.spent(0, "all").amount == 1


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("unit", [0, 1])
def test_derived_releases_read_python_integers_past_64_bits(
    tmp_path: Path, relation: str, unit: int
) -> None:
    # audit 6, G4: a cell of 2**64 - 1 was released and its neighbour 2**64 refused uncharged
    policy = _policy(relation, reg_nonnegative=False, cap="1000000000000")
    big = 2**64 - 1 + unit
    req = dl.ReleaseRequest(epoch=0, metric="conf", region="all", cohort=10**8)
    with dl.Ledger.open(tmp_path / "c.db", policy, mode="create") as ledger:
        out = release_confusion(ledger, req, [[big, 0], [0, 0]])
        assert out.release.charge.amount == 1
    codec = fr.regression_codec(y_bounds=(0, 1), residual_bound=1, max_samples=1, cap=1e12)
    req = dl.ReleaseRequest(epoch=0, metric="reg", region="all", cohort=10**8)
    with dl.Ledger.open(tmp_path / "r.db", policy, mode="create") as ledger:
        got = release_regression(ledger, req, [big, 0, 0, 0, 0], codec)
        assert got.release.charge.amount == 1


class Unreadable:
    """An aggregate whose own conversion fails with its payload in the message (as an
    autograd tensor's can): refused by the error's type, its text never repeated."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise RuntimeError("cannot convert: share 2.5 from node 7")


class Unlisted(list):  # type: ignore[type-arg]
    """A list whose iteration raises, quoting a value."""

    def __iter__(self) -> Any:
        raise RuntimeError("private sum 4242.5")


class Huge(int):
    """An integer past int64 whose conversion to a double raises, quoting a value."""

    def __float__(self) -> float:
        raise RuntimeError("private sum 4242")


@pytest.mark.parametrize("values", [Unreadable(), Unlisted([1.0]), [Huge(10**30)]])
def test_an_aggregate_that_cannot_be_read_is_refused_without_its_text(values: Any) -> None:
    """Whichever step of reading raises (numpy's conversion, the list's own iteration, an
    integer's conversion to a double): refused by the error's type, its text never shown."""
    arr, why = as_float64(values)
    assert arr is None
    assert "RuntimeError while reading it" in why
    for private in ("2.5", "node 7", "4242"):
        assert private not in why


def test_labels_and_units_that_cannot_be_read_are_refused_without_their_text() -> None:
    with pytest.raises(InvalidInput, match=r"one flat array of integer class labels \(Runt"):
        as_labels(Unreadable(), "y_true", 3)
    with pytest.raises(InvalidInput, match=r"one array of integers \(ValueError") as e:
        FixedPoint(0.0, 3.0).decode([[1, 2], [3]])
    assert "inhomogeneous" not in str(e.value)


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ([0, 0, True], "booleans among the numbers"),
        ([[1.5, np.True_]], "booleans among the numbers"),
        ((2, False), "booleans among the numbers"),
        (True, "dtype bool"),
        (np.array([1 + 0j]), "dtype complex128"),
        (["1.5"], "dtype <U3"),
        ([decimal.Decimal("1.5")], "dtype object"),
        (np.ma.masked_array([1.0, 99.0], mask=[False, True]), "masked array"),
        (memoryview(b"a"), "raw bytes"),  # np.asarray: the count 97 (review hsafe)
        (bytearray(b"\x01\x02"), "raw bytes"),
        ([np.ma.masked_array([1.0, 99.0], mask=[False, True])], "masked array"),
        ([np.timedelta64(3, "s"), 2**70], "dtype object"),
        (np.array([np.timedelta64(3, "s")]), "dtype timedelta64"),
        ([[1.0, 2.0], [3.0]], "not an array of numbers"),
        (Unreadable(), "not an array of numbers (RuntimeError while reading it"),
    ],
)
def test_only_real_numbers_are_read(values: Any, said: str) -> None:
    arr, why = as_float64(values)
    assert arr is None
    assert said in why
    grid = FixedPoint(0.0, 3.0)
    with pytest.raises(InvalidInput, match="contributions must hold real numbers"):
        grid.encode(values)
    rows = values if isinstance(values, np.ma.MaskedArray) else [values]  # one client's row
    with pytest.raises(InvalidInput, match="contributions must hold real numbers"):
        exact_sum(rows, grid)


@pytest.mark.parametrize(
    "values",
    [
        [1, 2.5],
        (3, 4),
        [[2**70, 1.0]],
        np.array([1, 2], dtype=np.uint64),
        [np.int8(3)],
        np.array([1.5], dtype=np.longdouble),  # rounded to a double, as a big integer is
        [np.longdouble(0.5), 2**64],  # review s28: refused by value beside ints, once
        np.array([0.5], dtype=np.float16),
    ],
)
def test_numbers_of_any_integer_or_float_type_are_read(values: Any) -> None:
    arr, why = as_float64(values)
    assert arr is not None
    assert why == ""
    assert arr.dtype == np.float64
    assert arr.tolist() == np.asarray(values, dtype=np.float64).tolist()


def test_an_integer_past_the_doubles_is_the_inf_it_denotes() -> None:
    # one past the largest double reads as ±inf (as a float of that size does) and the
    # finiteness check refuses it, typed: a float and an integer of one size alike
    arr, why = as_float64([10**400, -(10**400), 1])
    assert why == ""
    assert arr is not None
    assert arr.tolist() == [math.inf, -math.inf, 1.0]
    grid = FixedPoint(0.0, 3.0)
    for call in (lambda: grid.encode([10**400]), lambda: exact_sum([[10**400]], grid)):
        with pytest.raises(InvalidInput, match="NaN or inf"):
            call()


@pytest.mark.parametrize("units", [[1.5], ["7"], np.array([2.0]), [True]])
def test_decode_takes_integer_units_only(units: Any) -> None:
    with pytest.raises(InvalidInput, match="units must be integers"):
        FixedPoint(0.0, 3.0).decode(units)
    grid = FixedPoint(0.0, 3.0)
    assert grid.decode(np.array([4], dtype=np.int64)).tolist() == [4 * grid.quantum]
    assert grid.decode(np.array([np.int64(4)], dtype=object)).tolist() == [4 * grid.quantum]


@pytest.mark.parametrize(
    "missing", [float("nan"), np.float64("nan"), decimal.Decimal("NaN"), None, True]
)
def test_person_ids_that_are_not_ids_are_refused(missing: object) -> None:
    ids = np.array(["ann", missing, "bob", missing], dtype=object)
    with pytest.raises(InvalidInput, match="2 person id"):
        keep_per_person(ids, 1)
    with pytest.raises(InvalidInput, match="2 person id"):  # a list: not read as text "nan"
        keep_per_person(["ann", missing, "bob", missing], 1)


def test_any_id_equal_to_itself_is_an_id() -> None:
    # review s28: UUID and Decimal ids (a database's uuid or NUMERIC column) are ids
    a, b = uuid.uuid4(), uuid.uuid4()
    assert keep_per_person(np.array([a, a, b], dtype=object), 1).tolist() == [True, False, True]
    d = [decimal.Decimal("7"), decimal.Decimal("7"), decimal.Decimal("8")]
    assert keep_per_person(d, 1).tolist() == [True, False, True]


def test_text_and_integer_ids_in_one_list_are_not_merged() -> None:
    # np.asarray(["7", 7]) would make both the text "7": one person
    with pytest.raises(InvalidInput, match="comparable"):
        keep_per_person(["7", 7], 1)


def test_text_and_integer_person_ids_are_kept_per_person() -> None:
    assert keep_per_person(np.array(["a", "a", "b"], dtype=object), 1).tolist() == [
        True,
        False,
        True,
    ]
    assert keep_per_person(np.array([7, 7, 8], dtype=object), 1).tolist() == [True, False, True]


def test_float64_inputs_to_the_metrics_are_read_in_place(tmp_path: Path) -> None:
    # review s28: the by-type reader copied a float64 memmap (and pandas column) per call
    x = np.linspace(0.0, 1.0, 1000)
    assert as_real(x, "x") is x
    mm = np.memmap(tmp_path / "x.f64", dtype=np.float64, mode="w+", shape=(1000,))
    assert np.shares_memory(as_real(mm, "x"), mm)
    got, _ = as_float64(x)  # an aggregate is copied: the release keeps its own
    assert got is not None
    assert not np.shares_memory(got, x)
