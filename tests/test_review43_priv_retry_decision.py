"""Review 43 (priv): whether a retry is answered or refused reads the private aggregate.

A release id's second request is a retry (the recorded value, nothing charged) when its
aggregate lies within ``retry_tolerance`` noise scales of the recorded noisy value, and
``ReleaseIdConflict`` (nothing charged) otherwise (README, "release_id"). For an honest
retry — the same fleet, the same aggregate — that outcome is ``1{|noise| ≤ reach}``: given
the PUBLISHED noisy value ``y`` it is ``1{|y − A| ≤ reach}``, a function of the private
aggregate ``A``, not post-processing of ``y``. Two neighbouring fleets (``add_remove``: one
client with contribution 1 more) that publish the same ``y`` — each through a noise draw
OpenDP makes with positive density — then meet different outcomes: the first's retry gets
its value, the second's is refused. Such a ``y`` has probability of order ``e^(−t)·(e^ε − 1)``
per coordinate (``t = ln(d / 1e-9)``, 20.7 scales for one: ~1.7e-9 at ε = 1), an uncharged
δ beside the pure ε the ledger records, for every release that is ever retried.

Deterministic: OpenDP's draw is replaced by the noisy value under test (the decision is
what is examined, not the sampler). Left xfail: a retry rule that reads no aggregate (the
same request fields and principal are the retry) drops the reuse-of-an-id detection the
README promises; a design decision.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from dpledger import mechanisms as mech
from dpledger.errors import ReleaseIdConflict
from dpledger.ledger.retries import retry_tolerance

POLICY = """
name = "retry-neighbours"
version = "1"
neighbouring = "add_remove"
epoch_epsilon = "8"
allocation = "pooled"

[regions]
names = ["north"]

[metrics.loss]
kind = "scalar_mean"
epsilon = "1"
clip = { low = "0", high = "1", source = "test" }
"""
A = 500.0  # the fleet's sum: 500 clients at 1 (add_remove: Δ = 1)
NEIGHBOUR = A + 1.0  # one client more


def _world(
    tmp_path: Path, aggregate: float, published: float, monkeypatch: pytest.MonkeyPatch
) -> str:
    policy = dl.Policy.from_toml(POLICY, source="p.toml")
    monkeypatch.setattr(mech, "invoke", lambda meas, values, vector: [published])
    request = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=600,
                                release_id="r1")  # fmt: skip
    path = tmp_path / f"ledger-{aggregate}.db"
    with dl.Ledger.open(str(path), policy, mode="create") as ledger:
        first = ledger.release(request, aggregate)
        assert float(first.noisy_sum[0]) == published  # the same public value in both worlds
        try:
            again = ledger.release(request, aggregate)  # the honest retry: the same fleet
        except ReleaseIdConflict:
            return "refused"
        assert again.retried
        return "retried"


@pytest.mark.xfail(
    strict=True,
    reason="design decision: a retry is recognised by the caller's aggregate against the "
    "recorded noisy value (README), an uncharged decision on the private sum (~1e-9 δ)",
)
def test_an_honest_retry_meets_the_same_outcome_in_neighbouring_fleets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = dl.Policy.from_toml(POLICY, source="p.toml")
    facts, _ = mech.mechanism_facts(policy, "loss")
    reach = retry_tolerance(facts) * facts.scale + facts.grid_slack
    published = A - (reach - 0.5)  # |y − A| = reach − 0.5; |y − NEIGHBOUR| = reach + 0.5
    assert abs(published - A) + float(np.spacing(published)) <= reach < abs(published - NEIGHBOUR)
    outcomes = {
        which: _world(tmp_path, aggregate, published, monkeypatch)
        for which, aggregate in (("fleet", A), ("neighbour", NEIGHBOUR))
    }
    assert outcomes["fleet"] == outcomes["neighbour"], outcomes
