"""Privacy policies: validated, immutable, content-hashed, loaded from TOML.

A policy declares everything a reviewer needs to trust a release: the neighbouring
relation, the epoch budget and evaluation fraction, the disjoint regions, and per
metric its kind, clip or cap (with provenance) and per-release budget. Budgets are
kept as exact :class:`fractions.Fraction` values parsed from the decimals written.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
import tomllib
import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from dpledger.errors import DpLedgerError, InvalidInput, PolicyError
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.records import record_regression_codec
from dpledger.types import (
    Allocation,
    BarKind,
    Budget,
    Definition,
    MechanismKind,
    MetricKind,
    Neighbouring,
    PrivacyUnit,
    Unit,
    fraction_text,
)

__all__ = [
    "ALL",
    "EVAL_FRACTION_ADVISED",
    "MAX_POLICY_BYTES",
    "MAX_RECORDS_PER_PERSON",
    "BudgetValue",
    "Clip",
    "ExactDecimal",
    "FrozenModel",
    "MetricSpec",
    "Policy",
    "PolicyWarning",
    "PositiveDecimal",
    "Regions",
    "describe_validation_error",
    "to_fraction",
]

ALL = "*"
"""The scope of a release that covers every region (a global release)."""

EVAL_FRACTION_ADVISED = (Fraction(1, 10), Fraction(2, 5))
"""Outside this range of ``eval_fraction`` the policy loads with a :class:`PolicyWarning`."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


MAX_POLICY_BYTES = 1 << 20
"""A policy file larger than this (1 MiB) is refused before it is parsed."""


_ADDED_FIELDS: dict[str, object] = {"allocation": "per_metric", "max_records_per_person": None}
"""Policy fields added after ledgers existed, with the default that leaves a hash unchanged."""

_ADDED_METRIC_FIELDS: dict[str, object] = {
    "cap_per_record": None,
    "y_clip": None,
    "y_pred_clip": None,
}
"""The same for fields of each ``[metrics.NAME]`` table (the record-level declarations)."""

MAX_RECORDS_PER_PERSON = 1_000_000
"""The largest ``max_records_per_person`` a policy may declare."""


class PolicyWarning(UserWarning):
    """A policy is valid but unwise (e.g. an eval fraction outside 0.10–0.40)."""


def to_fraction(value: object) -> Fraction:
    """An exact rational from a decimal string, int, float (its shortest repr) or Fraction.

    Floats are read through ``repr`` so that ``0.1`` is exactly 1/10, the decimal the
    policy author wrote, not the binary double nearest to it.
    """
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    if isinstance(value, Fraction):
        q = value
    elif isinstance(value, int):
        q = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {value!r}")
        q = Fraction(repr(value))
    elif isinstance(value, str):
        try:
            q = Fraction(value.strip())
        except (ValueError, ZeroDivisionError) as e:
            raise ValueError(f"expected a decimal number, got {value!r}") from e
    else:
        raise ValueError(f"expected a number, got {type(value).__name__}")
    return q


ExactDecimal = Annotated[
    Fraction,
    BeforeValidator(to_fraction),
    PlainSerializer(fraction_text, return_type=str),
]
"""A policy number kept exact; serialised as ``"p/q"`` text."""


def _budget_value(v: object) -> Budget:
    """A :class:`Budget`, or its :meth:`Budget.as_dict` form (what JSON carries)."""
    if isinstance(v, Budget):
        return v
    if isinstance(v, Mapping) and v.get("unit") in ("epsilon", "rho") and "amount" in v:
        return Budget(to_fraction(v["amount"]), v["unit"])
    raise ValueError(f"expected a Budget or {{'unit': ..., 'amount': 'p/q'}}, got {v!r}")


BudgetValue = Annotated[
    Budget,
    PlainValidator(_budget_value),
    PlainSerializer(lambda b: b.as_dict(), return_type=dict),
]
"""A :class:`Budget` field of a model; serialised as ``{"unit", "amount": "p/q", "value"}``."""


def _positive(q: Fraction) -> Fraction:
    if not q > 0:
        raise ValueError("must be > 0")
    return q


def _fraction_of_one(q: Fraction) -> Fraction:
    if not 0 < q <= 1:
        raise ValueError("must be in (0, 1]")
    return q


PositiveDecimal = Annotated[ExactDecimal, AfterValidator(_positive)]
"""A budget, cap or weight: exact and > 0 (checked per field, so every bad one is listed)."""


def describe_validation_error(e: ValidationError) -> str:
    """Every problem of a pydantic error as ``field: message`` parts joined by ``; ``.

    No pydantic documentation URLs, and inputs shown only as a short ``(got …)``.
    """
    parts = []
    for err in e.errors(include_url=False):
        field = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = str(err["msg"]).removeprefix("Value error, ")
        got = err.get("input")
        hint = ""
        if "input" in err and not isinstance(got, dict | list | tuple):
            shown = repr(got)
            hint = f" (got {shown[:40]}{'…' if len(shown) > 40 else ''})"
        parts.append(f"{field}: {msg}{hint}")
    return "; ".join(parts)


_DEPTH: ContextVar[int] = ContextVar("dpledger_validation_depth", default=0)


class FrozenModel(BaseModel):
    """Frozen, closed pydantic base whose bad input raises a :class:`DpLedgerError`.

    Pydantic's ``ValidationError`` never escapes: the outermost construction (or
    ``model_validate``) turns it into :meth:`_invalid`'s error, listing every problem;
    nested models re-raise pydantic's error so that their fields keep their paths.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    @classmethod
    def _invalid(cls, message: str) -> DpLedgerError:
        return InvalidInput(f"invalid {cls.__name__}: {message}")

    def __init__(self, **data: Any) -> None:
        token = _DEPTH.set(_DEPTH.get() + 1)
        try:
            super().__init__(**data)
        except ValidationError as e:
            if _DEPTH.get() > 1:
                raise
            raise self._invalid(describe_validation_error(e)) from None
        finally:
            _DEPTH.reset(token)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """Validate JSON text; a :class:`DpLedgerError` (not pydantic's) when it is invalid."""
        token = _DEPTH.set(_DEPTH.get() + 1)
        try:
            return super().model_validate_json(json_data, **kwargs)
        except ValidationError as e:
            if _DEPTH.get() > 1:
                raise
            raise cls._invalid(describe_validation_error(e)) from None
        finally:
            _DEPTH.reset(token)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """Validate ``obj``; a :class:`DpLedgerError` (not pydantic's) when it is invalid."""
        token = _DEPTH.set(_DEPTH.get() + 1)
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as e:
            if _DEPTH.get() > 1:
                raise
            raise cls._invalid(describe_validation_error(e)) from None
        finally:
            _DEPTH.reset(token)


class Clip(FrozenModel):
    """Per-client clip bounds of a scalar contribution, with where they came from."""

    low: ExactDecimal
    high: ExactDecimal
    source: str = Field(min_length=1, description="provenance: held-out fleet, n, percentile")

    @model_validator(mode="after")
    def _ordered(self) -> Clip:
        if not self.low < self.high:
            raise ValueError(f"clip low ({self.low}) must be below high ({self.high})")
        return self


class MetricSpec(FrozenModel):
    """One releasable metric: its kind, bounds, per-release budget and error-bar target."""

    kind: MetricKind
    description: str = ""
    clip: Clip | None = None
    edges: tuple[float, ...] | None = None
    edges_version: str | None = None
    dimension: int | None = Field(default=None, ge=1, le=100_000)
    cap_per_client: PositiveDecimal | None = None
    cap_per_record: PositiveDecimal | None = None
    y_clip: Clip | None = None
    y_pred_clip: Clip | None = None
    nonnegative: bool | None = None  # default: True for histograms, False for vector_sum
    epsilon: PositiveDecimal | None = None
    rho: PositiveDecimal | None = None
    weight: PositiveDecimal | None = None
    target: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    bar: BarKind = "ci95"
    mechanism: MechanismKind | None = None

    @field_validator("edges")
    @classmethod
    def _edges_increasing(cls, v: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if v is None:
            return v
        if len(v) < 1:
            raise ValueError("edges must hold at least one value")
        if not all(math.isfinite(e) for e in v):
            raise ValueError("edges must be finite")
        if any(b <= a for a, b in itertools.pairwise(v)):
            raise ValueError(f"edges must be strictly increasing, got {list(v)}")
        return v

    @property
    def is_nonnegative(self) -> bool:
        """Whether every client's vector is ≥ 0: declared, else histograms only.

        It matters for the L2 sensitivity under replace (√2·cap instead of 2·cap), so a
        ``vector_sum`` must declare it; the ledger cannot check it per client.
        """
        if self.nonnegative is not None:
            return self.nonnegative
        return self.kind == "histogram"

    @model_validator(mode="after")
    def _consistent(self) -> MetricSpec:
        problems = []
        budgets = [b for b in (self.epsilon, self.rho, self.weight) if b is not None]
        if len(budgets) != 1:
            problems.append("give exactly one of epsilon, rho (absolute) or weight (a share)")
        if self.kind == "scalar_mean":
            if self.clip is None:
                problems.append("a scalar_mean metric needs clip.low and clip.high")
            if self.edges is not None or self.cap_per_client is not None:
                problems.append("a scalar_mean metric takes clip, not edges or cap_per_client")
            if self.cap_per_record is not None:
                problems.append("a scalar_mean metric takes clip, not cap_per_record")
        else:
            caps = (self.cap_per_client, self.cap_per_record)
            if caps.count(None) != 1:
                problems.append(
                    f"a {self.kind} metric needs one L1 bound > 0: cap_per_client (a client's "
                    "contribution) or, in a record-level policy, cap_per_record (one record's)"
                )
            if self.clip is not None:
                problems.append(f"a {self.kind} metric is bounded by its L1 cap, not clip")
        if (self.y_clip is None) != (self.y_pred_clip is None):
            problems.append("declare both y_clip and y_pred_clip (regression measures), or neither")
        elif self.y_clip is not None and (
            self.kind != "vector_sum" or self.dimension != 5 or self.nonnegative is not False
        ):
            problems.append(
                "y_clip and y_pred_clip declare regression measures: a vector_sum of dimension 5 "
                "with nonnegative = false (regression_codec's layout)"
            )
        if self.kind == "histogram":
            if self.edges is None or self.edges_version is None:
                problems.append("a histogram needs fixed edges and an edges_version")
            elif self.dimension not in (None, len(self.edges) + 1):
                problems.append("a histogram's dimension is len(edges) + 1; omit dimension")
        if self.kind == "vector_sum" and self.dimension is None:
            problems.append("a vector_sum metric needs its dimension")
        if self.kind != "histogram" and self.edges is not None and self.edges_version is None:
            problems.append("edges need an edges_version")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def cap(self) -> Fraction | None:
        """The L1 bound of one privacy unit's element: ``cap_per_client`` or ``cap_per_record``.

        None for a scalar (bounded by ``clip``). Under a record-level policy it bounds one
        record; a person's contribution is bounded by ``max_records_per_person × cap``.
        """
        return self.cap_per_client if self.cap_per_client is not None else self.cap_per_record

    def record_regression_codec(
        self, weights: tuple[float, float, float, float, float] | None = None
    ) -> VectorSumCodec:
        """The codec a silo encodes this metric's records with, and the server decodes with.

        Only for a record-level regression metric (``y_clip``, ``y_pred_clip`` and
        ``cap_per_record`` declared): :func:`dpledger.metrics.records.record_regression_codec`
        of the declared numbers, so both sides build the same codec from the policy
        (``weights`` move noise between the measures; any choice keeps the sensitivity).
        """
        if self.y_clip is None or self.y_pred_clip is None or self.cap_per_record is None:
            raise InvalidInput(
                "record_regression_codec needs a record-level regression metric: y_clip, "
                "y_pred_clip and cap_per_record"
            )
        return record_regression_codec(
            y_clip=(float(self.y_clip.low), float(self.y_clip.high)),
            y_pred_clip=(float(self.y_pred_clip.low), float(self.y_pred_clip.high)),
            cap=float(self.cap_per_record),
            weights=weights,
        )

    @property
    def size(self) -> int:
        """Length of the released vector; 1 for a scalar."""
        if self.kind == "scalar_mean":
            return 1
        if self.kind == "histogram":
            return len(self.edges or ()) + 1
        return int(self.dimension or 0)


def _freeze_metrics(v: Mapping[str, MetricSpec]) -> Mapping[str, MetricSpec]:
    return MappingProxyType(dict(v))


FrozenMetrics = Annotated[
    Mapping[str, MetricSpec],
    AfterValidator(_freeze_metrics),
    PlainSerializer(lambda m: dict(m), return_type=dict[str, MetricSpec]),
]
"""A policy's metrics: a read-only mapping, so a loaded policy cannot change under a cache."""


class Regions(FrozenModel):
    """The disjoint partition of clients: declared names, or open keys (any valid name)."""

    names: tuple[str, ...] = ()
    open: bool = False

    @model_validator(mode="after")
    def _valid(self) -> Regions:
        if not self.open and not self.names:
            raise ValueError("declare region names, or set open = true")
        for n in self.names:
            if not _NAME.match(n):
                raise ValueError(f"region name {n!r} must match {_NAME.pattern}")
        if len(set(self.names)) != len(self.names):
            raise ValueError("region names must be unique")
        return self

    def admits(self, region: str) -> bool:
        """Whether ``region`` is a region of this partition."""
        if region in self.names:
            return True
        return self.open and bool(_NAME.match(region))


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
    epoch_epsilon: PositiveDecimal | None = None
    epoch_rho: PositiveDecimal | None = None
    delta: float = Field(default=1e-6, gt=0, lt=1)
    eval_fraction: Annotated[ExactDecimal, AfterValidator(_fraction_of_one)] = Fraction(1, 4)
    rounds_per_epoch: int = Field(default=1, ge=1, le=100_000)
    allocation: Allocation = "per_metric"
    regions: Regions
    metrics: FrozenMetrics
    source: str = Field(default="<policy>", exclude=True)

    @classmethod
    def _invalid(cls, message: str) -> DpLedgerError:
        return PolicyError(message, source="<policy>")

    @field_validator("name", "version")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} must match {_NAME.pattern}")
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
            if not _NAME.match(name):
                problems.append(f"metric name {name!r} must match {_NAME.pattern}")
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
        return out

    # -- loading -------------------------------------------------------------------

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<string>") -> Policy:
        """Parse and validate a policy from TOML text; raise :class:`PolicyError`."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise PolicyError(f"not valid TOML: {e}", source=source) from e
        except RecursionError:
            raise PolicyError("TOML nested too deeply to be a policy", source=source) from None
        return cls.from_mapping(data, source=source)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "<mapping>") -> Policy:
        """Validate a policy from a parsed mapping; raise :class:`PolicyError`."""
        if not isinstance(data, Mapping):
            raise PolicyError(
                f"expected a table of fields, got {type(data).__name__}", source=source
            )
        try:
            policy = cls.model_validate({**data, "source": source})
        except PolicyError as e:
            raise PolicyError(e.problem, source=source) from None
        lo, hi = EVAL_FRACTION_ADVISED
        if not lo <= policy.eval_fraction <= hi:
            warnings.warn(
                f"{source}: eval_fraction {float(policy.eval_fraction):g} is outside "
                f"{float(lo):g}–{float(hi):g}: below it the error bars swallow the signal, "
                "above it training slows",
                PolicyWarning,
                stacklevel=3,
            )
        return policy

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """Load and validate a policy file; raise :class:`PolicyError` naming the file."""
        p = Path(path)
        try:
            if p.stat().st_size > MAX_POLICY_BYTES:
                raise PolicyError(
                    f"the file is larger than {MAX_POLICY_BYTES} bytes: not a policy", source=str(p)
                )
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise PolicyError(f"cannot read the policy file: {e.strerror}", source=str(p)) from e
        except UnicodeDecodeError as e:
            raise PolicyError(
                f"not UTF-8 text (byte {e.start}): a policy is a UTF-8 TOML file", source=str(p)
            ) from None
        return cls.from_toml(text, source=str(p))

    # -- derived facts -------------------------------------------------------------

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
        spec = self.metric(name)
        absolute = spec.epsilon if spec.epsilon is not None else spec.rho
        if absolute is not None:
            return absolute
        rounds = rounds_per_epoch or self.rounds_per_epoch
        free = self.eval_budget / rounds - self.absolute_per_round()
        weights = sum(
            (m.weight for m in self.metrics.values() if m.weight is not None), Fraction(0)
        )
        return max(free, Fraction(0)) * (spec.weight or Fraction(0)) / weights

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
        return sum(
            (m.epsilon if m.epsilon is not None else m.rho or Fraction(0))
            for m in self.metrics.values()
        ) or Fraction(0)

    def overcommitment(self, rounds_per_epoch: int | None = None) -> Fraction:
        """How far one round of every metric per region exceeds its share (0 if it fits)."""
        rounds = rounds_per_epoch or self.rounds_per_epoch
        per_round = self.eval_budget / rounds
        used = sum((self.release_budget(m, rounds) for m in self.metrics), Fraction(0))
        return max(used - per_round, Fraction(0))

    @functools.cached_property
    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of the validated policy (not of its file bytes).

        Stability contract: a field added after a ledger could record a policy is left
        out while it holds its default (:data:`_ADDED_FIELDS`), so an unchanged policy
        file keeps its hash, and the epochs bound to it, across dpledger versions.
        """
        dump = self.model_dump(mode="json")
        for name, default in _ADDED_FIELDS.items():
            if dump.get(name) == default:
                del dump[name]
        for spec in dump["metrics"].values():
            for name, default in _ADDED_METRIC_FIELDS.items():
                if spec.get(name) == default:
                    del spec[name]
        body = json.dumps(dump, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()

    def __hash__(self) -> int:
        return hash(self.content_hash)
