"""The policy models' foundations: exact decimals, budget fields, and the frozen base model.

Every number a policy declares is kept as an exact :class:`fractions.Fraction`, parsed
from the decimal the author wrote (never the nearest binary double), so that ten
releases of 0.1 fit a budget of 1.0. :class:`FrozenModel` is the closed, immutable
pydantic base of every policy model; its bad input raises a :class:`DpLedgerError`
listing each problem, never pydantic's own error.
"""

from __future__ import annotations

import copy
import math
import re
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Annotated, Any, Self, TypeVar

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    ValidationError,
)

from dpledger._shown import shown
from dpledger.errors import DpLedgerError, InvalidInput
from dpledger.types import Budget, fraction_text

__all__ = [
    "MAX_BOUND",
    "MAX_BUDGET",
    "MIN_NORMAL",
    "NAME",
    "RECORDED",
    "BoundDecimal",
    "BudgetDecimal",
    "BudgetValue",
    "CapDecimal",
    "ExactDecimal",
    "FrozenModel",
    "PositiveDecimal",
    "describe_validation_error",
    "name_ok",
    "not_underflowed",
    "to_fraction",
]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
"""What a policy, version, metric or region name must match: 1–64 characters, no spaces."""


def name_ok(name: str) -> bool:
    """Whether ``name`` matches :data:`NAME` in whole (``re.match`` let ``$`` pass a final
    newline, so "a\\n" was a second region "a"); a policy recorded in a ledger
    (:data:`RECORDED`) is read as it was accepted then."""
    return bool(NAME.fullmatch(name) or (RECORDED.get() and NAME.match(name)))


_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE]([+-]?[0-9]+))?", re.ASCII)
"""What a number written as a string must be: a plain ASCII decimal, optionally with an
exponent (``"0.1"``, ``"-2.5"``, ``"1e-3"``); no spaces, underscores, signs other than
a leading minus, or non-ASCII digits."""
_RATIO = re.compile(r"-?[0-9]+/[0-9]+", re.ASCII)
"""The exact ``"p/q"`` text a policy's JSON form carries (:func:`fraction_text`)."""
_MAX_TEXT = 400
"""A longer decimal is refused unparsed (no double needs it); ``"p/q"`` text is bounded by
Python's 4,300-digit limit on integer parsing."""
_MAX_EXPONENT = 400
"""A decimal exponent beyond this is refused unparsed: no finite normal double needs it."""


def _from_text(value: str) -> Fraction:
    """An exact rational from a plain ASCII decimal or the canonical ``"p/q"`` text."""
    bad = ValueError(
        'expected a plain decimal such as "0.1" or "1e-3" (ASCII digits, no spaces or underscores)'
    )
    if len(value) <= _MAX_TEXT and (m := _DECIMAL.fullmatch(value)) is not None:
        if m.group(1) is not None and abs(int(m.group(1))) > _MAX_EXPONENT:
            raise ValueError(
                "out of range: its exponent makes it no finite, normal double (a policy's "
                "numbers lie between 2.2e-308 and 1e12 in magnitude); write one in range"
            )
        return Fraction(value)
    if _RATIO.fullmatch(value) is not None:
        num, den = value.split("/")
        try:
            p, q = int(num), int(den)
        except ValueError:  # Python's limit on parsing integers (4,300 digits by default)
            raise ValueError(
                f"a part of this p/q number has {max(len(num.lstrip('-')), len(den)):,} "
                f"digits, more than the {sys.get_int_max_str_digits():,} Python reads as one "
                'integer; no policy number needs that many: write a decimal (e.g. "0.25") '
                "or a shorter fraction"
            ) from None
        if q == 0:
            raise ValueError(f"{value!r} divides by zero")
        return Fraction(p, q)
    raise bad


def to_fraction(value: object) -> Fraction:
    """An exact rational from a decimal string, int, float (its shortest repr), Fraction or
    Decimal (numpy's integers and float64 as Python's).

    Floats are read through ``repr`` so that ``0.1`` is exactly 1/10, the decimal the
    policy author wrote, not the binary double nearest to it. A string is a plain ASCII
    decimal (``"0.1"``, ``"-2"``, ``"1e-3"``), or the exact ``"p/q"`` text that a policy's
    JSON form carries; nothing else (no spaces, underscores or non-ASCII digits).
    """
    if isinstance(value, bool | np.bool_):
        raise ValueError("expected a number, got a boolean")
    if isinstance(value, Fraction):  # a subclass as the plain rational it holds: its own
        q = Fraction(int(value.numerator), int(value.denominator))  # comparisons are not read
    elif isinstance(value, int | np.integer) and not isinstance(value, np.timedelta64):
        q = Fraction(int(value))
    elif isinstance(value, float):  # numpy's float64 too, by the double's own shortest repr
        if not math.isfinite(value):  # (numpy's repr is "np.float64(0.1)", no number's text)
            raise ValueError(f"expected a finite number, got {shown(value)}")
        q = Fraction(float.__repr__(value))
    elif isinstance(value, Decimal):  # its text, exactly, held to the decimals' rules
        q = _from_text(str(value))
    elif isinstance(value, str):
        q = _from_text(value)
    else:
        raise ValueError(
            f"expected an int, a float, a Fraction, a Decimal or decimal text such as "
            f'"0.1", got {type(value).__name__}'
        )
    return q


MIN_NORMAL = Fraction(sys.float_info.min)
"""The smallest normal double (2.2250738585072014e-308): a nonzero policy number below it
(a subnormal, or a decimal that rounds to 0.0) is refused."""

MAX_BUDGET = Fraction(10**9)
"""The largest ε or ρ (epoch or per release) or weight a policy may declare: 1e9.

Far beyond any meaningful guarantee (a few units of ε is already weak; tests use ε = 1e6
as "noise-free"), and small enough that everything computed from it stays a finite double:
noise scales (calibrated on OpenDP's 2⁻⁴⁰ grid), the zCDP view ε²/2 = 5e17 of a release
and lifetime sums of them (:func:`dpledger.accounting.zcdp_epsilon` uses the closed form
past OpenDP's range; the PLD view is skipped past ε = 100), cohort floors."""

MAX_BOUND = Fraction(10**12)
"""The largest magnitude of a clip bound or an L1 cap: 1e12. Times the largest cohort
(1e9) and person bound (1e6) it stays a finite double, and so do sensitivities, squared
sensitivities (Gaussian), gross-clipping limits and noise scales."""


def _double_in_range(q: Fraction, upper: Fraction, what: str, limit: str) -> Fraction:
    """``q`` unless, as a double, it is subnormal (nonzero but below the smallest normal
    double) or larger in magnitude than ``upper``. Skipped for a recorded policy, which is
    read as an earlier dpledger accepted it."""
    if RECORDED.get():
        return q
    if q != 0 and abs(q) < MIN_NORMAL:
        raise ValueError(
            f"a nonzero {what} must be at least the smallest normal double "
            f"2.2250738585072014e-308 (this is {_magnitude(q)}); use a larger value"
        )
    if abs(q) > upper:
        raise ValueError(
            f"a {what} must be at most {limit} in magnitude, so that noise scales "
            "and budget sums stay finite doubles; use a smaller value or other units"
        )
    return q


def _magnitude(q: Fraction) -> str:
    """``q`` as a double (``3.1e-310``), or its order of magnitude where the double would
    read 0 (``about 1e-3998``): math.log10 of an integer takes any size."""
    if float(q) != 0:
        return repr(float(q))  # every digit: 2.2e-308 just below the limit is not the limit
    power = math.log10(abs(q.numerator)) - math.log10(q.denominator)
    exponent = math.floor(power)
    mantissa = min(10 ** (power - exponent), 9.9)  # 9.96 would show as "1e+01"
    return f"about {'-' if q < 0 else ''}{mantissa:.2g}e{exponent}, which a double reads as 0"


def _budget_range(q: Fraction) -> Fraction:
    return _double_in_range(q, MAX_BUDGET, "budget (ε or ρ) or weight", "1e9")


def _bound_range(q: Fraction) -> Fraction:
    return _double_in_range(q, MAX_BOUND, "clip bound or cap", "1e12")


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
    raise ValueError(f"expected a Budget or {{'unit': ..., 'amount': 'p/q'}}, got {shown(v)}")


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


def not_underflowed(v: object) -> object:
    """``v``, unless it is the float 0.0, which is what TOML (or Python) reads a float
    literal below the smallest double as: ``1e-400`` arrives as 0.0, and "must be > 0"
    alone would not say why (audit s29, F10)."""
    if isinstance(v, float) and v == 0.0:
        raise ValueError(
            "must be > 0; if it was written as a float below 2.2e-308 (such as 1e-400), it "
            "underflowed to 0.0 when read, and a nonzero policy number must be at least the "
            'smallest normal double 2.2e-308: use a larger value (as a string, e.g. "1e-3", '
            "it is read exactly)"
        )
    return v


PositiveDecimal = Annotated[
    ExactDecimal, AfterValidator(_positive), BeforeValidator(not_underflowed)
]
"""Exact and > 0 (checked per field, so every bad one is listed); a float 0.0 is refused
with a word on underflow (:func:`not_underflowed`, run before the conversion)."""

BudgetDecimal = Annotated[PositiveDecimal, AfterValidator(_budget_range)]
"""A budget (ε, ρ) or weight: exact, > 0, a normal double, at most :data:`MAX_BUDGET`."""

CapDecimal = Annotated[PositiveDecimal, AfterValidator(_bound_range)]
"""An L1 cap: exact, > 0, a normal double, at most :data:`MAX_BOUND`."""

BoundDecimal = Annotated[ExactDecimal, AfterValidator(_bound_range)]
"""A clip bound: exact, 0 or a normal double, at most :data:`MAX_BOUND` in magnitude."""


def describe_validation_error(e: ValidationError) -> str:
    """Every problem of a pydantic error as ``field: message`` parts joined by ``; ``.

    No pydantic documentation URLs, and inputs shown only as a short ``(got …)``.
    """
    parts = []
    errors = e.errors(include_url=False)
    for err in errors[:_SHOWN_ERRORS]:
        field = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = str(err["msg"]).removeprefix("Value error, ")
        got = err.get("input")
        hint = ""
        if "input" in err and not isinstance(got, dict | list | tuple):
            shown = repr(got)
            hint = f" (got {shown[:40]}{'…' if len(shown) > 40 else ''})"
        parts.append(f"{field}: {msg}{hint}")
    if len(errors) > _SHOWN_ERRORS:
        parts.append(f"and {len(errors) - _SHOWN_ERRORS} more problems")
    return "; ".join(parts)


def _first_field(e: ValidationError) -> str:
    """The dotted path of the first problem (``metrics.loss.epsilon``), "" for the whole."""
    errors = e.errors(include_url=False)
    return ".".join(str(p) for p in errors[0]["loc"]) if errors else ""


_SHOWN_ERRORS = 12
"""The most problems one error message lists (a 400-metric policy missing one field in
each gave a message of 400 parts)."""


_DEPTH: ContextVar[int] = ContextVar("dpledger_validation_depth", default=0)
_T = TypeVar("_T")

RECORDED: ContextVar[bool] = ContextVar("dpledger_reading_recorded_policy", default=False)
"""True while a policy read back from a ledger is validated: rules added for new policies
since it was recorded are not applied to it (pydantic's validation context does not reach
models with their own ``__init__``, so this is a context variable)."""


class FrozenModel(BaseModel):
    """Frozen, closed pydantic base whose bad input raises a :class:`DpLedgerError`.

    Pydantic's ``ValidationError`` never escapes: the outermost construction (or
    ``model_validate``) turns it into :meth:`_invalid`'s error, listing every problem;
    nested models re-raise pydantic's error so that their fields keep their paths.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    @classmethod
    def _invalid(cls, message: str, field: str = "") -> DpLedgerError:
        """The error of bad input; ``field``: the first problem's dotted path, if any."""
        return InvalidInput(f"invalid {cls.__name__}: {message}")

    @classmethod
    def _typed(cls, build: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``build(*args, **kwargs)``, pydantic's error turned into :meth:`_invalid`'s at the
        outermost validation only. A plain call, not a context manager: every request, spec
        and policy is built through it, and a generator context manager costs more than
        pydantic's own check of a request."""
        token = _DEPTH.set(_DEPTH.get() + 1)
        try:
            return build(*args, **kwargs)
        except ValidationError as e:
            if _DEPTH.get() > 1:
                raise
            raise cls._invalid(describe_validation_error(e), _first_field(e)) from None
        finally:
            _DEPTH.reset(token)

    def __init__(self, *args: Any, **data: Any) -> None:
        if args:  # Python's own TypeError otherwise: fields are named, never positional
            raise type(self)._invalid(
                f"takes keyword arguments only (e.g. {type(self).__name__}(name=value, ...)), "
                f"got {len(args)} positional"
            )
        type(self)._typed(super().__init__, **data)

    def __getstate__(self) -> dict[Any, Any]:
        """Pickle's state, a read-only mapping field (a policy's metrics) as a dict: a
        ``MappingProxyType`` cannot be pickled or deep-copied (review 39)."""
        state = super().__getstate__()
        fields = state["__dict__"]
        proxies = [k for k, v in fields.items() if isinstance(v, MappingProxyType)]
        if proxies:
            plain = {k: dict(v) if k in proxies else v for k, v in fields.items()}
            state = {**state, "__dict__": plain, "_dpledger_proxies": proxies}
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        proxies = state.get("_dpledger_proxies", ())
        fields = {
            k: MappingProxyType(v) if k in proxies else v for k, v in state["__dict__"].items()
        }
        super().__setstate__({**state, "__dict__": fields})

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        copied = type(self).__new__(type(self))
        copied.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return copied

    def __setattr__(self, name: str, value: Any) -> None:
        raise type(self)._invalid(f"is frozen: {name} cannot be set; make a new one", name)

    def __delattr__(self, name: str) -> None:
        raise type(self)._invalid(f"is frozen: {name} cannot be deleted; make a new one", name)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update``, validated anew from its fields and ``update``, like any
        new instance: pydantic's copy validates nothing and keeps values a model derived
        from its old fields (a policy's budgets and hash: a copy with a lower budget
        enforced the old one; a request took an unknown field; review 39)."""
        if not update:
            return super().model_copy(deep=deep)
        if not isinstance(update, Mapping):
            raise type(self)._invalid(f"update must map field names to values, got {shown(update)}")
        fields = {k: getattr(self, k) for k in type(self).model_fields}
        return type(self).model_validate({**fields, **update})

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """Validate JSON text; a :class:`DpLedgerError` (not pydantic's) when it is invalid."""
        return cls._typed(super().model_validate_json, json_data, **kwargs)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """Validate ``obj``; a :class:`DpLedgerError` (not pydantic's) when it is invalid."""
        return cls._typed(super().model_validate, obj, **kwargs)
