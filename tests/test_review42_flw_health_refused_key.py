"""Review 42 (flw): the key a refused health release publishes is documented.

docs/flower.md lists what Flower records ("is only public: ..."), and the published
record's own docstring (``dpledger.flower.report``) its keys. A health release the ledger
refuses (here: the health metric's cohort floor) publishes ``REGION/health/refused`` 1 —
a key neither named. This test runs a round whose health release is refused and checks
that the key is published and named in both.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from test_flower import HEALTH, POLICY, run

import dpledger.flower.report
from dpledger import Ledger, Policy, Verdict
from dpledger.sim.fleet import Fleet, make_fleet

DOCS = Path(__file__).resolve().parent.parent / "docs" / "flower.md"


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=40, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def test_a_refused_health_release_publishes_a_documented_key(fleet: Fleet, tmp_path: Path) -> None:
    floor = HEALTH.format(eps="1") + "target = 0.001\n"  # no 20-node cohort meets it
    text = POLICY.format(neighbouring="add_remove", eps="1", epoch="100", extra=floor)
    with Ledger.open(
        tmp_path / "l.db", Policy.from_toml(text, source="t"), mode="create"
    ) as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, health_metric="health")
    assert isinstance(strategy.rounds[1].health_releases["north"], Verdict)
    record = result.evaluate_metrics_clientapp[1]
    assert record["north/health/refused"] == 1
    assert "north/health/reported" not in record
    docs = re.sub(r"\s+", " ", DOCS.read_text(encoding="utf-8"))
    module = re.sub(r"\s+", " ", dpledger.flower.report.__doc__ or "")
    assert "`REGION/health/refused`" in docs
    assert "``REGION/health/refused``" in module
