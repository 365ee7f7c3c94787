"""A refused release on a ledger with a ``-wal`` a crashed writer left (review 41).

The README said a refused release leaves the SQLite database and its ``-wal`` "byte for
byte" unchanged. Opened for writing, SQLite recovers a crashed writer's log, and the
refused writer, the last to close, checkpoints it into the file and removes it: the
entries are the same, the bytes are not. The README now says so; this pins both halves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from factories import SPATIAL, spatial

from dpledger import Ledger
from dpledger.approval import ReleaseRequest
from dpledger.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def _request(epoch: int) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="clipped_mean_loss", region="na", cohort=2400)


def test_a_refusal_recovers_a_crashed_log_keeping_every_entry(tmp_path: Path) -> None:
    live, crashed = tmp_path / "L.db", tmp_path / "C.db"
    with Ledger.open(str(live), spatial(), mode="create") as ledger:
        ledger.release(_request(0), 1200.0)
        ledger.release(_request(1), 1200.0)  # held open: its log is not checkpointed
        shutil.copyfile(live, crashed)  # a copy as a crash (or a backup) leaves it
        shutil.copyfile(f"{live}-wal", f"{crashed}-wal")
    with Ledger.open(str(crashed), spatial(), mode="read") as ledger:
        before = [e.as_dict() for e in ledger.entries()]
    agg = tmp_path / "a.json"
    agg.write_text("1200.0")
    at = ["--policy", str(SPATIAL), "--ledger", str(crashed)]
    argv = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss", "--region", "na"]
    assert main([*argv, "--cohort", "2400", "--aggregate", str(agg)]) == 1  # refused
    with Ledger.open(str(crashed), spatial(), mode="read") as ledger:
        assert [e.as_dict() for e in ledger.entries()] == before
        assert ledger.verify().ok
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "a `-wal` a crashed writer left" in readme
