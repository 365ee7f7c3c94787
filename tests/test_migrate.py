"""Upgrading a ledger written by dpledger 0.1 (schema 1): nothing lost, every hash kept.

``tests/data/ledger-v1.db`` is a real schema-1 ledger made by dpledger 0.1 (see
``tests/data/make_ledger_v1.py``). The same rows are loaded into PostgreSQL under the
schema-1 DDL for the PostgreSQL half.
"""

from __future__ import annotations

import shutil
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL

from dpledger import Ledger, LedgerCorrupted, Policy, ReleaseRequest
from dpledger.cli.main import main
from dpledger.ledger.migrate import migrate
from dpledger.ledger.pgsql import APPEND_ONLY as _APPEND_ONLY
from dpledger.types import Budget

FIXTURE = Path(__file__).parent / "data" / "ledger-v1.db"
V1_HEAD = (7, "8ad2c29150a262d47f7e74bda61dd8fac6ba6516234ae27a8a97d4aa58b474c8")
# what dpledger 0.1 charged: a client's loss per (epoch, region), global releases included
V1_SPENT = {(0, "eu-west"): Fraction(3, 5), (0, "na"): Fraction(2, 5), (0, "apac"): Fraction(1, 5),
            (1, "eu-east"): Fraction(1, 5), (1, "apac"): Fraction(1, 5),
            (2, "eu-west"): Fraction(1, 4)}  # fmt: skip


def second_policy() -> Policy:
    """spatial-eval 1.1.0 as dpledger 0.1 recorded it (epoch 2 was released under it)."""
    text = SPATIAL.read_text().replace('version = "1.0.0"', 'version = "1.1.0"')
    return Policy.from_toml(text.replace('epoch_epsilon = "4.0"', 'epoch_epsilon = "5.0"'))


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    return path


def test_a_schema_1_ledger_is_refused_with_the_command_that_upgrades_it(v1: Path) -> None:
    before = v1.read_bytes()
    with pytest.raises(LedgerCorrupted, match="dpledger ledger migrate"):
        Ledger.open(v1, second_policy(), mode="read")
    assert v1.read_bytes() == before


def test_migration_keeps_every_entry_hash_and_spend(v1: Path) -> None:
    done = migrate(v1)
    assert (done.from_version, done.to_version, done.entries, done.head) == ("1", "4", 7, V1_HEAD)
    with Ledger.open(v1, second_policy(), mode="read") as ledger:
        report = ledger.verify(expected_head=V1_HEAD)  # an anchor recorded before still holds
        assert report.ok, report.problems
        assert ledger.head() == V1_HEAD
        for (epoch, region), spent in V1_SPENT.items():
            assert ledger.spent(epoch, region) == Budget(spent, "epsilon")
        assert [e.draft.release_id for e in ledger.entries()] == [None] * 7


def test_a_migrated_ledger_takes_new_releases_and_verifies_across_both_rules(v1: Path) -> None:
    migrate(v1)
    with Ledger.open(v1, second_policy(), mode="write") as ledger:
        req = ReleaseRequest(epoch=2, metric="coverage", region="na", cohort=3000,
                             edges_version="coverage-cells/v1", release_id="r-1")  # fmt: skip
        agg = np.array([600.0, 900, 300, 450, 300, 150])
        first = ledger.release(req, agg)
        assert ledger.release(req, agg).entry_id == first.entry_id == 8  # a retry, no charge
        assert ledger.spent(2, "na") == Budget(Fraction(1, 4), "epsilon")
        assert ledger.verify(expected_head=V1_HEAD).ok


def test_migrating_twice_changes_nothing(v1: Path) -> None:
    migrate(v1)
    again = migrate(v1)
    assert not again.changed
    assert again.head == V1_HEAD


def test_a_tampered_schema_1_ledger_is_refused_and_left_as_it_was(v1: Path) -> None:
    with sqlite3.connect(v1) as conn:
        conn.execute("DROP TRIGGER dpl_entries_no_update")
        conn.execute("UPDATE dpl_entries SET output = '[1.0]' WHERE seq = 3")
    before = v1.read_bytes()
    with pytest.raises(LedgerCorrupted, match="entry 3: content does not match"):
        migrate(v1)
    assert v1.read_bytes() == before


def test_a_schema_1_spend_table_that_disagrees_is_refused(v1: Path) -> None:
    with sqlite3.connect(v1) as conn:
        conn.execute("UPDATE dpl_spend SET total = '1/10' WHERE epoch = 0 AND scope = 'na'")
    with pytest.raises(LedgerCorrupted, match="spend table does not equal"):
        migrate(v1)


def test_after_migration_old_entries_are_still_tamper_evident(v1: Path) -> None:
    migrate(v1)
    with sqlite3.connect(v1) as conn:
        conn.execute("DROP TRIGGER dpl_entries_no_update")
        conn.execute("UPDATE dpl_entries SET release_id = 'planted' WHERE seq = 2")
        conn.execute("UPDATE dpl_entries SET charge = '1/100' WHERE seq = 4")
    with Ledger.open(v1, second_policy(), mode="read") as ledger:
        problems = ledger.verify().problems
    assert any("entry 2: a schema-1 entry carries a release id" in p for p in problems)
    assert any(p.startswith("entry 4: content does not match its hash") for p in problems)


def test_raising_the_schema_1_boundary_is_caught(v1: Path) -> None:
    migrate(v1)
    with Ledger.open(v1, second_policy(), mode="write") as ledger:
        ledger.release(ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="na",
                                      cohort=3000), 3000.0)  # fmt: skip
    with sqlite3.connect(v1) as conn:  # claim the new entry 8 was written under schema 1
        conn.execute("UPDATE dpl_meta SET value = '8' WHERE key = 'chain_v1_through'")
    with Ledger.open(v1, second_policy(), mode="read") as ledger:
        assert any(
            p.startswith("entry 8: content does not match") for p in ledger.verify().problems
        )


def test_cli_migrates_and_says_what_it_kept(
    v1: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["ledger", "verify", "--ledger", str(v1), "--policy", str(SPATIAL)]) == 2
    assert "dpledger ledger migrate" in capsys.readouterr().err
    assert main(["ledger", "migrate", "--ledger", str(v1)]) == 0
    out = capsys.readouterr().out
    assert "from schema 1 to 4: 7 entries kept" in out
    assert f"{V1_HEAD[0]}:{V1_HEAD[1]} unchanged" in out
    assert main(["ledger", "migrate", "--ledger", str(v1)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    broken = tmp_path / "broken.db"
    shutil.copyfile(FIXTURE, broken)
    with sqlite3.connect(broken) as conn:
        conn.execute("UPDATE dpl_meta SET value = '6' WHERE key = 'head_seq'")
    assert main(["ledger", "migrate", "--ledger", str(broken)]) == 1
    assert "migration refused" in capsys.readouterr().err
    assert main(["ledger", "migrate", "--ledger", str(tmp_path / "missing.db")]) == 2


@pytest.mark.postgres
def test_postgres_schema_1_ledger_migrates_in_place(pg_url: str) -> None:
    import psycopg

    source = sqlite3.connect(FIXTURE)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for (ddl,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL"
        ):
            conn.execute(ddl)
        conn.execute(_APPEND_ONLY)  # schema 1 had the same append-only trigger
        for table in ("dpl_meta", "dpl_entries", "dpl_spend", "dpl_policies"):
            rows = source.execute(f"SELECT * FROM {table}").fetchall()
            marks = ", ".join(["%s"] * len(rows[0]))
            for row in rows:
                conn.execute(f"INSERT INTO {table} VALUES ({marks})", row)
    done = migrate(pg_url)
    assert (done.from_version, done.entries, done.head) == ("1", 7, V1_HEAD)
    with Ledger.open(pg_url, second_policy(), mode="write") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok
        for (epoch, region), spent in V1_SPENT.items():
            assert ledger.spent(epoch, region) == Budget(spent, "epsilon")
        ledger.release(ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="na",
                                      cohort=3000, release_id="pg-1"), 3000.0)  # fmt: skip
        assert ledger.verify(expected_head=V1_HEAD).ok


@pytest.mark.parametrize("content", [b"", b"not a database at all"])
def test_cli_migrate_gives_exit_2_for_a_file_that_is_no_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "zero.db"
    path.write_bytes(content)
    for cmd in (["ledger", "migrate"], ["ledger", "show", "--policy", str(SPATIAL)]):
        assert main([*cmd, "--ledger", str(path)]) == 2, cmd
        err = capsys.readouterr().err
        assert "migration refused" not in err
        assert "not a dpledger ledger" in err or "not an SQLite database" in err
    assert path.read_bytes() == content
