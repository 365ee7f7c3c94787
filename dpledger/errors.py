"""Every error dpledger raises: one root, typed subclasses that carry their data.

Callers catch :class:`DpLedgerError` for "anything dpledger refused", or a subclass
to act on the reason. Messages say what went wrong and what to do next.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpledger.approval import Verdict
    from dpledger.types import Budget

__all__ = [
    "BudgetExceeded",
    "CohortTooSmall",
    "CommitUnknown",
    "DpLedgerError",
    "InternalError",
    "InvalidAggregate",
    "InvalidInput",
    "LedgerChanged",
    "LedgerCorrupted",
    "LedgerNotFound",
    "LedgerOfAnotherPolicy",
    "LedgerSchemaUnsupported",
    "MigrationRefused",
    "NoiseOutOfRange",
    "NotALedger",
    "NotAuthenticated",
    "NotPermitted",
    "PlotUnavailable",
    "PolicyError",
    "PolicyMismatch",
    "ReleaseIdConflict",
    "ReleaseRefused",
    "StoreError",
    "UnknownResource",
    "error_code",
]


class DpLedgerError(Exception):
    """Root of every error dpledger raises on purpose.

    Pickles with its message and attributes (a verdict, a budget, a field), so it crosses
    a process boundary intact: rebuilt without calling ``__init__``, whose keyword-only
    arguments pickle's default ``cls(*args)`` did not pass (review 39).
    """

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(
    cls: type[DpLedgerError], args: tuple[object, ...], state: dict[str, object]
) -> DpLedgerError:
    """An unpickled error: its class, its ``args`` and its attributes, as they were."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class InvalidInput(DpLedgerError, ValueError):
    """An argument is malformed (NaN, wrong shape, out of range); nothing was changed."""


class PolicyError(DpLedgerError, ValueError):
    """A policy file or value is invalid; names the file, the field and the problem."""

    def __init__(self, message: str, *, source: str = "<policy>", field: str = "") -> None:
        self.source = source
        self.field = field
        self.problem = message
        named = not field or message.startswith(f"{field}: ")  # a validation message names it
        where = f"{source}: " if named else f"{source}: {field}: "
        super().__init__(where + message)


class StoreError(DpLedgerError):
    """The ledger's database failed (locked, unreachable, I/O); the release did not happen
    — except for :class:`CommitUnknown`, where it may have."""


class CommitUnknown(StoreError):
    """The database did not confirm a COMMIT (an I/O error in it, a session lost in its
    round trip): the release may have been recorded (over-counted, never under-counted)
    and no value was returned. A request made with a ``release_id`` gets the recorded
    release, if there is one, from a retry under that id; otherwise read the entries."""


class LedgerChanged(StoreError):
    """Another process changed the ledger while a read handle that reads it without
    SQLite's locks read it (see :mod:`dpledger.ledger.sqlite_fresh`): nothing is wrong
    with the ledger; read again."""


class LedgerNotFound(StoreError):
    """There is no ledger where one was expected (missing path, empty database schema).

    Reading never creates a ledger: open with ``mode="create"`` (or run ``dpledger ledger
    init``) to start a new one.
    """


class LedgerCorrupted(DpLedgerError):
    """The stored ledger is inconsistent with itself (schema, policy or chain)."""


class NotALedger(LedgerCorrupted):
    """The path holds something that is no ledger at all (a text file, another SQLite
    database): the wrong path, not a damaged ledger. Never adopted or overwritten.
    """


class LedgerSchemaUnsupported(LedgerCorrupted):
    """The ledger is of a schema this dpledger does not read as it is: not damage, so
    nothing was verified. Migrate it (``dpledger ledger migrate``) or upgrade dpledger.
    """


class MigrationRefused(LedgerCorrupted):
    """An opened ledger fails its own schema's rules, so it is not migrated (nothing changed).

    Distinct from a path that is no ledger at all (an empty or non-SQLite file), which is
    bad input like for every other command.
    """


class InternalError(DpLedgerError):
    """A dpledger bug: an invariant the code relies on did not hold. Please report it."""


class ReleaseRefused(DpLedgerError):
    """A release failed an approval check; ``verdict`` lists every check and its reason.

    The ledger is unchanged when this is raised. ``verdict`` is None only for a
    :class:`PolicyMismatch` raised when opening a ledger (no release was asked for).
    """

    verdict: Verdict | None

    def __init__(
        self, verdict: Verdict | None, *, message: str = "", index: int | None = None
    ) -> None:
        self.verdict = verdict
        self.index = index  # the refused request's position in a round (from 0), if in one
        super().__init__(message or (verdict.summary() if verdict is not None else ""))

    @property
    def release_id(self) -> str | None:
        """The refused request's release id, if it carried one."""
        return None if self.verdict is None else self.verdict.request.release_id


class InvalidAggregate(ReleaseRefused):
    """The aggregate is malformed (NaN, inf, wrong shape or dtype) or proves clipping failed."""


class PolicyMismatch(ReleaseRefused):
    """The request names an unknown metric or region, or a stale edges/policy version.

    Also raised, without a verdict (``verdict is None``), when a ledger is opened with a
    policy whose (name, version) the ledger already recorded under another content: a
    changed policy needs a new version.
    """

    def __init__(
        self, verdict: Verdict | None = None, *, message: str = "", index: int | None = None
    ) -> None:
        super().__init__(verdict, message=message, index=index)


class LedgerOfAnotherPolicy(PolicyMismatch, LedgerCorrupted):
    """The ledger is bound to another policy name or budget unit than the one it was opened
    with: the caller's mistake (a :class:`PolicyMismatch`, no verdict), still caught as the
    :class:`LedgerCorrupted` earlier versions raised for it."""


class ReleaseIdConflict(ReleaseRefused):
    """The request's ``release_id`` was already used for another request or aggregate.

    A release id names one release: a retry must send the same request and aggregate
    (and then gets the recorded release back). Choose a new id for a new release.
    """


class CohortTooSmall(ReleaseRefused):
    """The cohort is below the floor that the metric's error-bar target requires.

    ``cohort`` is the request's, ``floor`` the smallest cohort that meets the target.
    """

    def __init__(
        self,
        verdict: Verdict,
        *,
        cohort: int,
        floor: int,
        message: str = "",
        index: int | None = None,
    ) -> None:
        self.cohort = cohort
        self.floor = floor
        super().__init__(verdict, message=message, index=index)


class NoiseOutOfRange(ReleaseRefused):
    """The metric's noise scale (Δ/ε) is so near the doubles' limit that a draw could
    overflow: refused before any noise is drawn, from public facts only; nothing charged.
    Raise the metric's ε, or narrow its clip or cap."""


class BudgetExceeded(ReleaseRefused):
    """The release would take a scope past its epoch allocation.

    ``requested``, ``spent`` and ``remaining`` are exact :class:`~dpledger.types.Budget`
    values (in the policy's unit: ε, or ρ under zCDP) and ``scope`` names the binding
    ``(epoch, region)``. ``spent`` is committed spend and ``remaining`` what the ledger
    has left; ``staged`` is what the same call's earlier requests would have added (zero
    outside a round): the request fits iff spent + staged + requested ≤ the limit.
    """

    def __init__(
        self,
        verdict: Verdict,
        *,
        requested: Budget,
        spent: Budget,
        remaining: Budget,
        scope: str,
        staged: Budget | None = None,
        message: str = "",
        index: int | None = None,
    ) -> None:
        self.requested = requested
        self.spent = spent
        self.remaining = remaining
        self.scope = scope
        self.staged = staged if staged is not None else requested - requested  # zero (a
        # Budget: this module imports nothing at run time)
        super().__init__(verdict, message=message, index=index)


class NotAuthenticated(DpLedgerError):
    """No valid credential was presented (missing, malformed, unknown, wrong or revoked key).

    The message is the same for every cause, so that it tells a guesser nothing; the
    service logs the cause (never the key) for its operator.
    """


class NotPermitted(DpLedgerError):
    """A valid credential lacks the scope an action needs (an action, region or metric).

    ``key_id`` names the key (not secret), ``action`` what it asked to do, and ``missing``
    the scope it lacks, e.g. ``"region eu-west"``. Nothing was read or written.
    """

    def __init__(self, message: str, *, key_id: str, action: str, missing: str) -> None:
        self.key_id = key_id
        self.action = action
        self.missing = missing
        super().__init__(message)


class UnknownResource(DpLedgerError):
    """A named thing does not exist: an unknown region, an epoch with no releases, a key id."""


class PlotUnavailable(DpLedgerError):
    """A chart was asked for but matplotlib is not installed: ``pip install 'dpledger[plot]'``."""


def error_code(exc: BaseException) -> str:
    """``BudgetExceeded`` → ``budget_exceeded``: the code an error carries in JSON (the
    service's error bodies, the CLI's ``--json`` errors)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()
