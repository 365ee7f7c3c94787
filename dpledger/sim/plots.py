"""The demo's charts: released values with their 95% intervals, never bare noise.

Every plotted value is a released (noisy) value or post-processing of one, drawn with
its 95% interval from the public noise scale. A bucket whose noisy count is not clearly
positive — within q noise standard errors of 0, q the quantile the intervals use
(≈ 3.1 Laplace scales) — is greyed (a histogram share: its value is tiny and noisy) or
dropped and listed (a calibration gap: a ratio over such a count means nothing). Regions
whose releases were refused are named on every chart. Nothing here reads fleet data.
"""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from dpledger._files import write_new
from dpledger.errors import InvalidInput
from dpledger.ledger import Release
from dpledger.mechanisms import bar_factor
from dpledger.metrics._intervals import noise_std, quantile_factor
from dpledger.sim.demo import (
    DRIFT_FACTOR,
    OVERCONFIDENT_GAP,
    TAIL_SHARE,
    DemoResult,
    policy_reference,
    share_interval,
)

__all__ = ["PLOT_NAMES", "check_plot_targets", "clearly_positive", "write_plots"]

_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")
_GREY = "#c8c8c8"
_WIDE = 0.5  # a calibration gap whose 95% interval is wider (or unusable) is drawn hollow grey


def clearly_positive(rel: Release) -> tuple[np.ndarray, float]:
    """Which coordinates of a release are clearly positive, and the threshold used.

    The public rule of every chart: a noisy count must exceed q × its noise s.e., q the
    95% quantile of one coordinate's noise (Laplace: 2.17 × √2·b ≈ 3.06·b).
    """
    std = noise_std(rel.scale, 1, rel.facts.mechanism)
    se, q = quantile_factor(std.reshape(1, 1), 0.95, rel.facts.mechanism)
    threshold = float(q[0] * se[0])
    return rel.noisy_sum > threshold, threshold


def _refused(result: DemoResult) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in result.refusals:
        out.setdefault(v.request.region, v.failures[0].reason)
    return out


def _legend_refused(ax: Any, refused: dict[str, str], cohorts: dict[str, int]) -> None:
    """A legend entry per refused region: marked on the chart, never silently absent."""
    for region in refused:
        label = f"{region} (n = {cohorts[region]:,}): REFUSED, nothing published"
        ax.plot([], [], "x", color="#a00000", label=label)


def _save(plt: Any, fig: Any, path: Path, note: str) -> Path:
    try:
        fig.text(0.01, 0.01, note, fontsize=7, color="#444444", va="bottom", wrap=True)
        lines = 1 + len(note) * 7 * 0.55 / (fig.get_figwidth() * 72)  # wrapped 7 pt lines
        fig.tight_layout(rect=(0, 0.02 + lines * 11 / (fig.get_figheight() * 72), 1, 1))
        mark = {_MARK_KEY: _mark(_final(path))}  # a tEXt chunk: which file made it
        write_new(path, lambda f: fig.savefig(f, format="png", dpi=110, metadata=mark), "--plots")
    finally:
        plt.close(fig)
    return path


def _ratio_chart(plt: Any, result: DemoResult, rels: dict[tuple[str, str], Release],
                 path: Path) -> Path:  # fmt: skip
    refused = _refused(result)
    regions = list(result.cohorts)
    ratio_kinds = {"lateral_drift": "lateral drift", "crs_mismatch": "CRS mismatch"}
    found = {f.region: ratio_kinds[f.kind] for f in result.findings if f.kind in ratio_kinds}
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for i, region in enumerate(regions):
        rel = rels.get((region, "along_across_ratio"))
        if rel is None:
            ax.plot(i, 0.0, "x", color="#a00000", ms=10)
            ax.text(i, 0.3, "refused", rotation=90, ha="center", va="bottom", color="#a00000")
            continue
        bar = rel.half_width(bar_factor("ci95", rel.facts.mechanism))
        ax.bar(i, float(rel.value), yerr=bar, capsize=4, color="#4c72b0")
        if region in found:
            ax.text(i, float(rel.value) + bar, f"finding: {found[region]}", ha="center",
                    va="bottom", fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(regions)), regions)
    ref = policy_reference(result.policy)
    ax.axhline(ref, color="grey", ls="--", label=f"healthy reference {ref:.2f} (same statistic)")
    ax.axhline(DRIFT_FACTOR * ref, color="#c44e52", ls=":",
               label=f"drift rule: whole interval above {DRIFT_FACTOR:g} × {ref:.2f} = "
               f"{DRIFT_FACTOR * ref:.2f}")  # fmt: skip
    _legend_refused(ax, refused, result.cohorts)
    ax.set_ylabel("mean per-client across/along ratio")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    ax.set_title("Released along/across ratio per region", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    return _save(plt, fig, path, "Bars: released mean per-client clipped ratio; error bars: 95% "
                 "intervals from the public noise scale (ln 20 · b / n). A CRS finding takes "
                 "precedence over drift (its gross errors also raise the ratio).")  # fmt: skip


def _histogram_chart(plt: Any, result: DemoResult, rels: dict[tuple[str, str], Release],
                     path: Path) -> Path:  # fmt: skip
    refused = _refused(result)
    regions = [r for r in result.cohorts if (r, "error_histogram") in rels]
    edges = result.policy.metrics["error_histogram"].edges or ()
    labels = [f"≤{edges[0]:g}"] + [f"{a:g}–{b:g}" for a, b in itertools.pairwise(edges)]
    labels.append(f">{edges[-1]:g}")
    k = len(labels)
    fig, (ax, tail_ax) = plt.subplots(1, 2, figsize=(10, 4), width_ratios=(3, 1))
    width = 0.8 / max(1, len(regions))
    greyed = False
    threshold = 0.0
    for i, region in enumerate(regions):
        rel = rels[(region, "error_histogram")]
        clear, threshold = clearly_positive(rel)
        ivs = [share_interval(rel, j, slice(None), (0.0, 1.0), "total count") for j in range(k)]
        share = np.clip(rel.noisy_sum / rel.noisy_sum.sum(), 0.0, 1.0)  # as its interval is
        low = np.array([iv.low for iv in ivs])
        high = np.array([iv.high for iv in ivs])
        err = np.vstack([np.maximum(share - low, 0), np.maximum(high - share, 0)])
        colours = [_COLOURS[i % 5] if c else _GREY for c in clear]
        greyed |= not clear.all()
        x = np.arange(k) + i * width
        ax.bar(x, share, width, yerr=err, capsize=2, color=colours, label=region)
        tail_ax.bar(i, share[-1], 0.6, yerr=err[:, -1:], capsize=4, color=colours[-1])
    ax.set_xticks(np.arange(k) + 0.4 - width / 2, labels)
    ax.set_xlabel("position error (m)")
    ax.set_ylabel("share of errors (released counts / their total)")
    ax.set_title("Released error histogram per region", fontsize=10)
    _legend_refused(ax, refused, result.cohorts)
    ax.legend(fontsize=7, loc="upper right")
    tail_ax.axhline(
        TAIL_SHARE, color="#c44e52", ls=":", label=f"CRS rule: interval > {TAIL_SHARE:.0%}"
    )
    tail_ax.set_xticks(range(len(regions)), regions, fontsize=8)
    tail_ax.set_title(f"zoom: errors > {edges[-1]:g} m", fontsize=10)
    tail_ax.set_ylim(top=tail_ax.get_ylim()[1] * 1.25)
    tail_ax.legend(fontsize=7, loc="upper left")
    grey_note = (f" Grey: a bucket whose noisy count is ≤ {threshold:,.0f} = q × its noise s.e. "
                 "(≈ 3 noise scales): not clearly positive." if greyed else "")  # fmt: skip
    return _save(plt, fig, path, "Bars: released shares clipped to [0, 1], as their intervals "
                 "are; error bars: 95% intervals of each share from the public noise scale "
                 "(Fieller's, on the unclamped release)." + grey_note)  # fmt: skip


def _calibration_chart(plt: Any, result: DemoResult, rels: dict[tuple[str, str], Release],
                       path: Path) -> Path:  # fmt: skip
    refused = _refused(result)
    regions = [r for r in result.cohorts if (r, "calibration_gap") in rels]
    fig, ax = plt.subplots(figsize=(8.5, 4))
    dropped: list[str] = []
    threshold = 0.0
    greyed = False
    for i, region in enumerate(regions):
        rel = rels[(region, "calibration_gap")]
        k = rel.noisy_sum.shape[0] // 2
        clear, threshold = clearly_positive(rel)
        centre = np.arange(k) / k + 0.5 / k + (i - len(regions) / 2) * 0.012
        shown = [j for j in range(k) if clear[k + j]]
        dropped += [f"{region} p≈{(j + 0.5) / k:.1f}" for j in range(k) if not clear[k + j]]
        ivs = {j: share_interval(rel, j, k + j, (-1.0, 1.0), "bucket count") for j in shown}
        gap = np.clip([rel.noisy_sum[j] / rel.noisy_sum[k + j] for j in shown], -1.0, 1.0)
        err = np.array([[g - ivs[j].low, ivs[j].high - g] for g, j in zip(gap, shown, strict=True)])
        wide = np.array([ivs[j].high - ivs[j].low > _WIDE or not ivs[j].usable for j in shown],
                        dtype=bool)  # fmt: skip
        greyed |= bool(wide.any())
        # markers only: buckets are separate estimates, a line between them would read as a
        # trend that their intervals do not support
        label: str | None = region
        for sel, colour in ((~wide, _COLOURS[i % 5]), (wide, _GREY)):
            if sel.any():
                ax.errorbar(centre[shown][sel], gap[sel], yerr=err[sel].T.clip(0), fmt="o", ms=4,
                            capsize=3, color=colour, mfc="white" if colour == _GREY else colour,
                            label=label)  # fmt: skip
                label = None
    ax.axhline(0.0, color="grey", lw=0.8)
    rule = f"over-confidence rule (top bucket): interval > {OVERCONFIDENT_GAP:g}"
    ax.plot([0.8, 1.0], [OVERCONFIDENT_GAP] * 2, color="#c44e52", ls=":", label=rule)
    ax.set_xlim(0, 1)
    ax.set_xlabel("predicted probability (bucket centre)")
    ax.set_ylabel("mean(p − y) in the bucket")
    ax.set_title("Released calibration gap per confidence bucket", fontsize=10)
    _legend_refused(ax, refused, result.cohorts)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    drop_note = (f" Not shown (noisy count ≤ {threshold:,.0f} = q × its noise s.e., not clearly "
                 f"positive): {', '.join(dropped)}." if dropped else "")  # fmt: skip
    note = ("Markers: released Σ(p − y) / count per bucket (not joined: each bucket is its own "
            "estimate); error bars: their 95% intervals from the public noise scale (Fieller's, "
            "on the unclamped release).")  # fmt: skip
    if greyed:
        note += (
            f" Hollow grey: an interval wider than {_WIDE:g}, or one flagged unusable (within "
            "the noise: read as unknown)."
        )
    return _save(plt, fig, path, note + drop_note)


PLOT_NAMES = ("ratio_by_region.png", "error_histogram.png", "calibration_gap.png")
"""The files :func:`write_plots` creates in its directory."""

_PNG = b"\x89PNG\r\n\x1a\n"


_MARK_KEY = "dpledger"  # the tEXt keyword of the mark every demo chart carries
_TEXT_LIMIT = 1 << 20  # the bytes a mark is looked for in: the chunks before the image data


def _mark(final: Path) -> str:
    """The text a demo chart carries: that the demo made it, and at which path (a copy
    elsewhere is the user's file, as a copied demo ledger is)."""
    return f"demo chart at {os.path.abspath(final)!a}"  # ASCII: a PNG tEXt chunk


def _temporary(final: Path) -> Path:
    """Where a replacing chart is written before it takes ``final``'s name."""
    return final.with_name(f".{final.name}.{os.getpid()}.new")


def _final(path: Path) -> Path:
    """The chart name ``path`` is written for (itself, or the one its temporary replaces)."""
    for name in PLOT_NAMES:
        if path.name in (name, _temporary(path.with_name(name)).name):
            return path.with_name(name)
    return path


def check_plot_targets(directory: Path, *, replace: bool = False) -> list[Path]:
    """The chart paths in ``directory`` if the charts may be written there, checked before
    any work: ``directory`` is a directory or absent (then created), and each chart's name
    is free — or, with ``replace`` (the demo's ``--fresh``), a chart the demo wrote there
    (a regular PNG file carrying its mark), which :func:`write_plots` then replaces. A
    symlink, a user's own PNG, or any other file (a ledger, say), is never replaced:
    :class:`InvalidInput`."""
    for name in (directory, *(directory / n for n in PLOT_NAMES)):
        try:  # lexists() reads "name too long" as absent: found only after the spend
            os.lstat(name)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except (OSError, ValueError) as e:  # ValueError: a NUL byte
            why = e.strerror if isinstance(e, OSError) else e
            raise InvalidInput(f"--plots {directory!r}: cannot use {name!r}: {why}") from None
    if os.path.lexists(directory) and not directory.is_dir():
        raise InvalidInput(f"--plots {directory} is not a directory: name a directory")
    above = directory
    while not os.path.lexists(above) and above != above.parent:
        above = above.parent  # the nearest existing ancestor: mkdir will create the rest
    if not above.is_dir():
        raise InvalidInput(f"--plots {directory}: {above} is not a directory")
    paths = [directory / name for name in PLOT_NAMES]
    for p in paths:
        if not os.path.lexists(p):
            continue
        if not (replace and _is_chart(p)):
            how = "" if replace else "; --fresh replaces the demo's own earlier PNG charts"
            raise InvalidInput(
                f"--plots: {p} exists and is not replaced (dpledger never replaces a file it "
                f"cannot tell is its own chart: one the demo wrote at that path carries its "
                f"mark){how}; remove it or choose another directory"
            )
    return paths


def _is_chart(p: Path) -> bool:
    """Whether ``p`` is a regular file (not a symlink), a PNG whose text chunks before its
    image data hold the mark the demo writes at that path."""
    try:  # never follows a link, never blocks on a FIFO swapped in after a check
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        head = f.read(_TEXT_LIMIT)
    if not head.startswith(_PNG):
        return False
    want = f"{_MARK_KEY}\0{_mark(p)}".encode("ascii")
    at = len(_PNG)
    while at + 8 <= len(head):
        size, kind = int.from_bytes(head[at : at + 4], "big"), head[at + 4 : at + 8]
        if kind in (b"IDAT", b"IEND"):
            return False
        if kind == b"tEXt" and head[at + 8 : at + 8 + size] == want:
            return True
        at += 12 + size  # length, type, data, CRC
    return False


def write_plots(result: DemoResult, directory: Path, *, replace: bool = False) -> list[Path]:
    """PNG charts of released values: ratio per region, error histograms, calibration gaps.

    New files only (:func:`check_plot_targets`; ``replace``: an earlier run's PNG charts
    are replaced)."""
    from dpledger.planning.clip import require_pyplot

    plt = require_pyplot()
    paths = check_plot_targets(directory, replace=replace)
    directory.mkdir(parents=True, exist_ok=True)
    rels = {(r.request.region, r.request.metric): r for r in result.releases}
    charts = (_ratio_chart, _histogram_chart, _calibration_chart)
    out = []
    for chart, p in zip(charts, paths, strict=True):
        if not (replace and _is_chart(p)):
            out.append(chart(plt, result, rels, p))
            continue
        # the new chart is written first, then takes the old one's name: a failed write
        # leaves the earlier run's chart in place (review s29b)
        new = chart(plt, result, rels, _temporary(p))
        if not _is_chart(p):  # checked again here: still the demo's own chart
            new.unlink()
            raise InvalidInput(f"--plots: {p} changed while the demo ran; it was not replaced")
        os.replace(new, p)
        out.append(p)
    return out
