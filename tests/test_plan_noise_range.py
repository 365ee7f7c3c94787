"""A plan never calls publishable a metric that the ``noise_range`` check refuses.

A metric whose noise scale could overflow a double (here ε ≈ 2.2e-308 on a [0, 1] clip:
scale 4.5e307) is refused by every release (:class:`dpledger.NoiseOutOfRange`); the plan
says so on its row (not publishable, the reason, no releases, no budget used), in its
JSON and in ``dpledger plan``'s table, by the same rule the approval check applies.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from _stores import CONTRACT_POLICY
from test_cli_planning import run
from test_noise_range import POLICY, TINY  # a metric whose noise could overflow a double

from dpledger.accounting import EpochSpend
from dpledger.approval import ReleaseRequest, evaluate
from dpledger.planning.forward import plan


def test_a_metric_whose_noise_could_overflow_is_not_publishable_and_says_why() -> None:
    p = plan(POLICY, {"a": 100, "b": 10})
    for region in ("a", "b"):
        rows = {m.metric: m for m in p.region(region).metrics}
        tiny = rows["tiny"]
        assert not tiny.publishable
        assert tiny.releases == 0
        assert "could overflow a double (noise_range)" in tiny.reason
        assert "raise its ε or narrow its clip or cap" in tiny.reason
        # what the approval check decides for the same release
        req = ReleaseRequest(epoch=0, metric="tiny", region=region, cohort=tiny.cohort)
        found = evaluate(POLICY, req, np.asarray(0.0), EpochSpend.empty())
        assert found.prepared is None
        assert [c.name for c in found.verdict.failures] == ["noise_range"]
    a = p.region("a")
    assert a.metrics[0].publishable  # loss: the other metrics are planned as before
    # the refused metric uses none of the budget: loss, hist5 and hist20 at 0.1 each
    assert float(a.planned.amount) == pytest.approx(0.3)
    row = next(r for r in json.loads(p.model_dump_json())["regions"][0]["metrics"]
               if r["metric"] == "tiny")  # fmt: skip
    assert row["publishable"] is False
    assert "noise_range" in row["reason"]


def test_dpledger_plan_prints_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(CONTRACT_POLICY + TINY, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, out, _ = run(capsys, "plan", str(path), "--cohort", "a=100")
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if ln.startswith("a ") and " tiny " in ln]
    assert "0/1  no: noise scale 4.494e+307 could overflow a double (noise_range)" in line
