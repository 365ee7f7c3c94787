"""dpledger: a differential-privacy budget ledger for federated evaluation metrics.

Clients send bounded contributions; a secure aggregator sums them; dpledger checks
whether the sum may be released, adds OpenDP noise, charges the exact ε (or ρ) to a
durable, hash-chained ledger, and returns the value with its error bar.
"""

from dpledger.approval import Check, ReleaseRequest, Verdict
from dpledger.errors import (
    BudgetExceeded,
    CohortTooSmall,
    DpLedgerError,
    InternalError,
    InvalidAggregate,
    InvalidInput,
    LedgerCorrupted,
    LedgerNotFound,
    PolicyError,
    PolicyMismatch,
    ReleaseIdConflict,
    ReleaseRefused,
    StoreError,
)
from dpledger.ledger import Entry, Ledger, Release, VerifyReport
from dpledger.ledger.derived import DerivedRelease, release_confusion, release_regression
from dpledger.ledger.lifetime import Lifetime
from dpledger.mechanisms import MechanismFacts, cohort_floor, error_bar
from dpledger.planning.clip import ClipCalibration, calibrate_clip
from dpledger.planning.forward import Plan, plan
from dpledger.planning.inverse import epsilon_for_scale, epsilon_for_target, required_budget
from dpledger.policy import ALL, MetricSpec, Policy, PolicyWarning

__version__ = "0.1.0"

__all__ = [
    "ALL",
    "BudgetExceeded",
    "Check",
    "ClipCalibration",
    "CohortTooSmall",
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
    "Plan",
    "Policy",
    "PolicyError",
    "PolicyMismatch",
    "PolicyWarning",
    "Release",
    "ReleaseIdConflict",
    "ReleaseRefused",
    "ReleaseRequest",
    "StoreError",
    "Verdict",
    "VerifyReport",
    "__version__",
    "calibrate_clip",
    "cohort_floor",
    "epsilon_for_scale",
    "epsilon_for_target",
    "error_bar",
    "plan",
    "release_confusion",
    "release_regression",
    "required_budget",
]
