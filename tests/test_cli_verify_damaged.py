"""``ledger verify`` on a truncated or damaged ledger fails verification: exit 1.

It used to exit 2 ("bad input"), as if the command line were wrong; a CI gate reading
exit codes could not tell a broken ledger from a typo. A missing path stays exit 2.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main


@pytest.fixture
def db(tmp_path: Path) -> Path:
    (tmp_path / "agg.json").write_text("1234.5")
    ledger = tmp_path / "l.db"
    for epoch in range(3):
        argv = ["release", "--policy", str(SPATIAL), "--ledger", str(ledger),
                "--epoch", str(epoch), "--metric", "clipped_mean_loss", "--region", "eu-west",
                "--cohort", "2400", "--aggregate", str(tmp_path / "agg.json")]  # fmt: skip
        assert main(argv) == 0
    return ledger


def verify(ledger: Path, *extra: str) -> int:
    return main(["ledger", "verify", "--policy", str(SPATIAL), "--ledger", str(ledger), *extra])


@pytest.mark.parametrize("keep", [0, 100, 4096, 0.5])
def test_a_truncated_ledger_fails_verification_with_exit_1(
    db: Path, tmp_path: Path, keep: float, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    cut = tmp_path / "cut.db"
    data = db.read_bytes()
    cut.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    assert verify(cut) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out
    assert verify(cut, "--json") == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


@pytest.mark.parametrize("table", ["dpl_entries", "dpl_policies", "dpl_meta"])
def test_a_ledger_with_a_damaged_table_fails_verification_with_exit_1(
    db: Path, tmp_path: Path, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.db"
    shutil.copy(db, bad)
    with sqlite3.connect(bad) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
        (page,) = root.fetchone()
    conn.close()
    data = bytearray(bad.read_bytes())
    data[(page - 1) * page_size] = 0xFF  # not a b-tree page type: "malformed"
    bad.write_bytes(bytes(data))
    capsys.readouterr()
    assert verify(bad) == 1
    assert "damaged" in capsys.readouterr().out


def test_a_missing_ledger_is_still_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify(tmp_path / "nope.db") == 2
    assert "no ledger at" in capsys.readouterr().err


def test_a_damaged_index_the_chain_never_reads_fails_verification(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every index of the ledger's tables, each damaged in turn: SQLite's quick_check
    (run by verify) finds what reading the chain, policies and spend never touches."""
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        rows = conn.execute(
            "SELECT name, rootpage FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name LIKE 'dpl_%'"
        ).fetchall()
    conn.close()
    assert rows, "the ledger has indexes"
    for name, page in rows:
        bad = tmp_path / f"bad-{name}.db"
        shutil.copy(db, bad)
        data = bytearray(bad.read_bytes())
        data[(page - 1) * page_size] = 0xFF  # not a b-tree page type
        bad.write_bytes(bytes(data))
        capsys.readouterr()
        assert verify(bad) == 1, name
        assert "FAILED" in capsys.readouterr().out, name


def _edited(db: Path, tmp_path: Path, *statements: str) -> Path:
    """A copy of ``db`` edited with sqlite3 after dropping the append-only triggers."""
    bad = tmp_path / "edited.db"
    shutil.copy(db, bad)
    conn = sqlite3.connect(bad)
    with conn:
        conn.execute("DROP TRIGGER IF EXISTS dpl_entries_no_update")
        conn.execute("DROP TRIGGER IF EXISTS dpl_entries_no_delete")
        for s in statements:
            conn.execute(s)
    conn.close()
    return bad


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE dpl_entries SET output = '{' WHERE seq = 1",
        "UPDATE dpl_entries SET epoch = 'x' WHERE seq = 1",
        f"UPDATE dpl_entries SET charge = '{'9' * 5000}' WHERE seq = 1",
    ],
)
def test_an_unreadable_entry_is_named_with_what_to_do_not_a_python_exception(
    db: Path, tmp_path: Path, edit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Audit s29, F13: ``show`` said "entry 1 cannot be read: JSONDecodeError: …"."""
    bad = _edited(db, tmp_path, edit)
    capsys.readouterr()
    assert verify(bad) == 1
    assert main(["ledger", "show", "--policy", str(SPATIAL), "--ledger", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "entry 1 is damaged" in err
    assert "restore it from a backup" in err
    assert "Error" not in err  # no Python exception name (JSONDecodeError, TypeError, …)
    assert len(err) < 600


@pytest.mark.parametrize("value", ["x'00ff'", "'x'", "'0'", "NULL"])
def test_a_damaged_schema_version_fails_verification_not_asks_for_an_upgrade(
    db: Path, tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Audit s29, F13: a schema version of bytes was "upgrade dpledger" (exit 2)."""
    if value == "NULL":
        bad = _edited(db, tmp_path, "DELETE FROM dpl_meta WHERE key = 'schema_version'")
    else:
        bad = _edited(
            db, tmp_path, f"UPDATE dpl_meta SET value = {value} WHERE key = 'schema_version'"
        )
    capsys.readouterr()
    assert verify(bad) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out
    assert "is not a version number" in out
    assert "upgrade" not in out


def test_a_newer_schema_version_still_asks_for_an_upgrade(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _edited(db, tmp_path, "UPDATE dpl_meta SET value = '999' WHERE key = 'schema_version'")
    capsys.readouterr()
    assert verify(bad) == 2
    assert "upgrade dpledger" in capsys.readouterr().err


def test_a_dropped_table_is_damage_with_what_to_do(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Audit s29, F13: "no such table: dpl_spend" named no remedy and verify said nothing."""
    bad = _edited(db, tmp_path, "DROP TABLE dpl_spend")
    capsys.readouterr()
    assert verify(bad) == 1
    assert "damaged" in capsys.readouterr().out
    assert main(["ledger", "show", "--policy", str(SPATIAL), "--ledger", str(bad)]) == 2
    assert "restore it from a backup" in capsys.readouterr().err
