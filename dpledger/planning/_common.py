"""Helpers shared by the planning modules: value base, validation, sensitivity, tables.

Private to :mod:`dpledger.planning.forward`, :mod:`dpledger.planning.inverse` and
:mod:`dpledger.planning.clip` (not part of the public API).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence

from dpledger import mechanisms as mech
from dpledger.errors import InvalidInput
from dpledger.policy import ALL, Policy

__all__ = [
    "positive_int",
    "release_sensitivity_of",
    "text_table",
    "validated_cohorts",
    "validated_rounds",
]


def text_table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """An aligned plain-text table; ``align`` holds ``l``/``r`` per column (default ``l``)."""
    body = [tuple(r) for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]
    modes = align.ljust(len(headers), "l")

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if a == "r" else c.ljust(w)
            for c, w, a in zip(cells, widths, modes, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in body)])


def release_sensitivity_of(policy: Policy, metric: str) -> float:
    """Δ of one release as the approval check calibrates it (L2 if Gaussian, else L1)."""
    return mech.policy_sensitivity(policy, metric)


def positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise InvalidInput(f"{what} must be an integer ≥ 1, got {value!r}")
    return int(value)


def validated_cohorts(policy: Policy, cohorts: Mapping[str, int]) -> dict[str, int]:
    if not cohorts:
        raise InvalidInput("give at least one region's cohort, e.g. cohorts={'eu-west': 2400}")
    out: dict[str, int] = {}
    for region, n in cohorts.items():
        if region == ALL:
            raise InvalidInput(
                f"plan regional releases: {ALL!r} (a global release) is not a region; "
                "give each region's cohort"
            )
        if not policy.regions.admits(region):
            declared = ", ".join(policy.regions.names) or "(open partition)"
            raise InvalidInput(f"unknown region {region!r}; the policy declares: {declared}")
        out[region] = positive_int(n, f"cohort n of region {region!r}")
    return out


def validated_rounds(policy: Policy, rounds_per_epoch: int | None) -> int:
    if rounds_per_epoch is None:
        return policy.rounds_per_epoch
    return positive_int(rounds_per_epoch, "rounds_per_epoch")
