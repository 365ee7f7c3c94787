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
    PolicyError,
    PolicyMismatch,
    ReleaseRefused,
    StoreError,
)
from dpledger.ledger import Entry, Ledger, Release, VerifyReport
from dpledger.mechanisms import MechanismFacts, cohort_floor, error_bar
from dpledger.policy import ALL, MetricSpec, Policy, PolicyWarning

__version__ = "0.1.0"

__all__ = [
    "ALL",
    "BudgetExceeded",
    "Check",
    "CohortTooSmall",
    "DpLedgerError",
    "Entry",
    "InternalError",
    "InvalidAggregate",
    "InvalidInput",
    "Ledger",
    "LedgerCorrupted",
    "MechanismFacts",
    "MetricSpec",
    "Policy",
    "PolicyError",
    "PolicyMismatch",
    "PolicyWarning",
    "Release",
    "ReleaseRefused",
    "ReleaseRequest",
    "StoreError",
    "Verdict",
    "VerifyReport",
    "__version__",
    "cohort_floor",
    "error_bar",
]
