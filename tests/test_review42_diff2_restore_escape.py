"""Review 42, diff 2: ``pgsql.RESTORE`` compared a guard function's body after
``regexp_replace(prosrc, '\\s+', ' ', 'g')``, a backslash in an ordinary string literal.
A session with ``standard_conforming_strings = off`` (a role's, a database's or the URL's
setting) reads ``'\\s+'`` as ``'s+'``: every intact body then "differed", and migrate
replaced both of dpledger's functions — the one whose triggers were intact too — which
needs their owner (a role that may create the triggers but does not own the functions
failed). The pattern is now ``[[:space:]]+``, which has no backslash to escape.
"""

from __future__ import annotations

import pytest
from _stores import CONTRACT, StoreUnderTest

from dpledger import ReleaseRequest
from dpledger.ledger.migrate import migrate

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
XMIN = "SELECT proname, xmin::text FROM pg_proc WHERE proname LIKE 'dpl%' ORDER BY 1"


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_an_intact_guard_function_is_kept_whatever_the_string_escapes(
    store: StoreUnderTest,
) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    before = store.raw(XMIN)
    store.raw("DROP TRIGGER dpl_spend_no_truncate ON dpl_spend")
    url = store.target.replace("options=", "options=-c%20standard_conforming_strings%3Doff%20", 1)
    assert url != store.target
    assert migrate(url).restored == ("dpl_spend_no_truncate",)
    assert store.raw(XMIN) == before  # was: both functions replaced
    with store.open(CONTRACT) as writer:
        writer.release(LOSS, 30.0)
