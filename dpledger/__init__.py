"""dpledger: a differential-privacy budget ledger for federated evaluation metrics.

Clients send bounded contributions; a secure aggregator sums them; dpledger checks
whether the sum may be released, adds OpenDP noise, charges the exact ε (or ρ) to a
durable, hash-chained ledger, and returns the value with its error bar.

The package, by role (imports run one way, top to bottom)::

    cli/         the ``dpledger`` command
    service/     ``dpledger serve``: the HTTP API, keys and scopes, the privacy team's page
    sim/         synthetic fleets and the demo      planning/  plans, floors, clip bounds
    ledger/      the Ledger: write path, audit, stores, derived releases, lifetime
    approval     named checks -> Verdict (one path for check and release)
    accounting   composition in exact arithmetic: regions, allocations, conversions
    mechanisms   OpenDP measurements, sensitivities, error bars, cohort floors
    policy       validated, hashed policies
    errors, types   the error hierarchy; shared Literal types and Budget
    metrics/     the client side: contributions and derived-metric intervals (numpy only)

Names are imported on first use, so ``import dpledger.metrics`` on a device loads no
OpenDP, policy or ledger code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpledger.approval import Check, ReleaseRequest, Verdict
    from dpledger.errors import (
        BudgetExceeded,
        CohortTooSmall,
        CommitUnknown,
        DpLedgerError,
        InternalError,
        InvalidAggregate,
        InvalidInput,
        LedgerCorrupted,
        LedgerNotFound,
        NoiseOutOfRange,
        PolicyError,
        PolicyMismatch,
        ReleaseIdConflict,
        ReleaseRefused,
        StoreError,
    )
    from dpledger.ledger import Entry, Ledger, Release, VerifyReport
    from dpledger.ledger.derived import DerivedRelease, release_confusion, release_regression
    from dpledger.ledger.lifetime import Lifetime
    from dpledger.ledger.writer import RoundResult
    from dpledger.mechanisms import MechanismFacts, cohort_floor, error_bar
    from dpledger.planning.clip import ClipCalibration, calibrate_clip
    from dpledger.planning.forward import Plan, plan
    from dpledger.planning.inverse import budget_for_scale, budget_for_target, required_budget
    from dpledger.policy import ALL, MetricSpec, Policy, PolicyWarning
    from dpledger.types import Budget

__version__ = "0.1.0"

_HOME = {
    "ALL": "dpledger.policy",
    "Budget": "dpledger.types",
    "BudgetExceeded": "dpledger.errors",
    "Check": "dpledger.approval",
    "ClipCalibration": "dpledger.planning.clip",
    "CohortTooSmall": "dpledger.errors",
    "DerivedRelease": "dpledger.ledger.derived",
    "DpLedgerError": "dpledger.errors",
    "Entry": "dpledger.ledger",
    "InternalError": "dpledger.errors",
    "InvalidAggregate": "dpledger.errors",
    "InvalidInput": "dpledger.errors",
    "Ledger": "dpledger.ledger",
    "LedgerCorrupted": "dpledger.errors",
    "LedgerNotFound": "dpledger.errors",
    "Lifetime": "dpledger.ledger.lifetime",
    "MechanismFacts": "dpledger.mechanisms",
    "MetricSpec": "dpledger.policy",
    "Plan": "dpledger.planning.forward",
    "Policy": "dpledger.policy",
    "PolicyError": "dpledger.errors",
    "NoiseOutOfRange": "dpledger.errors",
    "PolicyMismatch": "dpledger.errors",
    "PolicyWarning": "dpledger.policy",
    "Release": "dpledger.ledger",
    "ReleaseIdConflict": "dpledger.errors",
    "ReleaseRefused": "dpledger.errors",
    "ReleaseRequest": "dpledger.approval",
    "RoundResult": "dpledger.ledger.writer",
    "StoreError": "dpledger.errors",
    "CommitUnknown": "dpledger.errors",
    "Verdict": "dpledger.approval",
    "VerifyReport": "dpledger.ledger",
    "calibrate_clip": "dpledger.planning.clip",
    "cohort_floor": "dpledger.mechanisms",
    "budget_for_scale": "dpledger.planning.inverse",
    "budget_for_target": "dpledger.planning.inverse",
    "error_bar": "dpledger.mechanisms",
    "plan": "dpledger.planning.forward",
    "release_confusion": "dpledger.ledger.derived",
    "release_regression": "dpledger.ledger.derived",
    "required_budget": "dpledger.planning.inverse",
}
"""Where each public name lives: imported from there on first use."""

_DEPRECATED = {
    "epsilon_for_scale": "dpledger.planning.inverse",  # budget_for_scale's amount
    "epsilon_for_target": "dpledger.planning.inverse",  # budget_for_target's amount
}
"""Old names kept importable (they warn when called); not in ``__all__``."""

__all__ = [
    "ALL",
    "Budget",
    "BudgetExceeded",
    "Check",
    "ClipCalibration",
    "CohortTooSmall",
    "CommitUnknown",
    "DerivedRelease",
    "DpLedgerError",
    "Entry",
    "InternalError",
    "InvalidAggregate",
    "InvalidInput",
    "Ledger",
    "LedgerCorrupted",
    "LedgerNotFound",
    "Lifetime",
    "MechanismFacts",
    "MetricSpec",
    "NoiseOutOfRange",
    "Plan",
    "Policy",
    "PolicyError",
    "PolicyMismatch",
    "PolicyWarning",
    "Release",
    "ReleaseIdConflict",
    "ReleaseRefused",
    "ReleaseRequest",
    "RoundResult",
    "StoreError",
    "Verdict",
    "VerifyReport",
    "__version__",
    "budget_for_scale",
    "budget_for_target",
    "calibrate_clip",
    "cohort_floor",
    "error_bar",
    "plan",
    "release_confusion",
    "release_regression",
    "required_budget",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name) or _DEPRECATED.get(name)
    if home is None:
        raise AttributeError(f"module 'dpledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
