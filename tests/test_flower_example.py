"""The example Flower app: a valid Flower project, and its one-process demo runs.

``make flower-demo`` runs 2,000 nodes; here 300 nodes and two rounds (a few seconds):
every region is refused by the policy's cohort floors at that size, which the printed
report must say, next to each round's health counters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed: pip install dpledger[flower]"
)

APP = Path(__file__).resolve().parent.parent / "examples" / "flower-eval"


def test_the_example_is_a_valid_flower_app() -> None:
    from flwr.common.config import validate_config

    config = tomllib.loads((APP / "pyproject.toml").read_text(encoding="utf-8"))
    ok, errors, _ = validate_config(config, check_module=True, project_dir=APP)
    assert ok, errors
    assert config["tool"]["flwr"]["app"]["components"] == {
        "serverapp": "flower_eval.server_app:app",
        "clientapp": "flower_eval.client_app:app",
    }


@pytest.mark.slow
def test_the_demo_prints_each_rounds_releases_refusals_and_health() -> None:
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "flower_eval.demo", "--nodes", "300", "--rounds", "2"],
        cwd=APP, capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "round 1 (epoch 0, replace)" in out
    assert "round 2 (epoch 0, replace)" in out
    assert "REFUSED: cohort_floor" in out  # 300 nodes: every region is below its floor
    assert out.count("west: selected") == 2
    assert "released accuracy per round" in out
