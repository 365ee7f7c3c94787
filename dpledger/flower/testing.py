"""``LocalGrid``: a Flower Grid that runs a ClientApp in this process, without Ray.

For tests, demos and benchmarks of ServerApps and strategies: it calls the ClientApp
directly for each pushed message and mimics what Flower's runtimes do to it. It touches
Flower internals, checked against flwr 1.42 (:data:`CHECKED_FLWR`; other versions warn):

- run identity: ``Message(content, dst_node_id, message_type)`` — how strategies build
  instructions — reads the process-global ``TaskIdentity`` and fails if unset; runtimes
  set it (task 1, the run id, the SuperLink's node id 1) and :meth:`LocalGrid.activate`
  does the same (:meth:`LocalGrid.deactivate` undoes it);
- message ids: the SuperLink assigns them on push (``Metadata.message_id`` has no setter;
  Flower's own in-memory grid writes ``metadata.__dict__["_message_id"]``);
- errors: a ClientApp exception becomes an error reply with code
  ``CLIENT_APP_RAISED_EXCEPTION`` (2) and reason ``"<class 'X'>:<'msg'>"``;
- validation: instructions and replies go through Flower's ``validate_message``; a reply
  a SuperLink would drop (wrong source, no ``reply_to``) is dropped here too and kept in
  :attr:`LocalGrid.dropped` — the server then has no reply from that node;
- isolation: each message is copied through Flower's own wire format (deflate/inflate),
  so clients cannot touch the server's objects (FedAvg sends one shared RecordDict to all
  nodes) and unserialisable values fail as they would in a deployment: a reply the wire
  format cannot carry (a MetricRecord int beyond 64 bits), or anything a ClientApp returns
  that is not a Message, never leaves its node — no reply, kept in ``dropped`` — rather
  than ending the run;
- node contexts: as in simulation, ``node_config`` holds ``partition-id`` and
  ``num-partitions`` (plus what ``node_configs`` adds) and ``state`` persists per node.

Nodes in ``offline`` never answer (a dropped node).
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import version
from uuid import uuid4

from flwr.app import Context, Error, Message, RecordDict
from flwr.app.user_config import UserConfig
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode
from flwr.server.utils.validator import validate_message
from flwr.serverapp import Grid
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from dpledger._shown import shown
from dpledger.errors import InternalError, InvalidInput

__all__ = ["CHECKED_FLWR", "SERVER_NODE_ID", "LocalGrid", "wire_copy"]

CHECKED_FLWR = "1.42"
"""The flwr minor version whose internals this module was checked against."""
SERVER_NODE_ID = 1
"""The SuperLink's node id (``flwr.common.constant.SUPERLINK_NODE_ID``)."""


def wire_copy(msg: Message) -> Message:
    """A deep copy of ``msg`` through Flower's serialisation (keeps its message id)."""
    objects = get_all_nested_objects(msg)
    contents = {oid: obj.deflate() for oid, obj in objects.items()}
    copy = inflate_object_from_contents(msg.object_id, contents)
    if not isinstance(copy, Message):
        raise InternalError(f"inflating a Message gave a {type(copy).__name__}")
    copy.metadata.__dict__["_message_id"] = msg.metadata.message_id
    return copy


class LocalGrid(Grid):
    """A Grid that executes ``client_app`` synchronously for ``num_nodes`` nodes (see module).

    ``node_configs[i]`` is added to node i's ``node_config``; node ids are random 63-bit
    integers drawn from ``seed``, as Flower's are. ``offline`` lists node indices that
    never answer.
    """

    def __init__(
        self,
        client_app: ClientApp | Callable[[Message, Context], Message],
        num_nodes: int,
        *,
        node_configs: Sequence[UserConfig] | None = None,
        run_config: UserConfig | None = None,
        run_id: int = 4242,
        serialize: bool = True,
        seed: int | None = 0,
        offline: Iterable[int] = (),
    ) -> None:
        installed = version("flwr")
        if not installed.startswith(CHECKED_FLWR + "."):
            warnings.warn(
                f"LocalGrid was checked against flwr {CHECKED_FLWR}.x, not {installed}: it "
                "uses Flower internals (TaskIdentity, the wire format, the validator)",
                stacklevel=2,
            )
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
            raise InvalidInput(f"num_nodes must be an integer ≥ 1, got {shown(num_nodes)}")
        if node_configs is not None and len(node_configs) != num_nodes:
            raise InvalidInput("node_configs needs one entry per node")
        gone = list(offline)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in gone) or not all(
            0 <= i < num_nodes for i in gone
        ):
            raise InvalidInput(f"offline lists node indices in [0, {num_nodes}), got {shown(gone)}")
        rng = random.Random(seed)
        self._client_app = client_app
        self._serialize = serialize
        self._run = Run.create_empty(run_id)
        self._pending: dict[str, Message] = {}
        self._replies: dict[str, Message] = {}
        self.contexts: dict[int, Context] = {}
        self.node_ids: list[int] = []
        for i in range(num_nodes):
            node_id = rng.getrandbits(63) or 2
            cfg: UserConfig = {"partition-id": i, "num-partitions": num_nodes}
            if node_configs is not None:
                cfg.update(node_configs[i])
            self.contexts[node_id] = Context(
                run_id=run_id, node_id=node_id, node_config=cfg, state=RecordDict(),
                run_config=dict(run_config or {}),
            )  # fmt: skip
            self.node_ids.append(node_id)
        self.offline = {self.node_ids[i] for i in gone}
        self.sent: list[Message] = []
        """Every instruction pushed, for assertions."""
        self.dropped: list[tuple[Message, list[str]]] = []
        """Replies a SuperLink would drop (or that never left their node: not serialisable,
        not a Message — then the instruction), with the reasons."""

    def activate(self) -> None:
        """Set the process-global run identity, as a Flower runtime does."""
        TaskIdentity.task_id = 1
        TaskIdentity.run_id = self._run.run_id
        TaskIdentity.node_id = SERVER_NODE_ID

    @staticmethod
    def deactivate() -> None:
        """Clear the process-global run identity."""
        TaskIdentity._task_id = None  # type: ignore[assignment]
        TaskIdentity._run_id = None  # type: ignore[assignment]
        TaskIdentity._node_id = None  # type: ignore[assignment]

    def server_context(self, run_config: UserConfig | None = None) -> Context:
        """The Context to call ``ServerApp(grid, context)`` with."""
        return Context(
            run_id=self._run.run_id, node_id=SERVER_NODE_ID, node_config={}, state=RecordDict(),
            run_config=dict(run_config or {}),
        )  # fmt: skip

    # -- the Grid API --------------------------------------------------------------------

    def set_run(self, run: Run) -> None:
        """Serve ``run`` from now on (Flower's Grid API)."""
        self._run = run

    @property
    def run(self) -> Run:
        """The run this grid serves."""
        return self._run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """Deprecated in Flower; kept for the abstract API."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """Every node's id."""
        return list(self.node_ids)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Validate, id and queue each instruction. One to a node the grid does not have
        is not stored and gets an empty id, as a SuperLink answers a push to a node that
        never connected or was deleted ("Invalid destination node ID"): no reply comes."""
        ids = []
        for msg in messages:
            msg_id = str(uuid4())
            msg.metadata.__dict__["_message_id"] = msg_id
            if errors := validate_message(msg, is_reply_message=False):
                raise InvalidInput(f"invalid instruction message: {errors}")
            self.sent.append(msg)
            if msg.metadata.dst_node_id not in self.contexts:
                ids.append("")
                continue
            self._pending[msg_id] = wire_copy(msg) if self._serialize else msg
            ids.append(msg_id)
        return ids

    def _execute(self, msg: Message) -> Message | None:
        node = msg.metadata.dst_node_id
        if node in self.offline:
            return None
        try:
            reply = self._client_app(msg, self.contexts[node])
        except Exception as ex:  # a ClientApp exception is an error reply, as in Flower
            reason = str(type(ex)) + ":<'" + str(ex) + "'>"
            reply = Message(
                Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=msg
            )
        if not isinstance(reply, Message):  # no reply leaves the node: none comes
            self.dropped.append((msg, [f"the ClientApp returned a {type(reply).__name__}"]))
            return None
        reply.metadata.__dict__["_message_id"] = str(uuid4())
        errors = validate_message(reply, is_reply_message=True)
        if reply.metadata.reply_to_message_id != msg.metadata.message_id:
            errors.append("reply_to_message_id does not match the instruction")
        if reply.metadata.src_node_id != node:
            errors.append("reply src_node_id != instruction dst_node_id")
        if errors:
            self.dropped.append((reply, errors))
            return None
        if not self._serialize:
            return reply
        try:  # a reply Flower's wire format cannot carry never leaves the node (review 42)
            return wire_copy(reply)
        except Exception as e:
            self.dropped.append((reply, [f"not serialisable ({type(e).__name__}: {e})"]))
            return None

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Run each pending instruction's ClientApp and return the replies."""
        out = []
        for msg_id in message_ids:
            if msg_id in self._pending:
                reply = self._execute(self._pending.pop(msg_id))
                if reply is not None:
                    self._replies[msg_id] = reply
            if msg_id in self._replies:
                out.append(self._replies.pop(msg_id))
        return out

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Push, run and pull in one go (nothing waits: offline nodes just never answer)."""
        return self.pull_messages(self.push_messages(messages))
