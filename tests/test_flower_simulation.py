"""End to end on Flower's real simulation engine (Ray): the example app, two rounds.

``run_simulation`` runs the example's ServerApp and ClientApp with Flower's Ray backend:
nodes with random ids register, the wrapper asks each its partition through a real query
message, one node's ClientApp raises inside a Ray actor, and every round is released
through a real SQLite ledger. It runs in its own process group (Ray starts helper
processes), which is killed by its id if it overruns. Skipped — loudly, in the terminal
summary — only where Ray (``flwr[simulation]``) is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed: pip install dpledger[flower]"
)

HERE = Path(__file__).resolve().parent
NODES, ROUNDS = 48, 2
POLICY = """
name = "flower-sim-test"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4.0"
rounds_per_epoch = 2

[regions]
names = ["north", "south", "east", "west", "islands"]

[metrics.loss]
kind = "scalar_mean"
weight = "1"
clip = { low = "0", high = "5", source = "test" }

[metrics.confusion]
kind = "vector_sum"
weight = "3"
dimension = 16
cap_per_client = "40"
nonnegative = true
"""


def _ray_missing() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install 'flwr[simulation]')"
    return None


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.skipif(_ray_missing() is not None, reason=str(_ray_missing()))
def test_the_example_runs_on_flowers_simulation_engine(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    ledger = tmp_path / "ledger.db"
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_flower_simulation.py"), str(NODES), str(ROUNDS),
         str(ledger), str(policy)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # our own process group: the run and its Ray
        out, _ = proc.communicate()
        pytest.fail(f"the simulation overran 240 s:\n{out[-3000:]}")
    lines = [x for x in out.splitlines() if x.startswith("SIMULATION-SUMMARY ")]
    assert proc.returncode == 0, out[-3000:]
    assert lines, out[-3000:]
    summary = json.loads(lines[-1].removeprefix("SIMULATION-SUMMARY "))
    assert sorted(summary["rounds"]) == ["1", "2"]
    for r in summary["rounds"].values():
        assert r["unregistered"] == 0  # every node answered its region query
        assert sum(h["selected"] for h in r["health"].values()) == NODES
        failed = sum(h["failed"] for h in r["health"].values())
        assert failed == len(r["failed_reasons"]) >= 1  # the crashing node, inside Ray
        assert all("out of memory" in why for why in r["failed_reasons"])
        assert r["released"] == 2 * len(r["health"])  # loss and confusion in every region
        assert not r["refused"]
    keys = set(summary["record_keys"])
    assert {"north/loss", "north/loss/ci95", "north/health/failed"} <= keys
    assert keys & {"north/confusion/accuracy", "north/confusion/accuracy/unusable"}
