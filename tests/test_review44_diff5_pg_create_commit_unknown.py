"""The first release into a new PostgreSQL ledger creates it in its own transaction
before the release's. A COMMIT of that creation not confirmed raised CommitUnknown —
"the spend may have been recorded … a retry under it returns the recorded release" —
though no release had been attempted: the release's transaction never began, nothing was
spent (review 44 diff 5: 3f4942e made a transaction that staged nothing a plain
StoreError; the creation's, which stages no release either, was left out).
"""

from __future__ import annotations

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import CommitUnknown, StoreError
from dpledger.ledger import Ledger
from dpledger.ledger.postgres import PostgresStore

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def test_a_creation_whose_commit_answer_is_lost_is_no_spend(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PostgresStore._commit
    lost: list[bool] = []

    def answer_lost(self: PostgresStore) -> None:
        real(self)  # it landed; its answer is lost on the way back
        if not lost:
            lost.append(True)
            raise self._commit_failed(psycopg.OperationalError("server closed the connection"))

    monkeypatch.setattr(PostgresStore, "_commit", answer_lost)
    request = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000)
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        with pytest.raises(StoreError) as failed:
            ledger.release(request, 30.0)
        assert lost
        assert ledger.entries() == []  # no release was recorded: nothing was spent
        assert not isinstance(failed.value, CommitUnknown), str(failed.value)
        assert "nothing was released (no spend is recorded)" in str(failed.value)
