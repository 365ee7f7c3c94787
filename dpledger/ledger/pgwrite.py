"""The PostgreSQL store's write transaction in two round trips (libpq pipeline mode).

:class:`PipelinedWrites` is the part of :class:`~dpledger.ledger.postgres.PostgresStore`
that talks to the server while the ledger lock is wanted or held:

1. ``BEGIN``, ``pg_advisory_xact_lock`` and the read of the chain head and the spend of
   the transaction's epochs (and of what else the store knows it will read: entries
   under release ids, epochs' policy bindings), in one pipeline
   (:meth:`~PipelinedWrites._begin_locked`); the caller's ``meanwhile`` work (a
   release's noise, which needs no ledger state) runs while that round trip is under
   way;
2. the entries, spend and head in one statement (a round too large for one statement's
   parameters: several), held back by :meth:`~PipelinedWrites._write_rows`, and
   ``COMMIT``, in one pipeline (:meth:`~PipelinedWrites._pipelined_commit`).

Which statement failed is read from its own result, never guessed. A write the server
refuses means ``COMMIT`` never ran (the server skips the rest of a pipeline after an
error): nothing recorded, the transaction is rolled back. Success is only a ``COMMIT``
result whose command tag is ``COMMIT``. An ERROR answering ``COMMIT`` on a live session
is PostgreSQL's rollback (nothing recorded, a plain ``StoreError``); any other outcome
once the writes were sent is unknown (:class:`~dpledger.errors.CommitUnknown`), so no
value is returned for a commit not seen to succeed.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq as _pq

from dpledger.errors import CommitUnknown, InternalError, StoreError
from dpledger.ledger.pgpipe import (
    Command,
    Pipeline,
    encode,
    error_of,
    lost,
    rows_of,
    succeeded,
)
from dpledger.ledger.schema import COLUMNS

if TYPE_CHECKING:
    from psycopg.pq.abc import PGresult
    from psycopg.rows import TupleRow

__all__ = ["STATEMENT_PARAMETERS", "PipelinedWrites"]


class PipelinedWrites:
    """A write transaction's round trips; mixed into the PostgreSQL store."""

    lock_key: int  # the ledger-wide advisory lock
    _conn: psycopg.Connection[TupleRow]
    _pipeline: Pipeline
    _pending: list[tuple[str, list[Any]]]  # writes sent with the COMMIT
    _in_txn: bool
    _location: str
    _exists: bool  # False while ``create`` runs: its transaction holds no release

    # provided by the store
    def _connection(self) -> psycopg.Connection[TupleRow]:
        raise NotImplementedError

    def _reconnect(self) -> None:
        raise NotImplementedError

    def _rollback_quietly(self) -> None:
        raise NotImplementedError

    def _clean(self, e: BaseException) -> str:
        raise NotImplementedError

    def _error(self, e: Exception) -> StoreError:
        raise NotImplementedError

    def _write_rows(
        self,
        entries: Sequence[tuple[Any, ...]],
        spend: Sequence[tuple[int, str, str, str]],
        head: tuple[int, str],
    ) -> None:
        """Entries, spend totals and the new head, sent with the COMMIT.

        Inside a write transaction the statements are held back and sent by
        :meth:`_commit` in the same round trip as ``COMMIT`` (libpq pipeline mode): nothing
        reads between the flush and the commit, and an error in one still surfaces before
        any value is returned (see :meth:`_pipelined_commit`). One statement as a rule; a
        round too large for one statement's parameters (PostgreSQL takes at most 65,535,
        19 an entry) is split into several, all in that one pipeline and transaction.
        """
        if not self._in_txn:
            raise InternalError("the PostgreSQL store writes only inside a write transaction")
        width = len(entries[0])
        room = STATEMENT_PARAMETERS - 2  # the head's two parameters ride in the last one
        cut_e = _chunks(len(entries), max(1, room // width))
        cut_s = _chunks(len(spend), room // 4)
        (ea, eb), (sa, sb) = cut_e[-1], cut_s[-1]
        if width * (eb - ea) + 4 * (sb - sa) > room:  # the last totals go alone too
            cut_s.append((sb, sb))
            sa = sb
        for a, b in cut_e[:-1]:  # all but the last entries alone
            rows = entries[a:b]
            self._pending.append((_entries_sql(width, b - a), [x for r in rows for x in r]))
        for a, b in cut_s[:-1]:  # all but the last spend totals alone
            self._pending.append((_spend_sql(b - a), [x for r in spend[a:b] for x in r]))
        sql = _write_sql(width, eb - ea, sb - sa)
        params = [*(x for row in entries[ea:eb] for x in row),
                  *(x for row in spend[sa:sb] for x in row), str(head[0]), head[1]]  # fmt: skip
        self._pending.append((sql, params))

    def _begin_locked(
        self, begin: str, reads: Sequence[Command], meanwhile: Callable[[], object] | None
    ) -> list[list[tuple[Any, ...]]]:
        """BEGIN, the ledger lock, then ``reads``: one round trip; the rows of each read.

        The reads run after the lock is granted, each with a fresh snapshot (READ
        COMMITTED): what they return is the state this transaction writes on.
        ``meanwhile`` runs once, while that round trip is under way. A session that
        failed since (or during) this call is replaced once: nothing was done in it yet,
        and BEGIN, the lock and a read are safe to send again.
        """
        ran = False

        def once() -> None:
            nonlocal ran
            if not ran and meanwhile is not None:
                ran = True
                meanwhile()

        commands: list[Command] = [
            (begin, []),
            ("SELECT pg_advisory_xact_lock($1)", [str(self.lock_key).encode()]),
            *reads,
        ]
        self._connection()
        try:
            try:
                results = self._run_pipeline(commands, once)
            except psycopg.OperationalError:
                self._reconnect()
                results = self._run_pipeline(commands, once)
            if any(lost(r) for r in results):  # nothing was read: end it, go again
                self._rollback_quietly()
                results = self._run_pipeline(commands, once)  # prepared afresh
        except psycopg.Error as e:
            raise self._error(e) from e
        encoding = self._conn.info.encoding
        for res in results:
            if not succeeded(res):  # e.g. the lock wait timed out
                error = error_of(res, encoding)
                raise self._error(error) from error
        return [rows_of(self._conn, r) for r in results[2:]]

    def _run_pipeline(
        self, commands: Sequence[Command], meanwhile: Callable[[], object] | None = None
    ) -> list[PGresult]:
        """:meth:`Pipeline.run`; a session that fails mid-pipeline is closed."""
        conn = self._conn
        try:
            return self._pipeline.run(conn, commands, meanwhile)
        except BaseException:
            if conn.broken or conn.pgconn.pipeline_status != _pq.PipelineStatus.OFF:
                with contextlib.suppress(psycopg.Error):
                    conn.close()  # its state is unknown: the next call opens a new one
            raise  # else only ``meanwhile`` failed, once the pipeline was done

    def _commit(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            self._pipelined_commit(pending)
            return
        try:
            self._conn.execute("COMMIT")
        except psycopg.Error as e:
            severity = e.diag.severity_nonlocalized if e.diag is not None else None
            if severity == "ERROR" and not self._conn.broken:  # rolled back (_refused_live)
                self._rollback_quietly()
                raise self._error(e) from e
            raise self._commit_failed(e) from e

    def _commit_failed(self, e: BaseException) -> StoreError:
        if not self._exists:  # the ledger's creation, before any release (review 44 diff 5)
            return StoreError(
                f"PostgreSQL ledger {self._location}: the COMMIT creating it failed "
                f"({self._clean(e)}); it may or may not exist now; nothing was released (no spend "
                "is recorded): retry"
            )
        return CommitUnknown(
            f"PostgreSQL ledger {self._location}: COMMIT failed ({self._clean(e)}); its "
            "outcome is unknown and no value was returned: the spend may have been "
            "recorded (over-counted, never under-counted); check the ledger's entries (a "
            "request made with a release_id: a retry under it returns the recorded release, "
            "if there is one)"
        )

    def _pipelined_commit(self, writes: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """The held-back writes and ``COMMIT`` in one round trip (libpq pipeline mode).

        A write the server refuses means ``COMMIT`` never ran (the server skips the rest
        of a pipeline after an error): nothing recorded, the transaction is rolled back.
        Success is only a ``COMMIT`` result whose command tag is ``COMMIT``; an ERROR on a
        live session is a rollback; any other outcome once the writes were sent — a
        FATAL result, a lost connection, an interrupt — is unknown (CommitUnknown): no
        value for a commit not seen to succeed.
        """
        encoding = self._conn.info.encoding
        try:
            commands = [(sql, encode(params, encoding)) for sql, params in writes]
        except ValueError as e:  # before anything is sent: nothing recorded
            self._rollback_quietly()
            raise StoreError(
                f"PostgreSQL ledger {self._location}: a value cannot be stored in the "
                f"session's encoding {encoding} ({e}); nothing was recorded"
            ) from e
        try:
            *done, commit = self._run_pipeline([*commands, ("COMMIT", [])])
        except psycopg.Error as e:  # the session failed mid-way (and was closed)
            raise self._commit_failed(e) from e
        refused = next((r for r in done if r.status == _pq.ExecStatus.FATAL_ERROR), None)
        if refused is not None:  # the server skipped the rest, COMMIT included
            error = error_of(refused, encoding)
            self._rollback_quietly()
            raise self._error(error) from error
        if commit.status != _pq.ExecStatus.COMMAND_OK or commit.command_status != b"COMMIT":
            error = error_of(commit, encoding)
            if _refused_live(commit, self._conn):  # the server said it rolled back
                self._rollback_quietly()
                raise self._error(error) from error
            with contextlib.suppress(psycopg.Error):
                self._conn.close()  # not seen to commit: start the next call afresh
            raise self._commit_failed(error) from error


def _refused_live(result: Any, conn: Any) -> bool:
    """Whether the server answered COMMIT with an ERROR (a deferred constraint, a
    serialization failure) on a session still open: PostgreSQL then rolled the transaction
    back, so nothing was recorded. FATAL or PANIC (the session ended, perhaps after the
    commit was durable, e.g. while waiting for a synchronous standby) or no answer stays
    unknown."""
    severity = result.error_field(_pq.DiagnosticField.SEVERITY_NONLOCALIZED)
    return bool(
        result.status == _pq.ExecStatus.FATAL_ERROR and severity == b"ERROR" and not conn.broken
    )


STATEMENT_PARAMETERS = 32_000
"""The most parameters a statement the store sends carries, well under PostgreSQL's
65,535 (a 16-bit count in the protocol): a round of up to ~1,600 entries is one statement."""


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    """``[a, b)`` spans of at most ``size`` covering ``range(n)``; one empty span for 0."""
    return [(a, min(a + size, n)) for a in range(0, n, size)] or [(0, 0)]


def _insert_entries(first: int, width: int, rows: int) -> str:
    """An insert of ``rows`` entries of ``width`` columns, parameters from ``$first`` on."""
    n = iter(range(first, first + width * rows))
    values = ", ".join(
        "(" + ", ".join(f"${next(n)}" for _ in range(width)) + ")" for _ in range(rows)
    )
    return f"INSERT INTO dpl_entries ({COLUMNS}) VALUES {values}"


def _upsert_spend(first: int, rows: int) -> str:
    """An upsert of ``rows`` spend totals, parameters from ``$first`` on."""
    values = ", ".join(
        f"(${k}, ${k + 1}, ${k + 2}, ${k + 3})" for k in range(first, first + 4 * rows, 4)
    )
    return (
        f"INSERT INTO dpl_spend (epoch, scope, metric, total) VALUES {values} "
        "ON CONFLICT (epoch, scope, metric) DO UPDATE SET total = excluded.total"
    )


@functools.lru_cache(maxsize=64)
def _entries_sql(width: int, entries: int) -> str:
    """Entries alone (a large round's first parts)."""
    return _insert_entries(1, width, entries)


@functools.lru_cache(maxsize=64)
def _spend_sql(spend: int) -> str:
    """Spend totals alone (a large round's first parts)."""
    return _upsert_spend(1, spend)


@functools.lru_cache(maxsize=64)
def _write_sql(width: int, entries: int, spend: int) -> str:
    """The write of ``entries`` rows of ``width`` columns, ``spend`` totals and the head.

    One text per shape (a single release, a round of 20, ...), built once: the text is
    also the prepared statement's key, and building its ~500 placeholders took longer
    than the rest of a round's client-side write. ``entries`` or ``spend`` may be 0 (the
    last part of a round split across statements).
    """
    parts = [f"e AS ({_insert_entries(1, width, entries)})"] if entries else []
    if spend:
        parts.append(f"s AS ({_upsert_spend(1 + width * entries, spend)})")
    n = 1 + width * entries + 4 * spend
    return (
        ("WITH " + ", ".join(parts) + " " if parts else "")
        + f"INSERT INTO dpl_meta (key, value) VALUES ('head_seq', ${n}), "
        f"('head_hash', ${n + 1}) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
