"""dpledger's own triggers on a schema-4 ledger: missing ones refuse writers, fail the
audit, and are re-created by ``dpledger ledger migrate`` once the ledger verifies.

Schema 4's triggers make the database refuse an edited entry and a lowered, moved or
deleted spend total. Review 40 refused a writer on a ledger whose triggers were *changed*
(a planted one, a disabled one, one that never fires); dropping them needs the same
privilege and has the same effect — a spend total lowered by hand afterwards lets later
releases overspend — so a writer refuses a ledger that lacks any of them too (review 41
left it as a strict xfail). Older schemas (2, 3) never had the spend guard: they are
checked by the audit's totals only, and ``migrate`` brings them to schema 4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpledger.errors import LedgerCorrupted
from dpledger.ledger.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from dpledger.ledger.store import SqlStore

__all__ = ["GUARDS_MISSING", "check_guards", "guard_problems", "missing_guards"]

GUARDS_MISSING = "dpledger's own trigger(s)"
"""How every report of missing triggers begins (migrate tells them from other problems)."""


def missing_guards(store: SqlStore) -> list[str]:
    """The names of dpledger's own triggers the schema-4 ledger in ``store`` lacks."""
    if store.meta().get("schema_version") != SCHEMA_VERSION:
        return []
    return [str(name) for (name,) in store.audit_rows("guards")]


def _said(missing: list[str]) -> str:
    return (
        f"{GUARDS_MISSING} {', '.join(missing)} are missing (dropped): without them the "
        "database takes an edited entry or a lowered spend total, which lets later "
        "releases overspend"
    )


def guard_problems(store: SqlStore) -> list[str]:
    """The audit's problem for missing triggers (none, or one naming them all)."""
    missing = missing_guards(store)
    if not missing:
        return []
    return [
        f"{_said(missing)}; `dpledger ledger migrate` re-creates them once the rest of "
        "the ledger verifies"
    ]


def check_guards(store: SqlStore) -> None:
    """Refuse to write through ``store`` when its ledger lacks any of its own triggers:
    :class:`LedgerCorrupted`, before anything is read for the write or written."""
    missing = missing_guards(store)
    if missing:
        where = store.location
        raise LedgerCorrupted(
            f"{where}: {_said(missing)}; nothing was written: run `dpledger ledger verify` "
            f"on it and, if only this is reported, `dpledger ledger migrate --ledger {where}` "
            "re-creates them (else restore the ledger from a backup)"
        )
