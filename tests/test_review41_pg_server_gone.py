"""Review 41 (pg): a release whose server has gone says that nothing was recorded.

A ledger handle opens a new session by itself when its session died (a restart, a
failover). When the server cannot be reached at all, a release or round then failed
with "cannot connect to the PostgreSQL ledger …; check that the server is running …":
what to do, but not whether the round was recorded (it was not: there was no session to
record it in). A retry under the same release ids, once the server is back, releases
once.
"""

from __future__ import annotations

import pytest

try:
    from ._stores import CONTRACT, server_gone
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT, server_gone

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
        with server_gone(ledger, pg_url), pytest.raises(StoreError, match="cannot connect") as e:
            ledger.release_round(_round())
        assert "nothing was recorded" in str(e.value)
        result = ledger.release_round(_round())
        assert [r.retried for r in result.releases] == [False, False]
        assert len(ledger) == 2
        assert ledger.verify().ok
