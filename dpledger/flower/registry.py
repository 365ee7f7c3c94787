"""Which region each node belongs to, decided on the server side.

A node's region picks the budget its releases are charged to, so it never comes from
the node's evaluate reply (data the node controls). Two registries:

- :class:`StaticRegistry`: an operator's ``node_id → region`` map (deployments whose
  SuperNodes keep their ids);
- :class:`QueryRegistry`: the server asks each new node, once, for keys of its
  ``node_config`` — what the operator set when starting it (``flower-supernode
  --node-config 'region="eu-west"'``; in simulation ``partition-id``) — through a Flower
  query message answered by :func:`dpledger.flower.region_reply`, and maps the answer to a
  region. A node that does not answer, or answers no region of the policy, stays
  unregistered: it is not asked to evaluate, and the round counts it.

Under ``add_remove`` whether a node takes part in a round is private, so a per-round
query (whose silence would drop the node from its region's planned cohort) would publish
its dropout. There the wrapper asks through a :class:`Roster`: one registration exchange,
with every connected node, at the run's first evaluate round; the node → region map it
gives is the run's public roster (a ``StaticRegistry`` is asked through one too: its map
gives the regions, the first round's connected nodes the population). The wrapped strategy
then samples from the nodes the roster asked (:func:`sampling_grid`; one that did not
register is sampled and counted unregistered, as in the first round), not from the
nodes connected in the round: a node that disconnects stays selected and counts as
dropped (privately), so no later behaviour of a node changes a planned cohort or the
published ``selected`` count.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.app.user_config import UserConfigValue
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.flower.client import NODE_RECORD, QUERY_RECORD, REGION_ACTION

__all__ = [
    "NodeRegistry",
    "QueryRegistry",
    "Roster",
    "StaticRegistry",
    "check_loop",
    "check_parts",
    "check_sampling",
    "region_map",
    "run_lookup",
    "sampling_grid",
]

_LOG = logging.getLogger("dpledger.flower")


class NodeRegistry(Protocol):
    """Maps node ids to regions (None: unknown). May use ``grid`` to ask the nodes."""

    def regions(self, node_ids: Sequence[int], grid: Grid) -> dict[int, str | None]:
        """The region of each of ``node_ids``, or None where it is unknown."""
        ...


class StaticRegistry:
    """A fixed ``node_id → region`` map, set by the operator."""

    def __init__(self, regions: Mapping[int, str]) -> None:
        if not isinstance(regions, Mapping) or not all(
            isinstance(k, int) and not isinstance(k, bool) and isinstance(v, str)
            for k, v in regions.items()
        ):
            raise InvalidInput("StaticRegistry needs a mapping of int node ids to region names")
        self._regions = dict(regions)

    def regions(self, node_ids: Sequence[int], grid: Grid) -> dict[int, str | None]:
        """Look each node up; unknown ids are None."""
        return {n: self._regions.get(n) for n in node_ids}


def _default_region(config: Mapping[str, UserConfigValue]) -> str:
    return str(config["region"])


class QueryRegistry:
    """Ask each new node for its ``node_config`` ``keys``; ``to_region`` maps the answer.

    Regions are cached for the registry's life (node ids are stable within a run); a node
    that did not answer is asked again in its next round. By
    default the node's ``region`` key is its region. ``timeout`` bounds the wait for
    answers, in seconds.
    """

    def __init__(
        self,
        keys: Iterable[str] = ("region",),
        to_region: Callable[[Mapping[str, UserConfigValue]], str] | None = None,
        *,
        timeout: float = 60.0,
    ) -> None:
        if isinstance(keys, str):
            raise InvalidInput(f"keys is a list of node_config keys: write ({keys!r},)")
        if not isinstance(keys, Iterable):
            raise InvalidInput(f"keys is a list of node_config keys, got {shown(keys)}")
        self.keys = tuple(keys)
        if not self.keys or not all(isinstance(k, str) and k for k in self.keys):
            raise InvalidInput("QueryRegistry needs at least one node_config key")
        if to_region is not None and not callable(to_region):
            raise InvalidInput("to_region must be callable: node_config answers -> region name")
        self._to_region = to_region or _default_region
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise InvalidInput(f"timeout is a positive number of seconds, got {shown(timeout)}")
        self.timeout = float(timeout)
        self._known: dict[int, str | None] = {}

    def regions(self, node_ids: Sequence[int], grid: Grid) -> dict[int, str | None]:
        """Known nodes from the cache; the others are asked now, in one exchange."""
        new = [n for n in node_ids if n not in self._known]
        if new:
            self._ask(new, grid)
        return {n: self._known.get(n) for n in node_ids}

    def _ask(self, node_ids: list[int], grid: Grid) -> None:
        content = RecordDict({QUERY_RECORD: ConfigRecord({"keys": list(self.keys)})})
        messages = [
            Message(content, dst_node_id=n, message_type=f"query.{REGION_ACTION}") for n in node_ids
        ]
        answered: dict[int, str | None] = dict.fromkeys(node_ids)
        for reply in grid.send_and_receive(messages, timeout=self.timeout):
            node = reply.metadata.src_node_id
            if node not in answered:
                continue
            if reply.has_error():
                _LOG.warning(
                    "node %s did not answer the region query (%.200r); register "
                    "dpledger.flower.answer_region_queries(app) on its ClientApp",
                    node, str(reply.error.reason),  # quoted: a node's text forges no line
                )  # fmt: skip
                continue
            try:
                record = reply.content.config_records.get(NODE_RECORD)
                answer = {str(k): v for k, v in (record or {}).items()}
                region = self._to_region(answer)  # type: ignore[arg-type]
            except Exception as e:  # a node's answer is untrusted: it never ends the run
                _LOG.warning(
                    "node %s answered no region (%s: %.200r)", node, type(e).__name__, str(e)
                )
                continue
            if isinstance(region, str):
                answered[node] = region
            else:
                _LOG.warning("node %s: to_region gave %.200r, not a region name", node, region)
        self._known.update({n: r for n, r in answered.items() if r is not None})


class Roster:
    """A registry asked once per run, of every connected node; then a fixed map.

    The first :meth:`regions` call asks ``registry`` about every node the grid lists
    (and the ones sampled) in one exchange and keeps the answer; later calls only look
    nodes up, so a node that is silent in a later round stays in its region's planned
    cohort (counted as dropped, privately) and a node that joins later is unregistered
    for the rest of the run.
    """

    def __init__(self, registry: NodeRegistry) -> None:
        self.registry = registry
        self._map: dict[int, str | None] | None = None

    def regions(self, node_ids: Sequence[int], grid: Grid) -> dict[int, str | None]:
        """The run's roster entry of each node (None: not registered in this run)."""
        if self._map is None:
            everyone = sorted(set(grid.get_node_ids()) | set(node_ids))
            self._map = region_map(self.registry, everyone, grid)
            _LOG.info(
                "run roster: %d of %d connected node(s) registered with a region",
                sum(r is not None for r in self._map.values()), len(everyone),
            )  # fmt: skip
        return {n: self._map.get(n) for n in node_ids}

    def members(self, grid: Grid) -> tuple[int, ...] | None:
        """Every node the roster asked (the first round's connected and sampled nodes,
        registered or not), or None before the first :meth:`regions` call fixes the
        roster (the run's first round samples from the connected nodes, as the roster is
        then made of them). A node that did not register stays in the population, as in
        the first round: sampled, not asked to evaluate, counted as unregistered — so one
        node's silence to the registration query cannot shrink the population below the
        strategy's minimum and skip every later round (review hflw F2)."""
        if self._map is None:
            return None
        return tuple(sorted(self._map))


def region_map(
    registry: NodeRegistry, node_ids: Sequence[int], grid: Grid
) -> dict[int, str | None]:
    """``registry.regions(node_ids, grid)``, refused with :class:`InvalidInput` when a
    third-party registry answers anything but a mapping (its values are checked where
    they are used: anything but a region of the policy leaves the node unregistered)."""
    found = registry.regions(node_ids, grid)
    if not isinstance(found, Mapping):
        raise InvalidInput(
            f"{type(registry).__name__}.regions must return a mapping of node id to region "
            f"name (or None where unknown), got {type(found).__name__}"
        )
    return dict(found)


def run_lookup(registry: NodeRegistry, neighbouring: str) -> NodeRegistry:
    """``registry`` as one run asks it: under ``add_remove`` once per run (a
    :class:`Roster`), whose nodes (every node connected or sampled at the run's first
    evaluate round, which the wrapped strategy waited for) are the run's population — a
    static map too, so its listed nodes that never connected are not selected in every
    round, and the first round waits for the fleet (review hflw F5); under ``replace``
    (cohorts public) as it is, every round."""
    return registry if neighbouring == "replace" else Roster(registry)


def sampling_grid(lookup: NodeRegistry, grid: Grid, strategy: object) -> Grid | None:
    """The grid the wrapped strategy samples from under ``add_remove``: the run's fixed
    population (its roster's ``members``) in place of the connected nodes,
    whose list changes as nodes drop out (a private fact there). ``grid`` itself before a
    roster is fixed. None, with an error logged, when the population is smaller than the
    strategy's ``min_available_nodes`` or ``min_evaluate_nodes`` (it would wait forever
    for nodes the run cannot have): the round is not evaluated."""
    members_of = getattr(lookup, "members", None)
    members = members_of(grid) if callable(members_of) else None
    if members is None:
        return grid
    need = _minimum(strategy)
    if len(members) < need:
        _LOG.error(
            "the run's population has %d node(s), fewer than the wrapped "
            "strategy's minimum of %d: evaluation is skipped (lower min_available_nodes / "
            "min_evaluate_nodes, or register more nodes)", len(members), need,
        )  # fmt: skip
        return None
    return _Population(grid, members)


def check_sampling(strategy: object) -> None:
    """Refuse a ``fraction_evaluate`` outside [0, 1] in ``strategy`` or any strategy it
    wraps: Flower samples ``int(n × fraction)`` of n nodes, so above 1 FedAvg waits forever
    for nodes that cannot connect (below 0 it raises mid-run)."""
    for s in _wrapped(strategy):
        value = _number(s, "fraction_evaluate")
        if value is not None and not 0.0 <= value <= 1.0:  # NaN too
            raise InvalidInput(
                f"{type(s).__name__}.fraction_evaluate is {value!r}: it must be in "
                "[0, 1] (above 1 Flower samples more nodes than connect and waits forever)"
            )


def check_loop(strategy: object) -> None:
    """Warn when ``strategy`` overrides ``start()``: the wrapper runs Flower's own round loop
    (``Strategy.start``, calling ``strategy``'s configure and aggregate methods), never
    ``strategy.start`` — which would evaluate around the ledger — so whatever that loop
    adds (checkpoints, early stopping, schedules) does not run (review 42 flw)."""
    own = getattr(type(strategy), "start", None)
    if own is not None and own is not Strategy.start:
        _LOG.warning(
            "%s overrides start(); LedgerEvaluation runs Flower's round loop "
            "(Strategy.start) with its configure/aggregate methods, so its own start() does "
            "not run: move what it adds into those methods or around strategy.start(...)",
            type(strategy).__name__,
        )


def _minimum(strategy: object) -> int:
    """The most nodes ``strategy`` waits for when it samples: its own
    ``min_available_nodes`` / ``min_evaluate_nodes`` and those of every strategy it wraps."""
    values = (
        _number(s, name)
        for s in _wrapped(strategy)
        for name in ("min_available_nodes", "min_evaluate_nodes")
    )
    return max((math.ceil(v) for v in values if v is not None and math.isfinite(v)), default=0)


def _wrapped(strategy: object) -> Iterator[object]:
    """``strategy`` and each strategy it wraps (Flower's DP wrappers keep theirs in
    ``.strategy`` and delegate sampling to it), each once (a cycle ends the walk)."""
    seen: set[int] = set()
    while strategy is not None and id(strategy) not in seen:
        seen.add(id(strategy))
        yield strategy
        strategy = getattr(strategy, "strategy", None)


def _number(strategy: object, name: str) -> float | None:
    """``strategy.name`` if it is a plain int or float (not a bool), else None."""
    value = getattr(strategy, name, None)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


class _Population(Grid):
    """``grid`` with a fixed node list: what a strategy samples from (the rest delegated)."""

    def __init__(self, grid: Grid, members: tuple[int, ...]) -> None:
        self._grid, self._members = grid, members

    def set_run(self, run_id: Any) -> None:
        self._grid.set_run(run_id)

    @property
    def run(self) -> Any:
        return self._grid.run

    def create_message(self, *args: Any, **kwargs: Any) -> Message:
        return self._grid.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return list(self._members)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(self, *args: Any, **kwargs: Any) -> Iterable[Message]:
        return self._grid.send_and_receive(*args, **kwargs)


_PREFIX = re.compile(r"^[!-~]{1,64}$")


def check_parts(registry: object, aggregator: object, prefix: object, on_round: object) -> None:
    """Refuse, before any round, a part the rounds would only trip over mid-run."""
    if registry is not None and not callable(getattr(registry, "regions", None)):
        raise InvalidInput("registry must have a regions(node_ids, grid) method (NodeRegistry)")
    if aggregator is not None and not all(
        callable(getattr(aggregator, name, None)) for name in ("check", "total")
    ):
        raise InvalidInput("aggregator must have check() and total() methods (Aggregator)")
    if prefix is not None and not (isinstance(prefix, str) and _PREFIX.fullmatch(prefix)):
        raise InvalidInput(
            f"release_prefix must be 1-64 printable ASCII characters without spaces (it "
            f"starts every release id), got {shown(prefix)}"
        )
    if on_round is not None and not callable(on_round):
        raise InvalidInput(f"on_round must be callable, got {type(on_round).__name__}")
