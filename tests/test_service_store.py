"""The service's own state on both stores: keys, revocation, the refusal log, sessions.

Run against a SQLite file beside the ledger and against tables in a real PostgreSQL
schema; none of it is ledger state.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from dpledger.errors import (
    InvalidInput,
    LedgerCorrupted,
    LedgerNotFound,
    StoreError,
    UnknownResource,
)
from dpledger.service import store as store_module
from dpledger.service.auth import Authenticator
from dpledger.service.keys import Scopes, parse_key
from dpledger.service.store import Refusal, ServiceStore


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.keys.db")
    url: str = request.getfixturevalue("pg_url")
    return url


def test_opening_never_creates_a_store(location: str) -> None:
    with pytest.raises(LedgerNotFound, match="dpledger keys create"):
        ServiceStore.open(location)
    if not location.startswith("postgresql://"):
        assert not Path(location).exists()


def test_keys_are_stored_as_digests_listed_and_revoked_once(location: str) -> None:
    with ServiceStore.open(location, create=True) as store:
        made, record = store.create_key("maps", Scopes(("release", "read"), ("north",), None))
        assert parse_key(made.token) == (record.key_id, made.token.split("_", 2)[2])
        assert made.token not in repr(made)
        found = store.lookup(record.key_id)
        assert found is not None
        assert found[0] == record
        assert [k.key_id for k in store.list_keys()] == [record.key_id]
        first = store.revoke(record.key_id).revoked_at
        assert first is not None
        assert store.revoke(record.key_id).revoked_at == first  # the first time is kept
        with pytest.raises(UnknownResource):
            store.revoke("000000000000")
        assert store.lookup("000000000000") is None


def test_the_refusal_log_keeps_the_newest_and_no_reason_text(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "REFUSALS_KEPT", 3)
    monkeypatch.setattr(store_module, "_PRUNE_EVERY", 5)
    with ServiceStore.open(location, create=True) as store:
        for i in range(12):
            store.log_refusal(Refusal("", "maps/abc", "release", 409, "budget_exceeded",
                                      epoch=i, failed=("budget",)))  # fmt: skip
        newest = store.refusals(limit=50)
        assert [r.epoch for r in newest[:3]] == [11, 10, 9]
        assert len(newest) < 12  # pruned at the 10th
        assert newest[0].failed == ("budget",)
        assert newest[0].at  # stamped by the store
        assert set(newest[0].as_dict()) == {
            "at", "principal", "action", "status", "error", "epoch", "region", "metric",
            "cohort", "release_id", "failed_checks",
        }  # fmt: skip


def _foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()


def _empty_sqlite(path: Path) -> None:  # a header and no table: what an old bug left
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=0")
    conn.execute("VACUUM")
    conn.close()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.touch(), "empty file (0 bytes), not a dpledger key store: move it away"),
        (lambda p: p.write_text("hello"), "not an SQLite database, so not a dpledger key store"),
        (_foreign_sqlite, "an SQLite database but not a dpledger key store"),
        (_empty_sqlite, "an SQLite database but not a dpledger key store"),
        (lambda p: p.mkdir(), "is a directory, not a dpledger key store"),
    ],
    ids=["empty", "text", "foreign", "sqlite-without-tables", "directory"],
)
@pytest.mark.parametrize("how", ["read", "write", "create"])
def test_a_file_that_is_not_a_key_store_is_refused_and_left_as_it_was(
    tmp_path: Path, make: Callable[[Path], None], says: str, how: str
) -> None:
    path = tmp_path / "L.keys.db"
    make(path)
    before = None if path.is_dir() else path.read_bytes()
    st = path.stat()
    with pytest.raises((LedgerCorrupted, StoreError), match=re.escape(says)):
        ServiceStore.open(str(path), create=how == "create", read_only=how == "read")
    assert (None if path.is_dir() else path.read_bytes()) == before  # byte-identical
    after = path.stat()
    assert (after.st_mode, after.st_size, after.st_mtime_ns) == (
        st.st_mode, st.st_size, st.st_mtime_ns,
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.keys.db"]  # no -wal/-shm/temp


def test_a_created_store_is_0600_whatever_the_umask_and_leaves_no_temporary_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "L.keys.db"
    old = os.umask(0)
    try:
        with ServiceStore.open(str(path), create=True) as store:
            store.create_key("maps", Scopes(("read",)))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.keys.db"]
    with ServiceStore.open(str(path), create=True) as again:  # an existing store is opened
        assert [k.name for k in again.list_keys()] == ["maps"]


def test_a_read_only_store_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "L.keys.db"
    with ServiceStore.open(str(path), create=True) as store:
        _, record = store.create_key("maps", Scopes(("read",)))
    before = path.read_bytes()
    with ServiceStore.open(str(path), read_only=True) as store:
        assert [k.key_id for k in store.list_keys()] == [record.key_id]
        with pytest.raises(StoreError):
            store.revoke(record.key_id)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.keys.db"]


@pytest.mark.postgres
def test_a_dropped_postgresql_session_is_replaced(pg_url: str) -> None:
    import psycopg

    with ServiceStore.open(pg_url, create=True) as store:
        _, record = store.create_key("maps", Scopes(("read",)))
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'dpledger-service'"
            )
        assert store.key(record.key_id) == record


def test_sessions_expire_and_cannot_be_forged(tmp_path: Path) -> None:
    with ServiceStore.open(str(tmp_path / "k.db"), create=True) as store:
        _, record = store.create_key("reader", Scopes(("read",)))
        auth = Authenticator(store, session_ttl_s=60)
        cookie = auth.session_for(record, now=1000.0)
        assert auth.from_session(cookie, now=1030.0) == record
        assert auth.from_session(cookie, now=1061.0) is None  # expired
        key_id, count, expires, mac = cookie.split(".")
        later = f"{key_id}.{count}.{int(expires) + 3600}.{mac}"
        assert auth.from_session(later, now=1030.0) is None
        assert auth.from_session("garbage", now=1030.0) is None
        store.revoke(record.key_id)
        assert auth.from_session(cookie, now=1030.0) is None  # dies with its key


@pytest.mark.parametrize(
    ("actions", "regions", "metrics", "says"),
    [
        ((), None, None, "at least one action"),
        (("spend",), None, None, "unknown action"),
        (("release",), (), None, "at least one region"),
        (("release",), ("a b",), None, "printable"),
    ],
)
def test_scopes_are_validated(
    actions: tuple[str, ...], regions: tuple[str, ...] | None, metrics: None, says: str
) -> None:
    with pytest.raises(InvalidInput, match=says):
        Scopes(actions, regions, metrics)  # type: ignore[arg-type]


def test_a_scope_names_what_a_request_lacks() -> None:
    s = Scopes(("release", "read"), ("north", "*"), ("loss",))
    assert s.missing("release", "north", "loss") is None
    assert s.missing("release", "*", "loss") is None
    assert s.missing("release", "south", "loss") == "region south"
    assert s.missing("release", "north", "hist") == "metric hist"
    assert s.missing("check", "north", "loss") == "action check"
    assert s.missing("read", "anything", "else") is None  # reads are not region-scoped
    assert Scopes(("release",), ("north",)).missing("release", "*", "x") == (
        "the global release (region '*')"
    )


CRASH_AFTER_A_REVOCATION = (
    "import os, signal, sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
    "c.execute('PRAGMA wal_autocheckpoint=0');"
    "c.execute(\"UPDATE dpl_svc_keys SET revoked_at = '2026-12-01T00:00:00+00:00'\");"
    "os.kill(os.getpid(), signal.SIGKILL)"
)  # a writer that commits into the WAL and dies before any checkpoint


def test_a_key_store_with_a_log_but_no_index_is_read_without_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a ledger's (audit 4, F-J): `keys list` of a copy of a crashed key store (its
    file and -wal, no -shm) created a -shm beside it; now it reads a private copy."""
    import shutil
    import subprocess
    import sys
    import tempfile

    live = tmp_path / "live.keys.db"
    with ServiceStore.open(str(live), create=True) as store:
        store.create_key("maps", Scopes(("read",), ("north",), None))
    subprocess.run([sys.executable, "-c", CRASH_AFTER_A_REVOCATION, str(live)], check=False)
    assert Path(f"{live}-wal").stat().st_size > 0
    backup = tmp_path / "backup"
    backup.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{live}{suffix}", backup / f"k.db{suffix}")
    before = {p.name: p.read_bytes() for p in backup.iterdir()}
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    with ServiceStore.open(str(backup / "k.db"), read_only=True) as store:
        (key,) = store.list_keys()
        assert key.revoked_at is not None  # the revocation in the -wal is read
        assert len(list(private.iterdir())) == 1
    assert {p.name: p.read_bytes() for p in backup.iterdir()} == before
    assert list(private.iterdir()) == []  # the private copy is gone with the store
