"""dpledger inside Flower's federated evaluation loop (extra ``flower``: ``flwr>=1.42,<2``).

Flower's evaluate path averages client metrics by participant weight and accounts for
none of them. :class:`LedgerEvaluation` wraps any Message-API strategy and owns
evaluation: each round's per-region sums go through a dpledger :class:`~dpledger.Ledger`
and only noisy values, their 95% half-widths, refusal flags and the health counters the
neighbouring relation makes public leave the server.

Server::

    from flwr.serverapp.strategy import FedAvg
    from dpledger.flower import LedgerEvaluation

    strategy = LedgerEvaluation(FedAvg(fraction_train=0.0), ledger,
                                metrics={"confusion": "confusion_matrix"},
                                params={"confusion": {"n_classes": 10}})
    result = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=3)
    strategy.rounds[1].table()      # the operator's report: every Release and Verdict

Client: :func:`contribution_reply` in the evaluate handler, and
:func:`answer_region_queries` so the server can ask each node its region once.

Modules: ``strategy`` (the wrapper), ``client`` (the client helper), ``wire`` (the plan and
reply records), ``npy`` (an Array's ``.npy`` bytes against its declared dtype and shape),
``intake`` (a round's replies sorted into node statuses and each region's rows),
``layout`` (where flwr 1.42 stores a reply's fields, read directly for a final 1.42 release only),
``columns`` (a round's three-record replies checked and decoded one metric at a time),
``registry`` (node → region), ``aggregation`` (the sum hook), ``report`` (round reports and
the public record), ``means`` (a scalar's mean over the reporters under ``add_remove``),
``testing`` (``LocalGrid``, a Grid without Ray).
This package is the only part of dpledger that imports ``flwr``. Set
``FLWR_TELEMETRY_ENABLED=0`` before importing flwr to keep Flower's telemetry off.
"""

from dpledger.flower.aggregation import Aggregator, PlainSum
from dpledger.flower.client import (
    answer_region_queries,
    contribution_reply,
    contributions,
    region_reply,
)
from dpledger.flower.means import ReporterMean
from dpledger.flower.registry import NodeRegistry, QueryRegistry, Roster, StaticRegistry
from dpledger.flower.report import (
    Health,
    NodeStatus,
    NodeStatuses,
    NotReleased,
    RoundReport,
    published,
)
from dpledger.flower.strategy import LedgerEvaluation
from dpledger.flower.wire import MetricPlan, RoundPlan

__all__ = [
    "Aggregator",
    "Health",
    "LedgerEvaluation",
    "MetricPlan",
    "NodeRegistry",
    "NodeStatus",
    "NodeStatuses",
    "NotReleased",
    "PlainSum",
    "QueryRegistry",
    "ReporterMean",
    "Roster",
    "RoundPlan",
    "RoundReport",
    "StaticRegistry",
    "answer_region_queries",
    "contribution_reply",
    "contributions",
    "published",
    "region_reply",
]
