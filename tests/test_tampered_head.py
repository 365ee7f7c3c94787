"""A chain head in the meta table that is not the last entry is a damaged ledger.

Review s32 B4: with ``head_seq`` edited to 999, ``ledger show`` printed "999 entries"
and the next release was written as entry 1000; with ``head_hash`` edited, the next
entry chained onto a hash no entry has, sealing the break into the chain. Now a write
and ``head()`` compare the meta table's head with the last entry (one indexed read with
the state a write reads anyway) and refuse with :class:`LedgerCorrupted`, writing
nothing; ``verify`` still names the damage. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import LedgerCorrupted
from dpledger.ledger.records import GENESIS

try:
    from ._stores import StoreUnderTest
except ImportError:
    from _stores import StoreUnderTest

REQ = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


def _entries(store: StoreUnderTest) -> list[tuple[object, ...]]:
    return store.raw("SELECT seq, hash, prev_hash FROM dpl_entries ORDER BY seq")


@pytest.mark.parametrize("edit", ["head_seq", "head_hash"])
def test_an_edited_head_refuses_writes_and_head_and_writes_nothing(
    store: StoreUnderTest, edit: str
) -> None:
    ledger = store.open()
    ledger.release(REQ, 30.0)
    assert ledger.head()[0] == 1
    value = "999" if edit == "head_seq" else "b" * 64
    store.raw(f"UPDATE dpl_meta SET value = '{value}' WHERE key = '{edit}'")
    before = _entries(store)
    with pytest.raises(LedgerCorrupted, match="is not its last entry"):
        ledger.release(REQ, 30.0)
    with pytest.raises(LedgerCorrupted, match="is not its last entry"):
        ledger.head()
    assert _entries(store) == before  # nothing chained onto the edited head
    assert not ledger.verify().ok


def test_a_consistent_head_reads_as_before(store: StoreUnderTest) -> None:
    ledger = store.open()
    assert ledger.head() == (0, GENESIS)
    ledger.init()
    assert ledger.head() == (0, GENESIS)  # an empty ledger: no last entry
    first = ledger.release(REQ, 30.0)
    second = ledger.release_round([(REQ, 30.0), (REQ, 31.0)]).releases[-1]
    assert ledger.head() == (second.entry_id, second.entry_hash)
    assert first.entry_id == 1
    assert second.entry_id == 3
