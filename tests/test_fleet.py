"""Tests for the synthetic fleet generator: determinism, structure, planted scenarios.

Every planted signature is checked with plain numpy on the raw per-sample arrays, without
noise and without the metrics module, so a failure here points at the generator.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from dpledger.sim.fleet import GRID_SIDE, Fleet, describe, make_fleet
from dpledger.sim.scenarios import (
    DEFAULT_SCENARIOS,
    CrsMismatch,
    HeavyTailedLoss,
    LabelSkew,
    Scenario,
    SmallRegion,
    held_out_losses,
)

N_CLIENTS = 20_000
ARRAY_FIELDS = (
    "client_region", "offsets", "along", "across", "loss", "prob", "outcome",
    "y_true", "y_pred", "y_reg", "y_reg_pred", "cell",
)  # fmt: skip


def without(name: str) -> tuple[Scenario, ...]:
    return tuple(s for s in DEFAULT_SCENARIOS if s.name != name)


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_CLIENTS, seed=0)


def per_client_mean(f: Fleet, values: NDArray[np.float64]) -> NDArray[np.float64]:
    sums = np.bincount(f.sample_client_ids(), weights=values, minlength=f.n_clients)
    return sums / f.sample_counts


def rms(x: NDArray[np.float64]) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def assert_same_fleet(a: Fleet, b: Fleet) -> None:
    for name in ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in ("regions", "n_classes", "scenarios", "seed"):
        assert getattr(a, name) == getattr(b, name), name


# --- determinism -------------------------------------------------------------------------


def test_same_seed_gives_identical_fleets() -> None:
    assert_same_fleet(make_fleet(n_clients=3000, seed=11), make_fleet(n_clients=3000, seed=11))


def test_different_seeds_give_different_fleets() -> None:
    a, b = make_fleet(n_clients=3000, seed=1), make_fleet(n_clients=3000, seed=2)
    n = min(a.n_samples, b.n_samples)
    assert not np.array_equal(a.along[:n], b.along[:n])
    assert not np.array_equal(a.prob[:n], b.prob[:n])
    assert not np.array_equal(a.sample_counts, b.sample_counts)


def test_worker_count_does_not_change_the_fleet() -> None:
    # 1.2M samples: more than one block per task, and tasks run concurrently with 3 workers.
    one = make_fleet(n_clients=30_000, seed=5, workers=1)
    assert_same_fleet(one, make_fleet(n_clients=30_000, seed=5, workers=3))


def test_turning_off_a_region_scenario_changes_only_its_region() -> None:
    with_it = make_fleet(n_clients=4000, seed=3)
    without_it = make_fleet(n_clients=4000, seed=3, scenarios=without("overconfident"))
    np.testing.assert_array_equal(with_it.along, without_it.along)
    np.testing.assert_array_equal(with_it.y_true, without_it.y_true)
    inside = np.zeros(with_it.n_samples, dtype=bool)
    r = with_it.client_range("na")
    ext = np.append(with_it.offsets, with_it.n_samples)
    inside[ext[r.start] : ext[r.stop]] = True
    np.testing.assert_array_equal(with_it.prob[~inside], without_it.prob[~inside])
    np.testing.assert_array_equal(with_it.outcome[~inside], without_it.outcome[~inside])
    assert not np.array_equal(with_it.prob[inside], without_it.prob[inside])


# --- structure ---------------------------------------------------------------------------


def test_offsets_counts_and_shapes_are_consistent(fleet: Fleet) -> None:
    counts = fleet.sample_counts
    assert fleet.offsets[0] == 0
    assert np.all(np.diff(fleet.offsets) >= 0)
    assert counts.sum() == fleet.n_samples
    assert counts.min() >= 1
    assert fleet.client_region.shape == fleet.offsets.shape == (fleet.n_clients,)
    assert np.all(np.diff(fleet.client_region) >= 0)
    ids = fleet.sample_client_ids()
    np.testing.assert_array_equal(ids[fleet.offsets], np.arange(fleet.n_clients))
    for name in ARRAY_FIELDS[2:]:
        assert getattr(fleet, name).shape == (fleet.n_samples,), name
    assert fleet.along.dtype == fleet.loss.dtype == np.float64
    assert fleet.y_true.dtype == fleet.y_pred.dtype == fleet.cell.dtype == np.int64
    assert abs(counts.mean() - 40) < 1.0


def test_values_lie_in_their_domains(fleet: Fleet) -> None:
    assert np.all(fleet.loss >= 0)
    assert np.all((fleet.prob >= 0) & (fleet.prob <= 1))
    assert set(np.unique(fleet.outcome)) == {0.0, 1.0}
    for labels in (fleet.y_true, fleet.y_pred):
        assert labels.min() >= 0
        assert labels.max() < fleet.n_classes
    region_of_cell = fleet.cell // GRID_SIDE**2
    np.testing.assert_array_equal(region_of_cell, fleet.client_region[fleet.sample_client_ids()])
    np.testing.assert_allclose(fleet.error_magnitude(), np.hypot(fleet.along, fleet.across))


def test_arrays_and_fleet_are_read_only(fleet: Fleet) -> None:
    for name in ARRAY_FIELDS:
        with pytest.raises(ValueError, match="read-only"):
            getattr(fleet, name)[0] = 0
    with pytest.raises(ValueError, match="read-only"):
        fleet.region_slice("na").along[0] = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        fleet.seed = 1  # type: ignore[misc]


def test_region_slice_is_a_renumbered_view(fleet: Fleet) -> None:
    r = fleet.client_range("apac")
    sub = fleet.region_slice("apac")
    np.testing.assert_array_equal(fleet.clients_in("apac"), np.arange(r.start, r.stop))
    assert sub.n_clients == len(r)
    assert sub.offsets[0] == 0
    np.testing.assert_array_equal(sub.sample_counts, fleet.sample_counts[r.start : r.stop])
    start = fleet.offsets[r.start]
    np.testing.assert_array_equal(sub.across, fleet.across[start : start + sub.n_samples])
    assert np.shares_memory(sub.across, fleet.across)
    assert [p.name for p in sub.scenarios] == ["heavy_tailed_loss", "label_skew", "small_region"]
    assert sub.planted("small_region")[0].clients == range(sub.n_clients)
    with pytest.raises(ValueError, match="unknown region"):
        fleet.client_range("mars")


def test_quantity_skew_zero_gives_equal_counts() -> None:
    f = make_fleet(n_clients=500, samples_per_client=12, quantity_skew=0.0)
    assert set(f.sample_counts.tolist()) == {12}


def test_region_shares_mapping_is_respected() -> None:
    f = make_fleet(n_clients=10_000, regions={"a": 0.5, "b": 0.3, "c": 0.2}, scenarios=())
    assert [len(f.client_range(r)) for r in f.regions] == [5000, 3000, 2000]


@settings(max_examples=40, deadline=None)
@given(
    n_clients=st.integers(1, 400),
    mean=st.floats(1, 60),
    skew=st.floats(0, 2),
    n_classes=st.integers(2, 12),
    seed=st.integers(0, 2**32),
)
def test_any_small_fleet_is_well_formed(
    n_clients: int, mean: float, skew: float, n_classes: int, seed: int
) -> None:
    f = make_fleet(
        n_clients=n_clients,
        samples_per_client=mean,
        quantity_skew=skew,
        n_classes=n_classes,
        seed=seed,
    )
    assert f.n_clients == n_clients
    assert f.sample_counts.min() >= 1
    assert sum(len(f.client_range(r)) for r in f.regions) == n_clients
    assert f.y_true.max() < n_classes
    assert f.y_pred.max() < n_classes
    assert np.all(np.isfinite(f.along))
    assert np.all(np.isfinite(f.loss))
    for p in f.scenarios:
        assert 0 <= p.clients.start <= p.clients.stop <= n_clients
    assert "fleet:" in describe(f)


# --- planted scenarios, seen without noise ------------------------------------------------


def test_lateral_drift_shows_in_the_ratio_not_much_in_scalar_rmse(fleet: Fleet) -> None:
    drift = fleet.region_slice("eu-west")
    along, across = rms(drift.along), rms(drift.across)
    assert along == pytest.approx(0.85, rel=0.03)
    assert across == pytest.approx(4.20, rel=0.03)
    assert across / along == pytest.approx(4.94, rel=0.04)
    assert np.sqrt((along**2 + across**2) / 2) == pytest.approx(3.03, rel=0.03)
    base = fleet.region_slice("na")  # no CRS devices, no drift (only over-confidence)
    b_along, b_across = rms(base.along), rms(base.across)
    assert b_along == pytest.approx(0.90, rel=0.03)
    assert b_across == pytest.approx(1.00, rel=0.03)
    assert np.sqrt((b_along**2 + b_across**2) / 2) == pytest.approx(0.95, rel=0.03)


def test_crs_mismatch_devices_pin_the_per_client_ratio(fleet: Fleet) -> None:
    (crs,) = fleet.planted("crs_mismatch")
    region = fleet.client_range("eu-east")
    assert crs.regions == ("eu-east",)
    assert crs.clients.start >= region.start
    assert crs.clients.stop <= region.stop
    assert len(crs.clients) == pytest.approx(0.10 * len(region), abs=1)
    ratio = np.sqrt(
        per_client_mean(fleet, fleet.across**2) / per_client_mean(fleet, fleet.along**2)
    )
    assert ratio[crs.clients.start : crs.clients.stop].min() >= 10.0
    healthy = np.zeros(fleet.n_clients, dtype=bool)
    healthy[region.start : region.stop] = True
    healthy[crs.clients.start : crs.clients.stop] = False
    assert np.median(ratio[healthy]) < 1.5
    ext = np.append(fleet.offsets, fleet.n_samples)
    bad = slice(ext[crs.clients.start], ext[crs.clients.stop])
    assert fleet.error_magnitude()[bad].min() > 25.0


def test_overconfident_region_has_a_large_top_bucket_gap(fleet: Fleet) -> None:
    for name in fleet.regions:
        sub = fleet.region_slice(name)
        top = sub.prob >= 0.8
        gap = float(np.mean(sub.prob[top] - sub.outcome[top]))
        if name == "na":
            assert gap > 0.3
        elif sub.n_samples > 100_000:
            assert abs(gap) < 0.02, (name, gap)


def test_held_out_losses_match_the_reference_percentiles() -> None:
    losses = held_out_losses(2000, seed=0)
    assert losses.shape == (2000,)
    assert losses.min() > 0
    p50, p90, p95, p99 = np.percentile(losses, [50, 90, 95, 99])
    assert p50 == pytest.approx(0.4, rel=0.1)
    assert p90 == pytest.approx(1.2, rel=0.1)
    assert p95 == pytest.approx(1.6, rel=0.12)
    assert p99 == pytest.approx(3.4, rel=0.2)
    assert 10.0 <= losses.max() < 100.0  # the max sits in the tens, far above p99


def test_heavy_tail_shows_in_per_client_loss_only_when_planted(fleet: Fleet) -> None:
    heavy = per_client_mean(fleet, fleet.loss)
    light_fleet = make_fleet(n_clients=N_CLIENTS, seed=0, scenarios=without("heavy_tailed_loss"))
    light = per_client_mean(light_fleet, light_fleet.loss)
    assert np.median(heavy) == pytest.approx(0.4, rel=0.1)
    assert heavy.max() > 10 * np.percentile(heavy, 99)
    assert light.max() < heavy.max() / 5
    assert np.median(light) == pytest.approx(np.median(heavy), rel=1e-9)


def label_tv(f: Fleet) -> float:
    c = f.n_classes
    hist = np.bincount(f.sample_client_ids() * c + f.y_true, minlength=f.n_clients * c)
    per_client = hist.reshape(-1, c) / f.sample_counts[:, None]
    overall = np.bincount(f.y_true, minlength=c) / f.n_samples
    return float(np.mean(0.5 * np.abs(per_client - overall).sum(axis=1)))


def test_label_skew_makes_client_class_mixes_differ(fleet: Fleet) -> None:
    iid = make_fleet(n_clients=N_CLIENTS, seed=0, scenarios=without("label_skew"))
    assert label_tv(fleet) > 0.4
    assert label_tv(iid) < 0.3
    c = fleet.n_classes
    cm = np.bincount(fleet.y_true * c + fleet.y_pred, minlength=c * c).reshape(c, c)
    accuracy = np.trace(cm) / cm.sum()
    recall, precision = np.diag(cm) / cm.sum(1), np.diag(cm) / cm.sum(0)
    macro_f1 = np.mean(2 * precision * recall / (precision + recall))
    assert abs(accuracy - macro_f1) > 0.01


def test_small_region_is_below_two_percent(fleet: Fleet) -> None:
    (small,) = fleet.planted("small_region")
    assert small.regions == ("apac",)
    assert fleet.regions == ("eu-west", "eu-east", "na", "apac")  # the shipped policy's four
    assert 0 < len(fleet.client_range("apac")) < 0.02 * fleet.n_clients
    assert len(small.clients) == 150


def test_small_region_can_shrink_an_existing_region() -> None:
    f = make_fleet(n_clients=10_000, scenarios=[SmallRegion(region="na", share=0.01)])
    assert f.regions == ("eu-west", "eu-east", "na", "apac")
    assert len(f.client_range("na")) == 100


def test_regression_and_cells_have_the_documented_shape(fleet: Fleet) -> None:
    y, yhat = fleet.y_reg, fleet.y_reg_pred
    assert y.mean() == pytest.approx(100, abs=0.5)
    assert y.std() == pytest.approx(15, rel=0.03)
    r2 = 1 - np.sum((y - yhat) ** 2) / np.sum((y - y.mean()) ** 2)
    assert r2 == pytest.approx(0.8, abs=0.02)
    pairs = np.unique(fleet.sample_client_ids() * GRID_SIDE**2 * 8 + fleet.cell)
    coverage = np.bincount(pairs // (GRID_SIDE**2 * 8), minlength=fleet.n_clients)
    assert coverage.min() == 1
    assert coverage.max() == 30
    assert np.std(coverage) > 3


def test_describe_names_regions_and_scenarios(fleet: Fleet) -> None:
    text = describe(fleet)
    for word in (*fleet.regions, *(p.name for p in fleet.scenarios), "20,000 clients"):
        assert word in text


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_clients": 0}, "n_clients must be an int > 0"),
        ({"n_clients": -5}, "n_clients must be an int > 0"),
        ({"n_clients": 1e6}, "n_clients must be an int > 0"),
        ({"scenarios": ["lateral_drift", "nope"]}, "unknown scenario 'nope'"),
        ({"scenarios": [object()]}, "unknown scenario"),
        ({"regions": {"a": 0.5, "b": 0.4}}, "shares must sum to 1, got 0.9"),
        ({"regions": {"a": 1.5, "b": -0.5}}, "shares must be > 0"),
        ({"regions": "eu-west"}, "sequence of names"),
        ({"regions": ["a", "a"]}, "duplicate region"),
        ({"regions": ["a", "b"]}, "targets region 'eu-west'"),
        ({"n_classes": 1}, "n_classes must be an int >= 2"),
        ({"samples_per_client": 0.5}, "samples_per_client"),
        ({"quantity_skew": -1.0}, "quantity_skew"),
        ({"seed": -1}, "seed must be"),
        ({"scenarios": [LabelSkew(), LabelSkew(alpha=2)]}, "planted twice"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"n_clients": 100, **kwargs}
    with pytest.raises(ValueError, match=message):
        make_fleet(**args)  # type: ignore[arg-type]


def test_bad_scenario_parameters_raise_value_error() -> None:
    with pytest.raises(ValueError, match="CRS fraction"):
        CrsMismatch(fraction=0.0)
    with pytest.raises(ValueError, match="increase"):
        HeavyTailedLoss(anchors=((0.5, 1.0), (0.9, 0.5)))
    with pytest.raises(ValueError, match="n_clients"):
        held_out_losses(0)
