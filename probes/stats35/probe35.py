"""stats35 probe: 3-4 class macro averages, coverage among published / overall / % published.

One process, seeded. Run from the repository root with its venv:

  python probes/stats35/probe35.py cells /work/main before.jsonl    # the former rule
  python probes/stats35/probe35.py cells "$PWD" after.jsonl         # this checkout
  python probes/stats35/probe35.py table before.jsonl after.jsonl
  python probes/stats35/probe35.py switch 4,6,8 4000                # SAFE_FACTOR scan
  python probes/stats35/probe35.py target 6 20000                   # the scan's lowest cells

``cells`` takes optional groups (rare tworare max3 easy) and ``--releases N`` (4,000).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

KEYS = ("accuracy", "balanced_accuracy", "precision_macro", "recall_macro", "f1_macro",
        "precision_weighted", "recall_weighted", "f1_weighted", "mcc")  # fmt: skip
MACRO = ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro")
RARE = (((3, "5%", 0.9, 0.1), 1.5), ((3, "5%", 0.55, 0.1), 1.5), ((3, "1%", 0.55, 0.1), 1.0),
        ((3, "5%", 0.9, 0.05), 1.0), ((3, "5%", 0.99, 0.05), 1.0), ((4, "5%", 0.9, 0.1), 1.5),
        ((4, "1%", 0.9, 0.05), 1.0))  # fmt: skip
LAWS = ("laplace", "gaussian")


def _use(src: str) -> Any:
    """Import dpledger and the test helpers from checkout ``src``; the helpers module."""
    sys.path[:0] = [src, src + "/tests"]
    import coverage_cases

    import dpledger

    assert dpledger.__file__.startswith(src), dpledger.__file__
    return coverage_cases


def _matrix(cc: Any, prior: str, c: int, acc: float) -> np.ndarray:
    if prior.startswith("tworare:"):  # the last two classes share% each (no helper on main)
        share = float(prior.split(":")[1]) / 100
        p = np.full(c, (1 - 2 * share) / (c - 2))
        p[-2:] = share
        return np.asarray(cc._confusion(p, np.linspace(0.5, 1.5, c), acc, 1e6, clip=True))
    return np.asarray(cc.hard_confusion(c, prior, acc, 1e6))


def _cells(groups: list[str]) -> list[tuple[str, int, str, float, float, str, float]]:
    cells = []
    if "rare" in groups:
        cells += [("rare", c, p, a, nz, d, most) for (c, p, a, nz), most in RARE for d in LAWS]
    if "tworare" in groups:
        cells += [("tworare", c, f"tworare:{sh}", a, nz, d, 1.5) for c in (3, 4)
                  for sh in ("5", "1") for a, nz in ((0.99, 0.05), (0.9, 0.1), (0.9, 0.05))
                  for d in LAWS]  # fmt: skip
    if "max3" in groups:
        cells += [("max3", c, "balanced", a, nz, d, 3.0)
                  for c, noises in ((3, (0.2, 0.25, 0.3, 0.35)), (4, (0.3, 0.4)))
                  for nz in noises for a in (0.97, 0.99) for d in LAWS]  # fmt: skip
    if "easy" in groups:
        cells += [("easy", c, p, a, nz, d, 1.5) for c in (3, 4)
                  for p, a, nz in (("balanced", 0.7, 0.01), ("balanced", 0.9, 0.05),
                                   ("5%", 0.9, 0.01)) for d in LAWS]  # fmt: skip
    return cells


def cells(src: str, out: str, args: list[str]) -> None:
    releases = 4000
    if "--releases" in args:
        i = args.index("--releases")
        releases = int(args[i + 1])
        args = args[:i] + args[i + 2 :]
    groups = args or ["rare", "tworare", "max3", "easy"]
    cc = _use(src)
    with open(out, "a") as f:
        for i, (g, c, prior, acc, nz, law, most) in enumerate(_cells(groups)):
            t0 = time.time()
            tm = _matrix(cc, prior, c, acc)
            seed = 35000 + i + 1000 * groups.index(g)
            truth, b = cc._release(tm, nz * tm.sum() / c**2, law, releases, seed,
                                   most * tm.sum())  # fmt: skip
            row: dict[str, Any] = {"group": g, "C": c, "prior": prior, "acc": acc, "noise": nz,
                                   "law": law, "max": most, "R": releases}  # fmt: skip
            for key in KEYS:
                hit = (b.low[key] <= truth[key]) & (truth[key] <= b.high[key])
                u = b.usable(key)
                k = int(u.sum())
                width = float((b.high[key] - b.low[key])[u].mean()) if k else None
                row[key] = {
                    "among": float(hit[u].mean()) if k else None,
                    "k": k,
                    "overall": float(hit.mean()),
                    "pub": k / releases,
                    "width": width,
                }
            f.write(json.dumps(row) + "\n")
            print(g, c, prior, acc, nz, law, most, f"{time.time() - t0:.1f}s", flush=True)


def _fmt(x: dict[str, Any]) -> str:
    among = "  -  " if x["among"] is None else f"{x['among']:.3f}"
    return f"{among}/{x['overall']:.3f}/{100 * x['pub']:3.0f}%"


def table(before: str, after: str) -> None:
    def load(p: str) -> dict[tuple[Any, ...], dict[str, Any]]:
        names = ("group", "C", "prior", "acc", "noise", "law", "max")
        with open(p) as f:
            return {tuple(r[n] for n in names): r for r in map(json.loads, f)}

    b, a = load(before), load(after)
    print("among published / overall / % published, before -> after")
    for cell, ra in a.items():
        rb = b[cell]
        parts = [f"{k[:9]} {_fmt(rb[k])} -> {_fmt(ra[k])}" for k in MACRO]
        print(f"{' '.join(map(str, cell)):40s}", "  ".join(parts))
    for g in dict.fromkeys(c[0] for c in a):
        for tag, r in (("before", b), ("after", a)):
            xs = [r[c][k] for c in r if c[0] == g for k in MACRO]
            among = [x["among"] for x in xs if x["k"] >= 50]
            print(f"{g:8s} {tag:6s} among {min(among):.3f}-{max(among):.3f} overall "
                  f"{min(x['overall'] for x in xs):.3f} published "
                  f"{100 * min(x['pub'] for x in xs):.0f}-{100 * max(x['pub'] for x in xs):.0f}% "
                  f"width {min(x['width'] or 1 for x in xs):.3f}-"
                  f"{max(x['width'] or 0 for x in xs):.3f}")  # fmt: skip


def _straddle(kappa: float, cells: list[tuple[Any, ...]], releases: int, seed0: int) -> list[Any]:
    """Coverage of the macro averages with SAFE_FACTOR = kappa (a class near the switch)."""
    cc = _use(os.getcwd())
    import dpledger.metrics._simultaneous as sim

    sim.SAFE_FACTOR = kappa
    rows = []
    for i, (c, nz, share, acc, law) in enumerate(cells):
        p = np.full(c, (1 - share) / (c - 1))
        p[-1] = share
        tm = cc._confusion(p, np.linspace(0.5, 1.5, c), acc, 1e6, clip=True)
        truth, b = cc._release(tm, nz * tm.sum() / c**2, law, releases, seed0 + i, 1.5 * tm.sum())
        for k in MACRO:
            hit = (b.low[k] <= truth[k]) & (truth[k] <= b.high[k])
            rows.append((float(hit.mean()), k, c, nz, share, acc, law))
    return rows


def switch(kappas: str, releases: int) -> None:
    grid = [(c, nz, sh, a, law) for c in (3, 4) for nz in (0.01, 0.05)
            for sh in (0.03, 0.05, 0.08, 0.12, 0.18, 0.25) for a in (0.7, 0.9, 0.99)
            for law in LAWS]  # fmt: skip
    for kappa in map(float, kappas.split(",")):
        rows = sorted(_straddle(kappa, grid, releases, 36001))
        print("kappa", kappa, "cells", len(grid), "lowest:", flush=True)
        for r in rows[:6]:
            print("   ", r, flush=True)


def target(kappa: float, releases: int) -> None:
    grid = [(4, 0.01, 0.03, 0.7, "gaussian"), (3, 0.01, 0.25, 0.99, "laplace"),
            (3, 0.05, 0.18, 0.9, "gaussian"), (3, 0.01, 0.18, 0.7, "gaussian"),
            (4, 0.01, 0.12, 0.99, "gaussian"), (4, 0.05, 0.05, 0.7, "gaussian"),
            (3, 0.01, 0.05, 0.9, "laplace")]  # fmt: skip
    for r in _straddle(kappa, grid, releases, 37000):
        print(r, flush=True)


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "cells":
        cells(rest[0], rest[1], rest[2:])
    elif cmd == "table":
        table(rest[0], rest[1])
    elif cmd == "switch":
        switch(rest[0], int(rest[1]))
    else:
        target(float(rest[0]), int(rest[1]))
