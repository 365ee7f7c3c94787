"""``LedgerEvaluation``: a Flower strategy wrapper that releases evaluation through a ledger.

It wraps any Message-API strategy (``flwr.serverapp.strategy``), passes training through
untouched and owns evaluation:

- ``configure_evaluate`` lets the wrapped strategy sample the nodes, looks up each one's
  region on the server side (:mod:`dpledger.flower.registry`), drops nodes with no
  region, fixes each region's planned cohort and puts the round's plan (metrics, policy
  bounds, edges) into every instruction;
- ``aggregate_evaluate`` sorts replies into reported, failed (error replies), dropped
  (selected, no reply) and rejected (wrong schema, out of bounds, wrong edges version) per
  region (:func:`~dpledger.flower.intake.sort_replies`) — a bad reply is counted, never
  ends the run — sums each region's contributions
  with the aggregator hook (:mod:`dpledger.flower.aggregation`), releases every (region,
  metric) of the round through :meth:`Ledger.release_round` (one transaction), derives the
  FLAM metrics of confusion matrices and regression measures, and returns the public
  MetricRecord (:func:`dpledger.flower.report.published`). The wrapped strategy's own
  ``aggregate_evaluate`` is never called: its participant-weighted mean of raw client
  metrics is what must not leave the server.

Rounds map to epochs through the policy's ``rounds_per_epoch``: round r (from 1) is epoch
``first_epoch + (r − 1) // rounds_per_epoch``. The cohort of a release is the public
number the neighbouring relation allows: under ``replace`` the region's reporters (cohort
membership is public); under ``add_remove`` the planned cohort fixed before the round (how
many reported is private), and every region with a planned cohort is released whatever
came back, so that no refusal depends on who reported.
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from dpledger.approval import MAX_EPOCH, ReleaseRequest, Verdict
from dpledger.errors import DpLedgerError, InvalidInput, StoreError
from dpledger.flower.aggregation import Aggregator, PlainSum, aggregate_error, sums_few_rows
from dpledger.flower.intake import Intake, sort_replies
from dpledger.flower.means import reporter_means
from dpledger.flower.plans import (
    DERIVED,
    choose_metrics,
    health_metric_of,
    metric_plan,
    regression_codec_for,
    settings_of,
)
from dpledger.flower.registry import (
    NodeRegistry,
    QueryRegistry,
    check_loop,
    check_parts,
    check_sampling,
    region_map,
    run_lookup,
    sampling_grid,
)
from dpledger.flower.report import (
    HEALTH_FIELDS,
    NotReleased,
    Outcome,
    RoundReport,
    published,
)
from dpledger.flower.wire import PLAN_RECORD, MetricPlan, RoundPlan
from dpledger.ledger import Ledger, Release
from dpledger.ledger.derived import DerivedRelease, derive_confusion, derive_regression
from dpledger.policy import ALL

__all__ = ["LedgerEvaluation"]

_LOG = logging.getLogger("dpledger.flower")


@dataclass(frozen=True)
class _Failed:
    """Why a region's sum could not be had (the wrapper's text, never the aggregator's)."""

    reason: str


@dataclass(frozen=True)
class _Planned:
    plan: RoundPlan
    selected: Mapping[int, str]  # node id -> region
    unregistered: tuple[int, ...]


class LedgerEvaluation(Strategy):
    """Wrap ``strategy``; release its evaluation rounds through ``ledger`` (module docstring).

    ``metrics`` maps each policy metric to the declared contribution that computes it
    (:data:`dpledger.metrics.DECLARATIONS`; default: every policy metric whose name is a
    declaration). ``params`` gives a declaration's own settings per metric (``n_classes``
    for a confusion matrix; ``y_bounds``, ``residual_bound``, ``max_samples`` for
    regression measures). ``registry`` maps nodes to regions (default
    :class:`~dpledger.flower.QueryRegistry`), ``aggregator`` sums contributions (default
    :class:`~dpledger.flower.PlainSum`: the server sees clear contributions).
    ``health_metric`` names a policy ``vector_sum`` (dimension 3, cap 1, nonnegative) that
    releases the health counters as noisy counts under ``add_remove``; without it they
    stay with the operator (:attr:`rounds`). ``release_prefix`` starts every release id
    (default ``flwr``), followed by a tag drawn afresh for every :meth:`start` (a run)
    and whenever a round whose ids went to the ledger (or one before the latest) is
    configured again (a loop an outer strategy drives): a round's FLAM metrics are read
    back from its committed release by id, and a second run — another model, on the same
    ledger — never meets the first run's ids. ``on_round`` is called with each round's
    :class:`~dpledger.flower.RoundReport` (to print or alert) after the round's releases
    are committed; an exception it raises is logged, and the round's MetricRecord still
    returned (a release that spent ε always returns its value).
    """

    def __init__(
        self,
        strategy: Strategy,
        ledger: Ledger,
        *,
        metrics: Mapping[str, str] | None = None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        registry: NodeRegistry | None = None,
        aggregator: Aggregator | None = None,
        health_metric: str | None = None,
        first_epoch: int = 0,
        release_prefix: str | None = None,
        on_round: Callable[[RoundReport], object] | None = None,
    ) -> None:
        if not isinstance(strategy, Strategy):
            raise InvalidInput(f"strategy must be a Flower Strategy, got {type(strategy).__name__}")
        check_sampling(strategy)
        check_loop(strategy)  # its own start() is not the loop that runs: warned
        if not isinstance(ledger, Ledger):
            raise InvalidInput(f"ledger must be a dpledger Ledger, got {type(ledger).__name__}")
        if ledger.mode == "read":
            raise InvalidInput("the ledger was opened with mode='read': open it to write")
        if (
            isinstance(first_epoch, bool)
            or not isinstance(first_epoch, int)
            or not 0 <= first_epoch <= MAX_EPOCH
        ):
            raise InvalidInput(
                f"first_epoch must be an integer in [0, 2**63 - 1] (a ledger epoch), got "
                f"{first_epoch!r}"
            )
        check_parts(registry, aggregator, release_prefix, on_round)
        if ledger.policy.privacy_unit != "client":
            raise InvalidInput(
                "LedgerEvaluation releases client-level policies (one node is one privacy "
                f"unit), not privacy_unit = {ledger.policy.privacy_unit!r}: its bounds are "
                "per client"
            )
        self.strategy = strategy
        self.ledger = ledger
        self.policy = ledger.policy
        self.registry: NodeRegistry = registry if registry is not None else QueryRegistry()
        self._lookup = self._run_lookup()
        self.aggregator: Aggregator = aggregator if aggregator is not None else PlainSum()
        self.first_epoch = first_epoch
        self.release_prefix = release_prefix or "flwr"
        self.run_tag = uuid.uuid4().hex[:16]
        """This run's part of every release id (drawn again by each :meth:`start`)."""
        self.health_metric = health_metric_of(self.policy, health_metric)
        chosen = choose_metrics(self.policy, metrics, self.health_metric)
        settings = settings_of(chosen, params)
        self.plans: Mapping[str, MetricPlan] = MappingProxyType(
            {m: metric_plan(self.policy, m, d, settings.get(m, {})) for m, d in chosen.items()}
        )
        if isinstance(self.aggregator, PlainSum):
            for m in self.plans.values():
                self.aggregator.grid(m)  # its fixed-point grid fits every metric's bounds
        if self.policy.neighbouring == "add_remove":
            sums_few_rows(self.aggregator, self.plans)
        self.rounds: dict[int, RoundReport] = {}
        """Every evaluate round's full report of the current run, by server round
        (operator-only; each :meth:`start` begins a new dict)."""
        self._pending: dict[int, _Planned] = {}
        self._configured: set[int] = set()  # rounds configured under this run tag
        self._sent: set[int] = set()  # rounds whose release ids went to the ledger
        self._on_round = on_round

    # -- Strategy: training passes through ------------------------------------------------

    def __repr__(self) -> str:
        return f"LedgerEvaluation({self.strategy!r}, ledger={self.ledger.location})"

    def summary(self) -> None:
        """Log the wrapper's settings, then the wrapped strategy's summary."""
        p = self.policy
        _LOG.info(
            "LedgerEvaluation: policy %s v%s (%s), %d metric(s) %s, %d round(s) per epoch, "
            "health %s",
            p.name, p.version, p.neighbouring, len(self.plans), sorted(self.plans),
            p.rounds_per_epoch,
            "public" if p.neighbouring == "replace"
            else (f"released as {self.health_metric}" if self.health_metric else "operator-only"),
        )  # fmt: skip
        self.strategy.summary()

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Training is the wrapped strategy's, untouched."""
        return self.strategy.configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Training is the wrapped strategy's, untouched."""
        return self.strategy.aggregate_train(server_round, replies)

    # -- Strategy: evaluation is the ledger's -----------------------------------------------

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Run Flower's round loop (:meth:`Strategy.start`) as a new run: fresh release ids
        and a new :attr:`rounds` (an earlier run's reports stay in the dict it returned)."""
        if (
            isinstance(num_rounds, int)
            and num_rounds >= 1
            and (self.epoch_of(num_rounds) > MAX_EPOCH)
        ):  # before any round: a late round would have no epoch (audit 5, F6)
            raise InvalidInput(
                f"round {num_rounds} would be epoch {self.epoch_of(num_rounds)}, past the "
                f"last ledger epoch 2**63 - 1: lower first_epoch ({self.first_epoch}) or "
                "num_rounds"
            )
        if self.rounds or self._pending or self._configured:
            self._new_run()
        return super().start(
            grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config,
            evaluate_fn,
        )  # fmt: skip

    def _new_run(self) -> None:
        """A fresh run tag (so fresh release ids), an empty :attr:`rounds`."""
        self.run_tag = uuid.uuid4().hex[:16]
        self.rounds = {}
        self._pending = {}
        self._configured = set()
        self._sent = set()
        self._lookup = self._run_lookup()

    def _run_lookup(self) -> NodeRegistry:
        """The registry as this run asks it (:func:`~dpledger.flower.registry.run_lookup`)."""
        return run_lookup(self.registry, self.policy.neighbouring)

    def epoch_of(self, server_round: int) -> int:
        """The ledger epoch of ``server_round`` (rounds from 1)."""
        return self.first_epoch + (server_round - 1) // self.policy.rounds_per_epoch

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Sample with the wrapped strategy, keep nodes with a region, fix the planned cohorts."""
        if server_round < 1:  # a loop not run by start(), counting from 0 (review 39 flw)
            _LOG.error("round %d: rounds count from 1 (epoch_of), not evaluated", server_round)
            return []
        if self.epoch_of(server_round) > MAX_EPOCH:  # a loop not run by start()
            _LOG.error("round %d: past the last ledger epoch, not evaluated", server_round)
            return []
        if server_round in self._sent or server_round < max(self._configured, default=0):
            # a round whose ids were used, or one before the latest, again: another run
            _LOG.info("round %d configured again: a new run, with new release ids", server_round)
            self._new_run()
        self._pending.pop(server_round, None)  # sampled again: the earlier plan is void,
        # even when this sampling asks nobody (its replies never come; review 39 flw)
        sampler = grid if self.policy.neighbouring == "replace" else sampling_grid(
            self._lookup, grid, self.strategy)  # fmt: skip
        if sampler is None:  # fewer nodes in the run than the strategy waits for: logged
            return []
        messages = list(self.strategy.configure_evaluate(server_round, arrays, config, sampler))
        self._configured.add(server_round)
        if not messages:
            return []
        nodes = [m.metadata.dst_node_id for m in messages]
        regions = region_map(self._lookup, nodes, grid)
        plan = RoundPlan(server_round, self.epoch_of(server_round), self.policy.version,
                         self.plans)  # fmt: skip
        record = plan.record()
        selected: dict[int, str] = {}
        unregistered: dict[int, None] = {}  # each node once, however often it was sent to
        out = []
        planned: set[int] = set()  # ids of the contents given the plan (all alive here)
        for m, node in zip(messages, nodes, strict=True):
            region = regions.get(node)
            if (
                not isinstance(region, str)
                or region == ALL
                or not self.policy.regions.admits(region)
            ):
                unregistered[node] = None
                continue
            if node in selected:
                continue
            content = m.content  # strategies such as FedAvg share one RecordDict: set it once
            if id(content) not in planned:
                content[PLAN_RECORD] = record
                planned.add(id(content))
            selected[node] = region
            out.append(m)
        if unregistered:
            _LOG.warning(
                "round %d: %d selected node(s) have no region of the policy and are not asked "
                "to evaluate", server_round, len(unregistered),
            )  # fmt: skip
        self._pending[server_round] = _Planned(plan, MappingProxyType(selected),
                                               tuple(unregistered))  # fmt: skip
        return out

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """Sort, sum, release through the ledger; return the public MetricRecord."""
        replies = list(replies)  # may be one-shot
        planned = self._pending.pop(server_round, None)
        if planned is None:
            return None
        got = sort_replies(planned.plan, planned.selected, replies, self.aggregator)
        report = self._release(planned, got)
        self.rounds[server_round] = report
        if self._on_round is not None:
            try:  # the round has spent ε: its values reach Flower whatever the callback does
                self._on_round(report)
            except Exception:
                _LOG.exception(
                    "round %d: on_round raised; the round's release stands", server_round
                )
        _LOG.info(
            "round %d: %d released, %d refused", server_round, len(report.releases),
            len(report.refusals),
        )  # fmt: skip
        public = self.policy.neighbouring == "replace"
        return MetricRecord(published(report, health_public=public))  # type: ignore[arg-type]

    # -- the round ------------------------------------------------------------------------

    def _request(self, r: int, epoch: int, region: str, metric: str, n: int) -> ReleaseRequest:
        run = f"{self.release_prefix}/{self.run_tag}"
        rid = f"{run}/r{r}/{region}/{metric}"
        if len(rid) > 128:
            digest = hashlib.sha256(f"{region}/{metric}".encode()).hexdigest()[:32]
            rid = f"{run}/r{r}/{digest}"
        if len(rid) > 128:  # a 64-character prefix and a round of 13+ digits (review 40 flw)
            rid = f"{run}/{hashlib.sha256(f'r{r}/{region}/{metric}'.encode()).hexdigest()[:32]}"
        spec = self.policy.metric(metric)
        return ReleaseRequest(
            epoch=epoch, metric=metric, region=region, cohort=n,
            edges_version=spec.edges_version, policy_version=self.policy.version,
            release_id=rid,
        )  # fmt: skip

    def _release(self, planned: _Planned, got: Intake) -> RoundReport:
        plan, health, payloads = planned.plan, got.health, got.accepted
        r, epoch = plan.server_round, plan.epoch
        replace = self.policy.neighbouring == "replace"
        items: list[tuple[ReleaseRequest, object]] = []  # an aggregator may give anything
        keys: list[tuple[str, str]] = []
        outcomes: dict[tuple[str, str], Outcome] = {}
        bounds: dict[tuple[str, str], float] = {}  # the aggregator's error bound per release
        for region, h in sorted(health.items()):
            cohort = h.reported if replace else h.selected
            if self.health_metric is not None:  # first: a tight (pooled) budget refuses a
                # metric rather than the count a mean over reporters needs (review s35 F4)
                counts = [float(getattr(h, f)) for f in HEALTH_FIELDS]
                req = self._request(r, epoch, region, self.health_metric, h.selected)
                items.append((req, np.asarray(counts)))
                keys.append((region, self.health_metric))
            for name, m in self.plans.items():
                if cohort == 0:
                    outcomes[(region, name)] = NotReleased(region, name, "no client reported")
                    continue
                bound = self._sum_error(name, cohort)  # before the spend: a bad one spends nothing
                if isinstance(bound, str):
                    outcomes[(region, name)] = NotReleased(region, name, bound)
                    continue
                bounds[(region, name)] = bound
                rows = payloads.get(region, {}).get(name)
                if rows is None or not len(rows):  # no one's rows (add_remove): their exact
                    total: object = np.zeros(m.size)  # sum, never the aggregator's to fail on
                else:
                    total = self._total(m, rows)
                if isinstance(total, _Failed):
                    outcomes[(region, name)] = NotReleased(region, name, total.reason)
                    continue
                items.append((self._request(r, epoch, region, name, cohort), total))
                keys.append((region, name))
        results: tuple[Release | Verdict | NotReleased, ...]
        self._sent.add(r)  # before the commit: whatever follows, its ids are never reused
        try:
            results = self._committed(items) if items else ()
        except DpLedgerError as e:  # the store failed (twice), or a noise draw overflowed a
            # double: nothing is returned for the round (a COMMIT of unknown outcome may
            # have landed: its entries are in the ledger), the run goes on
            _LOG.error("round %d: nothing released: %s", r, e)
            what = "ledger error" if isinstance(e, StoreError) else type(e).__name__
            results = tuple(NotReleased(k[0], k[1], f"{what}: {e}") for k in keys)
        health_releases: dict[str, Release | Verdict | NotReleased] = {}
        for (region, name), res in zip(keys, results, strict=True):
            if name == self.health_metric:
                health_releases[region] = res
            elif isinstance(res, Release):  # the aggregator's own error, in its bar
                outcomes[(region, name)] = res.with_aggregate_error(bounds[(region, name)])
            else:
                outcomes[(region, name)] = res
        derived, errors = self._derive(outcomes)
        at = HEALTH_FIELDS.index("reported")  # add_remove: means over reporters, from releases
        means = {} if replace else reporter_means(outcomes, health_releases, self.plans, at)
        return RoundReport(
            server_round=r, epoch=epoch, neighbouring=self.policy.neighbouring,
            health=MappingProxyType(health), nodes=got.nodes,
            outcomes=MappingProxyType(outcomes), derived=MappingProxyType(derived),
            derive_errors=MappingProxyType(errors),
            health_releases=MappingProxyType(health_releases), means=MappingProxyType(means),
            unregistered=planned.unregistered, unexpected_replies=got.unexpected,
        )  # fmt: skip

    def _committed(self, items: list[tuple[ReleaseRequest, object]]) -> tuple[Outcome, ...]:
        """The round's releases, in one transaction; after a StoreError (a COMMIT that may
        have landed unseen: review 43) asked once more under the same release ids, which
        return the recorded releases (nothing charged twice) or commit the round now."""
        try:
            return self.ledger.release_round(items, partial=True).outcomes
        except StoreError:
            return self.ledger.release_round(items, partial=True).outcomes

    def _derive(
        self, outcomes: Mapping[tuple[str, str], Outcome]
    ) -> tuple[dict[tuple[str, str], DerivedRelease], dict[tuple[str, str], str]]:
        """FLAM metrics of each released confusion matrix or regression measures, derived
        from the committed release alone (post-processing: the private sum is never
        read again; audit 5, F4)."""
        derived: dict[tuple[str, str], DerivedRelease] = {}
        errors: dict[tuple[str, str], str] = {}
        for key, rel in outcomes.items():
            name = key[1]
            kind = DERIVED.get(self.plans[name].declaration) if name in self.plans else None
            if kind is None or not isinstance(rel, Release):
                continue
            try:
                if kind == "confusion":
                    cap = float(self.policy.metric(name).cap or math.inf)
                    derived[key] = derive_confusion(rel, cap * rel.request.cohort)
                else:
                    codec = regression_codec_for(self.policy, name, self.plans[name].params)
                    derived[key] = derive_regression(rel, codec)
            except DpLedgerError as e:
                errors[key] = f"{type(e).__name__}: {e}"
        return derived, errors

    def _total(self, m: MetricPlan, rows: npt.NDArray[Any]) -> object:
        """The aggregator's sum of a region's rows (anything but numbers of the metric's
        shape is refused by the ledger, nothing spent), or :class:`_Failed` when it raises:
        a third-party aggregator's failure ends neither the round nor the run; its message
        is left out, as it may quote a client's payload."""
        try:
            return self.aggregator.total(m, rows)
        except Exception as e:
            return _Failed(f"the aggregator's total failed ({type(e).__name__}): not released")

    def _sum_error(self, name: str, cohort: int) -> float | str:
        """The aggregator's public bound on the sum's error over ``cohort`` clients, asked
        before the spend: why not, when it fails or is not a finite number ≥ 0."""
        try:
            bound = aggregate_error(self.aggregator, self.plans[name], cohort)
        except Exception as e:  # a third-party aggregator: its failure must not cost ε
            return f"the aggregator's sum_error failed ({type(e).__name__}: {e}): not released"
        if not (math.isfinite(bound) and bound >= 0.0):
            return (
                f"the aggregator's sum_error gave {bound!r}, not a finite number >= 0; not released"
            )
        return bound
