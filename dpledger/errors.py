"""Every error dpledger raises: one root, typed subclasses that carry their data.

Callers catch :class:`DpLedgerError` for "anything dpledger refused", or a subclass
to act on the reason. Messages say what went wrong and what to do next.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpledger.approval import Verdict

__all__ = [
    "BudgetExceeded",
    "CohortTooSmall",
    "DpLedgerError",
    "InternalError",
    "InvalidAggregate",
    "InvalidInput",
    "LedgerCorrupted",
    "PolicyError",
    "PolicyMismatch",
    "ReleaseRefused",
    "StoreError",
]


class DpLedgerError(Exception):
    """Root of every error dpledger raises on purpose."""


class InvalidInput(DpLedgerError, ValueError):
    """An argument is malformed (NaN, wrong shape, out of range); nothing was changed."""


class PolicyError(DpLedgerError, ValueError):
    """A policy file or value is invalid; names the file, the field and the problem."""

    def __init__(self, message: str, *, source: str = "<policy>", field: str = "") -> None:
        self.source = source
        self.field = field
        where = f"{source}: {field}: " if field else f"{source}: "
        super().__init__(where + message)


class StoreError(DpLedgerError):
    """The ledger's database failed (locked, unreachable, I/O); the release did not happen."""


class LedgerCorrupted(DpLedgerError):
    """The stored ledger is inconsistent with itself (schema, policy or chain)."""


class InternalError(DpLedgerError):
    """A dpledger bug: an invariant the code relies on did not hold. Please report it."""


class ReleaseRefused(DpLedgerError):
    """A release failed an approval check; ``verdict`` lists every check and its reason.

    The ledger is unchanged when this is raised.
    """

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.summary())


class InvalidAggregate(ReleaseRefused):
    """The aggregate is malformed (NaN, inf, wrong shape or dtype) or proves clipping failed."""


class PolicyMismatch(ReleaseRefused):
    """The request names an unknown metric or region, or a stale edges/policy version."""


class CohortTooSmall(ReleaseRefused):
    """The cohort is below the floor that the metric's error-bar target requires.

    ``cohort`` is the request's, ``floor`` the smallest cohort that meets the target.
    """

    def __init__(self, verdict: Verdict, *, cohort: int, floor: int) -> None:
        self.cohort = cohort
        self.floor = floor
        super().__init__(verdict)


class BudgetExceeded(ReleaseRefused):
    """The release would take a scope past its epoch allocation.

    ``requested``, ``spent`` and ``remaining`` are exact (in the policy's unit: ε, or ρ
    under zCDP) and ``scope`` names the binding ``(epoch, region)``.
    """

    def __init__(
        self,
        verdict: Verdict,
        *,
        requested: Fraction,
        spent: Fraction,
        remaining: Fraction,
        scope: str,
    ) -> None:
        self.requested = requested
        self.spent = spent
        self.remaining = remaining
        self.scope = scope
        super().__init__(verdict)
