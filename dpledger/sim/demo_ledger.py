"""The demo's own ledger file: created by the demo, replaced only by the demo, never another.

The demo writes a fresh SQLite ledger each run. It never overwrites a file it did not
create: a demo ledger carries the label :data:`DEMO_LABEL` and the path it was made at,
and :func:`claim_ledger` frees a path only when it is missing, or holds such a ledger made
at that very path (not a copy) and ``--fresh`` was given.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpledger._files import check_sidecars, check_sqlite_name, postgres_url
from dpledger.errors import DpLedgerError, InvalidInput

__all__ = ["DEMO_LABEL", "claim_ledger", "demo_labels"]

DEMO_LABEL = {"purpose": "demo"}
"""The label a demo ledger is created with: the only kind of ledger the demo replaces."""


def demo_labels(path: Path) -> dict[str, str]:
    """The labels of a demo ledger created at ``path``: :data:`DEMO_LABEL` and where it
    was made, so a copy of it elsewhere is not taken for the demo's own file."""
    return {**DEMO_LABEL, "path": str(path.resolve())}


def claim_ledger(path: Path, *, fresh: bool) -> None:
    """Make ``path`` free for a new demo ledger, or refuse; never touch another file.

    A missing path is free. An existing file is replaced only if it is a ledger the demo
    created (labelled ``purpose = demo``) and ``fresh`` is set; anything else — a real
    ledger, a file that is not a ledger — is refused with :class:`InvalidInput`.
    """
    if postgres_url(str(path), "demo ledger") is not None:
        raise InvalidInput("the demo writes a local SQLite ledger: give --ledger a file path")
    check_sqlite_name(str(path), "demo ledger path")
    try:
        if not (path.exists() or path.is_symlink()):
            return
    except OSError as e:  # e.g. a name too long for the file system
        raise InvalidInput(f"cannot use {str(path)[:80]!r} as the demo ledger: {e.strerror}") from e
    if path.is_symlink():  # resolve() would match its target's label, unlink() the link
        raise InvalidInput(
            f"{path} is a symbolic link (to {os.readlink(path)}), not a file the demo "
            "created: the demo replaces only its own ledger, at the path it made it; pass "
            "that path, or --ledger with a new path"
        )
    from dpledger import _sqlite_files as sqlite_files
    from dpledger.ledger.sqlite import SqliteStore

    if sqlite_files.held(path):  # removing its -wal/-shm would corrupt the open ledger
        raise InvalidInput(
            f"{path} is open in this process: close its Ledger before the demo replaces it"
        )
    check_sidecars(str(path), "demo ledger")  # its -wal and -shm are removed below

    try:
        store = SqliteStore(path, "read")
        try:
            meta = store.meta()
        finally:
            store.close()
        purpose, made_at = meta.get("label.purpose"), meta.get("label.path")
    except DpLedgerError as e:
        raise InvalidInput(
            f"{path} exists and is not a demo ledger ({e}); the demo never overwrites a file "
            "it did not create: pass --ledger with a new path"
        ) from None
    if purpose != DEMO_LABEL["purpose"]:
        unlabelled = (
            " (it has no demo label: if an older dpledger's demo made it — 0.1 did not label "
            "its ledger — and you no longer need it, delete it yourself)"
            if purpose is None
            else ""
        )
        raise InvalidInput(
            f"{path} is a dpledger ledger the demo did not create; the demo never touches "
            f"it{unlabelled}: pass --ledger with a new path"
        )
    if made_at is not None and made_at != str(path.resolve()):
        raise InvalidInput(
            f"{path} is a copy of the demo ledger made at {made_at}, not a file the demo "
            "created: the demo never deletes it; delete it yourself, or pass --ledger with "
            "a new path"
        )
    if not fresh:
        raise InvalidInput(
            f"{path} holds a previous demo ledger: pass --fresh to replace it, or --ledger "
            "with a new path"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
