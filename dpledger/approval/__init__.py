"""Release approval: named checks, each pass/fail with a human reason, and the Verdict.

:func:`evaluate` is the one code path behind both ``Ledger.check`` (dry run) and
``Ledger.release`` (which re-runs the budget check under the write lock), so the two
can never disagree. It validates the aggregate before OpenDP ever sees it: OpenDP
turns NaN into 0, clamps inf and accepts a vector of the wrong length.

Every name is importable from here; each lives in one module with one job:

- :mod:`~dpledger.approval.request` the :class:`ReleaseRequest` and its fingerprint;
- :mod:`~dpledger.approval.verdict` :class:`Check`, :class:`Verdict`, the typed refusal;
- :mod:`~dpledger.approval.aggregate` the aggregate's checks (shape, finite, bounds);
- :mod:`~dpledger.approval.checks` the request, costing and ledger-state checks;
- :mod:`~dpledger.approval.noise_range` whether a release's noise stays a finite double;
- :mod:`~dpledger.approval.decide` :func:`evaluate`, :func:`recheck`, :func:`admits`.
"""

from __future__ import annotations

from dpledger.approval.aggregate import AGGREGATE_TOLERANCE
from dpledger.approval.decide import admits, evaluate, recheck
from dpledger.approval.request import MAX_COHORT, MAX_EPOCH, ReleaseRequest, fingerprint
from dpledger.approval.verdict import (
    STATE_CHECKS,
    Assessment,
    Check,
    Prepared,
    Verdict,
    id_conflict,
    refusal,
)

__all__ = [
    "AGGREGATE_TOLERANCE",
    "MAX_COHORT",
    "MAX_EPOCH",
    "STATE_CHECKS",
    "Assessment",
    "Check",
    "Prepared",
    "ReleaseRequest",
    "Verdict",
    "admits",
    "evaluate",
    "fingerprint",
    "id_conflict",
    "recheck",
    "refusal",
]
