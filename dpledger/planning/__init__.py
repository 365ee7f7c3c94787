"""Planning before a round: budgets, error bars, cohort floors, clip bounds, definitions.

``forward`` plans an epoch of a policy's releases (what each costs and shows); ``inverse``
gives the budget a target error bar needs; ``clip`` tabulates clip bounds from held-out
percentiles; ``definitions`` compares pure/Laplace with zCDP/Gaussian at one guarantee.
Every figure comes from the same functions the approval check uses.
"""

from dpledger.planning.clip import ClipCalibration, ClipCandidate, calibrate_clip
from dpledger.planning.definitions import DefinitionChoice, compare_definitions
from dpledger.planning.forward import MetricPlan, Plan, RegionPlan, plan
from dpledger.planning.inverse import (
    BudgetRequirement,
    budget_for_scale,
    budget_for_target,
    required_budget,
)

__all__ = [
    "BudgetRequirement",
    "ClipCalibration",
    "ClipCandidate",
    "DefinitionChoice",
    "MetricPlan",
    "Plan",
    "RegionPlan",
    "budget_for_scale",
    "budget_for_target",
    "calibrate_clip",
    "compare_definitions",
    "plan",
    "required_budget",
]
