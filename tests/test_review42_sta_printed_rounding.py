"""Review 42 (statistics): ``DerivedRelease.table()`` printed interval ends rounded to the
nearest 4th decimal, so the printed interval could be narrower than the computed one by
up to half a printed unit at each end. Where an interval is about one printed unit wide
(precise metrics of a large cohort) the printed intervals under-covered: a 10⁷-sample
2-class matrix under Gaussian noise σ = 200, 4,000 releases, computed intervals covering
~0.951, printed f1_macro covered 0.897 and MCC 0.861 (rounded to nearest). The ends are
now rounded outward (low down, high up), so every printed interval contains the computed
one and covers at least as often.

The coverage check is deterministic given the seed: printed ⊇ computed, so printed
coverage ≥ computed coverage in every release; the floor 0.93 on the computed coverage
(4,000 releases, true coverage ~0.95) fails by chance with probability < 1e-6.
"""

from __future__ import annotations

import math
from decimal import Decimal
from types import MappingProxyType

import numpy as np

from dpledger.ledger.derived import DerivedRelease, _shown_triple
from dpledger.metrics import flam
from dpledger.metrics.uncertainty import Interval, classification_batch


def _printed(value: float, low: float, high: float) -> tuple[float, float]:
    _, lo, hi = _shown_triple(value, low, high)
    return float(lo), float(hi)


def test_printed_ends_contain_the_computed_interval() -> None:
    # the row that printed [0.1234, 0.1236] for [0.12344, 0.12362]: 0.12361 fell outside
    lo, hi = _printed(0.12353, 0.12344, 0.12362)
    assert lo <= 0.12344
    assert hi >= 0.12362
    rng = np.random.default_rng(42)
    for _ in range(20_000):
        low = float(rng.uniform(-1, 1) * 10.0 ** rng.integers(-12, 4))
        high = low + float(abs(rng.normal()) * 10.0 ** rng.integers(-17, 1))
        p_lo, p_hi = _printed((low + high) / 2, low, high)
        assert Decimal(p_lo) <= Decimal(low), (low, high)
        assert Decimal(p_hi) >= Decimal(high), (low, high)


def test_exact_ends_keep_their_short_text() -> None:
    # a double whose text reads back as itself is not pushed a unit out
    assert _shown_triple(0.5, 0.4, 0.6) == (" 0.5000", " 0.4000", " 0.6000")
    assert _shown_triple(2.9e-7, 2.6e-7, 3.3e-7) == (" 2.9e-07", " 2.6e-07", " 3.3e-07")


def test_one_sided_bound_is_rounded_up() -> None:
    iv = Interval(-math.inf, 0.123449, 0.95, "fieller, one-sided")
    assert iv.one_sided
    d = DerivedRelease(None, MappingProxyType({"r2": 0.1}), MappingProxyType({"r2": iv}), "")  # type: ignore[arg-type]
    (row,) = d.rows()
    assert "<= 0.1235" in row, row


def test_printed_intervals_cover_as_the_computed_ones() -> None:
    total, sigma, releases = 1e7, 200.0, 4000
    m = np.array([[0.45, 0.05], [0.03, 0.47]]) * total
    truth = flam.classification_metrics(m, labels="all")
    rng = np.random.default_rng(1)
    noisy = m.reshape(1, -1) + rng.normal(0.0, sigma, (releases, 4))
    batch = classification_batch(noisy, sigma, distribution="gaussian", max_total=total)
    for k in ("f1_macro", "mcc", "precision_macro", "balanced_accuracy"):
        lo, hi, t = batch.low[k], batch.high[k], truth[k]
        computed = (lo <= t) & (t <= hi)
        pairs = zip(lo.tolist(), hi.tolist(), strict=True)
        ends = [_printed((a + b) / 2, a, b) for a, b in pairs]
        p_lo, p_hi = np.array(ends).T
        printed = (p_lo <= t) & (t <= p_hi)
        assert computed.mean() >= 0.93, (k, computed.mean())
        assert (printed | ~computed).all(), k  # printed ⊇ computed, release by release
        assert printed.mean() >= computed.mean(), (k, printed.mean(), computed.mean())


def test_reporter_mean_line_holds_its_interval() -> None:
    from dpledger.flower.means import ReporterMean

    iv = Interval(0.499951, 0.500139, 0.95, "fieller")
    line = ReporterMean(0.50004, iv, 1e6).describe()
    low, high = line.split("[")[1].split("]")[0].split(", ")
    assert float(low) <= iv.low  # was 0.5: above the interval's low end
    assert float(high) >= iv.high  # was 0.5001: below its high end
