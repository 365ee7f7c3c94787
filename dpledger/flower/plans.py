"""From a policy to what clients compute: each evaluated metric's plan, checked up front.

Everything a round's releases and derived metrics depend on is checked when the wrapper
is built — the declaration exists and computes the policy's kind, signs agree, a
confusion matrix is C×C, a regression codec fits the policy's dimension and cap, a
health metric has the right shape — so nothing after a round's spend can fail on
configuration.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.flower.report import HEALTH_FIELDS, HEALTH_KEY
from dpledger.flower.wire import MetricPlan, empty_contribution
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.declarations import DECLARATIONS
from dpledger.metrics.flam_regression import regression_codec
from dpledger.policy import Policy
from dpledger.sim.demo import bounds_of

__all__ = [
    "DERIVED",
    "SETTINGS",
    "choose_metrics",
    "health_metric_of",
    "metric_plan",
    "regression_codec_for",
    "settings_of",
]

DERIVED = MappingProxyType({"confusion_matrix": "confusion", "regression_measures": "regression"})
"""Declarations whose release yields every FLAM metric (``release_confusion`` / ``_regression``)."""

_REGRESSION_SETTINGS = ("y_bounds", "residual_bound", "max_samples", "shift")

SETTINGS = MappingProxyType(
    {
        "confusion_matrix": ("n_classes",),
        "regression_measures": _REGRESSION_SETTINGS,
        "pooled_along_across_ratio": ("error_bound", "max_samples"),
    }
)
"""The settings each declaration reads from ``params`` (the others read none)."""


def choose_metrics(
    policy: Policy, metrics: Mapping[str, str] | None, health: str | None
) -> dict[str, str]:
    """Policy metric → declaration; by default every policy metric named as a declaration."""
    names = [m for m in policy.metrics if m != health]
    if metrics is None:
        missing = [m for m in names if m not in DECLARATIONS]
        if missing:
            raise InvalidInput(
                f"say which declared contribution computes {missing}: pass metrics="
                f"{{policy metric: one of {sorted(DECLARATIONS)}}}"
            )
        chosen = {m: m for m in names}
    elif not isinstance(metrics, Mapping) or not metrics:
        raise InvalidInput("metrics must map at least one policy metric to a declaration")
    else:
        chosen = dict(metrics)
    if health is not None and health in chosen:  # two releases under one id (review 39 flw)
        raise InvalidInput(
            f"{health!r} is the health_metric: the wrapper releases the health counters "
            "under it, so clients must not also compute it; leave it out of metrics="
        )
    if HEALTH_KEY in chosen and health != HEALTH_KEY:
        raise InvalidInput(
            f"a metric named {HEALTH_KEY!r} would publish under the health counters' keys "
            f"(REGION/{HEALTH_KEY}/...): rename it in the policy (a new version), or pass "
            f"it as health_metric= if it carries the counters"
        )
    return chosen


def settings_of(
    chosen: Mapping[str, str], params: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, Mapping[str, Any]]:
    """Each evaluated metric's settings, checked: a setting no declaration reads is refused
    (a misspelt ``shfit`` would otherwise be ignored on every client), and every value must
    travel in the round's JSON plan."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidInput(f"params must map metrics to their settings, got {shown(params)}")
    out: dict[str, Mapping[str, Any]] = {}
    for metric, given in params.items():
        if metric not in chosen:
            raise InvalidInput(f"params for a metric that is not evaluated: {metric!r}")
        if not isinstance(given, Mapping):
            raise InvalidInput(
                f"params[{shown(metric)}] must be a mapping of settings, got {shown(given)}"
            )
        known = SETTINGS.get(chosen[metric], ())
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise InvalidInput(
                f"{metric}: {chosen[metric]} reads no setting {unknown}; it reads "
                f"{list(known) or 'none'}"
            )
        try:
            json.dumps(dict(given), allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidInput(
                f"{metric}: settings must be plain finite numbers, strings or lists of them "
                f"(they travel in the round's plan): {e}"
            ) from None
        out[metric] = MappingProxyType(dict(given))
    return out


def health_metric_of(policy: Policy, name: str | None) -> str | None:
    """``name`` if it can carry the health counters (add_remove only; see docs/flower.md)."""
    if name is None:
        return None
    if policy.neighbouring != "add_remove":
        raise InvalidInput(
            "under replace the health counters are public and published exactly: a "
            "health_metric would spend budget for nothing"
        )
    spec = policy.metric(name)
    if not (
        spec.kind == "vector_sum"
        and spec.size == len(HEALTH_FIELDS)
        and spec.is_nonnegative
        and spec.cap_per_client is not None
        and spec.cap_per_client >= 1
    ):
        raise InvalidInput(
            f"health_metric {name!r} must be a nonnegative vector_sum of dimension 3 "
            "(reported, failed, rejected) with cap_per_client ≥ 1 (1 is enough)"
        )
    return name


def metric_plan(
    policy: Policy, metric: str, declaration: str, params: Mapping[str, Any]
) -> MetricPlan:
    """The plan clients follow for ``metric``, after every check its releases rely on."""
    spec = policy.metric(metric)
    declared = DECLARATIONS.get(declaration) if isinstance(declaration, str) else None
    if declared is None:  # a list or dict is no name either (review 42 flw: TypeError)
        raise InvalidInput(
            f"{metric}: {shown(declaration)} is not a declared contribution; "
            f"choose from {sorted(DECLARATIONS)}"
        )
    scalar = declared.kind == "scalar_mean"
    if scalar != (spec.kind == "scalar_mean") or (
        declared.kind == "histogram" and spec.kind != "histogram"
    ):
        raise InvalidInput(
            f"{metric} is a {spec.kind} in the policy, but {declaration} computes a {declared.kind}"
        )
    if spec.is_nonnegative and not declared.nonnegative:
        raise InvalidInput(
            f"{metric}: {declaration} has signed coordinates; declare the policy metric "
            "with nonnegative = false"
        )
    if DERIVED.get(declaration) == "confusion" and not spec.is_nonnegative:
        raise InvalidInput(
            f"{metric}: a confusion matrix counts; declare the policy metric nonnegative = "
            "true (signed, a client's negative cell would be a valid row)"
        )
    if DERIVED.get(declaration) == "confusion":
        c = params.get("n_classes")
        if not isinstance(c, int) or c < 2 or c * c != spec.size:
            raise InvalidInput(
                f"{metric}: a confusion matrix needs params n_classes = C ≥ 2 with C² = the "
                f"policy dimension {spec.size}"
            )
    if DERIVED.get(declaration) == "regression":
        regression_codec_for(policy, metric, params)
    plan = MetricPlan(
        metric, declaration, spec.kind, bounds_of(spec), spec.edges_version,
        MappingProxyType(dict(params)), spec.is_nonnegative,
    )  # fmt: skip
    row = empty_contribution(plan)
    if row.shape != (spec.size,):
        raise InvalidInput(
            f"{metric}: {declaration} computes {row.shape[0]} number(s) per client with these "
            f"settings, the policy's {spec.kind} has dimension {spec.size}"
        )
    return plan


def regression_codec_for(policy: Policy, metric: str, params: Mapping[str, Any]) -> VectorSumCodec:
    """The codec clients encode ``metric``'s regression measures with (the same settings)."""
    spec = policy.metric(metric)
    settings = {k: params[k] for k in _REGRESSION_SETTINGS if k in params}
    try:
        codec = regression_codec(cap=float(spec.cap_per_client or 0), **settings)
    except TypeError as e:
        raise InvalidInput(
            f"{metric}: regression measures need params y_bounds, residual_bound and "
            f"max_samples ({e})"
        ) from None
    if codec.dimension != spec.size:
        raise InvalidInput(f"{metric}: regression measures need a policy dimension of 5")
    return codec
