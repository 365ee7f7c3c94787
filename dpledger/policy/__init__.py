"""Privacy policies: validated, immutable, content-hashed, loaded from TOML.

A policy declares everything a reviewer needs to trust a release: the neighbouring
relation, the epoch budget and evaluation fraction, the disjoint regions, and per
metric its kind, clip or cap (with provenance) and per-release budget. Budgets are
kept as exact :class:`fractions.Fraction` values parsed from the decimals written.

Every name is importable from here; each lives in one module with one job:

- :mod:`~dpledger.policy.base` exact decimals, budget fields, the frozen model base;
- :mod:`~dpledger.policy.metric` one metric's spec (:class:`Clip`, :class:`MetricSpec`);
- :mod:`~dpledger.policy.regions` the disjoint regions and the all-regions scope;
- :mod:`~dpledger.policy.model` the :class:`Policy` and the budgets it derives;
- :mod:`~dpledger.policy.loading` a policy file's text in (size, UTF-8, TOML);
- :mod:`~dpledger.policy.hashing` the content hash and its stability contract.
"""

from __future__ import annotations

from dpledger.policy.base import (
    BudgetValue,
    ExactDecimal,
    FrozenModel,
    PositiveDecimal,
    describe_validation_error,
    to_fraction,
)
from dpledger.policy.limits import EVAL_FRACTION_ADVISED, eval_fraction_note
from dpledger.policy.loading import MAX_POLICY_BYTES
from dpledger.policy.metric import Clip, MetricSpec
from dpledger.policy.model import (
    MAX_RECORDS_PER_PERSON,
    MAX_ROUNDS,
    Policy,
    PolicyWarning,
    checked_rounds,
)
from dpledger.policy.model import FrozenMetrics as FrozenMetrics  # importable here, as before
from dpledger.policy.regions import ALL, Regions

__all__ = [
    "ALL",
    "EVAL_FRACTION_ADVISED",
    "MAX_POLICY_BYTES",
    "MAX_RECORDS_PER_PERSON",
    "MAX_ROUNDS",
    "BudgetValue",
    "Clip",
    "ExactDecimal",
    "FrozenModel",
    "MetricSpec",
    "Policy",
    "PolicyWarning",
    "PositiveDecimal",
    "Regions",
    "checked_rounds",
    "describe_validation_error",
    "eval_fraction_note",
    "to_fraction",
]
