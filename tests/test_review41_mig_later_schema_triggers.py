"""Review 41 (migrations): an older dpledger writing to a ledger a newer one migrated.

A later schema may add triggers (schema 4 added the spend guard's). A write handle
checks the ledger's triggers when it connects, before the schema version: on a ledger of
a later schema with a trigger this dpledger does not know, `release`, `serve` and
`ledger migrate` said the ledger "holds trigger(s) … that dpledger did not create …:
drop them, or restore the ledger from a backup" — advice that strips the newer
dpledger's guard from a sound ledger — while `ledger show`/`verify` said "upgrade
dpledger". Now every command says "upgrade dpledger", and nothing is written.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _stores import CONTRACT, CONTRACT_POLICY

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import LedgerCorrupted, LedgerSchemaUnsupported

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
LATER = (
    "UPDATE dpl_meta SET value = '5' WHERE key = 'schema_version'",
    "CREATE TRIGGER dpl_meta_no_delete BEFORE DELETE ON dpl_meta "
    "BEGIN SELECT RAISE(ABORT, 'dpledger meta rows are never deleted'); END",
)


def _later_ledger(tmp_path: Path) -> Path:
    path = tmp_path / "later.db"
    with Ledger.open(path, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for sql in LATER:  # what a later dpledger's migration might do
            conn.execute(sql)
    finally:
        conn.close()
    return path


def test_a_later_schemas_trigger_is_refused_as_a_later_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _later_ledger(tmp_path)
    before = path.read_bytes()
    for mode in ("read", "write"):
        with pytest.raises(LedgerSchemaUnsupported, match=r"schema version '5'.*upgrade dpledger"):
            Ledger.open(path, CONTRACT, mode=mode)  # type: ignore[arg-type]
    policy = tmp_path / "p.toml"
    policy.write_text(CONTRACT_POLICY)
    agg = tmp_path / "agg.txt"
    agg.write_text("30\n")
    monkeypatch.delenv("DPLEDGER_URL", raising=False)
    at = ["--ledger", str(path), "--policy", str(policy)]
    release = ["release", *at, "--epoch", "0", "--metric", "loss", "--region", "a",
               "--cohort", "100", "--aggregate", str(agg)]  # fmt: skip
    for argv in (release, ["ledger", "show", *at], ["ledger", "migrate", "--ledger", str(path)]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code in (1, 2), argv
        assert "upgrade dpledger" in err or "not one this dpledger upgrades" in err, err
        assert "drop them" not in err, err
    assert path.read_bytes() == before


def test_a_planted_trigger_in_a_current_ledger_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(LATER[1])  # the same trigger, in a schema-4 ledger: not dpledger's
    finally:
        conn.close()
    with pytest.raises(LedgerCorrupted, match="did not create") as raised:
        Ledger.open(path, CONTRACT, mode="write")
    assert not isinstance(raised.value, LedgerSchemaUnsupported)


@pytest.mark.postgres
def test_postgres_a_later_schemas_trigger_is_refused_as_a_later_schema(pg_url: str) -> None:
    import psycopg

    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE dpl_meta SET value = '5' WHERE key = 'schema_version'")
        conn.execute(
            "CREATE FUNCTION dpl_meta_kept() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'dpledger meta rows are never deleted'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER dpl_meta_no_delete BEFORE DELETE ON dpl_meta "
            "FOR EACH ROW EXECUTE FUNCTION dpl_meta_kept()"
        )
    for mode in ("read", "write"):
        with pytest.raises(LedgerSchemaUnsupported, match=r"schema version '5'.*upgrade dpledger"):
            Ledger.open(pg_url, CONTRACT, mode=mode)  # type: ignore[arg-type]
