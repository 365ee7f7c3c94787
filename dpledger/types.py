"""Every shared Literal type, defined once, and :class:`Budget`, an amount of privacy loss.

Imports only :mod:`dpledger.errors`, so that the client side (:mod:`dpledger.metrics`)
and every layer of the core can share these names without importing each other.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from dpledger._shown import shown
from dpledger.errors import InvalidInput

__all__ = [
    "MAX_COHORT",
    "MAX_DIMENSION",
    "Allocation",
    "BarKind",
    "Budget",
    "Definition",
    "IntervalMethod",
    "Labels",
    "LifetimeMethod",
    "MechanismKind",
    "MetricKind",
    "Mode",
    "Neighbouring",
    "PrivacyUnit",
    "Unit",
    "cohort_size",
    "fraction_text",
    "mechanism_kind",
    "nonnegative_real",
    "positive_real",
    "unit_of",
]

MAX_DIMENSION = 100_000
"""The most coordinates a vector metric (a histogram's buckets, a vector sum) may have."""

MAX_COHORT = 10**9
"""The largest cohort a release, a plan or an error bar may declare (a billion clients, or
records under a record-level policy: more than any fleet)."""


def cohort_size(value: object, what: str = "cohort") -> int:
    """``value`` as a cohort: an integer (not a bool) in 1..:data:`MAX_COHORT`; else
    :class:`InvalidInput` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInput(
            f"{what} must be an integer ≥ 1 (a count of clients, or records under a "
            f"record-level policy), got {type(value).__name__} {shown(value, 40)}"
        )
    n = int(value)
    if not 1 <= n <= MAX_COHORT:
        text = f"{n}" if abs(n) < 10**40 else "an integer of more than 40 digits"
        raise InvalidInput(
            f"{what} must be an integer ≥ 1 and at most {MAX_COHORT:_} (1e9, the largest "
            f"cohort a release accepts), got {text}"
        )
    return n


def positive_real(value: object, what: str) -> float:
    """``value`` as a finite double > 0: an int, float or Fraction (not a bool, complex,
    string, Decimal or array); else :class:`InvalidInput` naming ``what``."""
    return _real(value, what, zero=False)


def nonnegative_real(value: object, what: str) -> float:
    """``value`` as a finite double ≥ 0 (an error bound): a real number (int, float,
    Fraction, a numpy integer or float; not a bool, string or array); else
    :class:`InvalidInput` naming ``what``."""
    return _real(value, what, zero=True)


def _real(value: object, what: str, *, zero: bool) -> float:
    """:func:`positive_real` (``zero`` false) or :func:`nonnegative_real`."""
    sign = ">= 0" if zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInput(
            f"{what} must be a real number{' >= 0' if zero else ''} (int, float or Fraction), "
            f"got {type(value).__name__} {shown(value, 40)}"
        )
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if not (math.isfinite(x) and (x >= 0 if zero else x > 0)):
        text = (
            shown(value, 40)
            if not isinstance(value, int) or abs(value) < 10**40
            else "an integer of more than 40 digits"
        )
        raise InvalidInput(f"{what} must be finite and {sign}, got {text}")
    return x


Neighbouring = Literal["replace", "add_remove"]
"""The neighbouring relation: one client's data swapped, or one client added or removed."""

PrivacyUnit = Literal["client", "record"]
"""Whom a policy protects: one client's whole contribution, or one person's records (a
record-level policy, where one person holds at most ``max_records_per_person`` records)."""

Definition = Literal["pure", "zcdp"]
"""The privacy definition a policy accounts in: pure ε-DP, or ρ-zCDP."""

Unit = Literal["epsilon", "rho"]
"""The unit an amount of privacy loss is counted in: ε (pure DP) or ρ (zCDP)."""

MetricKind = Literal["scalar_mean", "histogram", "vector_sum"]
"""How a metric is released: a clipped scalar published as a mean, counts over fixed
edges, or any L1-capped vector."""

BarKind = Literal["ci95", "std", "scale"]
"""What an error bar is: a 95% half-width, a standard deviation, or the noise scale."""

Allocation = Literal["per_metric", "pooled"]
"""Whether each metric may spend only its own share of an epoch's budget, or all share it."""

MechanismKind = Literal["laplace", "gaussian"]
"""The noise a release draws (from OpenDP): Laplace, or Gaussian (zCDP only)."""

Mode = Literal["read", "write", "create"]
"""How a ledger is opened: read an existing one (never written), write an existing one,
or create one with the first approved release."""

Labels = Literal["present", "all"]
"""Which classes macro averages run over: those present, or all C classes."""

IntervalMethod = Literal["delta", "monte_carlo"]
"""How a derived metric's interval is computed: the delta method, or a seeded bootstrap."""

LifetimeMethod = Literal["basic", "zcdp", "pld"]
"""Which composition gave a lifetime figure: exact pure sum, zCDP conversion, or PLD."""


def unit_of(value: object, what: str = "a budget's unit") -> Unit:
    """``value`` as a :data:`Unit` ("epsilon" or "rho"); else :class:`InvalidInput`."""
    if isinstance(value, str) and value in ("epsilon", "rho"):
        return value  # type: ignore[return-value]
    raise InvalidInput(f"{what} must be 'epsilon' or 'rho', got {shown(value)}")


def mechanism_kind(value: object, what: str = "mechanism") -> MechanismKind:
    """``value`` as a :data:`MechanismKind` ("laplace" or "gaussian"); else
    :class:`InvalidInput`."""
    if isinstance(value, str) and value in ("laplace", "gaussian"):
        return value  # type: ignore[return-value]
    raise InvalidInput(f"{what} must be 'laplace' or 'gaussian', got {shown(value)}")


def fraction_text(q: Fraction) -> str:
    """Exact text of a rational: ``"3"`` or ``"1/5"`` (what ledgers and JSON carry)."""
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@functools.total_ordering
@dataclass(frozen=True, slots=True)
class Budget:
    """An exact, non-negative amount of privacy loss and its unit (ε, or ρ under zCDP).

    The amount and its unit travel together, so no number called ``epsilon`` ever holds
    a ρ. Budgets of one unit add, subtract (never below zero) and compare exactly; mixing
    units is an error (convert through the accounting module instead).
    """

    amount: Fraction
    unit: Unit

    def __post_init__(self) -> None:
        unit_of(self.unit)
        if isinstance(self.amount, bool) or not isinstance(self.amount, Fraction | int):
            raise InvalidInput(f"a budget's amount is an exact Fraction, got {shown(self.amount)}")
        # the plain rational first: a Fraction subclass's own comparisons are not read
        object.__setattr__(self, "amount", Fraction(self.amount))
        if self.amount < 0:
            raise InvalidInput(f"a budget is never negative, got {self.amount}")

    @classmethod
    def zero(cls, unit: Unit) -> Budget:
        """No loss, in ``unit``."""
        return cls(Fraction(0), unit)

    @property
    def symbol(self) -> str:
        """``ε`` or ``ρ``."""
        return "ε" if self.unit == "epsilon" else "ρ"

    @property
    def text(self) -> str:
        """The exact amount as ``"p/q"`` text (what ledgers and JSON carry)."""
        return fraction_text(self.amount)

    def _same(self, other: object) -> Budget:
        if not isinstance(other, Budget):
            raise InvalidInput(f"a budget combines with a budget, not {type(other).__name__}")
        if other.unit != self.unit:
            raise InvalidInput(f"cannot combine {self.unit} with {other.unit}: convert first")
        return other

    def __add__(self, other: Budget) -> Budget:
        return Budget(self.amount + self._same(other).amount, self.unit)

    def __radd__(self, other: object) -> Budget:
        """``0 + budget``, so that ``sum(budgets)`` works; any other left operand is an error."""
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return self._same(other) + self

    def __mul__(self, count: int | Fraction) -> Budget:
        """``count`` releases at this budget (a non-negative int or Fraction)."""
        if isinstance(count, bool) or not isinstance(count, int | Fraction):
            raise InvalidInput(f"a budget scales by an int or Fraction, not {count!r}")
        return Budget(self.amount * count, self.unit)

    __rmul__ = __mul__

    def __sub__(self, other: Budget) -> Budget:
        """The difference, floored at zero (what is left of a budget)."""
        return Budget(max(self.amount - self._same(other).amount, Fraction(0)), self.unit)

    def __lt__(self, other: object) -> bool:
        return self.amount < self._same(other).amount

    def __float__(self) -> float:
        """The amount as a double: +inf beyond the largest one (a sum of tampered charges
        on a ledger that fails verification; the exact amount is :attr:`text`)."""
        try:
            return float(self.amount)
        except OverflowError:
            return math.inf

    def __str__(self) -> str:
        return f"{self.symbol} {self.text}"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form: the unit, the exact amount as text, and a float to read."""
        return {"unit": self.unit, "amount": self.text, "value": float(self)}
