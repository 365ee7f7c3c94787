"""Clip bounds from held-out percentiles: the candidate table behind a policy's ``clip``.

A scalar metric's clip bound *is* its sensitivity, so it sets the noise on every
published mean. :func:`calibrate_clip` takes one value per client from a held-out
fleet (never the data being released) and, for each candidate percentile, reports
the bound, the fraction of clients it clips, the Laplace noise scale on the published
mean over the production cohort (a release's calibrated scale over n: ``Δ/(ε·n)``
unless Δ nears OpenDP's 2**-40 grid; Δ by the policy's neighbouring rule), the
clipping bias on the held-out data, and the resulting RMSE. The table shows the
trade-off: the maximum buys no bias with an order of magnitude more noise than the
99th percentile; the median clips half of the fleet.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger._files import read_bounded, write_new
from dpledger._npy import load_npy
from dpledger._shown import shown
from dpledger.errors import InvalidInput, PlotUnavailable
from dpledger.planning._clip_args import (
    LARGEST,
    bound_column,
    bound_texts,
    check_args,
    clip_bias,
    clip_low,
    milli,
    normal_or_zero,
    pct,
)
from dpledger.planning._common import refuse_read_as_zero, text_table
from dpledger.policy import Clip, FrozenModel
from dpledger.types import Neighbouring

__all__ = [
    "COMMON_PERCENTILE",
    "DEFAULT_PERCENTILES",
    "ClipCalibration",
    "ClipCandidate",
    "calibrate_clip",
    "load_held_out",
    "plot_candidates",
    "require_pyplot",
]

DEFAULT_PERCENTILES: tuple[float, ...] = (50, 90, 95, 99, 100)
"""Candidate percentiles: median, p90, p95, p99, maximum."""

COMMON_PERCENTILE = 99.0
"""The usual default: the 99th percentile of the held-out distribution."""

PLOT_HINT = "pip install 'dpledger[plot]'"


class ClipCandidate(FrozenModel):
    """One candidate clip bound and what it costs (units: those of the metric values).

    ``noise_scale`` is the Laplace scale on the published *mean* over the cohort;
    ``bias`` is ``mean(clipped) − mean(raw)`` on the held-out data (≤ 0 when only the
    top is clipped); ``rmse = √(bias² + 2·noise_scale²)`` (a Laplace variance is 2b²);
    ``written``: the bound as a policy's decimal (6 significant digits, or more where they
    would move it across a held-out value or by over 5e-6 of the clip's width).
    """

    percentile: float
    bound: float
    written: str
    clipped_fraction: float
    noise_scale: float
    bias: float
    rmse: float


class ClipCalibration(FrozenModel):
    """Candidate clip bounds for one metric, the recommendation, and their provenance."""

    source: str
    n_values: int
    nan_dropped: int
    epsilon: float
    cohort: int
    neighbouring: Neighbouring
    low: float
    rows: tuple[ClipCandidate, ...]
    recommended: ClipCandidate
    note: str

    def row(self, percentile: float) -> ClipCandidate:
        """The candidate at ``percentile``; :class:`InvalidInput` if it was not computed."""
        for r in self.rows:
            if r.percentile == float(percentile):
                return r
        have = ", ".join(pct(r.percentile) for r in self.rows)
        raise InvalidInput(f"p{pct(percentile)} is not a candidate; computed: {have}")

    def source_string(self, percentile: float | None = None) -> str:
        """Provenance as a policy's ``clip.source`` takes it, e.g.
        ``"held-out fleet-a (n=2000 clients), p99 = 3.4"``; default: the recommended row."""
        r = self.recommended if percentile is None else self.row(percentile)
        return f"{self.source} (n={self.n_values} clients), p{pct(r.percentile)} = {r.written}"

    def to_clip(self, percentile: float | None = None) -> Clip:
        """A policy :class:`~dpledger.policy.Clip` at a candidate (default: recommended).

        The bound is its ``written`` decimal, as :meth:`source_string` shows it.
        """
        r = self.recommended if percentile is None else self.row(percentile)
        return Clip(
            low=Fraction(repr(self.low)),
            high=Fraction(r.written),
            source=self.source_string(r.percentile),
        )

    def table(self) -> str:
        """An aligned text table of the candidates; ``*`` marks the recommended one."""
        headers = ("pct", "bound", "clipped %", "noise ×1000", "bias ×1000", "rmse ×1000", "")
        shown = bound_column([r.bound for r in self.rows], [r.written for r in self.rows], self.low)
        body = [
            (
                f"p{pct(r.percentile)}",
                bound,
                f"{100 * r.clipped_fraction:.1f}",
                milli(r.noise_scale),
                milli(r.bias),
                milli(r.rmse),
                "*" if r == self.recommended else "",
            )
            for r, bound in zip(self.rows, shown, strict=True)
        ]
        dropped = f", {self.nan_dropped} NaN dropped" if self.nan_dropped else ""
        head = (
            f"clip candidates from {self.source} (n={self.n_values} clients{dropped}); "
            f"published mean over n={self.cohort}, ε={self.epsilon:g}, "
            f"{self.neighbouring}, low={pct(self.low)}"  # every digit low needs
        )
        return "\n".join(
            [head, text_table(headers, body, align="lrrrrrl"), f"* recommended: {self.note}"]
        )


MAX_HELD_OUT_BYTES = 1 << 28
"""A held-out file larger than this (256 MiB: over ten million values) is refused unread."""


def _read_held_out(p: Path) -> bytes:
    """The held-out file's bytes: a regular file of at most :data:`MAX_HELD_OUT_BYTES`."""
    return read_bounded(
        p,
        MAX_HELD_OUT_BYTES,
        lambda problem: InvalidInput(f"cannot read held-out values from {p}: {problem}"),
    )


def load_held_out(path: str | os.PathLike[str], column: str | None = None) -> npt.NDArray[Any]:
    """Per-client held-out values from a ``.npy`` (1-D) or a CSV file (header row).

    A CSV needs ``column`` unless it has exactly one column; empty cells read as NaN
    (dropped, and counted, by :func:`calibrate_clip`). Raise :class:`InvalidInput`.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        if column is not None:
            raise InvalidInput(f"{p}: a .npy file holds one array; --column applies to CSV only")
        data = _read_held_out(p)  # its own InvalidInput (a ValueError): not wrapped twice
        try:  # the header checked before allocating: 2**40 values claimed is not 8 TiB
            arr = load_npy(data)
        except ValueError as e:
            raise InvalidInput(f"cannot read held-out values from {p}: it {e}") from None
        return np.asarray(arr)
    if suffix != ".csv":
        raise InvalidInput(f"{p}: held-out values must be a .npy or .csv file")
    data = _read_held_out(p)
    try:
        # utf-8-sig: a spreadsheet's byte-order mark is not part of the first column's name
        rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    except (UnicodeDecodeError, csv.Error) as e:
        raise InvalidInput(f"cannot read held-out values from {p}: {e}") from e
    if not rows:
        raise InvalidInput(f"{p}: the CSV file is empty (expected a header row)")
    header = [h.strip() for h in rows[0]]
    if all(h and _CELL.fullmatch(h) for h in header):  # else its first values were dropped
        raise InvalidInput(
            f"{p}: the first row {header[:5]} holds only numbers, read as no header (its "
            "values would be dropped): add a header row (e.g. `loss`, and pass it to "
            "--column), or give numeric column names a letter (`2024` -> `y2024`)"
        )
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise InvalidInput(f"{p}: the CSV names column(s) {twice} more than once")
    ragged = next((i for i, r in enumerate(rows[1:]) if r and len(r) != len(header)), None)
    if ragged is not None:
        raise InvalidInput(
            f"{p}: line {ragged + 2} has {len(rows[ragged + 1])} cells, the header "
            f"{len(header)}: a cell is missing or extra"
        )
    if column is None:
        if len(header) != 1:
            raise InvalidInput(f"{p}: the CSV has columns {header}; name one with --column")
        column = header[0]
    if column not in header:
        raise InvalidInput(f"{p}: no column {column!r}; the CSV has {header}")
    idx = header.index(column)
    cells = [r[idx].strip() if idx < len(r) else "" for r in rows[1:]]
    bad = next((i for i, c in enumerate(cells) if not _CELL.fullmatch(c)), None)
    if bad is not None:
        raise InvalidInput(
            f"{p}: column {column!r}, line {bad + 2}: {cells[bad]!r} is not a number "
            "(ASCII digits, an optional sign, point and exponent; an empty cell or nan is "
            "missing)"
        )
    text = np.asarray(cells, dtype=str)
    text = np.where(text == "", "nan", text)
    values = text.astype(np.float64)
    refuse_read_as_zero(f"{p}: column {column!r}", text, values)  # 1e-400 is not 0
    return values


_CELL = re.compile(
    r"(?:[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:nan|inf(?:inity)?)))?"
)  # one way to read each cell (no backtracking over splits of a digit run); no newline
"""A held-out cell: a decimal number in ASCII (or nan/inf, or empty). Python's float()
also reads ``1_000``, other scripts' digits and full-width ones: refused, not guessed."""


def _clean(values: object) -> tuple[npt.NDArray[np.float64], int]:
    """Finite float64 values (sorted) and how many NaN were dropped.

    Real numbers only: text, booleans and complex values are refused, not converted
    (``np.asarray(..., float)`` reads "1.5" as 1.5 and drops an imaginary part).
    """
    try:
        raw = np.asarray(values)
        kind = raw.dtype.kind
        if kind == "O":  # a list of Python objects: each must be a real number
            for v in raw.reshape(-1):
                if isinstance(v, bool) or not isinstance(v, numbers.Real):
                    raise InvalidInput(f"held-out values must be real numbers, got {shown(v, 40)}")
        elif kind not in "fiu":
            raise InvalidInput(
                f"held-out values must be real numbers, got dtype {raw.dtype} (send floats)"
            )
        arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidInput(f"held-out values must be numbers: {e}") from e
    if arr.ndim != 1:
        raise InvalidInput(
            f"held-out values must be 1-D (one value per client), got shape {arr.shape}"
        )
    nan = np.isnan(arr)
    dropped = int(nan.sum())
    arr = arr[~nan]
    if arr.size == 0:
        more = f" ({dropped} NaN dropped, nothing left)" if dropped else ""
        raise InvalidInput(f"no held-out values to calibrate from{more}")
    inf = int(np.isinf(arr).sum())
    if inf:
        raise InvalidInput(f"{inf} held-out value(s) are infinite; per-client values are finite")
    big = int((np.abs(arr) > LARGEST).sum())
    if big:
        raise InvalidInput(
            f"{big} held-out value(s) exceed 1e12 in magnitude, more than any clip bound a "
            "policy takes: rescale the metric"
        )
    return np.sort(arr), dropped


def calibrate_clip(
    values: npt.ArrayLike | str | os.PathLike[str],
    *,
    epsilon: float,
    cohort: int,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    neighbouring: Neighbouring = "replace",
    low: float = 0.0,
    source: str = "held-out",
    column: str | None = None,
) -> ClipCalibration:
    """Candidate clip bounds ``[low, p-th percentile]`` of per-client held-out values.

    ``values``: one value per held-out client (array-like), or a ``.npy``/``.csv`` path
    (see :func:`load_held_out`; ``column`` names the CSV column). ``epsilon`` is the
    per-release ε of the metric, ``cohort`` the number of clients in a published mean.
    Sensitivity follows the policy rule (:func:`dpledger.mechanisms.sensitivity`):
    ``high − low`` under ``replace``, ``max(|low|, |high|)`` under ``add_remove``.
    NaN values are dropped (and counted); anything else invalid raises
    :class:`InvalidInput`.
    """
    if isinstance(values, str | os.PathLike):
        path = Path(values)
        values = load_held_out(path, column)
        if source == "held-out":
            source = f"held-out {path.name}" + (f"[{column}]" if column else "")
    if neighbouring not in ("replace", "add_remove"):
        raise InvalidInput(
            f"neighbouring must be 'replace' or 'add_remove', got {shown(neighbouring)}"
        )
    pcts = check_args(percentiles, epsilon, cohort)
    low_q = clip_low(low)
    low = float(low_q)
    x, dropped = _clean(values)
    n = x.size
    bounds = np.percentile(x, pcts)
    flat = [f"p{pct(p)} = {b:.6g}" for p, b in zip(pcts, bounds, strict=True) if not b > low]
    if flat:
        raise InvalidInput(
            f"candidate bound(s) {', '.join(flat)} are not above low = {low:g}: "
            "no range to clip to; lower `low` or drop those percentiles"
        )
    tiny = [
        f"p{pct(p)} = {b:.3g}" for p, b in zip(pcts, bounds, strict=True) if not normal_or_zero(b)
    ]
    if tiny:
        raise InvalidInput(
            f"candidate bound(s) {', '.join(tiny)} are below 2.2e-308, the smallest clip "
            "bound a policy takes (a normal double): rescale the metric (e.g. other units)"
        )
    bias = clip_bias(x, bounds, low)  # exact, rounded once (O(n + k log k) on sorted x)
    n_low = int(np.searchsorted(x, low, side="left"))  # values below low: raised to low
    n_le = np.searchsorted(x, bounds, side="right")  # values ≤ each bound
    clipped_fraction = (n_low + (n - n_le)) / n
    deltas = [  # the ledger's rule, one implementation (a handful of candidates)
        mech.scalar_sensitivity(low_q, Fraction(float(b)), neighbouring) for b in bounds
    ]
    beyond = InvalidInput(
        f"at ε = {float(epsilon):g} and cohort {int(cohort)} the noise scale Δ/(ε·n) of a "
        "candidate is beyond the range of a double (inf, or below the smallest): use an ε "
        "nearer 1, or rescale the metric"
    )
    try:
        scales = np.array([_release_scale(d, epsilon) for d in deltas]) / int(cohort)
    except InvalidInput as e:  # Δ/ε is inf, or 0: not a noise scale
        raise beyond from e
    rmse = np.hypot(bias, math.sqrt(2.0) * scales)  # √(bias² + 2b²), without overflow
    if not (np.isfinite(rmse).all() and np.isfinite(bias).all()):
        raise beyond
    columns = (pcts, bounds, bound_texts(x, bounds, low), clipped_fraction, scales, bias, rmse)
    rows = tuple(
        ClipCandidate(
            percentile=p,
            bound=float(b),
            written=w,
            clipped_fraction=float(c),
            noise_scale=float(s),
            bias=float(e),
            rmse=float(r),
        )
        for p, b, w, c, s, e, r in zip(*columns, strict=True)
    )
    best = min(rows, key=lambda r: r.rmse)
    return ClipCalibration(
        source=source,
        n_values=n,
        nan_dropped=dropped,
        epsilon=float(epsilon),
        cohort=int(cohort),
        neighbouring=neighbouring,
        low=float(low),
        rows=rows,
        recommended=best,
        note=_note(rows, best, low),
    )


def _release_scale(delta: Fraction, epsilon: float) -> float:
    """The Laplace scale on the sum a release at clip width ``delta`` and ``epsilon`` is
    calibrated to: OpenDP's map on its 2**-40 grid at the sensitivity a release records
    (widened for the clients' rounding), not the closed form Δ/ε, which near the grid is
    too little noise (review 40: half the noise of a release at clip width 1e-12)."""
    recorded = mech.float_up(delta * (1 + mech.CLIENT_ROUNDING_SLACK))
    mech.noise_scale(recorded, epsilon, "epsilon")  # the closed form's checks (inf, 0)
    budget = Fraction(repr(float(epsilon)))  # ε read as a policy's decimal reads it
    facts = mech.calibrate(
        sensitivity=recorded, budget=budget, measure="epsilon", mechanism="laplace", dimension=0
    )
    return facts.scale


def _note(rows: tuple[ClipCandidate, ...], best: ClipCandidate, low: float) -> str:
    bound = bound_column([r.bound for r in rows], [r.written for r in rows], low)[rows.index(best)]
    head = f"p{pct(best.percentile)} (bound {bound}) has the lowest RMSE, {best.rmse:.3g}"
    usual = next((r for r in rows if r.percentile == COMMON_PERCENTILE), None)
    if best.percentile == COMMON_PERCENTILE:
        return head + "; it is the usual default, p99"
    if usual is None:
        return head + "; the usual default p99 was not a candidate"
    why = (
        "its clipping bias dominates: the tail above p99 is heavy"
        if abs(usual.bias) > usual.noise_scale
        else "its noise dominates at this ε and cohort"
    )
    if usual.rmse == best.rmse:
        return head + "; the usual default p99 has the same RMSE"
    if best.rmse == 0:  # no bias, and a noise scale below the smallest double
        return (
            head + f" (no clipping bias, and noise below the smallest double at this ε and "
            f"cohort); NOT the usual default p99 (RMSE {usual.rmse:.3g}: {why})"
        )
    return (
        head + f"; NOT the usual default p99 (RMSE {usual.rmse:.3g}, "
        f"{usual.rmse / best.rmse:.2g}× higher: {why})"
    )


def plot_candidates(result: ClipCalibration, path: str | os.PathLike[str]) -> Path:
    """Write the trade-off chart per candidate: 95% error bar vs clipping bias (PNG, SVG…).

    Both series are in the metric's units ×1000 so they compare directly: the ci95
    half-width a release at that bound would carry (ln 20 × the Laplace scale on the
    published mean, from the public ε and cohort) and the clipping bias measured on the
    held-out fleet; each tick shows the share clipped, ``*`` the recommended bound.
    Nothing plotted is a released value. ``path`` must be a new file (an existing name,
    or a symlink, is refused: :func:`~dpledger._files.write_new`); the format is its
    suffix (PNG without one). Needs matplotlib (``pip install 'dpledger[plot]'``); raise
    :class:`PlotUnavailable` if it is missing.
    """
    plt = require_pyplot()
    labels = [
        f"p{pct(r.percentile)}{'*' if r == result.recommended else ''}\n"
        f"{100 * r.clipped_fraction:.1f}% clipped"
        for r in result.rows
    ]
    bar95 = np.array([1000 * math.log(20.0) * r.noise_scale for r in result.rows])
    bias = np.array([1000 * abs(r.bias) for r in result.rows])
    if not (np.isfinite(bar95).all() and np.isfinite(bias).all()):
        raise InvalidInput("the error bars ×1000 are beyond a double's range: nothing to chart")
    pos = np.arange(len(labels))
    width = 0.38
    fig, ax = plt.subplots(figsize=(7, 4.3))
    try:
        for offset, heights, label in (
            (-width / 2, bar95, "95% error bar of the published mean (±, ×1000)"),
            (width / 2, bias, "|clipping bias| on the held-out fleet (×1000)"),
        ):
            bars = ax.bar(pos + offset, heights, width, label=label)
            ax.bar_label(bars, labels=[f"{h:.1f}" for h in heights], fontsize=8)
        ax.set_xticks(pos, labels, fontsize=8)
        ax.set_ylabel("metric units ×1000")
        ax.set_title(
            f"Where to put the clip bound: {result.source}, "
            f"cohort {result.cohort:,}, ε = {result.epsilon:g}",
            fontsize=10,
        )
        ax.legend(frameon=False, fontsize=8)
        fig.text(
            0.01, 0.01, "No released values: computed from the held-out fleet and the public "
            "ε and cohort. * = lowest RMSE = √(bias² + 2b²).", fontsize=7, color="#444444",
        )  # fmt: skip
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        out = Path(path)
        kind = out.suffix.lstrip(".").lower() or "png"
        try:
            write_new(out, lambda f: fig.savefig(f, format=kind), "the plot")
        except (OSError, ValueError, RuntimeError) as e:  # RuntimeError: e.g. no LaTeX
            raise InvalidInput(f"cannot write the plot to {out}: {e}") from e
    finally:
        plt.close(fig)
    return out


def require_pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend, imported on first use.

    Raise :class:`PlotUnavailable` (naming the ``plot`` extra) if matplotlib is missing.
    """
    try:
        import matplotlib
    except ImportError as e:
        raise PlotUnavailable(f"plotting needs matplotlib: {PLOT_HINT}") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
