"""Seeded, vectorised synthetic fleets for the demo, the notebooks and the benchmarks.

A :class:`Fleet` is a set of clients (devices) in disjoint regions. Each client holds a run of
samples, stored as flat per-sample arrays (client ``i`` owns ``[offsets[i], offsets[i+1])``):
signed along-/across-track position errors in meters, a loss, a predicted probability with
its observed outcome, a class label with its prediction, a regression target with its
prediction, and the grid cell the sample was taken in. :func:`make_fleet` can plant known
failures (lateral drift, a CRS mismatch, an over-confident model, a heavy-tailed loss, label
skew, a region too small to publish) so that the metrics and the ledger can be shown to find
them; every planted scenario is recorded in ``Fleet.scenarios`` with the signature to expect.

Randomness: this and :mod:`dpledger.sim.silos` are the only modules of dpledger that use
``numpy.random``. It makes
synthetic *data*, never release noise; release noise comes from OpenDP only (docs/privacy-model.md).
A fleet is a pure function of its arguments: the root ``default_rng(seed)`` spawns one
independent stream per field, so the output does not depend on the number of worker threads,
and turning a region-scoped scenario on or off changes only what that scenario plants
(except ``small_region``, which changes how clients are apportioned). Streams are stable for
a given numpy version; numpy does not promise identical draws across versions.

Layout and memory: clients are numbered region by region, so a region's clients and samples
are contiguous and :meth:`Fleet.region_slice` returns views. Per-sample arrays keep the dtypes
the metric functions take (float64, labels and cells int64): 80 bytes per sample, 3.2 GB for
1,000,000 clients x 40 samples. Work is done in blocks of about a million samples, so
temporaries stay in the tens of megabytes on top of the output arrays (measured at 1M x 40:
peak RSS 3.3 GiB for 3.05 GiB of arrays, about 9-10 CPU-seconds, spread over ``workers``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final, TypeAlias

import numpy as np
from numpy.typing import NDArray

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.sim.scenarios import (
    _SCENARIO_TYPES,
    BASELINE_ACROSS_RMS,
    BASELINE_ALONG_RMS,
    DEFAULT_SCENARIOS,
    HELD_OUT_LOSS_ANCHORS,
    CrsMismatch,
    HeavyTailedLoss,
    LabelSkew,
    LateralDrift,
    Overconfident,
    Scenario,
    SmallRegion,
    _is_int,
    _loss_levels,
    _require,
)

__all__ = [
    "DEFAULT_REGIONS",
    "GRID_SIDE",
    "Fleet",
    "Planted",
    "describe",
    "make_fleet",
    "region_sizes",
]

F64: TypeAlias = NDArray[np.float64]
I64: TypeAlias = NDArray[np.int64]

DEFAULT_REGIONS: Final = ("eu-west", "eu-east", "na", "apac")
#: Cells per side of each region's square grid; cell id = region * side² + row * side + col.
GRID_SIDE: Final = 2048

_LIGHT_LOSS_ANCHORS: Final = HELD_OUT_LOSS_ANCHORS[:2]  # the same lognormal body, no tail
_DEVICE_SHAPE: Final = 8.0  # device quality m = sqrt(Gamma(8)/8): E[m²] = 1, keeps the RMS
_CLASS_ACCURACY: Final = (0.95, 0.55)  # per-class accuracy, linear from class 0 to the last
_REG_MEAN, _REG_SD, _REG_CLIENT_SD, _REG_R2 = 100.0, 15.0, 10.0, 0.8
_MAX_TERRITORY: Final = 30  # a client's cells: the first K <= 30 cells of an 8 x 4 block
_BLOCK_SAMPLES: Final = 1 << 20
_STREAMS: Final = (
    "counts", "client", "crs", "label_mix", "along", "across", "loss",
    "prob", "outcome", "labels", "pred", "reg", "reg_pred", "cells",
)  # fmt: skip


@dataclass(frozen=True)
class Planted:
    """What a scenario planted where: its spec, the regions and client indices it touched
    (a range, because regions are contiguous), and the signature a metric should show."""

    name: str
    spec: Scenario
    regions: tuple[str, ...]
    clients: range
    signature: str


_FLOAT_FIELDS: Final = ("along", "across", "loss", "prob", "outcome", "y_reg", "y_reg_pred")
_INT_FIELDS: Final = ("y_true", "y_pred", "cell")


@dataclass(frozen=True, kw_only=True, eq=False)
class Fleet:
    """A synthetic fleet: flat per-sample arrays plus the per-client structure (read-only).

    Per client: ``client_region`` (int32 index into ``regions``, non-decreasing, so each
    region's clients and samples are contiguous) and ``offsets`` (int64 start of each client's
    samples). Per sample, float64 unless noted: ``along``/``across`` signed along-/across-track
    position errors in meters; ``loss`` >= 0; ``prob`` predicted probability in [0, 1] and
    ``outcome`` 0.0/1.0; ``y_true``/``y_pred`` int64 labels in [0, n_classes); ``y_reg``/
    ``y_reg_pred`` regression target and prediction; ``cell`` int64 grid cell (see GRID_SIDE).
    Sample order within a client carries no meaning (labels come grouped by class).
    Construction validates shapes and dtypes and marks every array read-only in place.
    """

    regions: tuple[str, ...]
    client_region: NDArray[np.int32]
    offsets: I64
    along: F64
    across: F64
    loss: F64
    prob: F64
    outcome: F64
    y_true: I64
    y_pred: I64
    y_reg: F64
    y_reg_pred: F64
    cell: I64
    n_classes: int
    scenarios: tuple[Planted, ...]
    seed: int

    def __post_init__(self) -> None:
        cr, off, n = self.client_region, self.offsets, self.along.shape[0]
        _require(cr.dtype == np.int32 and off.dtype == np.int64, "need int32/int64 index arrays")
        _require(cr.ndim == 1 and off.shape == cr.shape, "offsets needs one entry per client")
        _require(off.size == 0 or off[0] == 0, "offsets must start at 0")
        _require(bool(np.all(np.diff(off) >= 0)) and (off.size == 0 or off[-1] <= n), "bad offsets")
        _require(bool(np.all(np.diff(cr) >= 0)), "clients must be grouped by region in order")
        _require(cr.size == 0 or 0 <= cr[0] <= cr[-1] < len(self.regions), "bad client_region")
        for name in _FLOAT_FIELDS + _INT_FIELDS:
            a = getattr(self, name)
            want = np.float64 if name in _FLOAT_FIELDS else np.int64
            _require(a.dtype == want and a.shape == (n,), f"{name} must be {want.__name__}[{n}]")
        for name in ("client_region", "offsets", *_FLOAT_FIELDS, *_INT_FIELDS):
            getattr(self, name).setflags(write=False)

    @property
    def n_clients(self) -> int:
        return int(self.client_region.size)

    @property
    def n_samples(self) -> int:
        return int(self.along.size)

    @property
    def sample_counts(self) -> I64:
        """Samples held by each client."""
        return np.diff(self.offsets, append=np.int64(self.n_samples))

    def client_range(self, region: str) -> range:
        """Indices of the clients of ``region`` (contiguous by construction)."""
        if region not in self.regions:
            raise InvalidInput(f"unknown region {region!r}; this fleet has {self.regions}")
        i = self.regions.index(region)
        lo, hi = np.searchsorted(self.client_region, [i, i + 1])
        return range(int(lo), int(hi))

    def clients_in(self, region: str) -> I64:
        """Indices of the clients of ``region`` as an array."""
        r = self.client_range(region)
        return np.arange(r.start, r.stop, dtype=np.int64)

    def sample_client_ids(self) -> I64:
        """The owning client's index for every sample."""
        return np.repeat(np.arange(self.n_clients, dtype=np.int64), self.sample_counts)

    def error_magnitude(self) -> F64:
        """Euclidean position error per sample, meters: hypot(along, across)."""
        return np.hypot(self.along, self.across)

    def planted(self, name: str) -> tuple[Planted, ...]:
        """The planted scenarios called ``name`` (empty if none)."""
        return tuple(p for p in self.scenarios if p.name == name)

    def region_slice(self, region: str) -> Fleet:
        """The sub-fleet of one region: views, no copies. Client indices (offsets, scenario
        ranges) are renumbered from 0; ``regions`` is kept so ``client_region`` stays valid."""
        r = self.client_range(region)
        ext = np.append(self.offsets, np.int64(self.n_samples))
        s0, s1 = int(ext[r.start]), int(ext[r.stop])
        planted = []
        for p in self.scenarios:
            lo, hi = max(p.clients.start, r.start), min(p.clients.stop, r.stop)
            if lo < hi:
                clients = range(lo - r.start, hi - r.start)
                planted.append(Planted(p.name, p.spec, (region,), clients, p.signature))
        arrays = {k: getattr(self, k)[s0:s1] for k in _FLOAT_FIELDS + _INT_FIELDS}
        return Fleet(
            regions=self.regions,
            client_region=self.client_region[r.start : r.stop],
            offsets=self.offsets[r.start : r.stop] - ext[r.start],
            n_classes=self.n_classes,
            scenarios=tuple(planted),
            seed=self.seed,
            **arrays,
        )


def _parse_scenarios(scenarios: Iterable[Scenario | str]) -> tuple[Scenario, ...]:
    specs: list[Scenario] = []
    for s in (scenarios,) if isinstance(scenarios, str) else scenarios:
        if isinstance(s, str):
            if s not in _SCENARIO_TYPES:
                raise InvalidInput(f"unknown scenario {s!r}; choose from {sorted(_SCENARIO_TYPES)}")
            s = _SCENARIO_TYPES[s]()
        if not isinstance(s, tuple(_SCENARIO_TYPES.values())):
            raise InvalidInput(f"unknown scenario {s!r}; pass a name or a scenario spec")
        specs.append(s)
    keys = [(s.name, getattr(s, "region", None)) for s in specs]
    dupes = sorted({f"{k[0]}@{k[1]}" if k[1] else k[0] for k in keys if keys.count(k) > 1})
    _require(not dupes, f"scenario planted twice in the same place: {dupes}")
    return tuple(specs)


def _region_shares(
    regions: Sequence[str] | Mapping[str, float], specs: Sequence[Scenario]
) -> dict[str, float]:
    if isinstance(regions, str):
        raise InvalidInput("regions must be a sequence of names or a mapping name -> share")
    if isinstance(regions, Mapping):
        shares = {str(k): float(v) for k, v in regions.items()}
        total = math.fsum(shares.values())
        _require(all(v > 0 and math.isfinite(v) for v in shares.values()), "shares must be > 0")
        _require(abs(total - 1.0) < 1e-6, f"region shares must sum to 1, got {total:.6g}")
    else:
        names = list(regions)
        _require(len(set(names)) == len(names), f"duplicate region names in {names}")
        shares = {str(k): 1.0 / max(1, len(names)) for k in names}
    _require(len(shares) > 0 and all(shares), "need at least one region, with non-empty names")
    small = {s.region: s.share for s in specs if isinstance(s, SmallRegion)}
    rest = math.fsum(v for k, v in shares.items() if k not in small)
    _require(math.fsum(small.values()) < 1.0 and rest > 0, "small regions leave no room")
    scale = (1.0 - math.fsum(small.values())) / rest
    out = {k: v * scale for k, v in shares.items() if k not in small}
    return {**{k: out.get(k, small.get(k, 0.0)) for k in shares}, **small}


def region_sizes(
    n_clients: int,
    regions: Sequence[str] | Mapping[str, float] = DEFAULT_REGIONS,
    scenarios: Iterable[Scenario | str] = DEFAULT_SCENARIOS,
) -> dict[str, int]:
    """Clients per region that :func:`make_fleet` gives these arguments, without building it.

    The same shares (a ``small_region`` scenario shrinks its region) and the same
    largest-remainder rounding, so a caller can check cohorts before simulating.
    """
    _require(_is_int(n_clients) and n_clients > 0, f"n_clients must be an int > 0: {n_clients!r}")
    share_map = _region_shares(regions, _parse_scenarios(scenarios))
    sizes = _apportion(list(share_map.values()), int(n_clients))
    return {name: int(k) for name, k in zip(share_map, sizes, strict=True)}


def _apportion(shares: Sequence[float], total: int) -> I64:
    """Largest-remainder rounding of shares x total to integers summing to total."""
    raw: F64 = np.asarray(shares, dtype=np.float64) * total
    base = np.floor(raw).astype(np.int64)
    extra = np.argsort(-(raw - base), kind="stable")[: total - int(base.sum())]
    base[extra] += 1
    return base


def _blocks(ext: I64) -> list[tuple[int, int, int, int]]:
    """Client-aligned blocks (c0, c1, s0, s1) of about _BLOCK_SAMPLES samples each."""
    cuts = np.searchsorted(ext, np.arange(_BLOCK_SAMPLES, int(ext[-1]), _BLOCK_SAMPLES))
    c = np.unique(np.concatenate(([0], cuts, [ext.size - 1])))
    return [(int(a), int(b), int(ext[a]), int(ext[b])) for a, b in pairwise(c)]


def make_fleet(
    *,
    n_clients: int,
    samples_per_client: float = 40,
    quantity_skew: float = 0.5,
    regions: Sequence[str] | Mapping[str, float] = DEFAULT_REGIONS,
    n_classes: int = 10,
    seed: int = 0,
    scenarios: Iterable[Scenario | str] = DEFAULT_SCENARIOS,
    workers: int = 2,
) -> Fleet:
    """Generate a fleet; deterministic for its arguments (``workers`` changes only speed).

    Args:
        n_clients: number of clients (devices), > 0.
        samples_per_client: mean samples per client, >= 1.
        quantity_skew: coefficient of variation of per-client sample counts (Gamma
            distributed, rounded, at least 1); 0 (or < 1e-6) gives every client the same count.
        regions: region names (equal shares) or a mapping name -> share summing to 1.
        n_classes: number of classes for ``y_true``/``y_pred``, >= 2.
        seed: root seed (>= 0).
        scenarios: scenario specs or their names (default: all six, at default settings).
        workers: threads used to fill the per-sample arrays.
    """
    _require(_is_int(n_clients) and n_clients > 0, f"n_clients must be an int > 0: {n_clients!r}")
    _require(math.isfinite(samples_per_client) and samples_per_client >= 1, "samples_per_client<1")
    _require(math.isfinite(quantity_skew) and quantity_skew >= 0, "quantity_skew must be >= 0")
    _require(_is_int(n_classes) and n_classes >= 2, f"n_classes must be an int >= 2: {n_classes!r}")
    _require(_is_int(seed) and seed >= 0, f"seed must be an int >= 0, got {shown(seed)}")
    n_clients, n_classes, seed = int(n_clients), int(n_classes), int(seed)
    _require(workers >= 1, f"workers must be >= 1, got {workers}")
    specs = _parse_scenarios(scenarios)
    share_map = _region_shares(regions, specs)
    names = tuple(share_map)
    for s in specs:
        region = getattr(s, "region", None)
        if region is not None and region not in names:
            raise InvalidInput(
                f"scenario {s.name} targets region {region!r}, not one of {names}; "
                f"pass {type(s).__name__}(region=...) naming an existing region"
            )
    rng = dict(zip(_STREAMS, np.random.default_rng(seed).spawn(len(_STREAMS)), strict=True))
    per_region = _apportion(list(share_map.values()), n_clients)
    first = np.concatenate(([0], np.cumsum(per_region))).astype(np.int64)
    client_region = np.repeat(np.arange(len(names), dtype=np.int32), per_region)
    C = n_classes

    # Per-client structure and parameters (n_clients-sized; cheap).
    if quantity_skew < 1e-6:  # treated as 0: 1/skew² would overflow
        counts = np.full(n_clients, max(1, round(samples_per_client)), dtype=np.int64)
    else:
        k = 1.0 / quantity_skew**2
        g = rng["counts"].standard_gamma(k, n_clients) * (samples_per_client / k)
        counts = np.maximum(1, np.rint(g)).astype(np.int64)
    ext = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    n = int(ext[-1])
    pc = rng["client"]
    device = np.sqrt(pc.standard_gamma(_DEVICE_SHAPE, n_clients) / _DEVICE_SHAPE)
    level_z = pc.standard_normal(n_clients)
    reg_mu = _REG_MEAN + _REG_CLIENT_SD * pc.standard_normal(n_clients)
    territory = pc.integers(1, _MAX_TERRITORY + 1, n_clients)
    hx, hy = pc.integers(0, GRID_SIDE - 8, (2, n_clients))
    home = client_region.astype(np.int64) * GRID_SIDE**2 + hy * GRID_SIDE + hx
    along_s = np.full(n_clients, BASELINE_ALONG_RMS)
    across_s = np.full(n_clients, BASELINE_ACROSS_RMS)
    shift = np.zeros(n_clients)
    anchors: Sequence[tuple[float, float]] = _LIGHT_LOSS_ANCHORS
    overconf: list[tuple[int, int, Overconfident]] = []
    skew: LabelSkew | None = None
    planted: list[Planted] = []
    crs_along: list[tuple[int, int, float]] = []
    for s in specs:
        span = range(0, n_clients)
        if isinstance(s, LateralDrift | CrsMismatch | Overconfident | SmallRegion):
            i = names.index(s.region)
            span = range(int(first[i]), int(first[i + 1]))
        if isinstance(s, LateralDrift):
            along_s[span.start : span.stop] = s.along_rms
            across_s[span.start : span.stop] = s.across_rms
        elif isinstance(s, CrsMismatch):
            m = min(len(span), max(1, round(s.fraction * len(span))))
            start = span.start + int(rng["crs"].integers(0, len(span) - m + 1))
            span = range(start, start + m)
            crs_along.append((start, start + m, s.along_rms))  # applied last: wins over drift
            sign = np.where(rng["crs"].random(m) < 0.5, -1.0, 1.0)
            shift[start : start + m] = sign * s.offset_m * rng["crs"].uniform(0.5, 1.5, m)
        elif isinstance(s, Overconfident):
            overconf.append((span.start, span.stop, s))
        elif isinstance(s, HeavyTailedLoss):
            anchors = s.anchors
        elif isinstance(s, LabelSkew):
            skew = s
        touched = tuple(x for x, a, b in zip(names, first, first[1:], strict=False) if a < b
                        and a < span.stop and b > span.start)  # fmt: skip
        planted.append(Planted(s.name, s, touched, span, s.signature(span, n_clients)))
    for a, b, value in crs_along:
        along_s[a:b] = value
    along_s *= device
    across_s *= device
    level = _loss_levels(level_z, anchors)

    fields: dict[str, NDArray[Any]] = {k: np.empty(n, dtype=np.float64) for k in _FLOAT_FIELDS}
    fields |= {k: np.empty(n, dtype=np.int64) for k in _INT_FIELDS}
    blocks = _blocks(ext)

    def rep(values: NDArray[Any], c0: int, c1: int) -> NDArray[Any]:
        return np.repeat(values[c0:c1], counts[c0:c1])

    def spatial() -> None:
        along, across = fields["along"], fields["across"]
        for c0, c1, s0, s1 in blocks:
            rng["along"].standard_normal(out=along[s0:s1])
            along[s0:s1] *= rep(along_s, c0, c1)
            rng["across"].standard_normal(out=across[s0:s1])
            across[s0:s1] *= rep(across_s, c0, c1)
            if shift[c0:c1].any():
                across[s0:s1] += rep(shift, c0, c1)

    def loss() -> None:
        out = fields["loss"]
        for c0, c1, s0, s1 in blocks:
            rng["loss"].standard_exponential(out=out[s0:s1])
            out[s0:s1] *= rep(level, c0, c1)

    def calibration() -> None:
        prob, outcome = fields["prob"], fields["outcome"]
        for _, _, s0, s1 in blocks:
            rng["prob"].random(out=prob[s0:s1])
            np.sqrt(prob[s0:s1], out=prob[s0:s1])  # Beta(2, 1): calibrated elsewhere
            rng["outcome"].random(out=outcome[s0:s1])
        cuts = [0]
        for c0, c1, s in sorted(overconf, key=lambda t: t[0]):
            a, b = int(ext[c0]), int(ext[c1])
            ratio = s.confidence / (1 - s.confidence)
            np.power(prob[a:b], 2.0 / ratio, out=prob[a:b])  # sqrt(U)^(2/b) = U^(1/b)
            np.less(outcome[a:b], s.hit_rate, out=outcome[a:b])
            cuts += [a, b]
        cuts.append(n)
        for a, b in zip(cuts[::2], cuts[1::2], strict=True):
            np.less(outcome[a:b], prob[a:b], out=outcome[a:b])

    def labels() -> None:
        mix = np.full((n_clients, C), 1.0 / C)
        if skew is not None:
            for i in range(len(names)):
                p_r = rng["label_mix"].dirichlet(np.full(C, skew.region_alpha))
                conc = np.maximum(skew.alpha * C * p_r, 1e-2)
                mix[first[i] : first[i + 1]] = rng["label_mix"].dirichlet(conc, int(per_region[i]))
            mix /= mix.sum(axis=1, keepdims=True)
        per_class = rng["labels"].multinomial(counts, mix)
        accuracy = np.linspace(*_CLASS_ACCURACY, C)
        y_true, y_pred = fields["y_true"], fields["y_pred"]
        classes = np.arange(C, dtype=np.int64)
        for c0, c1, s0, s1 in blocks:
            yt = np.repeat(np.tile(classes, c1 - c0), per_class[c0:c1].ravel())
            y_true[s0:s1] = yt
            wrong = np.flatnonzero(rng["pred"].random(s1 - s0) >= accuracy[yt])
            yt[wrong] = (yt[wrong] + rng["pred"].integers(1, C, wrong.size)) % C
            y_pred[s0:s1] = yt

    def regression() -> None:
        y, yhat = fields["y_reg"], fields["y_reg_pred"]
        within = math.sqrt(_REG_SD**2 - _REG_CLIENT_SD**2)
        noise = _REG_SD * math.sqrt(1 - _REG_R2)  # R² = 1 - noise²/SD²
        for c0, c1, s0, s1 in blocks:
            rng["reg"].standard_normal(out=y[s0:s1])
            y[s0:s1] *= within
            y[s0:s1] += rep(reg_mu, c0, c1)
            rng["reg_pred"].standard_normal(out=yhat[s0:s1])
            yhat[s0:s1] *= noise
            yhat[s0:s1] += y[s0:s1]

    def cells() -> None:
        out, step = fields["cell"], (np.arange(32) >> 3) * GRID_SIDE + (np.arange(32) & 7)
        for c0, c1, s0, s1 in blocks:
            j = (rng["cells"].random(s1 - s0) * rep(territory, c0, c1)).astype(np.intp)
            np.add(rep(home, c0, c1), step[j], out=out[s0:s1])

    tasks = (labels, spatial, regression, calibration, loss, cells)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(t) for t in tasks]:
            future.result()
    return Fleet(
        regions=names,
        client_region=client_region,
        offsets=ext[:-1].copy(),
        n_classes=C,
        scenarios=tuple(planted),
        seed=seed,
        **fields,
    )


def describe(fleet: Fleet) -> str:
    """A short human summary: size, regions, sample counts and the planted scenarios."""
    counts = fleet.sample_counts
    lo, mid, hi = np.percentile(counts, [0, 50, 100]) if counts.size else (0, 0, 0)
    lines = [
        f"fleet: {fleet.n_clients:,} clients, {fleet.n_samples:,} samples (per client min "
        f"{lo:g}, median {mid:g}, max {hi:g}), {fleet.n_classes} classes, seed {fleet.seed}",
        f"  {'region':<10} {'clients':>10} {'share':>7} {'samples':>12}",
    ]
    for name in fleet.regions:
        r = fleet.client_range(name)
        share = len(r) / max(1, fleet.n_clients)
        lines.append(
            f"  {name:<10} {len(r):>10,} {share:>7.2%} {int(counts[r.start : r.stop].sum()):>12,}"
        )
    lines.append("planted scenarios:" if fleet.scenarios else "planted scenarios: none")
    for p in fleet.scenarios:
        where = ", ".join(p.regions) if len(p.regions) < len(fleet.regions) else "all regions"
        span = f"clients {p.clients.start}..{p.clients.stop - 1}" if p.clients else "no clients"
        lines.append(f"  {p.name} [{where}; {span}]: {p.signature}")
    return "\n".join(lines)
