"""Derived releases: no spend-then-fail, analytic gradients, absent classes (issue 11).

* Every input post-processing could choke on is refused with a typed DpLedgerError
  BEFORE the ledger charges: the ledger file is byte-identical after the refusal.
* The analytic gradients of the 12 classification metrics (``_confusion_linear``)
  equal central finite differences of the metric functions themselves.
* An absent class is bounded, not guessed, in the per-class averages, and the interval
  method says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from test_published import REG_KW, SMALL

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.errors import DpLedgerError
from dpledger.ledger.derived import derive_confusion, release_confusion, release_regression
from dpledger.metrics import flam, flam_regression
from dpledger.metrics._confusion_linear import Marginal, cell_weights, classification_gradients
from dpledger.metrics.uncertainty import classification_batch

CODEC = flam_regression.regression_codec(cap=1.0, **REG_KW)  # type: ignore[arg-type]
GOOD_CONFUSION = np.full((10, 10), 20.0) + np.diag(np.full(10, 400.0))


def _files(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.is_file()}


def _ledger_with_one_entry(tmp_path: Path) -> None:
    """A ledger file holding one real release, closed (the state a refusal must keep)."""
    with Ledger.open(tmp_path / "l.db", Policy.from_toml(SMALL), mode="create") as ledger:
        req = ReleaseRequest(epoch=1, metric="confusion", region="all", cohort=1000)
        release_confusion(ledger, req, GOOD_CONFUSION)


BAD_CONFUSION: list[tuple[str, object, dict[str, object]]] = [
    ("level nan", GOOD_CONFUSION, {"level": math.nan}),
    ("level inf", GOOD_CONFUSION, {"level": math.inf}),
    ("level 1", GOOD_CONFUSION, {"level": 1.0}),
    ("level 0", GOOD_CONFUSION, {"level": 0.0}),
    ("level text", GOOD_CONFUSION, {"level": "0.95"}),
    ("level bool", GOOD_CONFUSION, {"level": True}),
    ("level next to 1", GOOD_CONFUSION, {"level": 1.0 - 1e-17}),
    ("method", GOOD_CONFUSION, {"method": "bootstrap"}),
    ("labels", GOOD_CONFUSION, {"labels": "some"}),
    ("ragged", [[1.0, 2.0], [3.0]], {}),
    ("complex", GOOD_CONFUSION.astype(complex), {}),
    ("text", np.full((10, 10), "1"), {}),
    ("nan cell", np.where(np.eye(10) > 0, math.nan, GOOD_CONFUSION), {}),
    ("inf cell", np.where(np.eye(10) > 0, math.inf, GOOD_CONFUSION), {}),
    ("not square", np.ones((10, 9)), {}),
    ("wrong size", np.ones((5, 5)), {}),
    ("3-d", np.ones((2, 10, 10)), {}),
    # the metric does not declare nonnegative (a vector_sum's default is false): still refused
    ("negative cell", np.where(np.eye(10) > 0, -1.0, GOOD_CONFUSION), {}),
    ("all negative", -np.ones((10, 10)), {}),
    ("negative flattened", -np.ones(100), {}),
    # an OverflowError, and a string coerced to 1.0, before the bound was checked by type
    ("aggregate_error 10**400", GOOD_CONFUSION, {"aggregate_error": 10**400}),
    ("aggregate_error text", GOOD_CONFUSION, {"aggregate_error": "1"}),
]


BAD_REGRESSION: list[tuple[str, object, object, dict[str, object]]] = [
    ("level nan", np.ones(5), CODEC, {"level": math.nan}),
    ("level 1.5", np.ones(5), CODEC, {"level": 1.5}),
    ("nan measure", np.array([1.0, math.nan, 1.0, 1.0, 1.0]), CODEC, {}),
    ("inf measure", np.array([1.0, 1.0, -math.inf, 1.0, 1.0]), CODEC, {}),
    ("complex", np.ones(5, dtype=complex), CODEC, {}),
    ("ragged", [[1.0, 2.0], [3.0]], CODEC, {}),
    ("wrong length", np.ones(4), CODEC, {}),
    ("not a codec", np.ones(5), "codec", {}),
    ("codec cap above the policy's", np.ones(5),
     flam_regression.regression_codec(cap=2.0, **REG_KW), {}),  # type: ignore[arg-type]
]  # fmt: skip


def _refuse(tmp_path: Path, metric: str, call: Callable[[Ledger, ReleaseRequest], object]) -> None:
    """``call`` raises a DpLedgerError and the ledger's files are byte-identical after it."""
    _ledger_with_one_entry(tmp_path)
    before = _files(tmp_path)
    req = ReleaseRequest(epoch=0, metric=metric, region="all", cohort=1000)
    policy = Policy.from_toml(SMALL)
    with (
        Ledger.open(tmp_path / "l.db", policy, mode="write") as ledger,
        pytest.raises(DpLedgerError),
    ):
        call(ledger, req)
    assert _files(tmp_path) == before


@pytest.mark.parametrize(
    ("matrix", "kwargs"), [c[1:] for c in BAD_CONFUSION], ids=[c[0] for c in BAD_CONFUSION]
)
def test_a_refused_confusion_release_leaves_the_ledger_byte_identical(
    tmp_path: Path, matrix: object, kwargs: dict[str, object]
) -> None:
    def call(ledger: Ledger, req: ReleaseRequest) -> object:
        return release_confusion(ledger, req, matrix, **kwargs)  # type: ignore[arg-type]

    _refuse(tmp_path, "confusion", call)


@pytest.mark.parametrize(
    ("encoded", "codec", "kwargs"),
    [c[1:] for c in BAD_REGRESSION],
    ids=[c[0] for c in BAD_REGRESSION],
)
def test_a_refused_regression_release_leaves_the_ledger_byte_identical(
    tmp_path: Path, encoded: object, codec: object, kwargs: dict[str, object]
) -> None:
    def call(ledger: Ledger, req: ReleaseRequest) -> object:
        return release_regression(ledger, req, encoded, codec, **kwargs)  # type: ignore[arg-type]

    _refuse(tmp_path, "regression", call)


def test_after_a_spend_extreme_releases_return_flags_never_raise(tmp_path: Path) -> None:
    """All-zero sums (n = 0 samples) still spend once and return every metric flagged."""
    with Ledger.open(tmp_path / "l.db", Policy.from_toml(SMALL), mode="create") as ledger:
        out = release_confusion(
            ledger, ReleaseRequest(epoch=0, metric="confusion", region="all", cohort=1),
            np.zeros((10, 10)),
        )  # fmt: skip
        assert set(out.unusable) == set(flam.CLASSIFICATION_KEYS)
        reg = release_regression(
            ledger, ReleaseRequest(epoch=0, metric="regression", region="all", cohort=1),
            np.zeros(5), CODEC,
        )  # fmt: skip
        assert set(reg.unusable) == set(flam_regression.REGRESSION_KEYS)
        assert len(ledger) == 2


def _finite_differences(m: np.ndarray, labels: str, h: float = 1e-4) -> dict[str, np.ndarray]:
    c = m.shape[-1]
    out = {k: np.zeros((c, c)) for k in flam.CLASSIFICATION_KEYS}
    for i in range(c):
        for j in range(c):
            up, down = m.copy(), m.copy()
            up[i, j] += h
            down[i, j] -= h
            f_up = flam.classification_metrics_rows(up[None], labels=labels)  # type: ignore[arg-type]
            f_down = flam.classification_metrics_rows(down[None], labels=labels)  # type: ignore[arg-type]
            for k in out:
                out[k][i, j] = (float(f_up[k][0]) - float(f_down[k][0])) / (2 * h)
    return out


@pytest.mark.parametrize("labels", ["all", "present"])
@pytest.mark.parametrize("c", [2, 3, 7])
def test_analytic_gradients_match_finite_differences(c: int, labels: str) -> None:
    rng = np.random.default_rng(c)  # a test matrix, not release noise
    m = rng.uniform(5.0, 50.0, (c, c)) + np.diag(rng.uniform(50.0, 200.0, c))
    grads = classification_gradients(m[None], labels)  # type: ignore[arg-type]
    values = flam.classification_metrics_rows(m[None], labels=labels)  # type: ignore[arg-type]
    numeric = _finite_differences(m, labels)
    for key in flam.CLASSIFICATION_KEYS:
        value, marginal = grads[key]
        assert value[0] == pytest.approx(float(values[key][0]), rel=1e-12), key
        analytic = cell_weights(marginal, np.ones((c, c)))[0]
        np.testing.assert_allclose(analytic, numeric[key], rtol=1e-6, atol=1e-9, err_msg=key)


def test_cell_weights_expand_the_four_marginal_partials() -> None:
    g = Marginal(np.array([[1.0, 2.0]]), np.array([[10.0, 20.0]]),
                 np.array([[100.0, 200.0]]), np.array([1000.0]))  # fmt: skip
    w = cell_weights(g, np.full((2, 2), 2.0))[0]
    assert w.tolist() == [[2 * 1111.0, 2 * 1210.0], [2 * 1120.0, 2 * 1222.0]]


def test_one_hundred_classes_post_process_without_a_c4_jacobian() -> None:
    """C = 100: 10⁴ cells. Central differences would evaluate every metric 2·10⁴ times
    over 10⁴ cells (10⁸ work per metric); the analytic path stays O(C²) per metric."""
    c = 100
    m = np.full((c, c), 2.0) + np.diag(np.full(c, 500.0))
    rng = np.random.default_rng(5)  # a simulated release, not release noise
    noisy = m.reshape(1, -1) + rng.laplace(0.0, 3.0, (4, c * c))
    batch = classification_batch(noisy, 3.0 * math.sqrt(2.0), max_total=1e7)
    truth = flam.classification_metrics(m, labels="all")
    for key in flam.CLASSIFICATION_KEYS:
        assert batch.usable(key).all(), key
        assert ((batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])).mean() >= 0.75


def test_an_absent_class_is_bounded_in_the_averages_and_named_in_the_method(
    tmp_path: Path,
) -> None:
    m = np.full((10, 10), 200.0) + np.diag(np.full(10, 20_000.0))
    m[9, :] = m[:, 9] = 0.0  # class 9 never occurs and is never predicted
    with Ledger.open(tmp_path / "l.db", Policy.from_toml(SMALL), mode="create") as ledger:
        req = ReleaseRequest(epoch=0, metric="confusion", region="all", cohort=10_000)
        out = release_confusion(ledger, req, m)
        max_total = float(ledger.policy.metric("confusion").cap) * req.cohort
    # OpenDP's noise cannot be seeded, and pure noise clears a class's guard by chance (the
    # absent class was measured in 7 of 200,000 simulated releases: a flaky 3.5e-5 per run
    # when asserted on the release itself), so the rule is checked on the committed release
    # re-derived at a seeded draw of its own noise: the release must equal its own
    # re-derivation, and the seeded one must bound the absent class.
    again = derive_confusion(out.release, max_total)
    assert dict(again.metrics) == pytest.approx(dict(out.metrics), rel=0, abs=0, nan_ok=True)
    assert again.intervals == out.intervals
    rng = np.random.default_rng(7)  # a simulated draw at the release's scale, not its noise
    noisy = m.reshape(-1) + rng.laplace(0.0, out.release.scale, m.size)
    seeded = derive_confusion(dataclasses.replace(out.release, noisy_sum=noisy), max_total)
    iv = seeded.intervals["recall_macro"]
    assert iv.usable
    assert "1 class within the noise bounded, not measured" in iv.method
    assert iv.high - iv.low >= 0.1  # the absent class's 1/C share could be anything in [0, 1]
    assert seeded.intervals["mcc"].usable  # defined and measured without class 9 (review D5)
    # Coverage at that release's public scale, on seeded simulated noise (OpenDP's release
    # noise cannot be seeded). 400 draws; a true 95% coverage falls below 0.9 with
    # probability < 1e-5.
    rng = np.random.default_rng(11)  # a simulation, not release noise
    noisy = m.reshape(1, -1) + rng.laplace(0.0, out.release.scale, (400, m.size))
    batch = classification_batch(noisy, out.release.scale, max_total=1e7)
    truth = flam.classification_metrics(m, labels="all")["recall_macro"]  # class 9 scores 0
    assert batch.usable("recall_macro").all()
    low, high = batch.low["recall_macro"], batch.high["recall_macro"]
    assert ((low <= truth) & (truth <= high)).mean() >= 0.9
    mcc = flam.classification_metrics(m, labels="all")["mcc"]
    assert batch.usable("mcc").all()
    assert ((batch.low["mcc"] <= mcc) & (mcc <= batch.high["mcc"])).mean() >= 0.9
    assert "Cornish–Fisher" in out.intervals["accuracy"].method
    assert "recall_macro" in out.table()


@pytest.mark.parametrize("not_a_ledger", [None, "x.db", 5], ids=repr)
def test_a_derived_release_without_a_ledger_is_invalid_input(not_a_ledger: object) -> None:
    """Review s32 B3: not an AttributeError from deep inside."""
    from dpledger.errors import InvalidInput

    req = ReleaseRequest(epoch=1, metric="confusion", region="all", cohort=1000)
    with pytest.raises(InvalidInput, match="ledger must be a dpledger Ledger"):
        release_confusion(not_a_ledger, req, GOOD_CONFUSION)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="ledger must be a dpledger Ledger"):
        release_regression(not_a_ledger, req, np.ones(CODEC.dimension), CODEC)  # type: ignore[arg-type]


def test_a_derived_releases_notes_name_only_the_metrics_shown(tmp_path: Path) -> None:
    """A caveat or an unusable count of a metric a table hides (the Flower round table's
    ``derived=``) described a row nobody could see: ``notes(only)`` counts the shown ones."""
    with Ledger.open(tmp_path / "l.db", Policy.from_toml(SMALL), mode="create") as ledger:
        req = ReleaseRequest(epoch=0, metric="confusion", region="all", cohort=1000)
        out = release_confusion(ledger, req, GOOD_CONFUSION)
    m = np.zeros((10, 10))
    m[:, 0] = 40_000.0  # every sample predicted class 0: precision_weighted is unusable
    d = derive_confusion(dataclasses.replace(out.release, noisy_sum=m.reshape(-1)), 1e8)
    bad = sorted(d.unusable)
    good = [k for k in d.metrics if k not in d.unusable]
    assert bad
    assert good
    assert f"{len(bad)} of {len(d.metrics)} metrics are unusable" in "".join(d.notes())
    assert f"{len(bad)} of {len(bad)} metrics are unusable" in "".join(d.notes(bad))
    assert not any("unusable" in x for x in d.notes(good))
    assert d.caveats(good)[0] == d.caveats()[0]  # how estimates were made: always
    assert d.table().splitlines()[1:] == [*d.rows(), *d.notes()]
