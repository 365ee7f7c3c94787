"""Review 41 (pg): a PostgreSQL session lost in the middle of ``verify`` is no failed
verification.

``verify`` reads the ledger in one REPEATABLE READ transaction. When the server ends
that session part way (an administrator's ``pg_terminate_backend``, a failover, a
role's ``idle_in_transaction_session_timeout`` firing while Python re-derives a large
batch of charges), the read fails with a psycopg error that says nothing about the
ledger. ``verify`` turned it into a problem ("store unreadable: … AdminShutdown …"), so
``report.ok`` was False and ``dpledger ledger verify`` exited 1, "verification failed",
on a sound ledger; a session lost at the read transaction's COMMIT even said "the spend
may have been recorded". A lost session is a read to do again (``LedgerChanged``: nothing
is wrong with the ledger), never a verdict.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import LedgerChanged
from dpledger.ledger import Ledger, audit

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def _kill(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:  # returns once the backend is gone
        assert admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,)).fetchall() == [
            (True,)
        ]


def _ledger(url: str) -> None:
    with Ledger.open(url, CONTRACT, mode="create") as ledger:
        for epoch in range(3):
            request = ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=1000)
            ledger.release(request, 30.0)


@pytest.mark.parametrize("where", ["mid-read", "at-commit"])
def test_a_session_killed_during_verify_is_read_again_not_a_failed_verification(
    pg_url: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ledger(pg_url)
    with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
        store: Any = ledger._store
        killed: list[int] = []

        def kill_once() -> None:
            if not killed:
                killed.append(store._conn.info.backend_pid)
                _kill(pg_url, killed[0])

        if where == "mid-read":
            check = audit._check_entry

            def checked(*args: Any) -> None:
                kill_once()  # the next read of the same transaction meets a dead session
                check(*args)

            monkeypatch.setattr(audit, "_check_entry", checked)
        else:
            problems = store.integrity_problems

            def last_read() -> list[str]:
                found: list[str] = problems()
                kill_once()  # every read done: the read-only COMMIT meets a dead session
                return found

            monkeypatch.setattr(store, "integrity_problems", last_read)
        report = ledger.verify()
        assert killed
        assert report.ok, report.problems
        assert report.entries_checked == 3


def test_a_session_lost_on_every_read_is_an_error_never_a_verdict(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ledger(pg_url)
    with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
        store: Any = ledger._store
        check = audit._check_entry

        killed: set[int] = set()

        def checked(*args: Any) -> None:
            pid = store._conn.info.backend_pid
            if pid not in killed:  # each new session dies at its first entry
                killed.add(pid)
                _kill(pg_url, pid)
            check(*args)

        monkeypatch.setattr(audit, "_check_entry", checked)
        monkeypatch.setattr(audit.time, "sleep", lambda s: None)
        with pytest.raises(LedgerChanged, match="nothing is wrong with the ledger"):
            ledger.verify()
