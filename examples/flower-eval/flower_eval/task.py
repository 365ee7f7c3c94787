"""The example's world: a synthetic fleet, a small numpy model, and a region that drifts.

Node ``i`` (``partition-id`` i) holds client i of a seeded fleet from
``dpledger.sim.fleet`` (label-skewed class mixes, five regions, "islands" too small to
publish). Each sample has 8 features drawn around its class prototype; the model is a
numpy linear classifier (nearest prototype: logits = x·W + b). In the drifting region
the features shift a little more every round — a sensor aging in the field — so the
model's accuracy there falls round after round while the other regions hold steady.
Everything here is synthetic and seeded; release noise comes from OpenDP in the ledger.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dpledger.sim.fleet import Fleet, make_fleet
from dpledger.sim.scenarios import LabelSkew, SmallRegion

__all__ = [
    "CLASSES",
    "DRIFTING",
    "REGIONS",
    "crashes",
    "evaluate",
    "fleet",
    "initial_model",
    "policy_path",
    "region_of",
]

CLASSES = 4
FEATURES = 8
REGIONS = ("north", "south", "east", "west", "islands")
DRIFTING = "west"
DRIFT_PER_ROUND = 1.4  # feature shift per round in the drifting region (prototype units)
CRASH_RATE = 0.01  # share of nodes whose ClientApp raises (a crashing client)
HERE = Path(__file__).resolve().parent


def policy_path(name: str = "policy.toml") -> Path:
    """A policy file shipped inside the app (so `flwr run` packages it)."""
    return HERE / name


@functools.lru_cache(maxsize=4)
def fleet(num_nodes: int, seed: int = 0) -> Fleet:
    """The fleet behind ``num_nodes`` nodes (the same on the server and on every node)."""
    return make_fleet(
        n_clients=num_nodes, n_classes=CLASSES, regions=REGIONS, seed=seed,
        scenarios=(LabelSkew(), SmallRegion(region="islands", share=0.01)),
    )  # fmt: skip


def region_of(partition: int, num_nodes: int, seed: int = 0) -> str:
    """The region of node ``partition``: public, the operator's partition of the fleet."""
    f = fleet(num_nodes, seed)
    return f.regions[int(f.client_region[partition])]


def _prototypes(seed: int) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng([seed, 7])
    return rng.normal(0.0, 0.8, (CLASSES, FEATURES))


def initial_model(seed: int = 0) -> dict[str, npt.NDArray[np.float64]]:
    """The model under evaluation: a nearest-prototype linear classifier."""
    p = _prototypes(seed)
    return {"w": p.T.copy(), "b": -0.5 * (p * p).sum(axis=1)}


def crashes(partition: int, seed: int = 0) -> bool:
    """Whether this node's ClientApp fails (seeded: the same nodes every round)."""
    return bool(np.random.default_rng([seed, 11, partition]).random() < CRASH_RATE)


def evaluate(
    model: dict[str, npt.NDArray[np.float64]],
    partition: int,
    num_nodes: int,
    server_round: int,
    seed: int = 0,
) -> dict[str, npt.NDArray[np.float64]]:
    """Run the model on node ``partition``'s samples: per-sample loss, labels, predictions."""
    f = fleet(num_nodes, seed)
    ext = np.append(f.offsets, f.n_samples)
    y = f.y_true[int(ext[partition]) : int(ext[partition + 1])]
    rng = np.random.default_rng([seed, 13, partition])
    x = _prototypes(seed)[y] + rng.normal(0.0, 1.0, (y.size, FEATURES))
    if region_of(partition, num_nodes, seed) == DRIFTING:
        direction = np.random.default_rng([seed, 17]).normal(0.0, 1.0, FEATURES)
        x += DRIFT_PER_ROUND * server_round * direction / np.linalg.norm(direction)
    logits = x @ model["w"] + model["b"]
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return {
        "loss": -logp[np.arange(y.size), y],
        "y_true": y,
        "y_pred": logits.argmax(axis=1),
    }
