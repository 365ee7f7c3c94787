"""Audit s29, F5: bad arguments to the metric functions are typed errors.

A Python integer past the largest double (10**400), text, an object, None, an empty or
misshapen array, one argument at a time in an otherwise valid call, raised a bare
OverflowError, ValueError, TypeError, IndexError or AttributeError. Each is now
:class:`InvalidInput` naming the argument; valid calls return what they returned before
(bit for bit: the values below are the previous release's).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpledger.metrics as m
from dpledger import InvalidInput
from dpledger.metrics import spatial
from dpledger.metrics.flam_regression import check_range
from dpledger.metrics.records import record_scalar

HUGE = 10**400  # an int beyond a double: float() raises OverflowError
CONF = np.array([[50.0, 5.0], [3.0, 40.0]])


def _codec() -> m.VectorSumCodec:
    return m.regression_codec(y_bounds=(0.0, 10.0), residual_bound=10.0, max_samples=100.0, cap=1.0)


_CODEC_KW: dict[str, Any] = {"y_bounds": (0.0, 10.0), "residual_bound": 10.0, "max_samples": 100.0}
_POOLED_KW: dict[str, Any] = {"error_bound": 10.0, "max_samples": 100.0, "cap": 1.0}
_MEAN = (10.0, 1.0, 20.0, 1.0)
_MEAN_KW: dict[str, Any] = {"bounds": (0.0, 1.0), "max_count": 100.0}
_RATIO = ([10.0, 20.0], 1.0, [1.0, 0.0], [0.0, 1.0])


def _deep() -> list[object]:
    deep: list[object] = [[1.0, 2.0], [3.0, 4.0]]
    for _ in range(100_000):
        deep = [deep]
    return deep


def _pooled() -> m.VectorSumCodec:
    return m.pooled_ratio_codec(**_POOLED_KW)


def _ratio_kw(**kw: object) -> Callable[[], object]:
    return lambda: m.ratio_interval(*_RATIO, bounds=(0.0, 10.0), **kw)  # type: ignore[arg-type]


def _mean(i: int, value: object) -> Callable[[], object]:
    args: list[object] = list(_MEAN)
    args[i] = value
    return lambda: m.mean_over_noisy_count(*args, **_MEAN_KW)  # type: ignore[arg-type]


def _ratio(i: int, value: object, bounds: object = (0.0, 10.0)) -> Callable[[], object]:
    args: list[object] = list(_RATIO)
    args[i] = value
    return lambda: m.ratio_interval(*args, bounds=bounds)  # type: ignore[arg-type]


# (case id, call, a word of the message that names the argument)
CASES: list[tuple[str, Callable[[], object], str]] = [
    (
        "clipped_loss clip_high huge",
        lambda: m.clipped_loss([1.0, 2.0], clip_high=HUGE),
        "clip_high",
    ),
    (
        "clipped_loss clip_high huge, offsets",
        lambda: m.clipped_loss([1.0, 2.0, 3.0], clip_high=HUGE, offsets=[0, 1, 3]),
        "clip_high",
    ),
    ("along_across_ratio clip huge", lambda: m.along_across_ratio([1.0], [1.0], clip=HUGE), "clip"),
    (
        "calibration_gap cap huge",
        lambda: m.calibration_gap([0.1, 0.9], [0, 1], cap=HUGE),
        "cap",
    ),
    (
        "error_histogram cap huge",
        lambda: m.error_histogram([0.1, 3.0], edges=[0.5, 1.0], cap=HUGE),
        "cap",
    ),
    (
        "pooled_along_across_ratio error_bound huge",
        lambda: m.pooled_along_across_ratio([1.0], [1.0], error_bound=HUGE),
        "error_bound",
    ),
    (
        "regression_codec residual_bound huge",
        lambda: m.regression_codec(**{**_CODEC_KW, "residual_bound": HUGE}, cap=1.0),
        "residual_bound",
    ),
    (
        "regression_codec max_samples huge",
        lambda: m.regression_codec(**{**_CODEC_KW, "max_samples": HUGE}, cap=1.0),
        "max_samples",
    ),
    ("regression_codec cap huge", lambda: m.regression_codec(**_CODEC_KW, cap=HUGE), "cap"),
    ("regression_codec cap None", lambda: m.regression_codec(**_CODEC_KW, cap=None), "cap"),  # type: ignore[arg-type]
    ("regression_codec cap text", lambda: m.regression_codec(**_CODEC_KW, cap="x"), "cap"),  # type: ignore[arg-type]
    (
        "regression_codec weights text",
        lambda: m.regression_codec(**_CODEC_KW, cap=1.0, weights="abcde"),  # type: ignore[arg-type]
        "weights",
    ),
    (
        "regression_codec weights huge",
        lambda: m.regression_codec(**_CODEC_KW, cap=1.0, weights=(1, 1, 1, 1, HUGE)),
        "weight of n",
    ),
    (
        "regression_codec y_bounds None",
        lambda: m.regression_codec(**{**_CODEC_KW, "y_bounds": None}, cap=1.0),
        "y_bounds",
    ),
    (
        "regression_codec y_bounds text",
        lambda: m.regression_codec(**{**_CODEC_KW, "y_bounds": "01"}, cap=1.0),
        "y_bounds",
    ),
    (
        "regression_codec y_bounds huge",
        lambda: m.regression_codec(**{**_CODEC_KW, "y_bounds": (0, HUGE)}, cap=1.0),
        "y_bounds",
    ),
    (
        "regression_codec shift huge",
        lambda: m.regression_codec(**_CODEC_KW, cap=1.0, shift=HUGE),
        "shift",
    ),
    (
        "regression_codec shift text",
        lambda: m.regression_codec(**_CODEC_KW, cap=1.0, shift="x"),  # type: ignore[arg-type]
        "shift",
    ),
    (
        "pooled_ratio_codec error_bound huge",
        lambda: m.pooled_ratio_codec(**{**_POOLED_KW, "error_bound": HUGE}),
        "error_bound",
    ),
    (
        "pooled_ratio_codec max_samples huge",
        lambda: m.pooled_ratio_codec(**{**_POOLED_KW, "max_samples": HUGE}),
        "max_samples",
    ),
    (
        "pooled_ratio_codec cap huge",
        lambda: m.pooled_ratio_codec(**{**_POOLED_KW, "cap": HUGE}),
        "cap",
    ),
    (
        "pooled_ratio_codec cap None",
        lambda: m.pooled_ratio_codec(**{**_POOLED_KW, "cap": None}),
        "cap",
    ),
    (
        "pooled_ratio_codec cap text",
        lambda: m.pooled_ratio_codec(**{**_POOLED_KW, "cap": "x"}),
        "cap",
    ),
    ("mean_over_noisy_count noisy_sum huge", _mean(0, HUGE), "noisy_sum"),
    ("mean_over_noisy_count sum_scale huge", _mean(1, HUGE), "scale"),
    ("mean_over_noisy_count sum_scale object", _mean(1, object()), "scale"),
    ("mean_over_noisy_count sum_scale text", _mean(1, "x"), "scale"),
    ("mean_over_noisy_count noisy_count huge", _mean(2, HUGE), "noisy_count"),
    ("mean_over_noisy_count count_scale huge", _mean(3, HUGE), "scale"),
    ("mean_over_noisy_count count_scale object", _mean(3, object()), "scale"),
    (
        "mean_over_noisy_count max_count huge",
        lambda: m.mean_over_noisy_count(*_MEAN, bounds=(0.0, 1.0), max_count=HUGE),
        "max_count",
    ),
    (
        "mean_over_noisy_count bounds huge",
        lambda: m.mean_over_noisy_count(*_MEAN, bounds=(0, HUGE), max_count=100.0),
        "bounds",
    ),
    (
        "mean_over_noisy_count bounds text",
        lambda: m.mean_over_noisy_count(*_MEAN, bounds="01", max_count=100.0),  # type: ignore[arg-type]
        "bounds",
    ),
    (
        "classification_intervals released text",
        lambda: m.classification_intervals("x", 2.0),
        "released",
    ),
    (
        "classification_intervals released huge",
        lambda: m.classification_intervals(HUGE, 2.0),
        "released",
    ),
    (
        "classification_intervals released object",
        lambda: m.classification_intervals(object(), 2.0),  # type: ignore[arg-type]
        "released",
    ),
    (
        "classification_intervals released text array",
        lambda: m.classification_intervals(np.array(["a", "b", "c", "d"]), 2.0),
        "released",
    ),
    (
        "classification_intervals scale huge",
        lambda: m.classification_intervals(CONF, HUGE),
        "scale",
    ),
    (
        "classification_intervals scale object",
        lambda: m.classification_intervals(CONF, object()),  # type: ignore[arg-type]
        "scale",
    ),
    (
        "classification_intervals scale wrong length",
        lambda: m.classification_intervals(CONF, [1.0, 2.0, 3.0]),
        "scale",
    ),
    (
        "classification_intervals method array",
        lambda: m.classification_intervals(CONF, 2.0, method=np.array([])),  # type: ignore[arg-type]
        "method",
    ),
    (
        "classification_intervals draws huge",
        lambda: m.classification_intervals(CONF, 2.0, method="monte_carlo", draws=HUGE),
        "draws",
    ),
    (
        "classification_metrics text array",
        lambda: m.classification_metrics(np.array(["a", "b"])),
        "confusion",
    ),
    (
        "classification_metrics labels array",
        lambda: m.classification_metrics(CONF, labels=np.array([])),  # type: ignore[arg-type]
        "labels",
    ),
    (
        "classification_metrics deep list",
        lambda: m.classification_metrics(_deep()),  # type: ignore[arg-type]
        "confusion",
    ),
    ("classification_metrics object", lambda: m.classification_metrics(object()), "confusion"),  # type: ignore[arg-type]
    (
        "regression_intervals released text",
        lambda: m.regression_intervals("x", _codec(), 1.0),
        "released",
    ),
    (
        "regression_intervals released huge",
        lambda: m.regression_intervals(HUGE, _codec(), 1.0),
        "released",
    ),
    (
        "regression_intervals released object",
        lambda: m.regression_intervals(object(), _codec(), 1.0),  # type: ignore[arg-type]
        "released",
    ),
    (
        "regression_intervals scale huge",
        lambda: m.regression_intervals(np.ones(5), _codec(), HUGE),
        "scale",
    ),
    (
        "regression_intervals scale object",
        lambda: m.regression_intervals(np.ones(5), _codec(), object()),  # type: ignore[arg-type]
        "scale",
    ),
    ("flatten_confusion text", lambda: m.flatten_confusion("x"), "confusion"),
    ("flatten_confusion huge", lambda: m.flatten_confusion(HUGE), "confusion"),
    ("flatten_confusion object", lambda: m.flatten_confusion(object()), "confusion"),  # type: ignore[arg-type]
    ("unflatten_confusion text", lambda: m.unflatten_confusion("x"), "vector"),
    ("unflatten_confusion huge", lambda: m.unflatten_confusion(HUGE), "C²"),
    ("unflatten_confusion object", lambda: m.unflatten_confusion(object()), "vector"),  # type: ignore[arg-type]
    ("project_confusion text", lambda: m.project_confusion("x"), "noisy"),
    ("project_confusion huge", lambda: m.project_confusion(HUGE), "square"),
    ("project_confusion object", lambda: m.project_confusion(object()), "noisy"),  # type: ignore[arg-type]
    ("project_regression_measures text", lambda: m.project_regression_measures("x"), "noisy"),
    ("project_regression_measures huge", lambda: m.project_regression_measures(HUGE), "measures"),
    (
        "project_regression_measures object",
        lambda: m.project_regression_measures(object()),  # type: ignore[arg-type]
        "noisy",
    ),
    ("interval_scales scales text", lambda: m.interval_scales("x", [0.0]), "scales"),
    ("interval_scales scales huge", lambda: m.interval_scales(HUGE, [0.0]), "scales"),
    ("interval_scales scales object", lambda: m.interval_scales(object(), [0.0]), "scales"),  # type: ignore[arg-type]
    ("interval_scales slack text", lambda: m.interval_scales([1.0], "x"), "slack"),
    ("interval_scales slack huge", lambda: m.interval_scales([1.0], HUGE), "slack"),
    ("interval_scales slack object", lambda: m.interval_scales([1.0], object()), "slack"),  # type: ignore[arg-type]
    (
        "interval_scales lengths differ",
        lambda: m.interval_scales([1.0, 2.0], [0.0, 0.0, 0.0]),
        "scales",
    ),
    ("ratio_interval released empty", _ratio(0, []), "released"),
    ("ratio_interval released text", _ratio(0, "x"), "released"),
    ("ratio_interval scale huge", _ratio(1, HUGE), "scale"),
    ("ratio_interval scale object", _ratio(1, object()), "scale"),
    ("ratio_interval num text", _ratio(2, "x"), "num"),
    ("ratio_interval num huge", _ratio(2, HUGE), "num"),
    ("ratio_interval num object", _ratio(2, object()), "num"),
    ("ratio_interval num wrong length", _ratio(2, [1.0, 0.0, 0.0]), "num"),
    ("ratio_interval den text", _ratio(3, "x"), "den"),
    ("ratio_interval den huge", _ratio(3, HUGE), "den"),
    ("ratio_interval den object", _ratio(3, object()), "den"),
    ("ratio_interval bounds None", _ratio(0, [10.0, 20.0], bounds=None), "bounds"),
    ("ratio_interval bounds text", _ratio(0, [10.0, 20.0], bounds="x"), "bounds"),
    (
        "ratio_interval bounds text array",
        _ratio(0, [10.0, 20.0], bounds=np.array(["a", "b"])),
        "bounds",
    ),
    ("ratio_interval bounds huge", _ratio(0, [10.0, 20.0], bounds=(0, -HUGE)), "bounds"),
    (
        "participant_weighted_average text",
        lambda: m.participant_weighted_average("x", [1, 2]),  # type: ignore[arg-type]
        "per_client_metrics",
    ),
    (
        "participant_weighted_average empty array",
        lambda: m.participant_weighted_average(np.array([]), [1, 2]),  # type: ignore[arg-type]
        "per_client_metrics",
    ),
    (
        "participant_weighted_average numpy nan",
        lambda: m.participant_weighted_average(np.float32("nan"), [1, 2]),  # type: ignore[arg-type]
        "per_client_metrics",
    ),
    (
        "participant_weighted_average rows of other keys",
        lambda: m.participant_weighted_average([{"a": 1.0}, {"b": 2.0}], [1, 2]),
        "per_client_metrics",
    ),
    (
        "participant_weighted_average values text",
        lambda: m.participant_weighted_average({"a": "xy"}, [1, 2]),
        "per_client_metrics",
    ),
    (
        "exact_sum grid None",
        lambda: m.exact_sum(np.ones((3, 2)) * 0.5, None),  # type: ignore[arg-type]
        "grid",
    ),
    ("FixedPoint.for_cap huge", lambda: m.FixedPoint.for_cap(HUGE), "cap"),
    ("codec.encode text", lambda: _codec().encode("x"), "measures"),
    ("codec.encode huge", lambda: _codec().encode(HUGE), "measures"),
    ("codec.encode object", lambda: _codec().encode(object()), "measures"),  # type: ignore[arg-type]
    ("codec.decode text", lambda: _codec().decode("x"), "released"),
    ("codec.decode huge", lambda: _codec().decode(HUGE), "released"),
    ("codec.decode object", lambda: _codec().decode(object()), "released"),  # type: ignore[arg-type]
    ("codec.decoded_scale text", lambda: _codec().decoded_scale("x"), "scale"),
    ("codec.decoded_scale object", lambda: _codec().decoded_scale(object()), "scale"),  # type: ignore[arg-type]
    ("codec.decoded_scale wrong length", lambda: _codec().decoded_scale([1.0, 2.0]), "scale"),
    ("check_range huge", lambda: check_range((0, HUGE)), "y_bounds"),
    # the same class, beside the audit's cases: limits, names, functions, counts
    (
        "pooled_ratio_interval codec None",
        lambda: spatial.pooled_ratio_interval([1.0, 1.0, 1.0], None, 1.0, clip=5.0),  # type: ignore[arg-type]
        "codec",
    ),
    (
        "pooled_ratio_interval max_along text",
        lambda: spatial.pooled_ratio_interval(
            [1.0, 1.0, 1.0],
            _pooled(),
            1.0,
            clip=5.0,
            max_along="x",  # type: ignore[arg-type]
        ),
        "denominator_max",
    ),
    ("ratio_interval denominator_max None", _ratio_kw(denominator_max=None), "denominator_max"),
    ("ratio_interval denominator_max text", _ratio_kw(denominator_max="x"), "denominator_max"),
    ("ratio_interval denominator_max empty", _ratio_kw(denominator_max=[]), "denominator_max"),
    ("ratio_interval denominator_max nan", _ratio_kw(denominator_max=float("nan")), "NaN"),
    ("ratio_interval denominator_name list", _ratio_kw(denominator_name=[]), "denominator_name"),
    (
        "classification_intervals max_total None",
        lambda: m.classification_intervals(CONF, 2.0, max_total=None),  # type: ignore[arg-type]
        "max_total",
    ),
    (
        "classification_intervals max_total text",
        lambda: m.classification_intervals(CONF, 2.0, max_total="x"),  # type: ignore[arg-type]
        "max_total",
    ),
    (
        "regression_intervals cohort None",
        lambda: m.regression_intervals(np.ones(5), _codec(), 1.0, cohort=None),  # type: ignore[arg-type]
        "cohort",
    ),
    (
        "regression_intervals cohort text array",
        lambda: m.regression_intervals(np.ones(5), _codec(), 1.0, cohort=np.array(["a"])),  # type: ignore[arg-type]
        "cohort",
    ),
    (
        "derived_interval f None",
        lambda: m.derived_interval(None, [1.0, 2.0], 1.0),  # type: ignore[arg-type]
        "f and denominator",
    ),
    (
        "derived_interval released empty",
        lambda: m.derived_interval(lambda z: float(z[0]), [], 1.0),
        "released",
    ),
    (
        "derived_interval bounds None",
        lambda: m.derived_interval(lambda z: float(z[0]), [1.0], 1.0, bounds=None),  # type: ignore[arg-type]
        "bounds",
    ),
    (
        "derived_interval bounds text",
        lambda: m.derived_interval(lambda z: float(z[0]), [1.0], 1.0, bounds="x"),  # type: ignore[arg-type]
        "bounds",
    ),
    (
        "mean_calibration_gaps min_count text",
        lambda: m.mean_calibration_gaps(np.ones(10), min_count="x"),  # type: ignore[arg-type]
        "min_count",
    ),
    (
        "mean_calibration_gaps min_count empty",
        lambda: m.mean_calibration_gaps(np.ones(10), min_count=[]),  # type: ignore[arg-type]
        "min_count",
    ),
    (
        "calibration_gap buckets huge",
        lambda: m.calibration_gap([0.1, 0.9], [0, 1], cap=20.0, buckets=HUGE),
        "buckets",
    ),
    (
        "record_scalar low huge",
        lambda: record_scalar([0.5], low=0.0, high=HUGE),
        "low, high",
    ),
    (
        "record_scalar low None",
        lambda: record_scalar([0.5], low=None, high=1.0),  # type: ignore[arg-type]
        "low, high",
    ),
    (
        "participant_weighted_classification offsets None",
        lambda: m.participant_weighted_classification([0, 1], [0, 1], n_classes=2, offsets=None),  # type: ignore[arg-type]
        "offsets",
    ),
    (
        "participant_weighted_regression offsets None",
        lambda: m.participant_weighted_regression([0.0, 1.0], [0.0, 1.0], offsets=None),  # type: ignore[arg-type]
        "offsets",
    ),
    (
        "calibration_gap buckets 2**63",
        lambda: m.calibration_gap([0.1, 0.9], [0, 1], cap=20.0, buckets=2**63),
        "buckets",
    ),
]


@pytest.mark.parametrize(("call", "word"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_argument_is_a_typed_error_naming_it(call: Callable[[], object], word: str) -> None:
    with pytest.raises(InvalidInput, match=word):
        call()


def test_a_huge_integer_is_shown_by_its_size_not_printed() -> None:
    with pytest.raises(InvalidInput, match="more than 40 digits") as info:
        m.clipped_loss([1.0], clip_high=HUGE)
    assert len(str(info.value)) < 200
    with pytest.raises(InvalidInput, match="more than 40 digits"):
        m.regression_codec(**{**_CODEC_KW, "y_bounds": (0, HUGE)}, cap=1.0)


def test_a_scale_of_negative_zero_is_zero() -> None:
    """``-0.0`` passed the "≥ 0" check, then numpy's Laplace sampler refused its sign."""
    iv = m.classification_intervals(CONF, -0.0, method="monte_carlo", draws=1000)
    assert iv == m.classification_intervals(CONF, 0.0, method="monte_carlo", draws=1000)


# ---------------------------------------------------------------- valid calls, unchanged


def _hexes(values: object) -> object:
    if isinstance(values, dict):
        return {k: _hexes(v) for k, v in values.items()}
    if isinstance(values, np.ndarray):
        return [float(v).hex() for v in values.reshape(-1)]
    if isinstance(values, tuple | list):
        return [_hexes(v) for v in values]
    if isinstance(values, float):
        return values.hex()
    return values


def test_valid_numbers_of_every_type_give_the_same_values() -> None:
    """An int, a numpy number or a Fraction reads as the double float() gives."""
    assert m.clipped_loss([1.0, 5.0], clip_high=3) == m.clipped_loss([1.0, 5.0], clip_high=3.0)
    assert m.clipped_loss([1.0, 5.0], clip_high=np.int64(3)) == 3.0  # type: ignore[call-overload]
    a = m.regression_codec(y_bounds=(0, 10), residual_bound=10, max_samples=100, cap=1)
    b = m.regression_codec(
        y_bounds=(np.float64(0), Fraction(10)),  # type: ignore[arg-type]
        residual_bound=10.0,
        max_samples=100.0,
        cap=1.0,
    )
    assert a == b
    five = np.array([1.0, 2.0, 1.0, 1.0, 1.0])
    w = m.regression_codec(**_CODEC_KW, cap=1.0, weights=five)  # type: ignore[arg-type]
    assert w.weights == m.regression_codec(**_CODEC_KW, cap=1.0, weights=(1, 2, 1, 1, 1)).weights
    assert m.FixedPoint.for_cap(10**29) == m.FixedPoint.for_cap(1e29)
    ints = m.ratio_interval([10, 20], 1, [1, 0], [0, 1], bounds=(0, 10))
    assert ints == m.ratio_interval(*_RATIO, bounds=(0.0, 10.0))
    mean = m.mean_over_noisy_count(10, 1, 20, 1, bounds=(0, 1), max_count=100)
    assert mean == m.mean_over_noisy_count(*_MEAN, **_MEAN_KW)
    assert m.interval_scales(1.0, []) == ((1.0,), False)


def test_valid_calls_return_the_previous_values() -> None:
    """Values of the release before this change (its float hex digits), bit for bit."""
    assert _hexes(m.flatten_confusion([[1, 2], [3, 4]])) == [
        "0x1.0000000000000p+0", "0x1.0000000000000p+1",
        "0x1.8000000000000p+1", "0x1.0000000000000p+2",
    ]  # fmt: skip
    assert _hexes(m.project_regression_measures([1.0, -1.0, 3.0, 1.0, 5.0])) == [
        "0x1.0000000000000p+0", "0x0.0p+0", "0x1.8000000000000p+1", "0x1.ccccccccccccdp+0",
        "0x1.4000000000000p+2",
    ]  # fmt: skip
    codec = _codec()
    assert _hexes(codec.decoded_scale(1.0)) == _hexes(codec.decode(np.ones(5)))
    assert m.interval_scales([2.0, 1.0, 3.0], [0.5, 0.1, 0.0]) == PREVIOUS_SCALES
    mean, iv = m.mean_over_noisy_count(*_MEAN, **_MEAN_KW)
    assert (_hexes(mean), _hexes(iv.low), _hexes(iv.high)) == PREVIOUS_MEAN
    ratio = m.ratio_interval(*_RATIO, bounds=(0.0, 10.0))
    assert (_hexes(ratio.low), _hexes(ratio.high)) == PREVIOUS_RATIO
    acc = m.classification_intervals(CONF, 2.0)["accuracy"]
    assert (_hexes(acc.low), _hexes(acc.high)) == PREVIOUS_ACCURACY
    r2 = m.regression_intervals(np.ones(5) * 10, codec, 1.0)["mse"]
    assert (_hexes(r2.low), _hexes(r2.high)) == PREVIOUS_MSE
    assert _hexes(m.participant_weighted_average([{"a": 1.0}, {"a": 2.0}], [1, 2])) == {
        "a": (5.0 / 3.0).hex()
    }


PREVIOUS_SCALES = ((2.8660254037844384, 1.4330127018922192, 4.299038105676658), True)
# Fieller's ends moved by 2-3 ulps on 2026-12-03 (review stats: the discriminant in its
# stable form, _intervals.fieller_spread); before: 0x1.5f3c78b0c1d09p-2, 0x1.5bed7e58b21e8p-1
# and 0x1.b128bdf3de9d0p-1. Every other value here is unchanged since audit 29.
PREVIOUS_MEAN = ("0x1.0000000000000p-1", "0x1.5f3c78b0c1d07p-2", "0x1.5bed7e58b21eap-1")
PREVIOUS_RATIO = ("0x1.5f3c78b0c1d07p-2", "0x1.5bed7e58b21eap-1")
PREVIOUS_ACCURACY = ("0x1.b128bdf3de9d3p-1", "0x1.0000000000000p+0")
PREVIOUS_MSE = ("0x1.d5e9d92077276p+5", "0x1.9000000000000p+6")


# -- review s30: the typed checks must not refuse what callers legitimately pass ------------

_REL = np.array([120.0, 30.0, 50.0, 10.0, 5.0, 3.0, 2.0])
_IND = np.arange(7) == 1


def _ratio(num: object = _IND.astype(int), scale: object = 5.0, **kw: Any) -> tuple[float, ...]:
    r = m.uncertainty.ratio_interval(_REL, scale, num, 1.0, bounds=kw.pop("bounds", (0, 1)), **kw)
    return (r.low, r.high, r.usable)


@pytest.mark.parametrize(
    "kw",
    [
        {"num": _IND},  # the docstring's "indicator": booleans
        {"num": list(_IND)},
        {"scale": Fraction(5)},
        {"scale": np.float32(5.0)},
        {"bounds": (Fraction(0), Fraction(1))},
        {"bounds": (Decimal(0), Decimal(1))},
        {"denominator_max": Decimal(1000)},
    ],
    ids=lambda kw: f"{next(iter(kw))}={type(next(iter(kw.values()))).__name__}",
)
def test_ratio_interval_reads_indicators_and_exact_numbers_as_before(kw: dict[str, Any]) -> None:
    assert _ratio(**kw) == pytest.approx(_ratio(), rel=1e-12)


def test_exact_numbers_are_read_where_a_policy_writes_them() -> None:
    """A policy's caps and clips are Fractions: the codecs and metrics take them."""
    codec = spatial.pooled_ratio_codec(error_bound=5.0, max_samples=100, cap=Fraction(20))
    assert codec.cap == 20.0
    w = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    assert spatial.pooled_ratio_codec(
        error_bound=5.0, max_samples=100, cap=20.0, weights=w
    ).weights == (
        0.5,
        0.25,
        0.25,
    )
    gen = spatial.pooled_ratio_codec(
        error_bound=5.0, max_samples=100, cap=20.0, weights=(x for x in (2, 1, 1))
    )
    assert gen.weights == (0.5, 0.25, 0.25)
    assert spatial.clipped_loss(np.array([0.5, 2.0]), clip_high=Fraction(1)) == pytest.approx(
        spatial.clipped_loss(np.array([0.5, 2.0]), clip_high=1.0)
    )
    mnc = m.uncertainty.mean_over_noisy_count
    base = mnc(100.0, 1.0, 40.0, 1.0, bounds=(0, 5), max_count=100)
    assert mnc(100.0, Fraction(1), 40.0, 1.0, bounds=(Decimal(0), Decimal(5)),
               max_count=Fraction(100)) == base  # fmt: skip


def test_a_degenerate_range_is_still_an_unusable_interval_not_an_error() -> None:
    r = m.uncertainty.derived_interval(lambda x: x[1] / x.sum(), _REL, 5.0, bounds=(1, 1))
    assert not r.usable


@pytest.mark.parametrize("bounds", [("0", "5"), (True, 5)])
def test_text_and_flags_are_still_not_numbers(bounds: object) -> None:
    with pytest.raises(InvalidInput, match="bounds must be a pair of numbers"):
        m.uncertainty.mean_over_noisy_count(100.0, 1.0, 40.0, 1.0, bounds=bounds, max_count=100)


@pytest.mark.parametrize("seed", ["x", None, 1.5, True])
def test_a_monte_carlo_seed_is_an_integer_checked_before_anything(seed: object) -> None:
    """Review s30: seed='x' or None raised ValueError/TypeError; 1.5 was truncated."""
    cm = np.array([50.0, 5.0, 4.0, 41.0])
    with pytest.raises(InvalidInput, match="seed must be an integer"):
        m.uncertainty.classification_estimates(cm, 2.0, method="monte_carlo", seed=seed)


def test_numpy_integers_are_draws_and_seeds() -> None:
    cm = np.array([50.0, 5.0, 4.0, 41.0])
    a = m.uncertainty.classification_estimates(
        cm, 2.0, method="monte_carlo", draws=np.int64(3000), seed=np.int64(7)
    )
    b = m.uncertainty.classification_estimates(cm, 2.0, method="monte_carlo", draws=3000, seed=7)
    assert a == b


def test_ragged_labels_are_typed() -> None:
    with pytest.raises(InvalidInput, match="y_true must be one flat array"):
        m.flam.confusion_matrix([[1, 0], [1]], [1, 0, 1], n_classes=2)  # type: ignore[list-item]
