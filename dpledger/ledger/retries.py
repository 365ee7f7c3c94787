"""When a request under a recorded release id is a retry: the tolerance and the test.

A retry is the same request (fields and principal) with an aggregate the recorded noisy
value could have come from. The test reads only the caller's own aggregate and the public
release — never a digest of the original aggregate, which anyone who reads the ledger
could test guesses against.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger.approval import Prepared, ReleaseRequest, fingerprint
from dpledger.ledger.records import Entry
from dpledger.metrics._reading import read_real

__all__ = [
    "RETRY_FALSE_CONFLICT",
    "close",
    "is_retry",
    "near",
    "plausible",
    "repeats",
    "retries_record",
    "retry_tolerance",
]

RETRY_FALSE_CONFLICT = 1e-9
"""Chance that a true retry (the same aggregate) is refused as a conflict, per release."""


def retry_tolerance(facts: mech.MechanismFacts) -> float:
    """Noise scales within which a retry's aggregate must lie of the recorded noisy value.

    A union bound over the release's coordinates: Laplace tails ``P(|X| > t·b) = e^(−t)``,
    Gaussian ``2Φ(−z)``, at :data:`RETRY_FALSE_CONFLICT` in all (e.g. t ≈ 22.7 for 7
    Laplace coordinates).
    """
    d = max(facts.dimension, 1)
    if facts.mechanism == "laplace":
        return math.log(d / RETRY_FALSE_CONFLICT)
    # the lower tail: 1 − 1e-9/(2d) as a double is off by up to ~1% of its tail (review 44)
    return -NormalDist().inv_cdf(RETRY_FALSE_CONFLICT / (2 * d))


def plausible(values: npt.NDArray[np.float64], hit: Entry) -> bool:
    """Whether ``values`` could be the aggregate the recorded noisy output came from."""
    return near(values, np.asarray(hit.draft.output, dtype=np.float64), hit.draft.facts)


def close(p: Prepared, first: Prepared) -> bool:
    """Whether ``p``'s aggregate is within :func:`retry_tolerance` noise scales of
    ``first``'s (the same request, so the same mechanism), every coordinate."""
    return p.facts == first.facts and near(p.values, first.values, first.facts)


def near(
    values: npt.NDArray[np.float64], to: npt.NDArray[np.float64], facts: mech.MechanismFacts
) -> bool:
    """Every coordinate of ``values`` within :func:`retry_tolerance` scales of ``to``'s, plus
    OpenDP's output grid (a scale below it rounds past any scales: audit 5, F3) and an ulp
    of ``to`` (OpenDP rounds its output to the nearest double: where that ulp nears the
    tolerance, a draw of half of it jumped a true retry out of reach, P ≈ 3e-5, not 1e-9;
    review h39)."""
    a, b = values.reshape(-1), to.reshape(-1)
    if a.shape != b.shape:
        return False
    reach = retry_tolerance(facts) * facts.scale + facts.grid_slack + np.spacing(np.abs(b))
    return bool(np.all(np.abs(a - b) <= reach))


def retries_record(
    request: ReleaseRequest, values: npt.NDArray[np.float64], hit: Entry, principal: str | None
) -> bool:
    """Whether ``request`` from ``principal`` with the aggregate ``values`` retries the
    recorded ``hit``: the recorded request's fingerprint, and :func:`plausible` values."""
    return hit.draft.request_hash == fingerprint(request, principal) and plausible(values, hit)


def is_retry(request: ReleaseRequest, aggregate: object, hit: Entry, principal: str | None) -> bool:
    """:func:`retries_record` on a caller's aggregate as given (any real numbers), read
    without any policy: for a request the current policy refuses — one recorded under an
    earlier policy, whose checks have changed since — the record still answers."""
    values, _ = read_real(aggregate)
    return values is not None and retries_record(request, values, hit, principal)


def repeats(
    request: ReleaseRequest, aggregate: object, first: Prepared, principal: str | None
) -> bool:
    """Whether a request refused on its own checks repeats ``first``, an approved request
    under the same release id in the same call: the same fields and principal, and an
    aggregate within the retry tolerance of ``first``'s. It then gets ``first``'s outcome,
    as a retry in a later call would get ``first``'s release."""
    if fingerprint(request, principal) != fingerprint(first.verdict.request, principal):
        return False
    values, _ = read_real(aggregate)
    return values is not None and near(values, first.values, first.facts)
