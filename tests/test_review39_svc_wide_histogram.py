"""Review 39 (service): a policy whose histogram has more bins than the API takes values.

The wire model caps an aggregate at ``MAX_AGGREGATE_VALUES`` (100,000) numbers, "the
largest dimension a policy admits"; but a histogram's size is ``len(edges) + 1`` and its
edges are not held to ``MAX_DIMENSION``, so a policy with a 100,001-bin histogram loaded,
the library and the CLI released it, and ``dpledger serve`` started on it and answered
every release of that metric with a 422 "List should have at most 100000 items": a metric
the service admitted at start and could never release. ``serve`` now refuses such a
policy at start (exit 2), naming the metric, as it refuses a body limit too small for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import BASE, policy_text

from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.service import Settings
from dpledger.service.models import MAX_AGGREGATE_VALUES

BINS = MAX_AGGREGATE_VALUES + 1


def _wide_policy_text() -> str:
    edges = ", ".join(str(float(i)) for i in range(1, BINS))  # BINS - 1 edges: BINS bins
    wide = BASE.replace("edges = [{edges20}]", "edges = [" + edges + "]")
    return wide.format(
        neighbouring="replace", epoch_epsilon="4", eval_fraction="0.25", scalar_eps="0.1",
        edges20="", version="1",
    )  # fmt: skip


def test_serve_refuses_a_metric_wider_than_an_aggregate_it_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _wide_policy_text()
    policy = Policy.from_toml(text, source="wide.toml")
    assert policy.metrics["hist20"].size == BINS  # the policy itself admits it
    with pytest.raises(InvalidInput, match="hist20"):
        Settings(ledger=str(tmp_path / "ledger.db"), policy=policy, max_body_bytes=1 << 30)

    path = tmp_path / "wide.toml"
    path.write_text(text)
    ledger = str(tmp_path / "ledger.db")
    with Ledger.open(ledger, policy, mode="create") as made:
        made.init()
    argv = ["serve", "--ledger", ledger, "--policy", str(path), "--port", "0"]
    assert main([*argv, "--max-body-bytes", str(1 << 30)]) == 2
    err = capsys.readouterr().err
    assert "hist20" in err
    assert "Traceback" not in err


def test_a_policy_within_the_limit_still_serves_settings(tmp_path: Path) -> None:
    policy = Policy.from_toml(policy_text(), source="p.toml")
    Settings(ledger=str(tmp_path / "ledger.db"), policy=policy)
