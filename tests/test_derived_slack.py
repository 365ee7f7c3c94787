"""Derived intervals account for a release's slack (audit 3, finding 5).

A release's coordinates are off by noise and by up to ``Release.sum_slack`` (OpenDP's
output grid, the doubles' rounding, an aggregate's encoding). With a noise scale far
below the grid (a cap of 1e-5 at ε = 1e9: scale 2e-14, grid 2^-40 ≈ 9.1e-13) the release's
own bar covered every cell, but every FLAM metric derived from it covered in 0 of 200
releases (accuracy's interval had width 0). Now a derived interval is widened by the
first-order worst case of the slack whenever the slack ratio ‖s/b‖₂ exceeds 1%; below
that (every ordinary policy) it is the same interval, bit for bit.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.ledger.derived import release_confusion, release_regression
from dpledger.metrics import flam, flam_regression, mean_over_noisy_count
from dpledger.metrics._slack import NEGLIGIBLE, WIDENED, slack_ratio
from dpledger.metrics.declarations import Bounds
from dpledger.metrics.uncertainty import classification_estimates, regression_estimates

TINY = """name = "tiny"
version = "1.0.0"
neighbouring = "{nb}"
definition = "pure"
epoch_epsilon = "{eps}"
eval_fraction = "1"
rounds_per_epoch = 1
allocation = "pooled"
[regions]
names = ["a"]
[metrics.cm]
kind = "vector_sum"
epsilon = "{eps}"
dimension = 9
cap_per_client = "{cap}"
nonnegative = true
[metrics.reg]
kind = "vector_sum"
epsilon = "{eps}"
dimension = 5
cap_per_client = "{cap}"
nonnegative = false
[metrics.loss]
kind = "scalar_mean"
epsilon = "{eps}"
clip = {{ low = "0", high = "{high}", source = "t" }}
[metrics.health]
kind = "vector_sum"
epsilon = "{eps}"
dimension = 1
cap_per_client = "1"
"""
COUNTS = np.array([[50, 3, 2], [4, 40, 6], [1, 2, 30]], float)  # the audit's matrix
REG_KW = {"y_bounds": (40.0, 160.0), "residual_bound": 30.0, "max_samples": 20.0}


def _ledger(
    tmp_path: Path, name: str, eps: str, cap: str, high: str = "1", nb: str = "replace"
) -> Ledger:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eval_fraction 1, huge ε: outside the usual ranges
        p = Policy.from_toml(TINY.format(eps=eps, cap=cap, high=high, nb=nb), source="t.toml")
    return Ledger.open(tmp_path / name, p, mode="create")


def test_the_audits_tiny_confusion_covers_or_is_flagged(tmp_path: Path) -> None:
    m = COUNTS * 1e-5  # each client capped at 1e-5 (one sample per client, scaled)
    truth = flam.classification_metrics(COUNTS)
    ok = dict.fromkeys(truth, 0)
    before = dict.fromkeys(truth, 0)
    releases = 100
    with _ledger(tmp_path, "c.db", "1e9", "0.00001") as ledger:
        for epoch in range(releases):
            req = ReleaseRequest(epoch=epoch, metric="cm", region="a", cohort=138)
            out = release_confusion(ledger, req, m)
            rel = out.release
            assert slack_ratio(rel.sum_slack, rel.scale) > 1  # the grid dominates the noise
            old = classification_estimates(
                rel.noisy_sum, rel.scale, max_total=1e-5 * 138,
                distribution=rel.facts.mechanism,
            )[1]  # fmt: skip
            for k, iv in out.intervals.items():
                ok[k] += (not iv.usable) or iv.contains(truth[k])
                before[k] += old[k].contains(truth[k])
                assert (not iv.usable) or iv.high > iv.low  # never a 0-width interval
    for k in truth:
        assert ok[k] >= 0.95 * releases, (k, ok[k])
        assert before[k] <= 0.05 * releases, (k, before[k])  # the audit's 0/200


def test_a_tiny_regression_release_covers_or_is_flagged(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)  # synthetic data, not release noise
    n, per = 300, 20
    y = rng.normal(100, 15, n * per)
    yhat = y + rng.normal(0, 6, y.size)
    measures = flam_regression.regression_measures(y, yhat, offsets=np.arange(n) * per, **REG_KW)  # type: ignore[arg-type]
    codec = flam_regression.regression_codec(cap=1e-5, **REG_KW)  # type: ignore[arg-type]
    encoded = codec.encode(measures).sum(axis=0)
    truth = flam_regression.regression_metrics(measures.sum(axis=0))
    ok = dict.fromkeys(truth, 0)
    releases = 100
    with _ledger(tmp_path, "r.db", "1e9", "0.00001") as ledger:
        for epoch in range(releases):
            req = ReleaseRequest(epoch=epoch, metric="reg", region="a", cohort=n)
            out = release_regression(ledger, req, encoded, codec)
            assert slack_ratio(out.release.sum_slack, out.release.scale) > 1
            for k, iv in out.intervals.items():
                ok[k] += (not iv.usable) or iv.contains(truth[k])
                assert (not iv.usable) or iv.high > iv.low
    for k in truth:
        assert ok[k] >= 0.95 * releases, (k, ok[k])


def _flower() -> Any:
    """dpledger.flower (the flower extra), imported as its own tests do: flwr's import
    warnings are its own."""
    pytest.importorskip("flwr", reason="the flower extra is not installed")
    import dpledger.flower.means
    import dpledger.flower.wire

    return dpledger.flower


def _mean_plan() -> dict[str, Any]:
    MetricPlan = _flower().wire.MetricPlan
    b = Bounds(low=0.0, high=1e-6)
    return {"loss": MetricPlan("loss", "loss", "scalar_mean", b, None, {}, False)}


def test_a_mean_over_reporters_below_the_grid_covers(tmp_path: Path) -> None:
    """add_remove, loss clip [0, 1e-6] at ε = 1e9: the sum's scale 1e-15, its slack 1.8e-12."""
    rng = np.random.default_rng(12)  # the reporters' values, not release noise
    selected, k = 60, 50
    ok = before = 0
    releases = 100
    with _ledger(tmp_path, "m.db", "1e9", "1", high="0.000001", nb="add_remove") as ledger:
        for epoch in range(releases):  # the count in its own epoch: one release per epoch
            x = rng.uniform(0, 1e-6, k)
            req = ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=selected)
            o = ledger.release(req, float(np.sum(x)))
            hreq = ReleaseRequest(
                epoch=releases + epoch, metric="health", region="a", cohort=selected
            )
            hr = ledger.release(hreq, [float(k)])
            plans = _mean_plan()
            (mean,) = _flower().means.reporter_means({("a", "loss"): o}, {"a": hr}, plans).values()
            truth = float(np.sum(x)) / k
            ok += (not mean.usable) or mean.interval.contains(truth)
            _, old = mean_over_noisy_count(
                float(o.noisy_sum[0]), o.scale, float(hr.noisy_sum[0]), hr.scale,
                bounds=(0.0, 1e-6), max_count=float(selected),
            )  # fmt: skip
            before += old.contains(truth)
    assert ok >= 0.95 * releases
    assert before <= 0.5 * releases  # 22 of 100 measured: the grid, not the noise, decides


def test_ordinary_releases_keep_their_intervals_bit_for_bit(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    with _ledger(tmp_path, "o.db", "4", "20", high="3.4", nb="add_remove") as ledger:
        req = ReleaseRequest(epoch=0, metric="cm", region="a", cohort=2000)
        out = release_confusion(ledger, req, COUNTS * 20)
        rel = out.release
        assert slack_ratio(rel.sum_slack, rel.scale) < 1e-6 * NEGLIGIBLE
        want = classification_estimates(
            rel.noisy_sum, rel.scale, max_total=20.0 * 2000, distribution=rel.facts.mechanism
        )  # fmt: skip
        assert (dict(out.metrics), dict(out.intervals)) == want
        assert not any(WIDENED in iv.method for iv in out.intervals.values())

        codec = flam_regression.regression_codec(cap=1.0, **REG_KW)  # type: ignore[arg-type]
        y = rng.normal(100, 15, 3000 * 20)
        measures = flam_regression.regression_measures(
            y,
            y + rng.normal(0, 6, y.size),
            offsets=np.arange(3000) * 20,
            **REG_KW,  # type: ignore[arg-type]
        )
        req = ReleaseRequest(epoch=1, metric="reg", region="a", cohort=3000)
        out = release_regression(ledger, req, codec.encode(measures).sum(axis=0), codec)
        rel = out.release
        want = regression_estimates(
            rel.noisy_sum, codec, rel.scale, distribution=rel.facts.mechanism, cohort=3000
        )  # fmt: skip
        assert (dict(out.metrics), dict(out.intervals)) == want

        o = ledger.release(ReleaseRequest(epoch=2, metric="loss", region="a", cohort=500), 800.0)
        hr = ledger.release(
            ReleaseRequest(epoch=3, metric="health", region="a", cohort=500), [480.0]
        )
        flower = _flower()
        plans = {
            "loss": flower.wire.MetricPlan(
                "loss", "loss", "scalar_mean", Bounds(low=0.0, high=3.4), None, {}, False
            )
        }
        (mean,) = flower.means.reporter_means({("a", "loss"): o}, {"a": hr}, plans).values()
        est, iv = mean_over_noisy_count(
            float(o.noisy_sum[0]), o.scale, float(hr.noisy_sum[0]), hr.scale,
            bounds=(0.0, 3.4), max_count=500.0,
        )  # fmt: skip
        assert (mean.estimate, mean.interval) == (est, iv) or math.isnan(est)


def test_the_demos_shares_cover_below_the_grid(tmp_path: Path) -> None:
    from dpledger.sim.demo import share_interval

    flat = (COUNTS * 1e-5).reshape(-1)
    truth = float(COUNTS.reshape(-1)[-1] / COUNTS.sum())
    ok = 0
    with _ledger(tmp_path, "s.db", "1e9", "0.00001") as ledger:
        for epoch in range(50):
            rel = ledger.release(
                ReleaseRequest(epoch=epoch, metric="cm", region="a", cohort=138), flat
            )
            iv = share_interval(rel, -1, slice(None), (0.0, 1.0), "total count")
            ok += (not iv.usable) or iv.contains(truth)
    assert ok >= 48


def test_a_near_perfect_model_at_the_range_edge_covers(tmp_path: Path) -> None:
    """Review s25: the first widening read central differences of point estimates clipped
    to the range, so at accuracy 1 it moved half as far as the one-sided encoding error
    (every metric covered 0/40). Off-diagonal cells are each client's 0.99 quantum,
    truncated to 0 by the grid; now the intervals are computed at the widened scale."""
    from dpledger.metrics.secure_sum import FixedPoint, exact_sum

    n, cap = 138, 1e-5
    grid = FixedPoint.for_cap(cap)
    diag = np.diag(np.diag(COUNTS))
    row = (diag / diag.sum() * cap * (1 - 1e-6)).reshape(-1)
    row[[1, 2, 3, 5, 6, 7]] = 0.99 * grid.quantum
    rows = np.repeat(row[None, :], n, axis=0)
    aggregate = exact_sum(rows, grid)
    truth = flam.classification_metrics(rows.sum(axis=0).reshape(3, 3))
    with _ledger(tmp_path, "edge.db", "1e9", repr(cap)) as ledger:
        # OpenDP's noise cannot be seeded: its scale (2e-14) is ~1/1,600 of the slack
        # (3.3e-11), so a miss would need a draw of hundreds of scales (false failure
        # < 1e-100 over the 20 releases)
        for epoch in range(20):
            out = release_confusion(
                ledger, ReleaseRequest(epoch=epoch, metric="cm", region="a", cohort=n),
                aggregate, aggregate_error=grid.sum_error(n),
            )  # fmt: skip
            for k, iv in out.intervals.items():
                assert iv.usable, k
                assert WIDENED in iv.method
                assert iv.contains(truth[k]), (k, truth[k], iv)


def test_interval_scales_refuses_what_it_cannot_scale() -> None:
    """Review s25 (m3): it returned (inf, nan) for an overflowing slack or a zero scale."""
    from dpledger.errors import InvalidInput
    from dpledger.metrics import interval_scales

    assert interval_scales(2.0, [1e-9] * 4) == ((2.0,), False)  # negligible: as given
    (wider,), did = interval_scales(1.0, [0.5] * 4)
    assert did
    assert wider == pytest.approx(1.0 + 2.0 * 0.5)  # 1 + √4·max(s/b)
    for scales, slack in ((0.0, [1.0]), (math.inf, [1.0]), (1.0, [math.nan]), (1.0, [-1.0])):
        with pytest.raises(InvalidInput, match="finite"):
            interval_scales(scales, slack)
    with pytest.raises(InvalidInput, match="too large to give an interval"):
        interval_scales(1e-300, [1e300])
