"""The policy: a validated, immutable, content-hashed declaration of what may be released.

A policy declares everything a reviewer needs to trust a release: the neighbouring
relation, the epoch budget and evaluation fraction, the disjoint regions, and per
metric its kind, clip or cap (with provenance) and per-release budget. It checks that
these agree, and derives what the ledger charges: each release's exact budget, each
metric's allocation, the noise mechanism.
"""

from __future__ import annotations

import functools
import numbers
import os
import warnings
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from dpledger._shown import shown
from dpledger.errors import DpLedgerError, InvalidInput, PolicyError
from dpledger.policy.base import (
    MIN_NORMAL,
    NAME,
    RECORDED,
    BudgetDecimal,
    ExactDecimal,
    FrozenModel,
    name_ok,
    not_underflowed,
)
from dpledger.policy.hashing import content_hash
from dpledger.policy.limits import budget_limit_problems, eval_fraction_note
from dpledger.policy.loading import parse_toml, read_policy_text
from dpledger.policy.metric import MetricSpec
from dpledger.policy.regions import Regions
from dpledger.types import (
    Allocation,
    Definition,
    MechanismKind,
    Neighbouring,
    PrivacyUnit,
    Unit,
)

__all__ = [
    "MAX_RECORDS_PER_PERSON",
    "MAX_ROUNDS",
    "Policy",
    "PolicyWarning",
    "checked_rounds",
]

MAX_RECORDS_PER_PERSON = 1_000_000
"""The largest ``max_records_per_person`` a policy may declare."""


MAX_ROUNDS = 100_000
"""The largest ``rounds_per_epoch`` a policy may declare (and a planner may plan)."""


def checked_rounds(value: object) -> int:
    """``value`` as a number of rounds per epoch: an integer (not a bool) in 1..MAX_ROUNDS."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not 1 <= int(value) <= MAX_ROUNDS
    ):
        raise InvalidInput(
            f"rounds_per_epoch must be an integer from 1 to {MAX_ROUNDS:_} (a policy's "
            f"limit), got {shown(value)}"
        )
    return int(value)


class PolicyWarning(UserWarning):
    """A policy is valid but unwise (e.g. an eval fraction outside 0.10–0.40)."""


def _decimal_text(q: Fraction) -> str:
    """An exact decimal when ``q`` has one (1/5 → 0.2), else ≈ 6 significant digits."""
    text = f"{float(q):.15g}"
    return text if Fraction(text) == q else f"≈{float(q):.6g}"


def _fraction_of_one(q: Fraction) -> Fraction:
    if not 0 < q <= 1:
        raise ValueError("must be in (0, 1]")
    if q < MIN_NORMAL and not RECORDED.get():
        raise ValueError("is below the smallest normal double (2.2e-308): not a usable fraction")
    return q


def _freeze_metrics(v: Mapping[str, MetricSpec]) -> Mapping[str, MetricSpec]:
    return MappingProxyType(dict(v))


FrozenMetrics = Annotated[
    Mapping[str, MetricSpec],
    AfterValidator(_freeze_metrics),
    PlainSerializer(lambda m: dict(m), return_type=dict[str, MetricSpec]),
]
"""A policy's metrics: a read-only mapping, so a loaded policy cannot change under a cache."""


class Policy(FrozenModel):
    """A validated privacy policy. Load with :meth:`load` or :meth:`from_toml`."""

    name: str
    version: str
    privacy_unit: PrivacyUnit = "client"
    max_records_per_person: int | None = Field(
        default=None, ge=1, le=MAX_RECORDS_PER_PERSON, strict=True
    )
    neighbouring: Neighbouring
    definition: Definition = "pure"
    epoch_epsilon: BudgetDecimal | None = None
    epoch_rho: BudgetDecimal | None = None
    delta: float = Field(default=1e-6, gt=0, lt=1, strict=True)
    eval_fraction: Annotated[
        ExactDecimal, AfterValidator(_fraction_of_one), BeforeValidator(not_underflowed)
    ] = Fraction(1, 4)
    rounds_per_epoch: int = Field(default=1, ge=1, le=MAX_ROUNDS, strict=True)
    allocation: Allocation = "per_metric"
    regions: Regions
    metrics: FrozenMetrics
    source: str = Field(default="<policy>", exclude=True)

    @classmethod
    def _invalid(cls, message: str, field: str = "") -> DpLedgerError:
        return PolicyError(message, source="<policy>", field=field)

    @field_validator("name", "version")
    @classmethod
    def _name(cls, v: str) -> str:
        if not name_ok(v):
            raise ValueError(f"{v!r} must match {NAME.pattern}")
        return v

    @field_validator("delta")
    @classmethod
    def _normal_delta(cls, v: float) -> float:
        if v < MIN_NORMAL and not RECORDED.get():
            raise ValueError(
                f"delta {v:.3g} is below the smallest normal double 2.2e-308; use a larger δ"
            )
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        problems = []
        if self.definition == "pure":
            if self.epoch_epsilon is None:
                problems.append("a pure-DP policy needs epoch_epsilon > 0")
            if any(m.rho is not None for m in self.metrics.values()):
                problems.append("a pure-DP policy budgets metrics in epsilon, not rho")
            if any(m.mechanism == "gaussian" for m in self.metrics.values()):
                problems.append("Gaussian noise is not pure DP: use definition = 'zcdp'")
        else:
            if self.epoch_rho is None:
                problems.append("a zCDP policy needs epoch_rho > 0")
            if any(m.epsilon is not None for m in self.metrics.values()):
                problems.append("a zCDP policy budgets metrics in rho, not epsilon")
        if not self.metrics:
            problems.append("a policy needs at least one metric")
        problems.extend(self._unit_problems())
        for name, spec in self.metrics.items():
            if not name_ok(name):
                problems.append(f"metric name {name!r} must match {NAME.pattern}")
            absolute = spec.epsilon if spec.epsilon is not None else spec.rho
            budget = self.epoch_epsilon if self.definition == "pure" else self.epoch_rho
            if (
                absolute is not None
                and budget is not None
                and absolute > self.eval_fraction * budget
            ):
                problems.append(
                    f"metric {name!r} costs {absolute} per release, more than the whole "
                    f"evaluation budget {self.eval_fraction * budget}: it could never be released"
                )
        if not problems and not RECORDED.get():  # a recorded policy reads as it was accepted
            problems.extend(budget_limit_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _unit_problems(self) -> list[str]:
        """A record policy declares its person bound and per-record caps; a client one, neither."""
        out = []
        record = self.privacy_unit == "record"
        if record and self.max_records_per_person is None:
            out.append(
                "a record-level policy needs max_records_per_person (the most records one "
                "person may hold; 1 when each person has one record): sensitivities scale by it"
            )
        if not record and self.max_records_per_person is not None:
            out.append("max_records_per_person belongs to a privacy_unit = 'record' policy")
        for name, spec in self.metrics.items():
            if record and spec.cap_per_client is not None:
                out.append(f"metric {name!r}: a record-level policy bounds cap_per_record, not "
                           "cap_per_client")  # fmt: skip
            if not record and (spec.cap_per_record is not None or spec.y_clip is not None):
                out.append(f"metric {name!r}: cap_per_record, y_clip and y_pred_clip belong to "
                           "a privacy_unit = 'record' policy")  # fmt: skip
            small = spec.cap_per_record is not None and spec.cap_per_record < 1
            if small and spec.kind == "histogram" and not RECORDED.get():  # review 41 priv
                out.append(f"metric {name!r}: a record adds one count to a histogram (L1 = 1, "
                           "never scaled): cap_per_record must be ≥ 1")  # fmt: skip
        return out

    # -- loading -------------------------------------------------------------------

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<string>") -> Policy:
        """Parse and validate a policy from TOML text; raise :class:`PolicyError`."""
        if not isinstance(text, str):
            raise PolicyError(
                f"expected the policy's TOML text as a str, got {type(text).__name__} "
                "(decode bytes as UTF-8 first; Policy.load reads a file)",
                source=str(source),
            )
        return cls.from_mapping(parse_toml(text, source=source), source=source)

    @classmethod
    def from_mapping(
        cls, data: dict[str, Any], *, source: str = "<mapping>", recorded: bool = False
    ) -> Policy:
        """Validate a policy from a parsed mapping; raise :class:`PolicyError`.

        ``recorded``: the policy was read back from a ledger, where an earlier dpledger
        accepted it; rules added since for new policies (e.g. on ``edges_version``) are
        not applied to it, so an older ledger still reads and verifies.
        """
        if not isinstance(data, Mapping):
            raise PolicyError(f"expected a table, got {type(data).__name__}", source=source)
        if "source" in data:  # the field holds the file name: a written one was dropped unread
            problem = "a policy has no top-level source field (a clip has its own source)"
            raise PolicyError(problem, source=source, field="source")
        token = RECORDED.set(recorded)
        try:
            policy = cls.model_validate({**data, "source": source})
        except PolicyError as e:
            raise PolicyError(e.problem, source=source, field=e.field) from None
        finally:
            RECORDED.reset(token)
        advice = eval_fraction_note(policy.eval_fraction)
        if advice is not None:
            warnings.warn(f"{source}: {advice}", PolicyWarning, stacklevel=3)
        for unused in policy.ignored_fields():
            warnings.warn(f"{source}: {unused}", PolicyWarning, stacklevel=3)
        note = policy.overcommitment_note()
        starved = any(m.weight is not None for m in policy.metrics.values())
        if note is not None and (policy.allocation == "per_metric" or starved):
            warnings.warn(f"{source}: {note}", PolicyWarning, stacklevel=3)
        return policy

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """Load and validate a policy file; raise :class:`PolicyError` naming the file."""
        if not isinstance(path, str | os.PathLike):
            raise PolicyError(
                f"expected a policy file path (str or pathlib.Path), got {type(path).__name__}",
                source=shown(path),
            )
        p = Path(path)
        return cls.from_toml(read_policy_text(p), source=str(p))

    # -- derived facts -------------------------------------------------------------

    def ignored_fields(self) -> list[str]:
        """Fields this policy states that have no effect, each with what to do: a reviewer
        would otherwise read a budget or a partition that is not applied (audit s29, F9)."""
        out = []
        if self.definition == "pure" and self.epoch_rho is not None:
            out.append(
                "epoch_rho has no effect under definition = 'pure' (the epoch's budget is "
                "epoch_epsilon): remove it, or set definition = 'zcdp'"
            )
        if self.definition == "zcdp" and self.epoch_epsilon is not None:
            out.append(
                "epoch_epsilon has no effect under definition = 'zcdp' (the epoch's budget is "
                "epoch_rho): remove it, or set definition = 'pure'"
            )
        names = self.regions.names
        if self.regions.open and names:
            listed = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
            out.append(
                f"[regions] open = true accepts any region name, so the declared names "
                f"({listed}) do not limit them: remove open = true to hold releases to them"
            )
        return out

    @property
    def unit(self) -> Unit:
        """The budget unit: ε for pure DP, ρ for zCDP."""
        return "epsilon" if self.definition == "pure" else "rho"

    @property
    def records_per_unit(self) -> int:
        """Records one privacy unit may hold: ``max_records_per_person``, or 1 for a client.

        Every sensitivity is the per-element bound (a client's contribution, or one
        record's) times this number.
        """
        return self.max_records_per_person or 1

    @property
    def counted(self) -> str:
        """What a cohort counts: ``"clients"``, or ``"records"`` under a record-level policy."""
        return "records" if self.privacy_unit == "record" else "clients"

    @property
    def protects(self) -> str:
        """One sentence on what a release under this policy protects."""
        if self.privacy_unit == "client":
            return "one client's whole contribution (all of its records together) is protected"
        k = self.records_per_unit
        return (
            f"one person's records (at most {k} per person, enforced by each silo) are "
            "protected; a silo's aggregate statistics are not"
        )

    @property
    def epoch_budget(self) -> Fraction:
        """A client's whole per-epoch budget (ε or ρ)."""
        b = self.epoch_epsilon if self.definition == "pure" else self.epoch_rho
        if b is None:  # excluded by validation
            raise PolicyError("no epoch budget", source=self.source)
        return b

    @functools.cached_property
    def eval_budget(self) -> Fraction:
        """The evaluation allocation per client per epoch: ``eval_fraction × epoch budget``."""
        return self.eval_fraction * self.epoch_budget

    def metric(self, name: str) -> MetricSpec:
        """The metric spec called ``name``; raise :class:`PolicyError` if unknown."""
        if not isinstance(name, str):
            raise PolicyError(
                f"a metric name is text, got {type(name).__name__} {shown(name)}",
                source=self.source,
            )
        try:
            return self.metrics[name]
        except KeyError:
            known = ", ".join(sorted(self.metrics))
            raise PolicyError(
                f"unknown metric {name!r}; this policy has: {known}", source=self.source
            ) from None

    def release_budget(self, name: str, rounds_per_epoch: int | None = None) -> Fraction:
        """Exact ε (or ρ) one release of metric ``name`` is charged.

        Absolute budgets are honoured as written; weighted metrics share what the
        absolute ones leave of ``eval_budget / rounds_per_epoch``, by weight. An
        over-committed policy gives weighted metrics no budget: :meth:`overcommitment`.
        """
        rounds = (
            self.rounds_per_epoch if rounds_per_epoch is None else checked_rounds(rounds_per_epoch)
        )
        spec = self.metric(name)
        absolute = spec.epsilon if spec.epsilon is not None else spec.rho
        if absolute is not None:
            return absolute
        free = self.eval_budget / rounds - self.absolute_per_round()
        return max(free, Fraction(0)) * (spec.weight or Fraction(0)) / self._weight_total

    @functools.cached_property
    def _weight_total(self) -> Fraction:
        """Sum of the weighted metrics' weights (once: every release budget divides by it)."""
        return sum((m.weight for m in self.metrics.values() if m.weight is not None), Fraction(0))

    def allocation_of(self, name: str) -> Fraction | None:
        """The exact share of an epoch's ``ε_eval`` metric ``name`` may spend, per client.

        ``rounds_per_epoch`` releases of its per-release budget: a metric cannot spend
        another metric's share. None when the policy declares ``allocation = "pooled"``
        (metrics then share the whole ``ε_eval``, first come, first served).
        """
        if self.allocation == "pooled":
            return None
        self.metric(name)  # an unknown metric is a PolicyError
        return self._allocations[name]

    @functools.cached_property
    def _allocations(self) -> dict[str, Fraction]:
        return {m: self.rounds_per_epoch * self.release_budget(m) for m in self.metrics}

    def mechanism(self, name: str) -> MechanismKind:
        """The noise a release of ``name`` uses: as declared, else Laplace (pure) or Gaussian."""
        declared = self.metric(name).mechanism
        if declared is not None:
            return declared
        return "laplace" if self.definition == "pure" else "gaussian"

    def absolute_per_round(self) -> Fraction:
        """Sum of the absolute per-release budgets (one release of each metric)."""
        return self._absolute_total

    @functools.cached_property
    def _absolute_total(self) -> Fraction:
        """:meth:`absolute_per_round`, summed once (a policy is frozen): the release budget
        of every weighted metric reads it, so per call it made allocations O(metrics²)."""
        return sum(
            (m.epsilon if m.epsilon is not None else m.rho or Fraction(0))
            for m in self.metrics.values()
        ) or Fraction(0)

    def overcommitment(self, rounds_per_epoch: int | None = None) -> Fraction:
        """How far one round of every metric per region exceeds its share (0 if it fits)."""
        rounds = (
            self.rounds_per_epoch if rounds_per_epoch is None else checked_rounds(rounds_per_epoch)
        )
        per_round = self.eval_budget / rounds
        used = sum((self.release_budget(m, rounds) for m in self.metrics), Fraction(0))
        return max(used - per_round, Fraction(0))

    def limit_problems(self, rounds_per_epoch: int, *, targets: bool = True) -> list[str]:
        """Why a version of this policy with ``rounds_per_epoch`` would not load (empty: it
        would): a per-release budget below the doubles' range, an error bar beyond it, a
        target no cohort reaches (left out with ``targets=False``). What a planner
        planning other rounds must refuse."""
        return budget_limit_problems(self, checked_rounds(rounds_per_epoch), targets=targets)

    def no_budget_reason(self, rounds_per_epoch: int | None = None) -> str:
        """Why a weighted metric gets no budget: over-committed by how much, or exactly used."""
        over = self.overcommitment(rounds_per_epoch)
        if over > 0:
            return f"the policy is over-committed by {_decimal_text(over)}"
        return (
            "the absolute budgets use all of eval_budget / rounds, leaving nothing for "
            "weighted metrics"
        )

    def overcommitment_note(self, rounds_per_epoch: int | None = None) -> str | None:
        """What an over-committed policy means, in one sentence; None if it is not.

        The text :func:`dpledger.plan` warns with, and loading warns with (a
        :class:`PolicyWarning`) where the policy's own rounds make it matter.
        """
        over = self.overcommitment(rounds_per_epoch)
        if over <= 0:
            return None
        sym = "ε" if self.unit == "epsilon" else "ρ"
        effects = []
        if any(m.weight is not None for m in self.metrics.values()):
            effects.append("weighted metrics get no budget")
        if self.allocation == "per_metric":
            effects.append(
                "the per-metric allocations add up to more than ε_eval, so the first releases "
                f"of an epoch can use up the {sym} the others were allocated"
            )
        effects.append("nothing was scaled down")
        return (
            f"the policy is over-committed by {_decimal_text(over)} {sym} per round: absolute "
            f"budgets exceed eval_budget / rounds ({'; '.join(effects)}); lower the absolute "
            "budgets or the rounds"
        )

    @functools.cached_property
    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of the validated policy (not of its file bytes).

        Stability contract: a field added after a ledger could record a policy is left
        out while it holds its default (:mod:`dpledger.policy.hashing`), so an unchanged policy
        file keeps its hash, and the epochs bound to it, across dpledger versions.
        """
        return content_hash(self.model_dump(mode="json"))

    def __hash__(self) -> int:
        return hash(self.content_hash)

    def __eq__(self, other: object) -> bool:
        """Equal fields, read from the content hash (a hash covers every field but
        ``source``): pydantic's field-by-field walk cost ~60 µs a verdict-cache lookup."""
        if self is other:
            return True
        if not isinstance(other, Policy) or type(other) is not type(self):
            return NotImplemented
        try:
            return self.content_hash == other.content_hash and self.source == other.source
        except (KeyError, AttributeError, TypeError, ValueError):  # no hash: model_construct
            return super().__eq__(other)  # (a field left out or mistyped): pydantic's answer
