"""One releasable metric of a policy: its kind, clip or L1 cap, budget and error-bar target.

:class:`Clip` carries a scalar's per-client bounds with their provenance; a
:class:`MetricSpec` checks its own consistency (one budget; a clip for a scalar, one L1
cap for a vector; fixed, versioned edges for a histogram) and knows its released size.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from fractions import Fraction

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, field_validator, model_validator

from dpledger.errors import InvalidInput
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.records import record_regression_codec
from dpledger.policy.base import RECORDED, BoundDecimal, BudgetDecimal, CapDecimal, FrozenModel
from dpledger.types import MAX_DIMENSION, BarKind, MechanismKind, MetricKind

__all__ = ["Clip", "MetricSpec"]


def _exact(q: Fraction) -> str:
    """A policy's number as it was written: its decimal (1.00000000000000001, 1e-300, not
    100000000000000001/1e17 nor 300 zeros), or ``p/q`` where no decimal ends (1/3)."""
    twos = fives = 0
    rest = q.denominator
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        return f"{q.numerator}/{q.denominator}"
    places = max(twos, fives)  # q · 10^places is an integer: exact, no context rounding
    digits = abs(q.numerator * 10**places // q.denominator)
    if digits.bit_length() > 14_000:  # over 4,000 digits, more than str() of an int shows
        return f"{q.numerator}/{q.denominator}"  # (p/q of a bound written shorter: as read)
    exact = Decimal((int(q < 0), tuple(int(c) for c in str(digits)), -places))
    return format(exact, "g")


class Clip(FrozenModel):
    """Per-client clip bounds of a scalar contribution, with where they came from."""

    model_config = ConfigDict(revalidate_instances="always")  # see MetricSpec

    low: BoundDecimal
    high: BoundDecimal
    source: str = Field(min_length=1, description="provenance: held-out fleet, n, percentile")

    @model_validator(mode="after")
    def _ordered(self) -> Clip:
        if not self.low < self.high:  # a new policy's bounds as written (review 41 diff 2)
            low, high = (str(b) if RECORDED.get() else _exact(b) for b in (self.low, self.high))
            raise ValueError(f"clip low ({low}) must be below high ({high})")
        # recorded first: a recorded bound is read unbounded, and float() of one past the
        # doubles raises (review 41 diff: verify of an edited body ended as exit 3)
        if not RECORDED.get() and float(self.low) == float(self.high):  # review 41 priv
            raise ValueError(
                f"clip low ({_exact(self.low)}) and high ({_exact(self.high)}) are the same double "
                f"({float(self.low)!r}): clients clip to doubles, so every one would send that "
                "value; widen the clip"
            )
        return self


class MetricSpec(FrozenModel):
    """One releasable metric: its kind, bounds, per-release budget and error-bar target."""

    # a spec (or clip) changed by pydantic's unvalidated model_copy(update=...) is checked
    # again inside the policy that holds it (review 39: a negative ε entered a policy)
    model_config = ConfigDict(revalidate_instances="always")

    kind: MetricKind
    description: str = ""
    clip: Clip | None = None
    edges: tuple[StrictFloat, ...] | None = None
    edges_version: str | None = Field(
        default=None,
        description="the version of the edges (or layout) a client must bucket with: 1-128 "
        "characters without control characters",
    )
    dimension: int | None = Field(default=None, ge=1, le=MAX_DIMENSION, strict=True)
    cap_per_client: CapDecimal | None = None
    cap_per_record: CapDecimal | None = None
    y_clip: Clip | None = None
    y_pred_clip: Clip | None = None
    nonnegative: StrictBool | None = None  # default: True for histograms, False for vector_sum
    epsilon: BudgetDecimal | None = None
    rho: BudgetDecimal | None = None
    weight: BudgetDecimal | None = None
    target: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    bar: BarKind = "ci95"
    mechanism: MechanismKind | None = None

    @field_validator("edges_version")
    @classmethod
    def _printable_version(cls, v: str | None) -> str | None:
        """A new policy's edges_version: 1-128 characters (what a request can carry) without
        control characters (stored in every entry; PostgreSQL cannot store NUL). A policy
        recorded in a ledger is read as it was accepted then (:data:`RECORDED`)."""
        if v is None or RECORDED.get():
            return v
        if not 1 <= len(v) <= 128:
            raise ValueError(
                f"edges_version must be 1-128 characters (a request carries it), got {len(v)}"
            )
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in v):
            raise ValueError(
                f"edges_version {v!r} holds a control character: it is stored in every "
                "entry (PostgreSQL cannot store NUL); use printable text such as 'h5/v1'"
            )
        return v

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
    def magnitude(self) -> float:
        """The largest |value| one counted element (a client, or a record) adds to a
        coordinate of the sum: max(|clip.low|, |clip.high|) for a scalar, the L1 cap for a
        vector. Bounds the doubles' rounding a release's error bar includes."""
        if self.clip is not None:
            return float(max(abs(self.clip.low), abs(self.clip.high)))
        return 0.0 if self.cap is None else float(self.cap)

    @property
    def size(self) -> int:
        """Length of the released vector; 1 for a scalar."""
        if self.kind == "scalar_mean":
            return 1
        if self.kind == "histogram":
            return len(self.edges or ()) + 1
        return int(self.dimension or 0)
