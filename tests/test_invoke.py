"""The lean OpenDP call (``dpledger._invoke``) draws what ``Measurement.__call__`` draws.

OpenDP's samplers cannot be seeded, so the distribution checks are two-sample KS tests
(lean call against OpenDP's public call on the same measurement) rejecting at
p < 1e-9: under the same law p is (at most) uniform, so a false failure has probability
1e-9 per assertion (four: 4e-9 per run; at 1e-6 it was 4e-6, a CI failure in every
~250,000 runs). The power check (a 2× scale must be told apart) has a false-failure rate
far below that (KS statistic ≈ 0.17 at 6,000 samples a side: p ≈ 1e-36 to 1e-54 measured).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest
from opendp.mod import OpenDPException
from scipy import stats

from dpledger import _invoke
from dpledger import _opendp as dp
from dpledger._invoke import invoke

ALPHA = 1e-9
K = -40  # dpledger's noise grid (mechanisms.GRANULARITY_K)


def _laplace(n: int, scale: float) -> dp.Measurement:
    atom = dp.atom_domain(T=float, nan=False)
    if n == 0:
        return dp.m.make_laplace(atom, dp.absolute_distance(T=float), scale=scale, k=K)
    space = dp.vector_domain(atom, size=n), dp.l1_distance(T=float)
    return dp.m.make_laplace(*space, scale=scale, k=K)


def _gaussian(n: int, scale: float) -> dp.Measurement:
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n), dp.l2_distance(T=float)
    return dp.m.make_gaussian(*space, scale=scale, k=K)


def _zcdp_laplace(n: int, scale: float) -> dp.Measurement:
    return dp.c.make_pureDP_to_zCDP(_laplace(n, scale))


def _noise(draw: Callable[[], list[float]], x: list[float], times: int) -> np.ndarray:
    return np.concatenate([np.asarray(draw(), dtype=np.float64) - x for _ in range(times)])


@pytest.mark.parametrize(
    ("make", "n"),
    [(_laplace, 0), (_laplace, 6), (_gaussian, 6), (_zcdp_laplace, 6)],
    ids=["laplace-scalar", "laplace-vector", "gaussian-vector", "zcdp-laplace"],
)
def test_the_lean_call_draws_the_public_calls_law(
    make: Callable[[int, float], dp.Measurement], n: int
) -> None:
    meas = make(n, 3.0)
    x = [0.5] if n == 0 else [float(i) + 0.25 for i in range(n)]
    vector = n > 0
    times = 6000 if n == 0 else 1000
    lean = _noise(lambda: invoke(meas, x, vector), x, times)
    public = _noise((lambda: list(meas(x))) if vector else (lambda: [meas(x[0])]), x, times)
    assert len(lean) == len(public) == times * max(n, 1)
    assert stats.ks_2samp(lean, public).pvalue > ALPHA
    # on OpenDP's 2^k grid (values below 2^12, so k = -40 leaves them exact)
    outs = lean + np.resize(np.asarray(x), lean.shape)
    assert np.all(outs * 2.0**-K == np.round(outs * 2.0**-K))


def test_the_two_sample_check_tells_a_wrong_scale_apart() -> None:
    """Power: the same check rejects the lean call against twice the scale."""
    x = [1.0] * 6
    narrow, wide = _laplace(6, 3.0), _laplace(6, 6.0)
    a = _noise(lambda: invoke(narrow, x, True), x, 1000)
    b = _noise(lambda: list(wide(x)), x, 1000)
    assert stats.ks_2samp(a, b).pvalue < ALPHA


def test_the_lean_call_returns_plain_floats_of_the_measurements_length() -> None:
    out = invoke(_laplace(7, 1.0), [2.0] * 7, True)
    assert len(out) == 7
    assert all(type(v) is float for v in out)
    one = invoke(_laplace(0, 1.0), [2.0], False)
    assert len(one) == 1
    assert type(one[0]) is float


def test_a_scalar_measurement_takes_exactly_one_value() -> None:
    with pytest.raises(ValueError, match="one value"):
        invoke(_laplace(0, 1.0), [1.0, 2.0], False)


def test_a_carrier_the_measurement_does_not_take_is_opendps_error_not_garbage() -> None:
    """A vector handed to a scalar measurement fails in OpenDP (its type check), as the
    public call would; nothing is read from a wrongly typed result."""
    with pytest.raises(OpenDPException):
        invoke(_laplace(0, 1.0), [1.0, 2.0, 3.0], True)
    with pytest.raises(OpenDPException):
        invoke(_laplace(3, 1.0), [1.0], False)


def test_the_lean_call_frees_what_it_allocates() -> None:
    """40,000 calls on an 8-value vector: a leak of the argument or the result (its 64
    bytes of data and OpenDP's boxes around them: > 100 bytes a call) would grow the
    resident set by > 4 MB; allowed: 2 MB."""
    meas, x = _laplace(8, 1.0), [1.0] * 8
    for _ in range(2_000):
        invoke(meas, x, True)
    before = _resident()
    for _ in range(40_000):
        invoke(meas, x, True)
    grown = _resident() - before
    assert grown < 2 << 20, f"resident set grew {grown >> 10} KiB"


def _resident() -> int:
    """This process's resident set now, in bytes (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_without_the_ffi_names_the_public_call_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_invoke, "LEAN", False)
    assert len(invoke(_laplace(5, 1.0), [1.0] * 5, True)) == 5
    assert len(invoke(_laplace(0, 1.0), [1.0], False)) == 1
