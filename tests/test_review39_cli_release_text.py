"""Review 39 (CLI): ``dpledger release`` (text mode) printed a released vector with
numpy's default summary, so a vector of more than 1,000 values showed six of them and
"...": the ε was spent and the rest of the value was not shown (only ``--json`` or
``ledger export`` had it). Every value is printed now. The scale line also says what
it is the scale of (a scalar mean's noise is on the sum, not on the printed mean).
"""

from __future__ import annotations

import json

import numpy as np
from _stores import SMALL_HEAD

from dpledger.cli.main import main

POLICY = (
    SMALL_HEAD.format(name="big")
    + """[metrics.v]
kind = "vector_sum"
weight = "1"
dimension = 1500
cap_per_client = "1"
"""
)


def test_a_long_released_vector_is_printed_whole(tmp_path, capsys):
    policy = tmp_path / "big.toml"
    policy.write_text(POLICY)
    request = tmp_path / "req.json"
    request.write_text(json.dumps({"epoch": 0, "metric": "v", "region": "a", "cohort": 100}))
    aggregate = tmp_path / "sum.npy"
    np.save(aggregate, np.zeros(1500))
    argv = ["release", "--policy", str(policy), "--ledger", str(tmp_path / "l.db")]
    assert main([*argv, "--request", str(request), "--aggregate", str(aggregate)]) == 0
    out = capsys.readouterr().out
    assert "..." not in out
    body = out.split("value", 1)[1].split("]", 1)[0].replace("[", " ")
    assert len(body.split()) == 1500
    assert "laplace noise per coordinate" in out
