"""Whether a release's noisy output stays a finite double, decided before any draw.

A noise scale near the doubles' limit (Δ/ε with ε ≈ 2e-308) overflows in some draws
whatever the data. Deciding that after the draw refused a whole round (and the decision
read the noise); deciding it here reads public facts only — the mechanism's scale, its
grid and dimension, and the largest aggregate the policy admits for the declared cohort.

Tails (each holds for OpenDP's samplers on a grid too): Laplace ``P(|X| ≥ t·b) ≤ 2e^(−t)``
(discrete Laplace's is ``2e^(−t)/(1 + e^(−1/b))``); Gaussian ``P(|X| ≥ z·σ) ≤ 2e^(−z²/2)``
(the discrete Gaussian is sub-Gaussian at its σ: Canonne, Kamath & Steinke 2020).
"""

from __future__ import annotations

import math
import sys

from dpledger.mechanisms import MechanismFacts

__all__ = ["NOISE_TAIL", "noise_reach", "tail_scales"]

NOISE_TAIL = 1e-300
"""Chance that any coordinate of a release's noise passes :func:`tail_scales` scales."""


def tail_scales(facts: MechanismFacts) -> float:
    """Noise scales that every coordinate's draw stays within but with chance
    :data:`NOISE_TAIL` (a union bound over the release's coordinates): ≈ 691 for one
    Laplace coordinate, ≈ 37.2 for one Gaussian one."""
    log_odds = math.log(2 * max(facts.dimension, 1)) - math.log(NOISE_TAIL)
    return log_odds if facts.mechanism == "laplace" else math.sqrt(2 * log_odds)


def noise_reach(facts: MechanismFacts, largest: float) -> float:
    """The largest |noisy coordinate| but with chance :data:`NOISE_TAIL`: ``largest`` (a
    public bound on |aggregate coordinate|) plus :func:`tail_scales` scales and the grid's
    rounding; ``inf`` when that passes a double (:data:`sys.float_info.max`)."""
    reach = abs(largest) + tail_scales(facts) * facts.scale + facts.grid_slack
    return reach if reach <= sys.float_info.max else math.inf
