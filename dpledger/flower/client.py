"""Client side in a few lines: bounded contributions packed into the evaluate reply.

::

    from flwr.clientapp import ClientApp
    from dpledger.flower import answer_region_queries, contribution_reply

    app = ClientApp()
    answer_region_queries(app)            # the server asks each node its region once

    @app.evaluate()
    def evaluate(msg, context):
        data = evaluate_model_locally(msg.content["arrays"], context)  # per-sample arrays
        return contribution_reply(msg, data)

``contribution_reply`` reads the round's plan from the instruction (which metrics, their
policy bounds and edges), computes each contribution with the declared function of
:mod:`dpledger.metrics` (clipped, capped: bounded per client) and packs scalars in a
MetricRecord, vectors in an ArrayRecord and the edges versions in a ConfigRecord.

Attach DP mods to training only: ``@app.train(mods=[LocalDpMod(...)])``. Flower runs an
app-wide mod (``ClientApp(mods=[...])``) around evaluate too, where ``LocalDpMod`` turns the
reply into an error the SuperLink drops (the server then waits out its timeout) and
``fixedclipping_mod`` fails for want of a clipping norm. Evaluation metrics get their
privacy from the ledger, not from those mods.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.app.typing import ConfigRecordValues
from flwr.clientapp import ClientApp

from dpledger._shown import shown
from dpledger.errors import DpLedgerError, InvalidInput
from dpledger.flower.wire import MetricPlan, RoundPlan, empty_contribution, pack, pack_packed
from dpledger.metrics.declarations import DECLARATIONS, Bounds

__all__ = [
    "NODE_RECORD",
    "QUERY_RECORD",
    "REGION_ACTION",
    "answer_region_queries",
    "contribution_reply",
    "contributions",
    "region_reply",
    "substitute",
]

REGION_ACTION = "dpledger_region"
"""The query action (``query.dpledger_region``) by which the server asks a node its region."""
QUERY_RECORD = "dpledger.query"
NODE_RECORD = "dpledger.node"
_LOG = logging.getLogger("dpledger.flower.client")  # not the server's logger (review s35 F5)
BadData = Literal["substitute", "raise"]
_OWN = "dpledger."  # the namespace of the plan, query and reply records


def contributions(
    plan: RoundPlan,
    data: Mapping[str, npt.ArrayLike],
    *,
    data_for: Mapping[str, Mapping[str, npt.ArrayLike]] | None = None,
    bounds: Mapping[str, Bounds] | None = None,
    edges_versions: Mapping[str, str] | None = None,
    packed: bool = False,
    on_bad_data: BadData = "substitute",
) -> RecordDict:
    """This client's bounded contribution to every metric of ``plan``, as reply records.

    ``data`` holds the per-sample arrays the declarations read (e.g. ``loss``, ``along``,
    ``across``, ``y_true``, ``y_pred``); ``data_for[metric]`` replaces some of them for one
    metric (a classifier's labels and a regressor's targets are both ``y_true``/``y_pred``
    to their declarations). A client whose metric module pins its own bounds
    passes them in ``bounds`` and names their edges version in ``edges_versions``; the
    server rejects a reply bucketed with edges its policy does not have. ``packed`` sends
    them as one float64 array with a layout header (:func:`~dpledger.flower.wire.pack_packed`),
    which the server reads for a whole round at once; the default is the three records.
    Pinned bounds must fit the plan's (a clip inside its clip; its cap, dimension and
    number of edges; edges other than the plan's only under their own edges version):
    others raise. The server would reject the replies that use wider
    room, and under ``replace`` that count is published — it would depend on the
    client's data; another cap would weigh the client differently (a codec metric's
    values would be decoded wrongly).

    Data a metric cannot be computed from (a NaN or infinite loss, no samples, a label
    outside the classes) is not a reason to fail: under ``replace`` whether a node reports
    is public, so it must not depend on its data. That metric's contribution is then a
    public substitute (:func:`substitute`: the clip's upper end for a loss, an empty
    client's otherwise) and a warning names the problem in this client's log;
    ``on_bad_data="raise"`` raises instead.
    A missing array or bad ``bounds`` is the app's mistake and always raises.
    """
    if on_bad_data not in ("substitute", "raise"):
        raise InvalidInput(f"on_bad_data is 'substitute' or 'raise', got {shown(on_bad_data)}")
    if not isinstance(plan, RoundPlan):
        raise InvalidInput(f"plan must be a RoundPlan (RoundPlan.from_content), got {shown(plan)}")
    if not isinstance(packed, bool):  # strict, as the ledger's flags: "yes" is not True
        raise InvalidInput(f"packed must be True or False, got {shown(packed)}")
    if not isinstance(data, Mapping):
        raise InvalidInput(f"data must map input names to per-sample arrays, got {shown(data)}")
    _mapping("data", data, object, "per-sample arrays")
    pinned = _mapping("bounds", bounds, object, "Bounds")  # each a Bounds: _within says
    versions = _mapping("edges_versions", edges_versions, str, "edges versions (str)")
    own = _mapping("data_for", data_for, Mapping, "mappings of per-sample arrays")
    unknown = (set(pinned) | set(versions) | set(own)) - set(plan.metrics)
    if unknown:
        raise InvalidInput(f"data or bounds for metrics the plan does not ask for: {unknown}")
    edgeless = sorted(n for n in versions if plan.metrics[n].edges_version is None)
    if edgeless:  # a packed reply's digest counts them, three records would not (review 39)
        raise InvalidInput(f"edges_versions for metrics the plan gives no edges: {edgeless}")
    rows: dict[str, npt.NDArray[np.float64]] = {}
    used: dict[str, str | None] = {}
    for name, m in plan.metrics.items():
        declared = DECLARATIONS[m.declaration]
        arrays = {**data, **own.get(name, {})}
        missing = [k for k in declared.inputs if k not in arrays]
        if missing:
            raise InvalidInput(
                f"{name}: {m.declaration} reads {missing}: pass them in data (or "
                f"data_for[{name!r}])"
            )
        chosen = pinned.get(name, m.bounds)
        if name in pinned:
            _within(name, chosen, m.bounds)
            _edges_named(name, chosen, m, versions.get(name))
        empty = substitute(m, chosen)  # the configuration's errors raise here
        try:
            if m.scalar and all(_no_samples(arrays[k]) for k in declared.inputs):
                raise InvalidInput(f"{name}: no samples, so no mean")  # not an empty client's 0
            rows[name] = declared.contribute(arrays, chosen, **dict(m.params))[0]
        except DpLedgerError as e:
            if on_bad_data == "raise":
                raise
            _LOG.warning(
                "%s: this client's data gives no contribution (%s); sending the public "
                "substitute %s instead, so that reporting does not depend on the data",
                name, e, empty.tolist(),
            )  # fmt: skip
            rows[name] = empty
        used[name] = versions.get(name, m.edges_version)
    return (pack_packed if packed else pack)(plan, rows, used)


def _mapping(name: str, given: object, kind: type[Any], what: str) -> dict[str, Any]:
    """``given`` (None: empty) as a dict of metric or array names to ``kind`` values, or
    :class:`InvalidInput` naming what it must be (review 42 flw: a list or text reached
    ``dict()`` or ``**``, an untyped error in every evaluate handler)."""
    if given is None:
        return {}
    if not isinstance(given, Mapping) or not all(
        isinstance(k, str) and isinstance(v, kind) for k, v in given.items()
    ):
        raise InvalidInput(f"{name} must map names (str) to {what}, got {shown(given)}")
    return dict(given)


def _no_samples(values: object) -> bool:
    """Whether ``values`` is an empty array of samples. Never raises: data numpy cannot
    make an array of (a ragged list of per-batch losses) is for the declaration's own
    check to refuse, typed, so that it gets the substitute (review 42 flw: ``np.size``
    raised ``ValueError`` there, an error reply whose count ``replace`` publishes)."""
    try:
        return bool(np.size(values) == 0)  # type: ignore[arg-type]
    except Exception:
        return False


def substitute(plan: MetricPlan, bounds: Bounds | None = None) -> npt.NDArray[np.float64]:
    """What a client sends for a metric its data cannot give (public, within ``bounds``).

    A ``clipped_loss`` counts as the clip's upper end, the worst loss: a model whose loss
    is NaN or infinite (diverged weights) must not read as a perfect one, and an infinite
    loss is what the clip maps to its upper end anyway. Any other metric gets an empty
    client's contribution (:func:`~dpledger.flower.wire.empty_contribution`: zero counts,
    a ratio of 1). Every substitute biases its release toward itself by the share of
    clients that sent it: the client logs say which.
    """
    chosen = plan.bounds if bounds is None else bounds
    empty = empty_contribution(plan, chosen)  # the configuration's errors raise here
    if plan.declaration == "clipped_loss" and chosen.high is not None:
        return np.full_like(empty, float(chosen.high))
    return empty


def _within(name: str, pinned: object, plan: Bounds) -> None:
    """InvalidInput unless ``pinned`` is a Bounds that gives every client the plan's
    weight and no room the plan's bounds do not: a clip inside the plan's, the plan's cap
    (a vector's contribution is scaled to its cap, and a codec's decoded by the plan's),
    its dimension and number of edges."""
    if not isinstance(pinned, Bounds):
        raise InvalidInput(f"{name}: bounds must be a Bounds, got {type(pinned).__name__}")
    wider = []
    if plan.low is not None and not (pinned.low is not None and pinned.low >= plan.low):
        wider.append(f"low {pinned.low} below the plan's {plan.low}")
    if plan.high is not None and not (pinned.high is not None and pinned.high <= plan.high):
        wider.append(f"high {pinned.high} above the plan's {plan.high}")
    if plan.cap is not None and pinned.cap != plan.cap:
        wider.append(f"cap {pinned.cap}, the plan's is {plan.cap}")
    if plan.dimension is not None and pinned.dimension != plan.dimension:
        wider.append(f"dimension {pinned.dimension}, the plan's is {plan.dimension}")
    if plan.edges is not None and len(pinned.edges or ()) != len(plan.edges):
        wider.append(f"{len(pinned.edges or ())} edges, the plan has {len(plan.edges)}")
    if wider:
        raise InvalidInput(
            f"{name}: pinned bounds that do not fit the round plan's ({'; '.join(wider)}): a "
            "contribution outside the plan's bounds is rejected, so whether this client is "
            "counted would depend on its data, and a cap other than the plan's misweights "
            "it; pin a clip within the plan's and its cap, or pin none"
        )


def _edges_named(name: str, pinned: Bounds, plan: MetricPlan, version: str | None) -> None:
    """InvalidInput when pinned edges differ from the plan's but the reply would carry the
    plan's edges version (by default, or named): the server, which compares versions, not
    edges, would add buckets over other edges to everyone else's (review 39 flw). Another
    version is fine: the server rejects that reply as stale."""
    if pinned.edges is None or plan.bounds.edges is None:
        return
    if tuple(map(float, pinned.edges)) == tuple(map(float, plan.bounds.edges)):
        return
    if version is not None and plan.edges_version is not None and version != plan.edges_version:
        return
    raise InvalidInput(
        f"{name}: pinned edges {list(pinned.edges)} differ from the plan's "
        f"{list(plan.bounds.edges)}, but the reply would name the plan's edges version "
        f"{plan.edges_version!r}: name their own version in edges_versions (the server then "
        "rejects the reply as stale), or pin the plan's edges"
    )


def contribution_reply(
    msg: Message,
    data: Mapping[str, npt.ArrayLike],
    *,
    data_for: Mapping[str, Mapping[str, npt.ArrayLike]] | None = None,
    bounds: Mapping[str, Bounds] | None = None,
    edges_versions: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    packed: bool = False,
    on_bad_data: BadData = "substitute",
) -> Message:
    """The evaluate reply to ``msg``: this client's contributions (see :func:`contributions`).

    ``extra`` adds the app's own records (name → ArrayRecord/MetricRecord/ConfigRecord);
    the wrapper ignores them and never publishes them. Names starting ``dpledger.`` are
    the wrapper's own and raise (such a record would replace the contribution).
    """
    if not isinstance(msg, Message):
        raise InvalidInput(f"msg must be the evaluate instruction (a Message), got {shown(msg)}")
    if extra is not None and not isinstance(extra, Mapping):  # a list: AttributeError (diff2)
        raise InvalidInput(f"extra must map record names to records, got {shown(extra)}")
    plan = RoundPlan.from_content(msg.content)
    content = contributions(
        plan,
        data,
        data_for=data_for,
        bounds=bounds,
        edges_versions=edges_versions,
        packed=packed,
        on_bad_data=on_bad_data,
    )
    for name, record in (extra or {}).items():
        if not isinstance(name, str):  # was told it started 'dpledger.' (review 42 diff3)
            raise InvalidInput(f"extra record names are text, got {shown(name)}")
        if name.startswith(_OWN):
            raise InvalidInput(
                f"extra record {shown(name)}: the names starting {_OWN!r} are the wrapper's "
                "(it would read that record as this client's contribution); name it otherwise"
            )
        if not isinstance(record, ArrayRecord | MetricRecord | ConfigRecord):
            raise InvalidInput(  # the name bounded: a megabyte name made a megabyte message
                f"extra record {shown(name)} must be an ArrayRecord, MetricRecord or "
                f"ConfigRecord, got {type(record).__name__}"
            )
        content[name] = record
    return Message(content, reply_to=msg)


def region_reply(msg: Message, context: Context) -> Message:
    """Answer the server's region query from ``context.node_config`` (the operator's config).

    The server names the node-config keys it needs; the node answers those values, set
    by whoever runs the node (``flower-supernode --node-config 'region="eu-west"'``), never
    from its evaluation data.
    """
    asked = msg.content.config_records.get(QUERY_RECORD)
    keys = asked.get("keys") if asked is not None else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise InvalidInput(f"a region query needs a {QUERY_RECORD!r} ConfigRecord listing keys")
    missing = [k for k in keys if k not in context.node_config]
    if missing:
        raise InvalidInput(
            f"this node's node_config lacks {missing}: start it with --node-config naming them"
        )
    answer: dict[str, ConfigRecordValues] = {str(k): context.node_config[str(k)] for k in keys}
    return Message(RecordDict({NODE_RECORD: ConfigRecord(answer)}), reply_to=msg)


def answer_region_queries(app: ClientApp) -> None:
    """Register :func:`region_reply` on ``app`` as its ``query.dpledger_region`` handler."""
    app.query(REGION_ACTION)(region_reply)
