"""A PostgreSQL COMMIT the server answers with an ERROR (a deferred constraint trigger
refusing it, a serialization failure) rolled the transaction back: the server said so on
a live session. bd7edd7 raises :class:`CommitUnknown` for it — "the spend may have been
recorded … check the ledger's entries" — the same as for a session lost in the round
trip, where the outcome is really unknown (review 44 diff 4: a CommitUnknown where
nothing was recorded). Telling the two apart (an ERROR-severity result on a session still
open, versus FATAL/PANIC or no answer, e.g. a session terminated while its COMMIT waited
for a synchronous standby, which has committed) is a contract decision the pipelined
commit's docstring settles the other way ("any other outcome … is unknown")."""

from __future__ import annotations

import pytest

from dpledger.errors import CommitUnknown, StoreError
from dpledger.ledger import Ledger

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT
from test_postgres_pipeline import _RAISE, _admin, _loss, _tables

pytestmark = pytest.mark.postgres


def test_a_commit_the_server_refused_on_a_live_session_is_not_commit_unknown(
    pg_url: str,
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        before = _tables(pg_url)
        _admin(
            pg_url,
            _RAISE,
            "CREATE CONSTRAINT TRIGGER dpl_test_refuse AFTER INSERT ON dpl_entries "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dpl_test_refuse()",
        )
        try:
            with pytest.raises(StoreError) as failed:
                ledger.release(_loss(), 30.0)
            assert _tables(pg_url) == before  # the server rolled it back, and said so
            assert not isinstance(failed.value, CommitUnknown), str(failed.value)
        finally:
            _admin(pg_url, "DROP TRIGGER dpl_test_refuse ON dpl_entries")
