"""A charge or spend total edited into a form the ledger never writes (a big-exponent
decimal, a negative, a huge integer) is a damaged ledger: ``verify`` reports it, reads
refuse with :class:`LedgerCorrupted`, and nothing hangs or raises an untyped error.

``Fraction("1e9999999")`` builds a ten-million-digit integer (minutes), and
``Fraction("1e99999")`` one that cannot be printed or turned into a float: stored
amounts are parsed only as the ledger writes them (``"3"`` or ``"1/5"``), bounded.
"""

from __future__ import annotations

import sqlite3
import time
from fractions import Fraction
from pathlib import Path

import pytest
from factories import drop_spend_guard

from dpledger.approval import ReleaseRequest
from dpledger.errors import LedgerCorrupted
from dpledger.ledger import Ledger
from dpledger.ledger.schema import stored_amount

try:
    from ._stores import CONTRACT, StoreUnderTest
except ImportError:
    from _stores import CONTRACT, StoreUnderTest

BAD = [
    "1e9999999",
    "1e99999",
    "-1/10",
    "1/0",
    "0x10",
    " 1/10",
    "1" + "0" * 5000,
    "1" + "0" * 4000,
    "10" * 160,  # 1.01e319: above the largest double
]


def _three(store: StoreUnderTest) -> Ledger:
    ledger = store.open()
    for _ in range(3):
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100), 30.0)
    assert ledger.verify().ok
    return ledger


@pytest.mark.parametrize(
    "text", ["0", "3", "1/5", "7" * 4300 + "/" + "9" * 4300, "2" + "0" * 18, "1" + "0" * 307]
)
def test_the_forms_the_ledger_writes_are_read(text: str) -> None:
    """Up to the largest double: a ledger written before budgets were capped at 1e9 may
    hold a charge of 2e18 (review s26: a cap of 1e18 refused it, and its migration)."""
    assert stored_amount(text) == Fraction(text)


def test_views_of_amounts_beyond_a_double_do_not_overflow() -> None:
    """A sum of tampered amounts may pass the largest double: rounding it up is +inf
    (an upper bound), and big values given as error bounds are typed errors."""
    from dpledger._sensitivity import float_up
    from dpledger.errors import InvalidInput
    from dpledger.types import nonnegative_real

    assert float_up(Fraction(10**400)) == float("inf")
    assert float_up(-Fraction(10**400)) == -1.7976931348623157e308
    with pytest.raises(InvalidInput, match="too large to print"):
        nonnegative_real(Fraction(10**5000), "aggregate_error")


def test_a_budget_beyond_a_double_reads_as_infinity() -> None:
    """Review s26: two tampered charges each at the largest double sum past it, and
    ``float(budget)`` / ``as_dict()`` (lifetime's JSON, the service's budget routes, the
    page) raised OverflowError: the CLI's exit 3 and HTTP 500s on a ledger that merely
    fails verification."""
    from dpledger.types import Budget

    big = Budget(2 * Fraction(1.7976931348623157e308), "epsilon")
    assert float(big) == float("inf")
    assert big.as_dict()["value"] == float("inf")
    assert big.as_dict()["amount"] == big.text  # the exact amount stays


@pytest.mark.parametrize("text", BAD)
def test_other_forms_are_refused_quickly(text: str) -> None:
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"not a budget amount|largest double|negative"):
        stored_amount(text)
    # microseconds when refused up front; Fraction("1e9999999") takes ~16 s. Not 0.5 s: a
    # full garbage collection or a descheduled worker on a loaded 2-core CI stalls that long
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("text", ["1e9999999", "1e99999", "-1/10", "1" + "0" * 310])
def test_a_tampered_spend_total_fails_verification_and_reads_refuse(
    store: StoreUnderTest, text: str
) -> None:
    ledger = _three(store)
    store.disable_append_only()
    store.raw("UPDATE dpl_spend SET total = ? WHERE epoch = 0", (text,))
    start = time.monotonic()
    report = ledger.verify()
    assert not report.ok
    assert any("spend row (epoch 0" in p and "unreadable" in p for p in report.problems)
    reopened = Ledger.open(store.target, CONTRACT, mode="read")
    try:
        with pytest.raises(LedgerCorrupted, match="spend"):
            reopened.spent(0, "a")
    finally:
        reopened.close()
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("text", ["1e99999", "1" + "0" * 310])
def test_a_tampered_charge_fails_verification_and_reads_refuse(
    store: StoreUnderTest, text: str
) -> None:
    ledger = _three(store)
    store.disable_append_only()
    store.raw("UPDATE dpl_entries SET charge = ? WHERE seq = 1", (text,))
    report = ledger.verify()
    assert not report.ok
    assert any(p.startswith("entry 1: unreadable") for p in report.problems)
    with pytest.raises(LedgerCorrupted, match="entry 1 is damaged"):
        ledger.lifetime(region="a")


def test_a_rewritten_last_hash_says_what_differs(store: StoreUnderTest) -> None:
    """It said "chain head is entry 3 but the last entry is 3": the seqs agree, the hashes
    do not."""
    ledger = _three(store)
    store.disable_append_only()
    store.raw("UPDATE dpl_entries SET hash = ? WHERE seq = 3", ("0" * 64,))
    report = ledger.verify()
    assert any(
        p.startswith("chain head is entry 3 with hash ") and "but entry 3's hash is 0000" in p
        for p in report.problems
    ), report.problems


def test_the_service_answers_verify_of_a_tampered_total_with_its_problems(
    tmp_path: Path,
) -> None:
    """It was a 500 "internal error": verify is a 200 ``{"ok": false, problems}``."""
    from _service import body, call, make_site

    from dpledger.service import create_app

    site = make_site(str(tmp_path / "l.db"), tmp_path)
    app = create_app(site.settings(connections=2))
    try:
        r = call(app, "POST", "/v1/releases", json=body(), headers=site.auth("admin"))
        assert r.status_code == 201, r.text
        with sqlite3.connect(tmp_path / "l.db") as conn:
            drop_spend_guard(conn)
            conn.execute("UPDATE dpl_spend SET total = '1e99999'")
        conn.close()
        r = call(app, "GET", "/v1/verify", headers=site.auth("admin"))
        assert r.status_code == 200, r.text
        assert r.json()["ok"] is False
        assert any("is not a budget amount" in p for p in r.json()["problems"])
    finally:
        app.state.service.close()
