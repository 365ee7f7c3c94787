"""Which store a ledger target names: a SQLite path or a ``postgresql://`` URL.

The target is checked before anything touches the filesystem or the network (a bytes
path, an empty path, a control character are :class:`~dpledger.errors.InvalidInput`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dpledger._files import check_path_text, check_unpadded, postgres_url
from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.ledger.store import SqlStore
from dpledger.policy import Policy
from dpledger.policy.checked import validated_copy
from dpledger.types import Mode

__all__ = ["checked_labels", "checked_mode", "checked_policy", "open_store"]


def checked_labels(labels: object) -> dict[str, str]:
    """A new ledger's labels as plain text: each name and value text a ledger can store,
    UTF-8 without NUL (PostgreSQL's text holds none; an unpaired surrogate is no UTF-8:
    it was a ``UnicodeEncodeError`` from the first release, a NUL on PostgreSQL a
    StoreError that said "retry"; review 40)."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise InvalidInput(f"labels must map strings to strings, got {type(labels).__name__}")
    out: dict[str, str] = {}
    for k, v in labels.items():
        for text in (k, v):
            if not isinstance(text, str):
                raise InvalidInput(f"labels must map strings to strings, got {shown(text)}")
            if "\x00" in text or (not text.isascii() and _unencodable(text)):
                raise InvalidInput(
                    f"label {shown(k)}: {shown(text)} holds a NUL or an unpaired surrogate, "
                    "which a ledger cannot store as text; use UTF-8 text without NUL"
                )
        out[str.__str__(k)] = str.__str__(v)
    return out


def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def checked_policy(policy: object, mode: Mode) -> Policy:
    """``policy`` validated again from its fields: the copy a ledger records and enforces
    (:func:`~dpledger.policy.checked.validated_copy`). Opened to read (nothing is spent),
    by the rules a recorded policy is read with: one an earlier dpledger recorded still
    opens its ledger to audit."""
    return validated_copy(policy, recorded=mode == "read")


_MODES: tuple[Mode, ...] = ("read", "write", "create")


def checked_mode(mode: object) -> Mode:
    """``mode`` as one of the plain literals: a ``str`` subclass (a ``StrEnum`` member) is
    read by its text, never by its own ``==``, which may say yes to every mode (review
    40: one that did got a write handle validated as a reader)."""
    text = str.__str__(mode) if isinstance(mode, str) else None
    for m in _MODES:
        if text == m:
            return m
    raise InvalidInput(f"mode must be 'read', 'write' or 'create', got {shown(mode)}")


def open_store(target: str | Path | None, mode: Mode) -> SqlStore:
    """The store at a SQLite path or ``postgresql://`` URL (``None``: ``$DPLEDGER_URL``)."""
    target = target if target is not None else os.environ.get("DPLEDGER_URL")
    if target is None:
        raise InvalidInput(
            "no ledger given: pass a SQLite path or postgresql:// URL, or set DPLEDGER_URL"
        )
    mode = checked_mode(mode)
    if not isinstance(target, str | os.PathLike) or isinstance(target, bytes):
        raise InvalidInput(
            f"a ledger is a SQLite path (str or pathlib.Path) or a postgresql:// URL, "
            f"got {type(target).__name__} {shown(target, 60)}"
        )
    fspath = os.fspath(target)
    if not isinstance(fspath, str):  # a PathLike of bytes
        raise InvalidInput(f"a ledger path must be text, got {shown(fspath, 60)}")
    if fspath == "":  # else opened as the current directory: "  is a directory" (audit s29, F10)
        raise InvalidInput(
            "the ledger path is empty: pass a SQLite file path or a postgresql:// URL "
            "(or set DPLEDGER_URL to one)"
        )
    text = check_unpadded(check_path_text(fspath, "ledger path or URL"), "ledger path or URL")
    url = postgres_url(text)
    if url is not None:
        from dpledger.ledger.postgres import PostgresStore  # optional extra

        return PostgresStore(url, mode)
    from dpledger.ledger.sqlite import SqliteStore

    return SqliteStore(text, mode)
