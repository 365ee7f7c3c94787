"""OpenDP's own measurement call on float64 data, with fewer Python layers around it.

``Measurement.__call__`` converts its argument and result through OpenDP's generic
bindings (type parsing, a cast per element, wrappers that free through more wrappers):
~50 µs of a 7-coordinate release's ~130 µs of noise. :func:`invoke` calls the same library
function (``opendp_core__measurement_invoke``) on the same measurement, with the argument
loaded as OpenDP's ``slice_as_object`` loads it and the result read as its
``object_as_slice`` returns it: the noise is OpenDP's, drawn in its Rust sampler.

It uses OpenDP's C interface through ``opendp._lib`` (pinned: ``opendp==0.16.*``). When a
name it needs is missing, :data:`LEAN` is false and :func:`invoke` is the public call.
The result's type is checked on every call (``f64`` or ``Vec<f64>``, as the argument).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from dpledger._opendp import Measurement

__all__ = ["LEAN", "invoke"]

_F64, _VEC_F64 = b"f64", b"Vec<f64>"
_Call = Callable[..., Any]

try:  # OpenDP's FFI names (opendp 0.16); anything missing: the public call only
    from opendp._lib import AnyObject, FfiResult, FfiSlice, lib, unwrap

    def _fn(name: str, argtypes: list[Any]) -> _Call:
        f = lib[name]  # a private function object: OpenDP's own keeps its settings
        f.argtypes, f.restype = argtypes, FfiResult
        return f  # type: ignore[no-any-return]

    _Obj = ctypes.POINTER(AnyObject)  # a plain pointer: freed here, not by a __del__
    _SlicePtr = ctypes.POINTER(FfiSlice)
    _to_object = _fn("opendp_data__slice_as_object", [_SlicePtr, ctypes.c_char_p])
    _measure = _fn("opendp_core__measurement_invoke", [Measurement, _Obj])
    _type_of = _fn("opendp_data__object_type", [_Obj])
    _to_slice = _fn("opendp_data__object_as_slice", [_Obj])
    _free_object = _fn("opendp_data__object_free", [_Obj])
    _free_slice = _fn("opendp_data__slice_free", [_SlicePtr])
    _free_str = _fn("opendp_data__str_free", [ctypes.c_char_p])
    LEAN = True
except (ImportError, AttributeError):  # pragma: no cover - another OpenDP build
    LEAN = False


def _ok(result: Any, kind: Any) -> Any:
    """The result's payload as ``kind``; an error raises OpenDP's own exception."""
    if result.tag != 0:
        unwrap(result, kind)  # raises OpenDPException and frees the error
    return ctypes.cast(result.payload.Ok, kind)


def invoke(meas: Measurement, values: Sequence[float], vector: bool) -> list[float]:
    """Run ``meas`` on float64 ``values`` (one value when ``vector`` is false).

    The caller has validated the values (finite floats, the measurement's length):
    OpenDP does not check them at run time.
    """
    if not LEAN:  # another OpenDP build (tested by switching LEAN off)
        out = meas(list(values) if vector else float(values[0]))
        return [float(v) for v in out] if vector else [float(out)]
    n = len(values)
    if not vector and n != 1:
        raise ValueError(f"a scalar measurement takes one value, got {n}")
    carrier = _VEC_F64 if vector else _F64
    data = (ctypes.c_double * n)(*values)  # OpenDP copies it into the argument object
    loaded = FfiSlice(ctypes.cast(data, ctypes.c_void_p), n)
    arg = _ok(_to_object(ctypes.byref(loaded), carrier), _Obj)
    try:
        out = _ok(_measure(meas, arg), _Obj)
    finally:
        _free_object(arg)
    try:
        name = _ok(_type_of(out), ctypes.c_char_p)
        try:
            if name.value != carrier:
                raise TypeError(f"OpenDP returned {name.value!r}, expected {carrier!r}")
        finally:
            _free_str(name)
        raw = _ok(_to_slice(out), _SlicePtr)
        try:
            s = raw.contents
            return ctypes.cast(s.ptr, ctypes.POINTER(ctypes.c_double))[0 : s.len]
        finally:
            _free_slice(raw)
    finally:
        _free_object(out)
