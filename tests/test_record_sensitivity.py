"""Record-level sensitivity: one record (or one person's records) moves a federation's sum by ≤ Δ.

Silos hold adversarial records (±max float, subnormals, values far outside the clips,
persons with many records). Each silo bounds them with :mod:`dpledger.metrics.records`
(per-record clip or count, the person bound, an exact sum on a public grid); the
federation's total is compared with its neighbour's, in L1 (Laplace's norm) and L2
(Gaussian's), against the ledger's own Δ (``release_sensitivity`` with the policy's
``max_records_per_person``). Neighbours: without a person bound, one record removed
(``add_remove``) or changed (``replace``); with a bound k, one person's records removed
or replaced, and one record changed. One record *removed* from a person who keeps
others can promote a previously dropped record: that moves the sum by ≤ 2 records,
within Δ = k records for k ≥ 2, and twice Δ for k = 1 (a change of that person's data,
covered at 2ε by group privacy) — both figures are asserted exactly.

The sums are exact (integers, or integers of a fixed-point grid), so there is no float
tolerance beyond the ledger's own ``CLIENT_ROUNDING_SLACK`` inside Δ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.mechanisms import release_sensitivity
from dpledger.metrics import records as rec
from dpledger.policy import Clip, MetricSpec

BIG = float(np.finfo(np.float64).max)
N_CLASSES = 3
EDGES = (0.5, 1.0, 2.0, 5.0)
Y_CLIP, P_CLIP = (25.0, 346.0), (0.1, 400.0)
SCALAR = (-0.7, 2.3)  # a clip that holds 0, with decimals that are not doubles

extreme = st.sampled_from([0.0, -0.0, BIG, -BIG, 5e-324, 1e300, -1e300, 0.1, 2.3, -0.7])
any_float = st.floats(allow_nan=False, allow_infinity=False, width=64) | extreme
label = st.integers(0, N_CLASSES - 1)

Record = tuple[Any, ...]  # (person, column values...)
Federation = list[list[Record]]  # silos, each a list of records in listed order


@dataclass(frozen=True)
class Kind:
    """A record-level metric: its silo-side sum and the policy metric that releases it."""

    name: str
    columns: tuple[st.SearchStrategy[Any], ...]
    dtypes: tuple[Any, ...]
    silo_sums: Callable[..., rec.SiloSums]
    spec: MetricSpec

    def total(self, fed: Federation, k: int | None) -> np.ndarray:
        rows = [r for silo in fed for r in silo]
        offsets = np.cumsum([0, *[len(s) for s in fed[:-1]]]).astype(np.int64)
        cols = [np.array([r[i + 1] for r in rows], dtype=dt) for i, dt in enumerate(self.dtypes)]
        persons = None if k is None else np.array([r[0] for r in rows], dtype=np.int64)
        return self.silo_sums(*cols, offsets=offsets, persons=persons, max_records=k).total()

    def delta(self, relation: str, k: int, mechanism: str) -> float:
        return release_sensitivity(self.spec, relation, mechanism, records=k)  # type: ignore[arg-type]


def _vector(cap: str, dimension: int, nonnegative: bool, **extra: Any) -> MetricSpec:
    return MetricSpec(kind="vector_sum", epsilon=1, dimension=dimension, cap_per_record=cap,
                      nonnegative=nonnegative, **extra)  # fmt: skip


def _clip(pair: tuple[float, float]) -> Clip:
    return Clip(low=str(pair[0]), high=str(pair[1]), source="test")


KINDS = {
    k.name: k
    for k in (
        Kind("confusion", (label, label), (np.int64, np.int64),
             lambda t, p, **kw: rec.record_confusion(t, p, n_classes=N_CLASSES, **kw),
             _vector("1", N_CLASSES**2, True)),
        Kind("histogram", (any_float,), (np.float64,),
             lambda v, **kw: rec.record_histogram(v, edges=EDGES, **kw),
             MetricSpec(kind="histogram", epsilon=1, edges=EDGES, edges_version="v1",
                        cap_per_record="1")),
        Kind("scalar", (any_float,), (np.float64,),
             lambda v, **kw: rec.record_scalar(v, low=SCALAR[0], high=SCALAR[1], **kw),
             MetricSpec(kind="scalar_mean", epsilon=1, clip=_clip(SCALAR))),
        Kind("regression", (any_float, any_float), (np.float64, np.float64),
             lambda y, p, **kw: rec.record_regression(y, p, y_clip=Y_CLIP, y_pred_clip=P_CLIP,
                                                      cap=1.0, **kw),
             _vector("1", 5, False, y_clip=_clip(Y_CLIP), y_pred_clip=_clip(P_CLIP))),
    )
}  # fmt: skip


def _record(kind: Kind, person: st.SearchStrategy[int]) -> st.SearchStrategy[Record]:
    return st.tuples(person, *kind.columns)


def federation(kind: Kind, persons: int) -> st.SearchStrategy[Federation]:
    silo = st.lists(_record(kind, st.integers(0, persons - 1)), min_size=0, max_size=7)
    return st.lists(silo, min_size=1, max_size=3).filter(lambda f: any(f))


def _norms(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    diff = (a - b).astype(np.float64)
    return float(np.abs(diff).sum()), float(np.sqrt((diff * diff).sum()))


def _assert_within(kind: Kind, a: np.ndarray, b: np.ndarray, relation: str, k: int) -> None:
    l1, l2 = _norms(a, b)
    assert l1 <= kind.delta(relation, k, "laplace"), (l1, kind.delta(relation, k, "laplace"))
    assert l2 <= kind.delta(relation, k, "gaussian"), (l2, kind.delta(relation, k, "gaussian"))


def _pick(data: st.DataObject, fed: Federation) -> tuple[int, int]:
    s = data.draw(st.sampled_from([i for i, silo in enumerate(fed) if silo]))
    return s, data.draw(st.integers(0, len(fed[s]) - 1))


def _without(fed: Federation, s: int, keep: Callable[[int, Record], bool]) -> Federation:
    return [[r for i, r in enumerate(silo) if j != s or keep(i, r)] for j, silo in enumerate(fed)]


@pytest.mark.parametrize("name", KINDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_one_record_moves_the_sum_by_at_most_delta_without_a_person_bound(
    name: str, data: st.DataObject
) -> None:
    kind = KINDS[name]
    fed = data.draw(federation(kind, persons=1_000))
    s, i = _pick(data, fed)
    base = kind.total(fed, None)
    removed = kind.total(_without(fed, s, lambda j, _: j != i), None)
    _assert_within(kind, base, removed, "add_remove", 1)
    changed = [list(silo) for silo in fed]
    changed[s][i] = data.draw(_record(kind, st.just(fed[s][i][0])))
    _assert_within(kind, base, kind.total(changed, None), "replace", 1)


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("k", [1, 2, 3])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_one_persons_records_move_the_sum_by_at_most_k_records(
    name: str, k: int, data: st.DataObject
) -> None:
    kind = KINDS[name]
    fed = data.draw(federation(kind, persons=3))  # few persons: many hold > k records
    s, i = _pick(data, fed)
    person = fed[s][i][0]
    base = kind.total(fed, k)
    gone = kind.total(_without(fed, s, lambda _, r: r[0] != person), k)
    _assert_within(kind, base, gone, "add_remove", k)
    # their records replaced (the same count: under replace the record count is public)
    swapped = [list(silo) for silo in fed]
    for j, r in enumerate(fed[s]):
        if r[0] == person:
            swapped[s][j] = data.draw(_record(kind, st.just(person)))
    _assert_within(kind, base, kind.total(swapped, k), "replace", k)
    changed = [list(silo) for silo in fed]
    changed[s][i] = data.draw(_record(kind, st.just(person)))
    _assert_within(kind, base, kind.total(changed, k), "replace", k)
    # one record removed, the person stays: ≤ 2 records (a promoted one may come in)
    one_less = kind.total(_without(fed, s, lambda j, _: j != i), k)
    l1, _ = _norms(base, one_less)
    assert l1 <= max(k, 2) * kind.delta("add_remove", 1, "laplace")


def test_removing_one_record_of_a_person_over_the_bound_swaps_in_the_next() -> None:
    """k = 1: the kept record leaves, the next is promoted: 2 records' change, twice Δ."""
    kind = KINDS["confusion"]
    fed: Federation = [[(7, 0, 0), (7, 1, 2)]]  # person 7: two records, the bound keeps one
    base = kind.total(fed, 1)
    after = kind.total([[(7, 1, 2)]], 1)
    l1, _ = _norms(base, after)
    delta = kind.delta("add_remove", 1, "laplace")
    assert l1 == 2.0
    assert delta < l1 <= 2 * delta  # twice Δ: a change of person 7's data, group size 2
    assert l1 <= kind.delta("replace", 1, "laplace")  # within the person's replace Δ


def test_sensitivities_scale_by_the_person_bound() -> None:
    for kind in KINDS.values():
        for relation in ("replace", "add_remove"):
            one = kind.delta(relation, 1, "laplace")
            assert kind.delta(relation, 3, "laplace") == pytest.approx(3 * one, rel=1e-12)
    assert KINDS["confusion"].delta("add_remove", 1, "laplace") == pytest.approx(1.0)
    assert KINDS["confusion"].delta("replace", 1, "laplace") == pytest.approx(2.0)
    assert KINDS["confusion"].delta("replace", 2, "gaussian") == pytest.approx(2 * 2**0.5)
    assert KINDS["scalar"].delta("replace", 1, "laplace") == pytest.approx(3.0)
    assert KINDS["scalar"].delta("add_remove", 4, "laplace") == pytest.approx(4 * 2.3)
