"""flwr 1.42's storage is read directly only where it is known, and reads what the accessors do.

``dpledger.flower.layout`` lets the intake read a reply's node id, error, content and a
record's entries from the objects' ``__dict__`` instead of Flower's Python-level
accessors (a round of 1,000 replies spends most of its reading there). Here: the gate
opens for final flwr 1.42 releases only; on the installed flwr (the tests pin 1.42) each direct read
equals its accessor, for content and error replies; the intake really reads directly
(an accessor that raises is never called); and a subclassed Message or record, which
may override an accessor, is read through the accessors. ``test_flower_intake*.py`` run
every hostile round both ways and require the same statuses, reasons and rows.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import Error, Message, Metadata, RecordDict
from test_flower_intake import _data
from test_flower_intake import round1 as round1  # the fixture `asked` builds on

from dpledger.flower import PlainSum, contributions, layout
from dpledger.flower.intake import sort_replies


@pytest.mark.parametrize(
    ("version", "known"),
    [("1.42.0", True), ("1.42.7", True), ("1.42", True), ("1.42.0+cpu", True),
     ("1.42.0.post1", True), ("1.42.0rc1", False), ("1.42rc1", False), ("1.42.0a1", False),
     ("1.42.dev0", False), ("1.42.0.dev20251001", False), ("1.43.0", False),
     ("1.4.2", False), ("2.0.0", False), ("1.41.9", False), ("", False), ("142", False),
     ("1.420.0", False), (" 1.42.0", False)],
)  # fmt: skip
def test_direct_reads_are_only_for_flwr_1_42(version: str, known: bool) -> None:
    assert layout.known_layout(version) is known


def test_the_installed_flwr_is_read_directly() -> None:
    from importlib.metadata import version

    assert version("flwr").startswith("1.42."), "the test dependencies pin flwr 1.42.*"
    assert layout.KNOWN is True


@pytest.fixture
def asked(request: pytest.FixtureRequest) -> tuple[Any, list[Message]]:
    """Round 1's plan and selection (the intake tests' ``round1``) and its instructions."""
    strategy, msgs, _, _ = request.getfixturevalue("round1")
    return strategy._pending[1], msgs


def _replies(planned: Any, msgs: list[Message]) -> list[Message]:
    """Packed, three-record and error replies to ``msgs``, in turn."""
    out = []
    for k, msg in enumerate(msgs):
        data, reg = _data(k)
        if k % 3 == 2:
            out.append(Message(Error(code=3, reason="disk full"), reply_to=msg))
        else:
            content = contributions(planned.plan, data, data_for=reg, packed=k % 3 == 0)
            out.append(Message(content, reply_to=msg))
    return out


def test_each_direct_read_is_what_the_accessor_gives(asked: tuple[Any, list[Message]]) -> None:
    planned, msgs = asked
    for reply in _replies(planned, msgs):
        fields = layout.stored(reply)
        assert fields is not None
        node, error, content = fields
        assert node == reply.metadata.src_node_id
        if reply.has_error():
            assert error is reply.error
            assert content is None
        else:
            assert error is None
            assert content is reply.content
            d = content.__dict__["_data"]
            assert d == dict(content.items())
            for record in d.values():
                assert record.__dict__["_data"] == dict(record.items())


def test_the_intake_reads_directly_and_gets_what_the_accessors_get(
    asked: tuple[Any, list[Message]], monkeypatch: pytest.MonkeyPatch
) -> None:
    planned, msgs = asked
    replies = _replies(planned, msgs)
    by_accessors = sort_replies(planned.plan, planned.selected, replies, PlainSum())

    def refuse(self: Any) -> Any:
        raise AssertionError("an accessor was called on the direct path")

    for cls, name in [(Message, "metadata"), (Message, "content"), (Metadata, "src_node_id")]:
        monkeypatch.setattr(cls, name, property(refuse))
    for cls in layout.RECORD_TYPES:
        monkeypatch.setattr(cls, "items", refuse)
    monkeypatch.setattr(Message, "has_error", refuse)
    direct = sort_replies(planned.plan, planned.selected, replies, PlainSum())
    assert direct.nodes == by_accessors.nodes
    assert direct.health == by_accessors.health
    for region, rows in by_accessors.accepted.items():
        for name, x in rows.items():
            assert np.array_equal(direct.accepted[region][name], x)
    assert sum(len(x) for x in direct.accepted["north"].values()) > 0
    monkeypatch.setattr(layout, "KNOWN", False)
    with pytest.raises(AssertionError, match="an accessor was called"):
        sort_replies(planned.plan, planned.selected, replies, PlainSum())


class _Reply(Message):
    """A Message subclass: it may override an accessor, so it is read through them."""

    @property
    def metadata(self) -> Metadata:
        self.__dict__["_read"] = True
        return super().metadata


class _Records(RecordDict):
    """A RecordDict subclass whose ``items()`` is its own: read through it."""

    def items(self) -> Any:
        self.__dict__["_read"] = True
        return super().items()


def test_a_subclassed_message_or_record_is_read_through_its_accessors(
    asked: tuple[Any, list[Message]],
) -> None:
    planned, msgs = asked
    replies: list[Message] = []
    for k, msg in enumerate(msgs):
        data, reg = _data(k)
        content = contributions(planned.plan, data, data_for=reg, packed=k % 2 == 0)
        if k == 1:
            content = _Records(dict(content.items()))
        reply = Message(content, reply_to=msg)
        if k == 0:
            reply.__class__ = _Reply
        replies.append(reply)
    got = sort_replies(planned.plan, planned.selected, replies, PlainSum())
    assert replies[0].__dict__.get("_read") is True  # the subclass's metadata was asked
    assert replies[1].content.__dict__.get("_read") is True  # the subclass's items()
    assert got.health["north"].reported + got.health["south"].reported == len(msgs)


@pytest.mark.parametrize("direct", [True, False], ids=["direct reads", "public accessors"])
def test_a_reply_with_neither_content_nor_error_is_rejected_and_the_round_goes_on(
    asked: tuple[Any, list[Message]], monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """``Message.content`` raises when a message has neither content nor error (flwr's
    public setter allows ``content = None``): read either way, such a reply is rejected
    as unreadable, and a second one from the same node, or one from a node nobody asked,
    is counted as unexpected, as any such reply is; the round goes on."""
    planned, msgs = asked
    monkeypatch.setattr(layout, "KNOWN", direct)
    replies = _replies(planned, msgs)
    replies[0].content = None
    assert not replies[0].has_content()
    assert not replies[0].has_error()
    again = Message(RecordDict(), reply_to=msgs[0])
    again.content = None
    stranger = Message(RecordDict(), dst_node_id=12345, message_type="evaluate")
    stranger.content = None
    got = sort_replies(planned.plan, planned.selected, [*replies, again, stranger], PlainSum())
    node = replies[0].metadata.src_node_id
    (status,) = [s for s in got.nodes if s.node_id == node]
    assert status.status == "rejected"
    assert status.reason == "unreadable reply (ValueError)"
    assert got.unexpected == 2
    assert sum(h.reported for h in got.health.values()) == len(msgs) - 1 - len(msgs) // 3


class _Meta(Metadata):
    """Metadata whose ``src_node_id`` is not the one it stores: read through it."""

    @property
    def src_node_id(self) -> int:
        return int(self.__dict__["_claimed"])


def test_a_subclassed_metadata_is_read_through_its_accessor(
    asked: tuple[Any, list[Message]],
) -> None:
    planned, msgs = asked
    replies = _replies(planned, msgs)
    first = replies[0]
    meta = first.metadata
    node = meta.src_node_id
    odd = _Meta(run_id=meta.run_id, message_id=meta.message_id, src_node_id=4242,
                dst_node_id=meta.dst_node_id, reply_to_message_id=meta.reply_to_message_id,
                group_id=meta.group_id, created_at=meta.created_at, ttl=meta.ttl,
                message_type=meta.message_type)  # fmt: skip
    odd.__dict__["_claimed"] = node
    first.__dict__["_metadata"] = odd
    assert layout.stored(first) is None
    got = sort_replies(planned.plan, planned.selected, replies, PlainSum())
    (status,) = [s for s in got.nodes if s.node_id == node]
    assert status.status == "reported"
    assert got.unexpected == 0
