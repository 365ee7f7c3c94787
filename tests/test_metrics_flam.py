"""FLAM measures: summed measures reproduce scikit-learn on the concatenated data exactly."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn import metrics as skm

from dpledger.errors import InvalidInput
from dpledger.metrics import flam
from dpledger.metrics import flam_regression as fr

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow noise

N_CLIENTS = 8
N_CLASSES = 6
PRIORS = np.array([0.32, 0.24, 0.16, 0.12, 0.09, 0.07])
CLASS_ACCURACY = np.array([0.92, 0.85, 0.75, 0.65, 0.55, 0.45])
EXACT = {"rel_tol": 1e-12, "abs_tol": 1e-12}


# --------------------------------------------------------------------------- partitions
# Each returns the client index of every sample ("owner"); clients may end up empty.


def dirichlet_label_skew(labels: np.ndarray, alpha: float, rng: np.random.Generator) -> np.ndarray:
    owner = np.empty(labels.shape[0], dtype=np.int64)
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        cuts = (np.cumsum(rng.dirichlet(np.full(N_CLIENTS, alpha))) * idx.size).astype(int)
        for client, part in enumerate(np.split(idx, cuts[:-1])):
            owner[part] = client
    return owner


def quantity_skew(labels: np.ndarray, alpha: float, rng: np.random.Generator) -> np.ndarray:
    idx = rng.permutation(labels.shape[0])
    cuts = (np.cumsum(rng.dirichlet(np.full(N_CLIENTS, alpha))) * idx.size).astype(int)
    owner = np.empty(labels.shape[0], dtype=np.int64)
    for client, part in enumerate(np.split(idx, cuts[:-1])):
        owner[part] = client
    return owner


def quantity_label_skew(labels: np.ndarray, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """FLAM's LQS: client sizes ~ Dirichlet(3.0) times per-class label shares ~ Dirichlet(α)."""
    size = rng.dirichlet(np.full(N_CLIENTS, 3.0))
    owner = np.empty(labels.shape[0], dtype=np.int64)
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        share = rng.dirichlet(np.full(N_CLIENTS, alpha)) * size
        cuts = (np.cumsum(share / share.sum()) * idx.size).astype(int)
        for client, part in enumerate(np.split(idx, cuts[:-1])):
            owner[part] = client
    return owner


def sole_owner(labels: np.ndarray, _alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Client 0 alone holds the last class; the others are spread evenly (FLAM's MS skew)."""
    owner = rng.integers(1, N_CLIENTS, labels.shape[0])
    owner[labels == labels.max()] = 0
    return owner


PARTITIONS: dict[str, tuple[Callable[..., np.ndarray], float]] = {
    "label-skew-0.6": (dirichlet_label_skew, 0.6),
    "label-skew-7.0": (dirichlet_label_skew, 7.0),
    "quantity-skew-2.0": (quantity_skew, 2.0),
    "quantity-label-skew-0.7": (quantity_label_skew, 0.7),
    "sole-owner": (sole_owner, 0.0),
}


def by_client(owner: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sort samples by client: flat columns plus offsets (empty clients included)."""
    order = np.argsort(owner, kind="stable")
    offsets = np.searchsorted(owner[order], np.arange(N_CLIENTS))
    return (*(c[order] for c in columns), offsets)


def classification_data(seed: int = 11, n: int = 6000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.choice(N_CLASSES, size=n, p=PRIORS)
    wrong = (y + rng.integers(1, N_CLASSES, n)) % N_CLASSES
    pred = np.where(rng.random(n) < CLASS_ACCURACY[y], y, wrong)
    return y, pred


def regression_data(seed: int = 5, n: int = 5000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y ~ 100 ± 10, a shrunk, noisy model, and y's decile as a 'label' for skews."""
    rng = np.random.default_rng(seed)
    y = rng.normal(100.0, 10.0, n)
    pred = 0.8 * y + 20.0 + rng.normal(0.0, 3.0, n)
    decile = np.searchsorted(np.quantile(y, np.linspace(0.1, 0.9, 9)), y)
    return y, pred, decile


def sk_classification(y: np.ndarray, p: np.ndarray, labels: object = None) -> dict[str, float]:
    kw = {} if labels is None else {"labels": labels}
    with warnings.catch_warnings():  # zero_division="warn" and single-label warnings
        warnings.simplefilter("ignore")
        out = {"accuracy": skm.accuracy_score(y, p), "mcc": skm.matthews_corrcoef(y, p)}
        out["balanced_accuracy"] = skm.balanced_accuracy_score(y, p)
        for avg in ("macro", "micro", "weighted"):
            out[f"precision_{avg}"] = skm.precision_score(y, p, average=avg, **kw)
            out[f"recall_{avg}"] = skm.recall_score(y, p, average=avg, **kw)
            out[f"f1_{avg}"] = skm.f1_score(y, p, average=avg, **kw)
    return {k: float(v) for k, v in out.items()}


def sk_regression(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "r2": float(skm.r2_score(y, p, sample_weight=w)),
            "mse": float(skm.mean_squared_error(y, p, sample_weight=w)),
            "rmse": float(skm.root_mean_squared_error(y, p, sample_weight=w)),
            "mae": float(skm.mean_absolute_error(y, p, sample_weight=w)),
        }


def assert_exact(ours: dict[str, float], ref: dict[str, float]) -> None:
    assert set(ref) <= set(ours)
    for key, want in ref.items():
        got = ours[key]
        if math.isnan(want):
            assert math.isnan(got), key
        else:
            assert math.isclose(got, want, **EXACT), (key, got, want)


# --------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("partition", PARTITIONS)
def test_summed_confusion_matrices_equal_sklearn_on_concatenated_data(partition: str) -> None:
    split, alpha = PARTITIONS[partition]
    y, pred = classification_data()
    owner = split(y, alpha, np.random.default_rng(2))
    yc, pc, offsets = by_client(owner, y, pred)
    rows = flam.confusion_matrix(yc, pc, n_classes=N_CLASSES, offsets=offsets)
    assert rows.shape == (N_CLIENTS, N_CLASSES, N_CLASSES)
    summed = rows.sum(axis=0)
    np.testing.assert_array_equal(summed, skm.confusion_matrix(y, pred))
    assert_exact(flam.classification_metrics(summed), sk_classification(y, pred))
    assert_exact(
        flam.classification_metrics(summed, labels="all"),
        sk_classification(y, pred, labels=list(range(N_CLASSES))),
    )


@pytest.mark.parametrize("partition", PARTITIONS)
def test_summed_regression_measures_equal_sklearn_on_concatenated_data(partition: str) -> None:
    split, alpha = PARTITIONS[partition]
    y, pred, decile = regression_data()
    owner = split(decile, alpha, np.random.default_rng(4))
    yc, pc, offsets = by_client(owner, y, pred)
    ref = sk_regression(y, pred)
    for kwargs in ({}, {"y_bounds": (0.0, 200.0), "residual_bound": 100.0}, {"shift": 137.0}):
        rows = fr.regression_measures(yc, pc, offsets=offsets, **kwargs)  # type: ignore[arg-type]
        assert rows.shape == (N_CLIENTS, 5)
        assert_exact(fr.regression_metrics(rows.sum(axis=0)), ref)


def test_sample_cap_weights_equal_sklearn_sample_weight() -> None:
    y, pred, decile = regression_data(n=3000)
    yc, pc, offsets = by_client(quantity_skew(decile, 2.0, np.random.default_rng(3)), y, pred)
    rows = fr.regression_measures(yc, pc, offsets=offsets, max_samples=200)
    lengths = np.diff(np.r_[offsets, y.shape[0]])
    assert rows[:, 4].max() == pytest.approx(200.0)
    assert lengths.max() > 200
    w = np.repeat(np.minimum(1.0, 200 / np.maximum(lengths, 1)), lengths)
    assert_exact(fr.regression_metrics(rows.sum(axis=0)), sk_regression(yc, pc, w))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.data())
def test_classification_exactness_property(n_classes: int, data: st.DataObject) -> None:
    labels = st.integers(0, n_classes - 1)
    n = data.draw(st.integers(1, 120))
    y = np.array(data.draw(st.lists(labels, min_size=n, max_size=n)))
    pred = np.array(data.draw(st.lists(labels, min_size=n, max_size=n)))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=6)))
    offsets = np.array([0, *cuts])
    summed = flam.confusion_matrix(y, pred, n_classes=n_classes, offsets=offsets).sum(axis=0)
    assert_exact(flam.classification_metrics(summed), sk_classification(y, pred))
    assert_exact(
        flam.classification_metrics(summed, labels="all"),
        sk_classification(y, pred, labels=list(range(n_classes))),
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_regression_exactness_property(data: st.DataObject) -> None:
    n = data.draw(st.integers(3, 150))
    y = data.draw(arrays(np.float64, n, elements=st.floats(60.0, 140.0)))
    pred = data.draw(arrays(np.float64, n, elements=st.floats(40.0, 160.0)))
    assume(np.var(y) > 1.0)  # realistic spread: cancellation-free at 1e-12
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=6)))
    rows = fr.regression_measures(y, pred, offsets=np.array([0, *cuts]), y_bounds=(0, 200))
    assert_exact(fr.regression_metrics(rows.sum(axis=0)), sk_regression(y, pred))


# --------------------------------------------------------------------------- the naive baseline


@pytest.mark.parametrize("partition", PARTITIONS)
def test_naive_weighted_average_differs_where_flam_findings_say(partition: str) -> None:
    """FLAM Findings 1 and 2 on every partition.

    Under label skew (and a sole owner) the deviation is large (> 2e-3 here). Under
    pure quantity skew with i.i.d. labels, per-client metrics differ only by sampling
    noise, so the deviation is small (MCC: ~6e-6 on this data) but still far above
    float error: there the bound is 1e-6 — six orders above the 1e-12 exactness.
    """
    split, alpha = PARTITIONS[partition]
    visible = 1e-6 if partition.startswith("quantity-skew") else 2e-3
    y, pred = classification_data()
    yc, pc, offsets = by_client(split(y, alpha, np.random.default_rng(2)), y, pred)
    central = sk_classification(y, pred)
    naive = flam.participant_weighted_classification(yc, pc, n_classes=N_CLASSES, offsets=offsets)
    for key in ("f1_macro", "mcc", "precision_weighted"):
        assert abs(naive[key] - central[key]) > visible, (key, naive[key], central[key])
    for key in ("accuracy", "recall_weighted"):  # FLAM's Finding 2: these aggregate exactly
        assert math.isclose(naive[key], central[key], **EXACT), key

    yr, pr, decile = regression_data()
    ycr, pcr, off_r = by_client(split(decile, alpha, np.random.default_rng(4)), yr, pr)
    naive_r = flam.participant_weighted_regression(ycr, pcr, offsets=off_r)
    assert abs(naive_r["r2"] - skm.r2_score(yr, pr)) > visible
    assert math.isclose(naive_r["mse"], skm.mean_squared_error(yr, pr), **EXACT)


def test_participant_weighted_average_accepts_rows_and_skips_undefined() -> None:
    rows = [{"r2": 0.5, "mse": 1.0}, {"r2": math.nan, "mse": 3.0}, {"r2": 0.9, "mse": 9.0}]
    out = flam.participant_weighted_average(rows, [1, 1, 3])
    assert out["r2"] == pytest.approx((0.5 + 3 * 0.9) / 4)
    assert out["mse"] == pytest.approx((1 + 3 + 27) / 5)
    same = flam.participant_weighted_average({"mse": np.array([1.0, 3.0, 9.0])}, [1, 1, 3])
    assert same["mse"] == out["mse"]
    with pytest.raises(InvalidInput, match="sample counts"):
        flam.participant_weighted_average({"mse": [1.0]}, [1, 2])


# --------------------------------------------------------------------------- conventions


@pytest.mark.parametrize(
    ("y", "pred", "n_classes"),
    [
        ([0, 1, 2, 0, 1], [0, 1, 1, 0, 0], 5),  # classes 3, 4 absent everywhere
        ([0, 0, 1, 1], [2, 2, 1, 0], 3),  # class 2 only predicted: recall 0/0
        ([0, 1, 2, 2], [0, 1, 1, 1], 3),  # class 2 never predicted: precision 0/0
        ([1, 1, 1], [1, 1, 1], 3),  # one class: MCC undefined → 0.0
        ([0, 1, 0, 1], [1, 0, 1, 0], 2),  # all wrong
    ],
)
def test_zero_division_and_label_conventions_match_sklearn(
    y: list[int], pred: list[int], n_classes: int
) -> None:
    m = flam.confusion_matrix(y, pred, n_classes=n_classes)
    assert_exact(flam.classification_metrics(m), sk_classification(np.array(y), np.array(pred)))
    assert_exact(
        flam.classification_metrics(m, labels="all"),
        sk_classification(np.array(y), np.array(pred), labels=list(range(n_classes))),
    )


def test_labels_all_penalises_absent_classes_and_present_does_not() -> None:
    m = flam.confusion_matrix([0, 1, 0, 1], [0, 1, 0, 1], n_classes=4)
    assert flam.classification_metrics(m)["f1_macro"] == 1.0
    assert flam.classification_metrics(m, labels="all")["f1_macro"] == 0.5
    assert flam.classification_metrics(m, labels="all")["f1_weighted"] == 1.0


@pytest.mark.parametrize(
    ("y", "pred"),
    [([5.0], [4.0]), ([3.0, 3.0, 3.0], [3.0, 3.0, 3.0]), ([3.0, 3.0], [1.0, 2.0])],
)
def test_regression_edge_conventions_match_sklearn(y: list[float], pred: list[float]) -> None:
    ours = fr.regression_metrics(fr.regression_measures(y, pred, y_bounds=(0, 10)))
    assert_exact(ours, sk_regression(np.array(y), np.array(pred)))


# --------------------------------------------------------------------------- shapes & noise


def test_confusion_batch_rows_equal_single_client_and_cap_scales() -> None:
    y, pred = classification_data(n=700)
    offsets = np.array([0, 0, 10, 10, 400, 700])
    rows = flam.confusion_matrix(y, pred, n_classes=N_CLASSES, offsets=offsets, cap=50)
    bounds = np.r_[offsets, 700]
    for i in range(offsets.size):
        s = slice(bounds[i], bounds[i + 1])
        single = flam.confusion_matrix(y[s], pred[s], n_classes=N_CLASSES, cap=50)
        np.testing.assert_array_equal(rows[i], single)
    assert rows.sum(axis=(1, 2)).tolist() == pytest.approx([0, 10, 0, 50, 50, 0][:6])
    flat = flam.flatten_confusion(rows)
    assert flat.shape == (6, N_CLASSES**2)
    np.testing.assert_array_equal(flam.unflatten_confusion(flat), rows)


def test_regression_batch_rows_equal_single_client() -> None:
    y, pred, _ = regression_data(n=400)
    offsets = np.array([0, 0, 1, 100, 100])
    kw = {"y_bounds": (70.0, 130.0), "residual_bound": 10.0, "max_samples": 50.0}
    rows = fr.regression_measures(y, pred, offsets=offsets, **kw)  # type: ignore[arg-type]
    bounds = np.r_[offsets, 400]
    for i in range(offsets.size):
        s = slice(bounds[i], bounds[i + 1])
        single = fr.regression_measures(y[s], pred[s], **kw)  # type: ignore[arg-type]
        np.testing.assert_array_equal(rows[i], single)
    assert rows[0].tolist() == [0.0] * 5


def test_regression_clipping_bounds_every_coordinate() -> None:
    y = np.array([1e300, -1e300, 50.0, 120.0] * 500)
    pred = np.array([-1e300, 1e300, 0.0, 100.0] * 500)
    kw = {"y_bounds": (80.0, 120.0), "residual_bound": 15.0, "max_samples": 100.0}
    row = fr.regression_measures(y, pred, **kw)  # type: ignore[arg-type]
    codec = fr.regression_codec(cap=1.0, **kw)  # type: ignore[arg-type]
    assert np.all(np.abs(row) <= np.array(codec.bounds) * (1 + 1e-12))
    assert row[4] == pytest.approx(100.0)
    z = codec.encode(row)
    assert np.abs(z).sum() <= 1.0 + 1e-12
    assert codec.decode(z) == pytest.approx(row, rel=1e-12)


def test_noisy_confusion_must_be_projected_first() -> None:
    noisy = np.array([[40.2, -1.5], [3.1, 55.0]])
    with pytest.raises(InvalidInput, match="project_confusion"):
        flam.classification_metrics(noisy)
    projected = flam.project_confusion(noisy)
    assert projected[0, 1] == 0.0
    assert projected[0, 0] == 40.2
    metrics = flam.classification_metrics(projected)
    assert metrics["precision_macro"] == pytest.approx((40.2 / 43.3 + 1.0) / 2)
    assert flam.classification_metrics(flam.flatten_confusion(projected)) == metrics


def test_noisy_regression_measures_project_to_feasible_set() -> None:
    noisy = np.array([-3.0, 12.0, 40.0, 10.0, 20.0])
    with pytest.raises(InvalidInput, match="project_regression_measures"):
        fr.regression_metrics(noisy)
    projected = fr.project_regression_measures(noisy)
    assert projected.tolist() == [0.0, 12.0, 40.0, 80.0, 20.0]
    assert fr.regression_metrics(projected)["r2"] == 1.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: flam.confusion_matrix([0, 3], [0, 1], n_classes=3), "label 3 at index 1"),
        (lambda: flam.confusion_matrix([0, -1], [0, 1], n_classes=3), "outside"),
        (lambda: flam.confusion_matrix([0.0], [0], n_classes=3), "integer class labels"),
        (lambda: flam.confusion_matrix([0], [0, 1], n_classes=3), "y_true=1, y_pred=2"),
        (lambda: flam.confusion_matrix([0], [0], n_classes=0), "n_classes must lie in"),
        (lambda: flam.confusion_matrix([0], [0], n_classes=10**6), "n_classes must lie in"),
        (lambda: flam.confusion_matrix([0], [0], n_classes=2, cap=-1), "cap must be"),
        (lambda: flam.classification_metrics(np.zeros((3, 3))), "no mass"),
        (lambda: flam.classification_metrics(np.ones((2, 3))), "square"),
        (lambda: flam.classification_metrics([[1.0, math.nan], [0, 1]]), "NaN"),
        (lambda: flam.classification_metrics(np.ones(5)), "C² entries"),
        (lambda: flam.classification_metrics(np.eye(2), labels="some"), "labels must"),  # type: ignore[arg-type]
        (lambda: fr.regression_measures([1.0], [math.inf]), "y_pred holds NaN"),
        (lambda: fr.regression_measures([1.0], [1.0], y_bounds=(2, 1)), "low < high"),
        (
            lambda: fr.regression_measures([1.0], [1.0], residual_bound=0),
            "residual_bound",
        ),
        (lambda: fr.regression_metrics([1.0, 1.0, 1.0, 1.0]), "shape"),
        (lambda: fr.regression_metrics([0.0, 0.0, 0.0, 0.0, 0.0]), "n = 0"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(call: Callable[[], object], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call()


def test_unclipped_regression_overflow_is_refused_with_the_fix() -> None:
    big = float(np.finfo(np.float64).max)
    with pytest.raises(InvalidInput, match="pass y_bounds"):
        fr.regression_measures([big, -big], [-big, big])
    clipped = fr.regression_measures([big, -big], [-big, big], y_bounds=(0, 1), residual_bound=1.0)
    assert clipped.tolist() == [2.0, 2.0, 0.0, 0.5, 2.0]
