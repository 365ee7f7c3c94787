"""Seeded cross-silo federations: records split over silos with a Dirichlet skew.

The record-level notebook and tests split a real data set (scikit-learn's digits and
diabetes) over silos the way federated-learning papers do: each class's records (or, for
regression, all records) are shared between silos in proportions drawn from a symmetric
Dirichlet(α); small α (0.3) gives silos of very different sizes and class mixes. Like
:mod:`dpledger.sim.fleet`, this makes synthetic *assignments* with ``numpy.random``,
never release noise. Persons are drawn too: :func:`persons_for` gives records shared
persons, so that a per-person bound has something to bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput

__all__ = ["Federation", "dirichlet_silos", "persons_for"]


@dataclass(frozen=True)
class Federation:
    """A permutation of the records that makes each silo contiguous, and the silos' starts.

    ``order`` indexes the original records: ``x[order]`` lists silo 0's records, then
    silo 1's, …; ``offsets`` holds each silo's start in that order (the ``offsets=`` of
    :mod:`dpledger.metrics`); ``sizes`` the record counts.
    """

    order: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]

    @property
    def silos(self) -> int:
        """Number of silos."""
        return int(self.sizes.shape[0])


def dirichlet_silos(
    groups: npt.ArrayLike, silos: int, alpha: float = 0.3, seed: int = 0
) -> Federation:
    """Split records over ``silos``: each group's records by Dirichlet(α) proportions.

    ``groups`` holds one group per record (class labels for label skew, or all zeros for
    quantity skew). Every silo is non-empty when there are at least ``silos`` records
    (each silo first takes one record, then the rest follow the drawn proportions).
    """
    g = np.asarray(groups)
    if g.ndim != 1 or g.size < silos or silos < 1:
        raise InvalidInput(f"need ≥ {silos} records in a 1-D array, got shape {g.shape}")
    if not (isinstance(alpha, int | float) and alpha > 0):
        raise InvalidInput(f"alpha must be > 0, got {shown(alpha)}")
    rng = np.random.default_rng(seed)
    silo_of = np.empty(g.size, dtype=np.int64)
    first = rng.choice(g.size, size=silos, replace=False)
    rest = np.setdiff1d(np.arange(g.size), first)
    silo_of[first] = np.arange(silos)
    for label in np.unique(g[rest]):
        idx = rest[g[rest] == label]
        share = rng.dirichlet(np.full(silos, float(alpha)))
        silo_of[idx] = rng.choice(silos, size=idx.size, p=share)
    order = np.argsort(silo_of, kind="stable").astype(np.int64)
    sizes = np.bincount(silo_of, minlength=silos).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return Federation(order, offsets, sizes)


def persons_for(n: int, records_per_person: float, seed: int = 0) -> npt.NDArray[np.int64]:
    """One person id per record: persons hold 1 + Poisson(m − 1) records on average m.

    Records of a person are adjacent in the returned order (as in a patient-sorted
    table); ids are unique across the whole set.
    """
    if n < 0 or not records_per_person >= 1:
        raise InvalidInput(f"need n ≥ 0 and records_per_person ≥ 1, got {n}, {records_per_person}")
    rng = np.random.default_rng(seed)
    counts = 1 + rng.poisson(records_per_person - 1.0, size=n)
    ids = np.repeat(np.arange(n, dtype=np.int64), counts)[:n]
    return ids
