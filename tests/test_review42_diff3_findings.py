"""Review 42 diff 3: the demo's findings printed their 95% intervals rounded to nearest.

ca907a3 rounded the published-values table's interval ends outward ("+0.423 [+0.423,
+0.423]" at 2,000,000 clients), but the findings lines of the same report, each citing
"95% interval lo–hi" as the evidence for its rule, still used ``.2f``/``.1%`` to nearest:
at 200,000 clients the report printed ``top-bucket gap +0.423 [+0.422, +0.425]`` in the
table and ``predicted − observed = 0.42 (95% interval 0.42–0.42 ...)`` below it, and at
the default 20,000 clients ``[9.84%, 10.91%]`` beside ``95% interval 9.8%–10.9%``: the
finding's interval missed the computed one. The ratio's bar, ``± 0.02`` for 0.0227, was
rounded down. Now the ends round outward, to the table's precision (.3f, .2f%: a low end
floored to .2f could print a band of 0.01 under the rule's printed threshold), and the
ratio prints as the table does.
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal

import numpy as np
import pytest

from dpledger.sim.demo import DemoResult, _findings, run_demo


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return run_demo(ledger_path=tmp_path_factory.mktemp("f") / "demo.db", progress=None)


def _ends(message: str) -> tuple[Decimal, Decimal, int]:
    m = re.search(r"95% interval ([-0-9.]+)(%?)–([-0-9.]+)%?", message)
    assert m is not None, message
    return Decimal(m.group(1)), Decimal(m.group(3)), 100 if m.group(2) else 1


def test_findings_intervals_hold_the_computed_ones(result: DemoResult) -> None:
    derived = dict(result.derived)
    gap = {"top_usable": 1.0, "top_gap": 0.4234, "top_low": 0.42268, "top_high": 0.42429}
    tail = {"tail_usable": 1.0, "tail_share": 0.1002, "tail_low": 0.09963, "tail_high": 0.10069}
    derived[("na", "calibration_gap")] = gap  # at 200,000 clients: "0.42–0.42"
    derived[("eu-east", "error_histogram")] = tail  # as "9.8%–10.9%" for [9.84%, 10.91%]
    derived.pop(("eu-west", "error_histogram"), None)  # eu-west: the drift finding
    releases = []
    for r in result.releases:
        if (r.request.region, r.request.metric) == ("eu-west", "along_across_ratio"):
            value = 5.0 + 0.006 + r.error_bar  # low end 5.006: .2f to nearest says 5.01
            r = dataclasses.replace(r, noisy_sum=np.array([value * r.request.cohort]))
        releases.append(r)
    fixed = dataclasses.replace(result, derived=derived, releases=tuple(releases), findings=())
    by = {(r.request.region, r.request.metric): r for r in fixed.releases}
    found = {(f.region, f.kind): f.message for f in _findings(fixed)}
    cases = [
        (("na", "overconfident"), (0.42268, 0.42429)),
        (("eu-east", "crs_mismatch"), (0.09963, 0.10069)),
        (("eu-west", "lateral_drift"), by[("eu-west", "along_across_ratio")].interval),
    ]
    for key, (lo, hi) in cases:
        low, high, scale = _ends(found[key])
        assert low <= Decimal(float(lo)) * scale, found[key]
        assert high >= Decimal(float(hi)) * scale, found[key]
    crs = found[("eu-east", "crs_mismatch")]
    ratio = by[("eu-east", "along_across_ratio")]
    bar = re.search(r"ratio at \S+ ± ([0-9.e+-]+)", crs)
    assert bar is not None, crs
    assert Decimal(bar.group(1)) >= Decimal(ratio.error_bar), crs  # was ± 0.02 for 0.0227
