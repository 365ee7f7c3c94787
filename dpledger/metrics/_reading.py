"""What counts as a real number, read by type: the one home of that rule for the metrics.

An aggregate, a released vector, a scale, a bound or a cap a caller passes is read by its
TYPE, never its values (a refusal that read the values of a private sum would depend on
it, uncharged): integers and floats of any width, and the exact ``Fraction``/``Decimal`` a
policy writes its caps in; not a bool (a flag is not a count), text, complex, a null or a
masked array. Each refusal is :class:`InvalidInput` naming the argument.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput

__all__ = [
    "FloatArray",
    "as_real",
    "check_positive",
    "finite_real",
    "read_array",
    "read_plain",
    "read_real",
    "real_limit",
    "real_pair",
]

FloatArray = npt.NDArray[np.float64]


def read_real(values: object, *, copy: bool = True) -> tuple[FloatArray | None, str]:
    """``values`` as a float64 array, read by their type, never their values; else None
    and why (the one home of what counts as real numbers). ``copy``: always a new array
    (the aggregate a release keeps), or float64 input as it is (per-sample metric inputs).

    Integers and floats of any width are rounded to the nearest double, as the caller's
    own float64 would be (refusing integers by size decided on a private sum's size,
    uncharged: audit 5, F2), Python integers past 64 bits too (numpy keeps them as
    objects); one beyond the largest double is ±inf, as a float of that size is, for the
    finiteness check to refuse. Refused: booleans (alone, or beside numbers in a list:
    numpy would promote a flag to a count; audit 6, G3), a null (``None``, named as one),
    text, complex, ``Decimal``, raw bytes (a ``bytearray``, a ``memoryview`` of bytes),
    dates and other objects, a masked array, alone or in a list (its masked values would
    be used).
    """
    try:
        return _read_real(values, copy)
    except MemoryError:  # the machine's limit, not the input's fault
        raise
    except Exception as e:
        return None, (
            f"not an array of numbers ({_unreadable(e)}: nested lists of unequal lengths or "
            "too deep, or an object that cannot be read as numbers); send one array of numbers"
        )


def read_array(values: object, what: str) -> npt.NDArray[Any]:
    """``np.asarray(values)``, or :class:`InvalidInput` "``what`` (the error's type while
    reading it)" when that raises; a ``MemoryError`` propagates."""
    try:
        return np.asarray(values)
    except MemoryError:
        raise
    except Exception as e:
        raise InvalidInput(f"{what} ({_unreadable(e)})") from None


def read_plain(values: object, what: str) -> npt.NDArray[Any]:
    """``values`` as a plain numpy array, read by type as :func:`read_real` reads numbers:
    a masked array (alone or among rows: its masked entries would be used), booleans
    among numbers, raw bytes, and whatever ``np.asarray`` raises (ragged rows) are
    :class:`InvalidInput` "``what``: why". For an input the caller checks itself (integer
    labels, cell ids, offsets; per-sample data a metric reads next): its dtype check is
    the caller's (a ``timedelta64`` is no integer, though numpy's ``issubdtype`` says it
    is: check ``dtype.kind in "iu"``)."""
    why = ""
    if isinstance(values, np.ma.MaskedArray):
        why = "a masked array: its masked values would be used; send a plain array"
    elif _raw_bytes(values):
        why = _BYTES
    elif isinstance(values, list | tuple):
        why = _odd_elements(values)
    if why:
        raise InvalidInput(f"{what}: {why}")
    return read_array(values, what)


def _unreadable(e: Exception) -> str:
    """What reading a caller's object raised, by type only: the object's own text may
    quote the private values it holds."""
    return f"{type(e).__name__} while reading it"


def _read_real(values: object, copy: bool) -> tuple[FloatArray | None, str]:
    """:func:`read_real`'s reading; any error of the caller's object propagates to it."""
    if isinstance(values, np.ma.MaskedArray):  # np.asarray would unmask it silently
        return None, "a masked array: its masked values would be used; send a plain array"
    if _raw_bytes(values):  # np.asarray reads the bytes of b"a" as the count 97
        return None, _BYTES
    if isinstance(values, list | tuple):
        odd = _odd_elements(values)
        if odd:
            return None, odd
    arr = np.asarray(values)
    if arr.dtype.kind in "fiu":
        return arr.astype(np.float64, copy=copy), ""
    if arr.dtype.kind == "O":
        flat = arr.reshape(-1).tolist()
        if all(_real_scalar(x) for x in flat):
            try:
                return arr.astype(np.float64), ""
            except OverflowError:  # an integer past the largest double: the ±inf it denotes
                doubles = [_double(x) for x in flat]
                return np.asarray(doubles, dtype=np.float64).reshape(arr.shape), ""
        if any(x is None for x in flat):  # JSON null: say so, not only "dtype object"
            return None, _NULL
    return None, f"dtype {arr.dtype} is not a real number type; send float64 or integers"


_NULL = "a null (None) is not a number; send numbers only (fill or drop a missing value)"


_BYTES = (
    "raw bytes (a bytearray or a memoryview of bytes, which numpy reads as small "
    "integers); send numbers: a float, a list or a numpy array"
)


def _raw_bytes(v: object) -> bool:
    """A bytearray, or a memoryview of bytes (a typed buffer, e.g. of float64, reads as
    itself and is not raw bytes)."""
    return isinstance(v, bytearray) or (isinstance(v, memoryview) and v.format in ("B", "b", "c"))


def _odd_elements(values: list[Any] | tuple[Any, ...]) -> str:
    """Why a list or tuple (nested or not) cannot be read as numbers by type: a bool or a
    masked array among its elements (numpy would promote or unmask them); else ""."""
    stack: list[Any] = [values]
    seen: set[int] = set()  # each list once: one that holds itself ends (review s30)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        kinds = set(map(type, v))  # one pass at C speed per list: rows of floats are cheap
        if type(None) in kinds:
            return _NULL
        if bool in kinds or np.bool_ in kinds:
            return "booleans among the numbers (a flag is not a count); send numbers only"
        if any(issubclass(t, np.ma.MaskedArray) for t in kinds):
            return "a masked array among the rows: its masked values would be used"
        if (bytearray in kinds or memoryview in kinds) and any(map(_raw_bytes, v)):
            return _BYTES
        if list in kinds or tuple in kinds or any(issubclass(t, np.ndarray) for t in kinds):
            for x in v:
                if isinstance(x, list | tuple):
                    stack.append(x)
                elif isinstance(x, np.ndarray) and x.dtype.kind == "b":
                    return "booleans among the numbers (a flag is not a count); send numbers only"
    return ""


def _real_scalar(x: object) -> bool:
    """A real number by its type (a bool is not one, nor a timedelta: refused, not coerced)."""
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(
        x, bool | np.bool_ | np.timedelta64
    )


def _double(x: object) -> float:
    """The double nearest the real number ``x``, ±inf past the largest (NaN for a
    ``Decimal`` signalling NaN, which ``float()`` refuses)."""
    try:
        return float(x)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf if x > 0 else -math.inf  # type: ignore[operator]
    except ValueError:  # Decimal('sNaN')
        return math.nan


def _real_number(x: object) -> bool:
    """One real number by type as a metric's parameter may be written: what
    :func:`_real_scalar` admits, and the exact ``Fraction`` (a policy's caps and clips
    are Fractions) and ``Decimal``; not a bool or text."""
    return _real_scalar(x) or isinstance(x, Fraction | Decimal)


def as_real(values: object, name: str, *, copy: bool = False, flags: bool = False) -> FloatArray:
    """``values`` as a float64 array of any shape, read by type (:func:`read_real`);
    anything else is :class:`InvalidInput` (NaN and ±inf pass: see :func:`as_finite`).
    ``copy``: always a new array (one the caller modifies), else float64 input as it is.
    ``flags``: booleans are read as 0/1 (an indicator's weights), not refused. One
    ``Fraction`` or ``Decimal`` (a scale, say) is read as the double nearest it.

    The one reading of a public array argument (a release, a scale, a matrix): text,
    objects, booleans and complex are refused by type (``np.asarray(x, dtype=float)``
    raised a bare ValueError or TypeError on them, and OverflowError on an integer past a
    double: audit s29, F5); such an integer is ±inf, refused by the finiteness checks.
    """
    if isinstance(values, Fraction | Decimal):  # one exact number: a scale, a bound
        return np.asarray(_double(values), dtype=np.float64)
    if flags:
        arr = _flags(values)
        if arr is not None:
            return arr
    arr, why = read_real(values, copy=copy)
    if arr is None:
        raise InvalidInput(f"{name} must hold real numbers: {why}")
    return arr


def _flags(values: object) -> FloatArray | None:
    """Booleans (an indicator: a bucket in or out of a share) as 0/1 doubles; else None."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "b":
        return values.astype(np.float64)
    if (
        isinstance(values, list | tuple)
        and values
        and all(isinstance(v, bool | np.bool_) for v in values)
    ):
        return np.asarray(values, dtype=np.float64)
    return None


def real_pair(
    pair: object, name: str, *, finite: bool = True, strict: bool = True
) -> tuple[float, float]:
    """``pair`` as ``(low, high)``: two real numbers (by type: int, float, Fraction, Decimal,
    numpy numbers; not a bool or text) with low < high (≤ unless ``strict``), finite
    unless ``finite`` is false (±inf allowed, never NaN); else :class:`InvalidInput`
    naming ``name``. The doubles are ``float(low)``, ``float(high)``; an integer past a
    double is out of range, not OverflowError."""
    items = _pair_items(pair)
    if items is None or not all(_real_number(v) for v in items):
        raise InvalidInput(
            f"{name} must be a pair of numbers (low, high), got {type(pair).__name__} "
            f"{shown(pair, 40)}"
        )
    lo, hi = (_double(v) for v in items)
    ordered = lo < hi if strict else lo <= hi
    if not (ordered and (not finite or (math.isfinite(lo) and math.isfinite(hi)))):
        kind = "finite numbers" if finite else "numbers"
        sign = "<" if strict else "≤"
        raise InvalidInput(
            f"{name} must be {kind} with low {sign} high, got ({_number_text(items[0])}, "
            f"{_number_text(items[1])})"
        )
    return lo, hi


def finite_real(value: object, name: str) -> float:
    """``value`` as a finite double of any sign: one real number by type (int, float,
    Fraction, a numpy number; not a bool, text or array); else :class:`InvalidInput`
    naming ``name`` (an integer past a double is out of range, not OverflowError)."""
    if not _real_number(value):
        raise InvalidInput(
            f"{name} must be one finite real number, got {type(value).__name__} {shown(value, 40)}"
        )
    x = _double(value)
    if not math.isfinite(x):
        raise InvalidInput(f"{name} must be finite, got {_number_text(value)}")
    return x


def real_limit(value: object, name: str) -> float:
    """``value`` as a public limit (an upper bound on a denominator, a count threshold):
    one real number by type (int, float, Fraction, a numpy number, or an array holding
    one), ±inf allowed, never NaN; else :class:`InvalidInput` naming ``name``. An integer
    past a double is ±inf, the double nearest it (the limit is no tighter than inf)."""
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "fiu":
        value = value.reshape(-1)[0]
    if not _real_number(value):
        raise InvalidInput(
            f"{name} must be one real number (inf for none), got {type(value).__name__} "
            f"{shown(value, 40)}"
        )
    x = _double(value)
    if math.isnan(x):
        raise InvalidInput(f"{name} must be a number, not NaN (inf for no limit)")
    return x


def _pair_items(pair: object) -> tuple[object, object] | None:
    """The two elements of a list, tuple or 1-D array of length 2; else None."""
    if isinstance(pair, np.ndarray):
        return (pair[0], pair[1]) if pair.shape == (2,) else None
    if isinstance(pair, list | tuple) and len(pair) == 2:
        return pair[0], pair[1]
    return None


def _number_text(x: object) -> str:
    """A number for a message: an integer past 40 digits by its size, else bounded."""
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 10**40:
        return "an integer of more than 40 digits"
    return shown(x, 40)


def check_positive(value: float, name: str) -> float:
    """A finite, strictly positive bound (a clip, cap or sample limit) as a float.

    An integer past the largest double is out of range (:class:`InvalidInput`), not the
    OverflowError of ``float()`` (audit s29, F5).
    """
    if not _real_number(value):
        raise InvalidInput(
            f"{name} must be a number (int, float or Fraction, finite and > 0), got "
            f"{type(value).__name__} {shown(value, 40)}"
        )
    v = _double(value)
    if not (math.isfinite(v) and v > 0.0):
        raise InvalidInput(f"{name} must be finite and > 0, got {_number_text(value)}")
    return v
