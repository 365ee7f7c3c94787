"""Review 41 diff: the one-double clip check broke reading a recorded policy.

2513180 refuses a clip whose bounds are one double (``float(low) == float(high)``) unless
the policy is read back from a ledger (:data:`RECORDED`), but it took both ``float``\\ s
before asking: a recorded policy's bounds are read as they were accepted, unbounded, and
``float`` of one past the doubles raises ``OverflowError``, which no reader of recorded
policies catches. ``dpledger ledger verify`` of a ledger whose recorded policy body was
edited to such a bound (``"1e400"``) ended as an internal error (exit 3, "a dpledger bug")
instead of a failed verification naming the edited policy (exit 1, as before the diff).
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main

MAPPING = {
    "name": "p",
    "version": "1",
    "neighbouring": "replace",
    "epoch_epsilon": "1",
    "regions": {"names": ["a"]},
    "metrics": {
        "m": {
            "kind": "scalar_mean",
            "epsilon": "0.1",
            "clip": {"low": "0", "high": "1e400", "source": "t"},
        }
    },
}


def test_a_recorded_clip_past_the_doubles_reads_as_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = dl.Policy.from_mapping(MAPPING, recorded=True)
    assert p.metric("m").clip is not None
    with pytest.raises(dl.PolicyError, match="at most 1e12"):  # a new one is still refused
        dl.Policy.from_mapping(MAPPING)


def test_verify_reports_an_edited_clip_past_the_doubles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agg.json").write_text("1000.0")
    args = ["--policy", str(SPATIAL), "--ledger", "l.db"]
    assert main(["release", *args, "--epoch", "0", "--metric", "clipped_mean_loss",
                 "--region", "na", "--cohort", "3000", "--aggregate", "agg.json"]) == 0  # fmt: skip
    con = sqlite3.connect(tmp_path / "l.db")
    try:
        with con:
            ((body,),) = con.execute("SELECT body FROM dpl_policies").fetchall()
            data = json.loads(body)
            data["metrics"]["clipped_mean_loss"]["clip"]["high"] = "1e400"
            con.execute("UPDATE dpl_policies SET body = ?", (json.dumps(data),))
    finally:
        con.close()
    capsys.readouterr()
    assert main(["ledger", "verify", *args]) == 1
    out = capsys.readouterr()
    assert "FAILED" in out.out
    assert "the recorded policy was edited" in out.out
    assert "internal error" not in out.err
