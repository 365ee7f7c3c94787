"""Helpers shared by the planning modules: value base, validation, sensitivity, tables.

Private to :mod:`dpledger.planning.forward`, :mod:`dpledger.planning.inverse` and
:mod:`dpledger.planning.clip` (not part of the public API).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.policy import ALL, Policy, checked_rounds
from dpledger.policy.checked import validated_copy
from dpledger.types import cohort_size

__all__ = [
    "positive_int",
    "refuse_read_as_zero",
    "release_sensitivity_of",
    "text_table",
    "validated_cohorts",
    "validated_policy",
    "validated_rounds",
]


def refuse_read_as_zero(
    where: str, text: npt.NDArray[np.str_], values: npt.NDArray[np.float64]
) -> None:
    """Refuse a number written in ``text`` that is not zero but reads as 0.0 in
    ``values`` (``1e-400``: below a double's smallest magnitude), naming its line (the
    header is line 1), rather than reading it silently as 0."""
    zero = np.flatnonzero(values == 0)
    if zero.size == 0:
        return
    digits = np.char.partition(np.char.lower(text[zero]), "e")[:, 0]  # before any exponent
    nonzero = np.char.strip(digits, "+-.0") != ""
    if nonzero.any():
        i = int(zero[np.argmax(nonzero)])
        raise InvalidInput(
            f"{where}, line {i + 2}: {str(text[i])!r} is too small for a double (it reads as "
            "0; the smallest non-zero magnitude is about 5e-324): write 0 if it is 0"
        )


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
        raise InvalidInput(f"{what} must be an integer ≥ 1, got {shown(value)}")
    return int(value)


def validated_policy(policy: object) -> Policy:
    """``policy`` validated again from its fields, as a ledger validates it (a plan of one
    built with ``model_construct`` would print numbers no ledger approves); not a
    :class:`Policy`: :class:`InvalidInput` saying how to get one."""
    if not isinstance(policy, Policy):
        raise InvalidInput(
            f"expected a dpledger.Policy, got {type(policy).__name__} {shown(policy, 60)}: "
            "load a policy file with dl.Policy.load(path)"
        )
    return validated_copy(policy, by="a planner")


def validated_cohorts(policy: Policy, cohorts: Mapping[str, int]) -> dict[str, int]:
    """Each region's cohort: a declared region (not ``*``) and an integer in 1..1e9, the
    cohorts a release accepts (:data:`dpledger.types.MAX_COHORT`)."""
    if not isinstance(cohorts, Mapping):
        raise InvalidInput(
            f"cohorts must map each region to its cohort, e.g. {{'eu-west': 2400}}; got "
            f"{type(cohorts).__name__}"
        )
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
        out[region] = cohort_size(n, f"cohort n of region {region!r}")
    return out


def validated_rounds(policy: Policy, rounds_per_epoch: int | None, *, targets: bool = True) -> int:
    """The rounds per epoch to plan: the policy's, or ``rounds_per_epoch`` if a version of
    the policy with that many rounds would load (audit s29, F12: a plan of rounds whose
    per-release budget no policy may hold called its releases publishable). ``targets``:
    whether a target no cohort reaches at those rounds refuses them too (a plan), or not
    (a budget sizer, whose answer then is that the budget does not fit)."""
    if rounds_per_epoch is None:
        return policy.rounds_per_epoch
    rounds = checked_rounds(rounds_per_epoch)  # an integer in 1..MAX_ROUNDS, as a policy's
    same = rounds == policy.rounds_per_epoch
    problems = [] if same else policy.limit_problems(rounds, targets=targets)
    if problems:
        raise InvalidInput(
            f"a version of policy {policy.name} with rounds_per_epoch = {rounds} would not "
            f"load, so these rounds cannot be planned: {'; '.join(problems)}"
        )
    return rounds
