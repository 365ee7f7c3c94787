"""libpq pipeline mode for the PostgreSQL store: several statements in one round trip.

A write transaction needs the server twice: once for ``BEGIN``, the ledger lock and the
state read under it, once for the writes and ``COMMIT``. :class:`Pipeline` sends each
group as one pipeline of prepared statements (text-format parameters) ending at one sync
point, and hands back one result per statement, in order. The server runs a
pipeline's statements in order and, after an error, skips the rest up to the sync point
(their results say ``PIPELINE_ABORTED``): the caller reads which statement failed from
the results, never guesses it.

Statements are prepared once per session, on first use, in the same pipeline; a
preparation outlives a rolled-back transaction, so it is remembered as soon as the
server confirms it. The store turns psycopg's own automatic preparation off on its
connections: psycopg answers a ``ROLLBACK`` by deallocating every prepared statement
of the session, ours included. Should a statement vanish all the same (someone sent
``DEALLOCATE ALL``), its command fails with ``invalid_sql_statement_name`` and every
name is forgotten, to be prepared again on next use. A session that fails
mid-pipeline is left in an unknown state: the caller closes it (:meth:`Pipeline.run`
raises, and the store opens a new session).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import generators, pq
from psycopg.adapt import Transformer

if TYPE_CHECKING:
    from psycopg.abc import PQGen
    from psycopg.pq.abc import PGconn, PGresult
    from psycopg.rows import TupleRow

__all__ = [
    "PREPARED_MAX",
    "Command",
    "Pipeline",
    "encode",
    "error_of",
    "lost",
    "rows_of",
    "succeeded",
    "text_array",
]

PREPARED_MAX = 64
"""Statements prepared per session (a write's text depends on its number of entries)."""

Command = tuple[str, list[bytes | None]]
"""A statement with ``$n`` parameters and its text-format parameter values."""

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_NO_STATEMENT = b"26000"  # invalid_sql_statement_name


def encode(values: Sequence[Any], encoding: str) -> list[bytes | None]:
    """Text-format parameters: ``None`` is NULL, anything else its ``str`` encoded.

    Raises :class:`UnicodeEncodeError` for text the session's encoding cannot carry, and
    :class:`ValueError` for a NUL character: libpq reads a text-format parameter as a C
    string, so the server would store the text cut at the NUL (PostgreSQL's text cannot
    hold one), not the text the caller hashed.
    """
    out = [None if v is None else str(v).encode(encoding) for v in values]
    if b"\0" in b"".join(b for b in out if b is not None):
        raise ValueError("PostgreSQL text cannot hold a NUL character (0x00)")
    return out


def succeeded(result: PGresult) -> bool:
    """Whether a statement's result is a success (a command or a row set)."""
    return result.status in _OK


def error_of(result: PGresult, encoding: str) -> psycopg.Error:
    """The psycopg exception a failed (or skipped) statement's result stands for."""
    if result.status == pq.ExecStatus.PIPELINE_ABORTED:
        return psycopg.errors.PipelineAborted("skipped after an earlier error in the pipeline")
    return psycopg.errors.error_from_result(result, encoding=encoding)


def lost(result: PGresult) -> bool:
    """Whether a statement failed because its prepared statement no longer exists."""
    return result.error_field(pq.DiagnosticField.SQLSTATE) == _NO_STATEMENT


def rows_of(conn: psycopg.Connection[TupleRow], result: PGresult) -> list[tuple[Any, ...]]:
    """A row set's values as ``conn.execute`` would return them (bigint as int, NULL as None).

    Loaded by psycopg's own loaders for the result's column types, so a row read through
    a pipeline is the same Python value as one read through a plain query.
    """
    loader = Transformer.from_context(conn)
    loader.set_pgresult(result)
    return loader.load_rows(0, result.ntuples, tuple)


def text_array(values: Sequence[str]) -> str:
    """A text-format PostgreSQL ``text[]`` literal: every element quoted and escaped."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


class Pipeline:
    """Runs groups of statements in one round trip each on one session's connection."""

    def __init__(self, adhoc: frozenset[str] = frozenset()) -> None:
        """``adhoc``: statements never prepared, planned for their values every time.

        A prepared statement's generic plan is made once, for the table as it was then:
        a lookup whose best plan changes as the table grows (an index scan once there
        are more than a few entries) must not keep the plan of an empty ledger.
        """
        self._names: dict[str, bytes] = {}  # statement text -> its prepared name
        self._adhoc = adhoc

    def forget(self) -> None:
        """Forget every prepared statement (the session they lived in is gone)."""
        self._names = {}

    def run(
        self,
        conn: psycopg.Connection[TupleRow],
        commands: Sequence[Command],
        meanwhile: Callable[[], object] | None = None,
    ) -> list[PGresult]:
        """One result per command, in order; a failed preparation is its command's result.

        ``meanwhile`` runs once the commands are sent and before their results are read:
        client work overlapped with the round trip. Its exception is raised after the
        results are in (the session stays usable). Raises :class:`psycopg.Error` (or an
        interrupt) when the session fails mid-way: its state is then unknown and the
        caller must close it.
        """
        pg = conn.pgconn
        pending = self._queue(pg, commands)
        conn.wait(generators.send(pg))
        failed: BaseException | None = None
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException as e:  # re-raised below, once the results are in
                failed = e
        results = conn.wait(self._collect(pg, *pending))
        if any(lost(r) for r in results):  # dropped by someone else (DEALLOCATE, DISCARD)
            self.forget()  # prepared again on next use
        if failed is not None:
            raise failed
        return results

    def _queue(
        self, pg: PGconn, commands: Sequence[Command]
    ) -> tuple[list[str | None], dict[str, bytes]]:
        pg.enter_pipeline_mode()
        fresh: dict[str, bytes] = {}
        prepares: list[str | None] = []  # per command: the text it prepares first, if any
        for sql, values in commands:
            name = self._names.get(sql) or fresh.get(sql)
            if name is None and (
                sql in self._adhoc or len(self._names) + len(fresh) >= PREPARED_MAX
            ):
                pg.send_query_params(sql.encode(), values)  # ad hoc, or a rare shape
                prepares.append(None)
                continue
            prepares.append(None if name is not None else sql)
            if name is None:
                name = fresh[sql] = f"dpl_{len(self._names) + len(fresh)}".encode()
                pg.send_prepare(name, sql.encode())
            pg.send_query_prepared(name, values)
        pg.pipeline_sync()
        return prepares, fresh

    def _collect(
        self, pg: PGconn, prepares: list[str | None], fresh: dict[str, bytes]
    ) -> PQGen[list[PGresult]]:
        out: list[PGresult] = []
        for text in prepares:
            failed = None
            if text is not None:
                ready = yield from _result(pg)
                if ready.status == pq.ExecStatus.COMMAND_OK:
                    self._names[text] = fresh[text]
                else:
                    failed = ready
            executed = yield from _result(pg)
            out.append(executed if failed is None else failed)
        sync = yield from generators.fetch_many(pg)
        if [r.status for r in sync] != [pq.ExecStatus.PIPELINE_SYNC]:
            raise psycopg.OperationalError("the pipeline did not end at its sync point")
        pg.exit_pipeline_mode()
        return out


def _result(pg: PGconn) -> PQGen[PGresult]:
    """The result of the next command in the pipeline (its last, if it sent several)."""
    got = yield from generators.fetch_many(pg)
    if not got:
        raise psycopg.OperationalError("the server sent no result for a command")
    last: PGresult = got[-1]
    return last
