"""Review (hfin), a guard: the release path's shared verdict (``evaluate`` with
``spend=None``: ``_passing``'s cached limits) and the slow path (``_evaluate``, every
aggregate check) decide every edge aggregate alike, with ``noise_room`` in force or not,
and a failing aggregate check's reason never varies with the aggregate's value."""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import pytest
from _stores import ONE_REGION_HEAD

from dpledger import Policy, ReleaseRequest
from dpledger.accounting import EpochSpend
from dpledger.approval import evaluate
from dpledger.approval.aggregate import noise_room

MAX = sys.float_info.max
HEAD = ONE_REGION_HEAD.replace("{name}", "edges")
METRICS = """
[metrics.pos]
kind = "scalar_mean"
epsilon = "{e}"
clip = {{ low = "0", high = "1", source = "t" }}
[metrics.neg]
kind = "scalar_mean"
epsilon = "{e}"
clip = {{ low = "-2", high = "0", source = "t" }}
[metrics.both]
kind = "scalar_mean"
epsilon = "{e}"
clip = {{ low = "-3", high = "1", source = "t" }}
[metrics.hist]
kind = "histogram"
edges = [1.0, 2.0]
edges_version = "e/v1"
cap_per_client = "1"
epsilon = "{e}"
[metrics.vec]
kind = "vector_sum"
dimension = 70
cap_per_client = "1"
epsilon = "{e}"
"""
CASES = [
    ("add_remove", "1e-300"),  # room ~1.8e308 - 7e302
    ("add_remove", "1e-303"),  # room ~1.8e308 - 7e305
    ("add_remove", "3.85253341596071375e-306"),  # hist: tail x scale rounds to the limit
    ("add_remove", "0.1"),  # room: the largest double
    ("replace", "0.1"),
]


def _edges(room: float) -> list[float]:
    up = math.nextafter(room, math.inf)
    return [0.0, -0.0, 5e-324, -5e-324, 1.0, -1.0, 100.0, 100.0000001, -300.0000001,
            room, -room, up, -up, math.nextafter(room, 0), room / 2, MAX, -MAX, 1e307,
            math.nan, math.inf, -math.inf]  # fmt: skip


def _aggregates(size: int | None, room: float) -> list[object]:
    if size is None:
        return [*_edges(room), *([x] for x in _edges(room)[:6]), np.float64(room), [1.0, 2.0]]
    out: list[object] = []
    for x in _edges(room):
        half = x / 2
        out += [[x] + [0.0] * (size - 1), [x / size] * size]
        out += [[half, half] + [0.0] * (size - 2), [x, 5e-324] + [0.0] * (size - 2)]
        if math.isfinite(x):  # L1 mass just past what the coordinates show
            out.append([math.nextafter(half, math.inf), half] + [0.0] * (size - 2))
    return [*out, [0.0] * (size + 1), np.zeros((1, size))]


@pytest.mark.parametrize(("nb", "eps"), CASES)
def test_the_shared_verdict_and_every_check_decide_alike(nb: str, eps: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny ε: unwise, not invalid
        policy = Policy.from_toml(HEAD.format(nb=nb) + METRICS.format(e=eps))
    reasons: dict[tuple[object, ...], set[str]] = {}
    for metric, spec in policy.metrics.items():
        size = None if spec.kind == "scalar_mean" else spec.size
        for n in (1, 100):
            room = noise_room(policy, metric, n)
            edges = "e/v1" if metric == "hist" else None
            req = ReleaseRequest(epoch=0, metric=metric, region="a", cohort=n, edges_version=edges)
            for agg in _aggregates(size, room):
                fast = evaluate(policy, req, agg, None)
                slow = evaluate(policy, req, agg, EpochSpend.empty())
                assert (fast.prepared is not None) == slow.verdict.approved, (metric, n, agg)
                assert fast.verdict.failures == slow.verdict.failures, (metric, n, agg)
                for c in slow.verdict.checks:
                    if c.name != "aggregate_shape":
                        reasons.setdefault((metric, n, c.name, c.passed), set()).add(c.reason)
    assert all(len(r) == 1 for r in reasons.values()), reasons
