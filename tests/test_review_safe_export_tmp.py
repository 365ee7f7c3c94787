"""``ledger export --out`` writes through a temporary named ``.OUT.<pid>.partial``.

It is opened with ``open("w")``: a file or symlink already there under that name (not
the command's own) is followed and truncated, then renamed over ``--out``. The command
must never replace or delete a file it did not create.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from factories import SPATIAL

from dpledger.cli.main import main

REQ = {"epoch": 0, "metric": "clipped_mean_loss", "region": "eu-west", "cohort": 2400}


def test_export_never_truncates_a_file_at_its_temporary_name(tmp_path: Path) -> None:
    (tmp_path / "agg.json").write_text("1234.5")
    (tmp_path / "req.json").write_text(json.dumps(REQ))
    ledger = tmp_path / "l.db"
    assert main(["release", "--policy", str(SPATIAL), "--ledger", str(ledger),
                 "--request", str(tmp_path / "req.json"),
                 "--aggregate", str(tmp_path / "agg.json")]) == 0  # fmt: skip
    precious = tmp_path / "precious.txt"
    precious.write_text("not dpledger's")
    out = tmp_path / "out.jsonl"
    os.symlink(precious, tmp_path / f".out.jsonl.{os.getpid()}.partial")
    main(["ledger", "export", "--policy", str(SPATIAL), "--ledger", str(ledger),
          "--out", str(out)])  # fmt: skip
    assert precious.read_text() == "not dpledger's"
