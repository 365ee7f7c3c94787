"""``ledger export --out X --force`` replaces only what may be replaced.

``--force`` guarded the exported ledger and its journal files only: it would overwrite
another ledger, a key store, or the command's own ``--policy`` file. Those are refused
now (exit 2), with or without ``--force``, and left byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

REQ = {"epoch": 0, "metric": "clipped_mean_loss", "region": "eu-west", "cohort": 2400}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    (tmp_path / "agg.json").write_text("1234.5")
    (tmp_path / "req.json").write_text(json.dumps(REQ))
    ledger = tmp_path / "l.db"
    req, agg = str(tmp_path / "req.json"), str(tmp_path / "agg.json")
    argv = ["release", "--policy", str(SPATIAL), "--ledger", str(ledger),
            "--request", req, "--aggregate", agg]  # fmt: skip
    assert main(argv) == 0
    return ledger


def export(db: Path, out: Path, policy: Path = SPATIAL) -> int:
    return main(["ledger", "export", "--policy", str(policy), "--ledger", str(db),
                 "--out", str(out), "--force"])  # fmt: skip


def test_export_refuses_to_replace_its_own_policy_file(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.toml"
    shutil.copy(SPATIAL, policy)
    before = policy.read_bytes()
    assert export(db, policy, policy) == 2
    assert "the --policy file" in capsys.readouterr().err
    link = tmp_path / "alias.toml"  # the same file by another name
    os.link(policy, link)
    assert export(db, link, policy) == 2
    assert policy.read_bytes() == before


def test_export_refuses_to_replace_another_ledger_or_a_key_store(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.db"
    shutil.copy(db, other)
    keys = tmp_path / "keys.db"
    assert main(["keys", "create", "--ledger", str(db), "--keys", str(keys),
                 "--name", "ci", "--action", "read"]) == 0  # fmt: skip
    capsys.readouterr()
    for victim in (other, keys):
        before = victim.read_bytes()
        assert export(db, victim) == 2
        assert "SQLite database" in capsys.readouterr().err
        assert victim.read_bytes() == before


def test_export_still_replaces_an_earlier_export_with_force(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "entries.jsonl"
    out.write_text("an earlier export\n")
    assert export(db, out) == 0
    assert json.loads(out.read_text().splitlines()[0])["entry_id"] == 1


def test_force_without_out_is_refused_before_anything_is_read(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--force`` alone did nothing and said nothing: a script meaning ``--out X
    --force`` with the ``--out`` lost would print the export to its log instead."""
    before = db.read_bytes()
    argv = ["ledger", "export", "--policy", str(SPATIAL), "--ledger", str(db), "--force"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "give --out FILE" in err
    assert out == ""
    assert db.read_bytes() == before
