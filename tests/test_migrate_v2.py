"""Schema 2 to 3: a schema-2 ledger keeps working as it is, and migrates keeping every hash.

``tests/data/ledger-v2.db`` is a real schema-2 ledger (see ``tests/data/make_ledger_v2.py``):
eight entries over three epochs, release ids, a principal, a round and a policy change.
Schema 3 drops the entries' unique ``hash`` index: the tests here show that what it
refused — a second entry with an existing hash — is still refused or reported.
"""

from __future__ import annotations

import shutil
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL
from test_migrate import second_policy

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.cli.main import main
from dpledger.ledger.migrate import migrate
from dpledger.ledger.pgsql import APPEND_ONLY as _APPEND_ONLY
from dpledger.types import Budget

FIXTURE = Path(__file__).parent / "data" / "ledger-v2.db"
V2_HEAD = (8, "ab1fb75a5d13355b2ad7f46afd40493d188e80c72841bd4fda28e91d56360f47")
V2_SPENT = {(0, "eu-west"): Fraction(3, 5), (0, "na"): Fraction(1, 5),
            (1, "apac"): Fraction(1, 5), (1, "eu-east"): Fraction(2, 5),
            (2, "eu-west"): Fraction(1, 4)}  # fmt: skip
RETRY = ReleaseRequest(epoch=1, metric="clipped_mean_loss", region="apac", cohort=3000,
                       release_id="e1/apac/loss")  # fmt: skip


@pytest.fixture
def v2(tmp_path: Path) -> Path:
    path = tmp_path / "v2.db"
    shutil.copyfile(FIXTURE, path)
    return path


def first_policy() -> Policy:
    return Policy.load(SPATIAL)


def schema_of(path: Path) -> tuple[str, list[str]]:
    """The ledger's schema version and the names of its entries table's indexes."""
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute(
            "SELECT value FROM dpl_meta WHERE key = 'schema_version'"
        ).fetchone()
        indexes = [row[1] for row in conn.execute("PRAGMA index_list(dpl_entries)")]
    return version, indexes


def indexed_columns(path: Path) -> set[tuple[str, ...]]:
    with sqlite3.connect(path) as conn:
        names = [row[1] for row in conn.execute("PRAGMA index_list(dpl_entries)")]
        return {tuple(r[2] for r in conn.execute(f"PRAGMA index_info('{name}')")) for name in names}


def test_a_schema_2_ledger_is_read_as_it_is_and_never_changed(v2: Path) -> None:
    before = v2.read_bytes()
    with Ledger.open(v2, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V2_HEAD).ok
        assert ledger.head() == V2_HEAD
        for (epoch, region), spent in V2_SPENT.items():
            assert ledger.spent(epoch, region) == Budget(spent, "epsilon")
        assert [e.draft.release_id for e in ledger.entries(epoch=1)][:3] == [
            "e1/na/loss", "e1/apac/loss", "e1/eu-east/loss"
        ]  # fmt: skip
    assert v2.read_bytes() == before
    assert not Path(f"{v2}-wal").exists()
    assert main(["ledger", "verify", "--ledger", str(v2), "--policy", str(SPATIAL)]) == 0
    assert v2.read_bytes() == before


def test_a_schema_2_ledger_takes_releases_and_retries_without_being_migrated(v2: Path) -> None:
    with Ledger.open(v2, first_policy(), mode="write") as ledger:
        recorded = ledger.entries(epoch=1)[1]
        again = ledger.release(RETRY, 3000.0)  # a retry of a recorded id: no new charge
        assert (again.entry_id, again.entry_hash) == (recorded.seq, recorded.hash)
        hist = ReleaseRequest(epoch=1, metric="error_histogram", region="apac", cohort=3000,
                              edges_version="abs-error-m/v1", release_id="e1/h")  # fmt: skip
        fresh = ledger.release(hist, np.full(7, 3000 * 40 / 7 * 0.9))
        assert fresh.entry_id == 9
        assert ledger.spent(1, "apac") == Budget(Fraction(2, 5), "epsilon")
        assert ledger.verify(expected_head=V2_HEAD).ok
    assert schema_of(v2)[0] == "2"  # writing never migrates


def test_migrating_schema_2_keeps_every_entry_hash_and_spend_and_drops_the_hash_index(
    v2: Path,
) -> None:
    assert ("hash",) in indexed_columns(v2)
    done = migrate(v2)
    assert (done.from_version, done.to_version, done.entries, done.head) == ("2", "4", 8, V2_HEAD)
    version, _ = schema_of(v2)
    assert version == "4"
    columns = indexed_columns(v2)
    assert ("hash",) not in columns  # the point of schema 3
    assert ("release_id",) in columns  # the idempotency lookup stays an indexed read
    assert ("epoch", "seq") in columns
    with Ledger.open(v2, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V2_HEAD).ok
        for (epoch, region), spent in V2_SPENT.items():
            assert ledger.spent(epoch, region) == Budget(spent, "epsilon")
    with Ledger.open(v2, first_policy(), mode="write") as ledger:
        assert ledger.release(RETRY, 3000.0).entry_id == 5
        assert len(ledger) == 8
    with Ledger.open(v2, second_policy(), mode="write") as ledger:
        req = ReleaseRequest(epoch=2, metric="coverage", region="na", cohort=3000,
                             edges_version="coverage-cells/v1", release_id="r-9")  # fmt: skip
        agg = np.array([600.0, 900, 300, 450, 300, 150])
        assert ledger.release(req, agg).entry_id == ledger.release(req, agg).entry_id == 9
        assert ledger.verify(expected_head=V2_HEAD).ok
    assert not migrate(v2).changed


def test_release_ids_stay_unique_after_migration(v2: Path) -> None:
    migrate(v2)
    with sqlite3.connect(v2) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO dpl_entries SELECT 99, created_at, epoch, scope, metric, policy_name, "
            "policy_version, policy_hash, edges_version, mechanism, unit, charge, cohort, "
            "output, release_id, request_hash, principal, prev_hash, hash "
            "FROM dpl_entries WHERE seq = 5"
        )


def test_without_the_hash_index_a_copied_hash_or_a_forked_entry_is_still_caught(
    v2: Path,
) -> None:
    migrate(v2)
    with sqlite3.connect(v2) as conn:
        with pytest.raises(sqlite3.IntegrityError):  # a fork at seq 5: the primary key refuses
            conn.execute(
                "INSERT INTO dpl_entries SELECT seq, created_at, epoch, scope, metric, "
                "policy_name, policy_version, policy_hash, edges_version, mechanism, unit, "
                "charge, cohort, output, NULL, request_hash, principal, prev_hash, hash "
                "FROM dpl_entries WHERE seq = 5"
            )
        conn.execute("DROP TRIGGER dpl_entries_no_update")
        # what the unique index used to refuse: entry 6 claiming entry 5's hash
        conn.execute(
            "UPDATE dpl_entries SET hash = (SELECT hash FROM dpl_entries WHERE seq = 5) "
            "WHERE seq = 6"
        )
    with Ledger.open(v2, second_policy(), mode="read") as ledger:
        problems = ledger.verify().problems
    assert any(p.startswith("entry 6: content does not match its hash") for p in problems)
    assert any(p.startswith("entry 7: prev_hash does not match") for p in problems)


def test_an_entry_whose_seq_is_not_an_integer_is_refused_and_left_as_it_was(
    v2: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with sqlite3.connect(v2) as conn:
        conn.execute("DROP TRIGGER dpl_entries_no_update")
        conn.execute("UPDATE dpl_entries SET seq = 'x' WHERE seq = 3")
    before = v2.read_bytes()
    assert main(["ledger", "migrate", "--ledger", str(v2)]) == 1
    assert "entries 'x' have a seq that is not an integer" in capsys.readouterr().err
    assert v2.read_bytes() == before


def test_cli_migrates_schema_2(v2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "migrate", "--ledger", str(v2)]) == 0
    out = capsys.readouterr().out
    assert "from schema 2 to 4: 8 entries kept" in out
    assert f"{V2_HEAD[0]}:{V2_HEAD[1]} unchanged" in out


def test_a_migration_that_finds_a_new_head_changes_nothing(v2: Path) -> None:
    from dpledger.errors import StoreError
    from dpledger.ledger.opening import open_store

    store = open_store(v2, "write")
    try:
        with pytest.raises(StoreError, match="changed while it was being migrated"):
            store.upgrade_schema_2((7, V2_HEAD[1]))  # a head the ledger has moved past
    finally:
        store.close()
    assert schema_of(v2)[0] == "2"
    assert ("hash",) in indexed_columns(v2)


@pytest.mark.postgres
def test_postgres_schema_2_ledger_is_used_as_it_is_then_migrates(pg_url: str) -> None:
    import psycopg

    source = sqlite3.connect(FIXTURE)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for (ddl,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL"
        ):
            conn.execute(ddl)
        conn.execute(_APPEND_ONLY)
        for table in ("dpl_meta", "dpl_entries", "dpl_spend", "dpl_policies"):
            rows = source.execute(f"SELECT * FROM {table}").fetchall()
            marks = ", ".join(["%s"] * len(rows[0]))
            for row in rows:
                conn.execute(f"INSERT INTO {table} VALUES ({marks})", row)

    def unique_on_hash() -> bool:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT 1 FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid "
                "AND a.attnum = ANY(c.conkey) WHERE c.conrelid = 'dpl_entries'::regclass "
                "AND c.contype = 'u' AND a.attname = 'hash'"
            ).fetchall()
        return bool(rows)

    assert unique_on_hash()
    with Ledger.open(pg_url, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V2_HEAD).ok
    with Ledger.open(pg_url, first_policy(), mode="write") as ledger:
        assert ledger.release(RETRY, 3000.0).entry_id == 5
    done = migrate(pg_url)
    assert (done.from_version, done.to_version, done.entries, done.head) == ("2", "4", 8, V2_HEAD)
    assert not unique_on_hash()
    with (
        psycopg.connect(pg_url, autocommit=True) as conn,
        pytest.raises(psycopg.errors.RaiseException, match="spend totals never decrease"),
    ):
        conn.execute("UPDATE dpl_spend SET total = '0'")  # schema 4 guards the spend
    with Ledger.open(pg_url, second_policy(), mode="write") as ledger:
        assert ledger.verify(expected_head=V2_HEAD).ok
        for (epoch, region), spent in V2_SPENT.items():
            assert ledger.spent(epoch, region) == Budget(spent, "epsilon")
        ledger.release(ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="na",
                                      cohort=3000, release_id="pg-2"), 3000.0)  # fmt: skip
        assert ledger.verify(expected_head=V2_HEAD).ok
    assert not migrate(pg_url).changed
