"""Review 41 (pg): a release whose server has gone says that nothing was recorded.

A ledger handle opens a new session by itself when its session died (a restart, a
failover). When the server cannot be reached at all, a release or round then failed
with "cannot connect to the PostgreSQL ledger …; check that the server is running …":
what to do, but not whether the round was recorded (it was not: there was no session to
record it in). A retry under the same release ids, once the server is back, releases
once.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

try:
    from ._stores import CONTRACT, closed_port
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT, closed_port

from dpledger.approval import ReleaseRequest
from dpledger.errors import StoreError
from dpledger.ledger import Ledger

pytestmark = pytest.mark.postgres


def _round() -> list[tuple[ReleaseRequest, object]]:
    return [
        (ReleaseRequest(epoch=e, metric="loss", region="a", cohort=1000, release_id=f"r{e}"), 30.0)
        for e in range(2)
    ]


def test_a_round_whose_server_is_gone_says_nothing_was_recorded(pg_url: str) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.init()
        store: Any = ledger._store
        real = store._url
        host = pg_url.split("@", 1)[1].split("/", 1)[0]
        store._url = real.replace(host, f"127.0.0.1:{closed_port()}", 1)  # the server is gone
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 60000)", (store._conn.info.backend_pid,))
        with pytest.raises(StoreError, match="cannot connect") as failed:
            ledger.release_round(_round())
        assert "nothing was recorded" in str(failed.value)
        store._url = real  # it is back
        result = ledger.release_round(_round())
        assert [r.retried for r in result.releases] == [False, False]
        assert len(ledger) == 2
        assert ledger.verify().ok
