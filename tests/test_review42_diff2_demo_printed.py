"""Review 42 diff 2: the demo's published-values table printed values and intervals as the
derived table and Flower's report did before review 42 fixed them (dpledger/_printed.py).

``dpledger demo`` (``make demo``, 20,000 clients, ~6,600 per region) printed each coverage
share to 2 decimals beside a ``.3f`` bar: ``[0.03, 0.04, 0.11, 0.23, 0.47, 0.13] ± 0.005``
for a bar of 0.0045. The value's rounding (up to 0.005) was as large as the bar, and the
printed intervals covered the truth in 0.52–0.58 of releases for some shares where the
computed ones covered 0.95. The calibration gap's and the > 25 m share's interval ends were
rounded to nearest (at 2,000,000 clients: ``+0.423 [+0.423, +0.423]``), and a scalar's bar
to nearest ``.4f``. Now: values to a unit of at most a hundredth of the bar, bars rounded
up, interval ends outward. The JSON report is unchanged (it never used this text).

Noise is numpy's Laplace at the release's calibrated scale (the text is post-processing);
at 2,000 releases a printed coverage below 0.9 with a true ~0.95 has probability < 1e-10.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
from factories import ROOT

import dpledger as dl
from dpledger.sim.report import _value_cell

N = 6617  # the default demo's cohort per region
TRUTH = np.array([0.0312, 0.0347, 0.1068, 0.2251, 0.4737, 0.1285])


def _policy() -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = (ROOT / "policies" / "spatial-eval.toml").read_text()
        return dl.Policy.from_toml(text, source="spatial-eval.toml")


def _release(metric: str, aggregate: object, **extra: object) -> dl.Release:
    with dl.Ledger.open(":memory:", _policy(), mode="create") as ledger:
        req = dl.ReleaseRequest(epoch=0, metric=metric, region="eu-west", cohort=N, **extra)
        return ledger.release(req, aggregate)  # type: ignore[arg-type]


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?[0-9]+\.?[0-9]*(?:e[-+][0-9]+)?", text)]


def test_coverage_shares_printed_cover_as_the_computed() -> None:
    rel = _release("coverage", TRUTH * N, edges_version="coverage-cells/v1")
    rng = np.random.default_rng(11)
    count = 2000
    printed = np.zeros(TRUTH.size)
    computed = np.zeros(TRUTH.size)
    for _ in range(count):
        r = dataclasses.replace(rel, noisy_sum=TRUTH * N + rng.laplace(0.0, rel.scale, TRUTH.size))
        values_text, bar_text = _value_cell(r, {}).split("±")
        values, bar = np.array(_numbers(values_text)), float(bar_text)
        exact_bar = r.error_bar / N
        assert bar >= exact_bar  # the bar rounded up
        assert (np.abs(values - r.per_client) <= exact_bar / 100).all()
        printed += np.abs(values - TRUTH) <= bar
        computed += np.abs(r.per_client - TRUTH) <= exact_bar
    assert (computed / count >= 0.92).all()
    assert (printed / count >= 0.9).all(), printed / count  # was 0.52-0.58 for 3 shares


def test_scalar_bar_rounded_up() -> None:
    rel = _release("clipped_mean_loss", 0.5685 * N)
    value, bar = _numbers(_value_cell(rel, {}))
    assert bar >= rel.error_bar
    assert abs(value - float(rel.value)) <= rel.error_bar / 100


def test_interval_ends_outward() -> None:
    rel = _release("calibration_gap", np.zeros(10))
    gap = {"top_usable": True, "top_gap": 0.4234, "top_low": 0.42301, "top_high": 0.42349}
    low, high = _numbers(_value_cell(rel, gap).split("[")[1])
    assert (low, high) == (0.423, 0.424)  # was [+0.423, +0.423]
    hist = _release("error_histogram", np.zeros(7), edges_version="abs-error-m/v1")
    tail = {"tail_usable": True, "tail_share": 0.1002, "tail_low": 0.100149, "tail_high": 0.10021}
    low, high = _numbers(_value_cell(hist, tail).split("[")[1])
    assert (low, high) == (10.01, 10.03)  # to nearest: [10.01%, 10.02%]
