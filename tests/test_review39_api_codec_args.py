"""Review 39 (api): ``VectorSumCodec.build`` converted each bound with ``float()`` before
checking it — ``None``, a list or an array was float()'s TypeError, text such as
``"x"`` its ValueError, and the text ``"2"`` was silently read as the bound 2.0 (text is
refused everywhere else) — and measured ``len(names)`` of whatever it was given (an int:
TypeError; a str: each letter a measure). And ``derived_interval(distribution=array)``
compared an array with "laplace": numpy's ambiguous-truth ValueError."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger.metrics as M
from dpledger.errors import InvalidInput


@pytest.mark.parametrize("bound", [None, "x", "2", [1.0], np.array([1.0, 2.0]), {}, True])
def test_codec_bounds_are_numbers(bound: object) -> None:
    with pytest.raises(InvalidInput, match="bound"):
        M.VectorSumCodec.build(("a", "b"), (1.0, bound), cap=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("names", [None, 3, 1.5, "ab", (), ("a", 1)])
def test_codec_names_are_a_tuple_of_text(names: object) -> None:
    with pytest.raises(InvalidInput, match="names"):
        M.VectorSumCodec.build(names, (1.0, 1.0), cap=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="names"):
        M.VectorSumCodec(names, (1.0, 1.0), (0.5, 0.5), 1.0)  # type: ignore[arg-type]


def test_codec_bounds_of_another_length_are_refused() -> None:
    with pytest.raises(InvalidInput, match="bounds"):
        M.VectorSumCodec.build(("a", "b"), (1.0,), cap=1.0)


def test_a_plain_codec_still_builds() -> None:
    codec = M.VectorSumCodec.build(["a", "b"], np.array([2.0, 4.0]), cap=1.0)
    assert codec.bounds == (2.0, 4.0)
    assert codec.names == ("a", "b")


def test_distribution_must_be_text() -> None:
    with pytest.raises(InvalidInput, match="distribution"):
        M.derived_interval(
            lambda x: float(x[0] / x[1]),
            [10.0, 20.0],
            1.0,
            distribution=np.array([1.0, 2.0]),  # type: ignore[arg-type]
        )
