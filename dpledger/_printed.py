"""Numbers as printed beside an error bar: interval ends rounded outward, and a value
shown to a precision its bar can see (review 42: rounded to the nearest printed unit,
an interval about one unit wide, or a value whose unit exceeds its bar, printed
intervals that missed the truth the computed ones covered)."""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

__all__ = ["outward", "value_with_bar"]

_EXACT = Context(prec=1100)  # every double's exact decimal (≤ 767 significant digits) fits


def outward(x: float, spec: str, up: bool) -> str:
    """``format(x, spec)`` (``spec`` ``" .Nf"`` or ``" .Ng"``) with ``x`` rounded toward
    +∞ (``up``) or −∞ at that precision instead of to the nearest: the printed number is
    never inside the interval it ends (text that reads back as ``x`` itself, as ``0.4000``
    for the double nearest 0.4, stays as it is)."""
    nearest = format(x, spec)
    if not math.isfinite(x) or float(nearest) == x:  # the text reads back as x itself
        return nearest
    exact = Decimal(x)
    digits = int(spec[spec.index(".") + 1 : -1])
    shift = -digits if spec.endswith("f") else exact.adjusted() - (digits - 1)
    rounded = exact.quantize(
        Decimal(1).scaleb(shift), rounding=ROUND_CEILING if up else ROUND_FLOOR, context=_EXACT
    )
    rounded = rounded.copy_abs() if rounded.is_zero() else rounded  # "+0.000", not "-0.000"
    if not math.isfinite(float(rounded)):  # past the largest double: not "inf" (diff2)
        return format(rounded.normalize(_EXACT), spec)  # "1.8e+308", not "1.80e+308"
    text = format(float(rounded), spec)  # as a double, the value's exponent style
    # a double carries ~16 digits: at 16-17 its nearest text may fall back inside
    return text if (Decimal(text) >= exact) is up else format(rounded, spec)


def value_with_bar(
    value: float, bar: float, digits: int = 3, least: int = 4, decimals: int = 0
) -> tuple[str, str]:
    """``value`` and its half-width ``bar`` as text for ``value ± bar``: the bar to
    ``digits`` significant digits rounded up, the value to at least ``least`` significant digits
    (and ``decimals`` decimal places: the CLI's former vector text, numpy's precision 4),
    and to a unit of at most a hundredth of the bar. To 4 significant digits alone a mean
    over 10⁵ clients printed ``0.5124 ± 3e-05`` for 0.512346 ± 0.00003: the value's
    rounding (up to 5e-5) exceeded the bar, and the printed interval missed the truth in
    every release where the computed one covered 95% (review 42)."""
    shown_bar = outward(bar, f".{digits}g", True)
    seen = math.isfinite(bar) and bar > 0.0
    if not (math.isfinite(value) and value != 0.0 and (seen or decimals > 0)):
        return f"{value:.{least}g}", shown_bar
    unit = math.floor(math.log10(bar)) - 2 if seen else -decimals  # the value's last digit:
    unit = min(unit, -decimals) if decimals else unit  # ≤ bar / 100, and ≤ 10^-decimals
    # (decimals=0 capped the unit at 1: 17 digits for 5.1234e20 ± 1e19; review 42 diff3)
    sig = min(17, max(least, math.floor(math.log10(abs(value))) - unit + 1))
    return f"{value:.{sig}g}", shown_bar
