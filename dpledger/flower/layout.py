"""Where flwr 1.42 keeps a reply's fields, for reading a round of thousands without accessors.

A ``Message``'s ``metadata``, ``content`` and ``has_error()``, ``Metadata.src_node_id``
and a record's ``items()`` are Python-level properties and methods; in flwr 1.42 each
returns one entry of its object's ``__dict__`` (``_metadata``, ``_content``, ``_error``,
``_src_node_id``; a record's ``_data`` dict) and does nothing else. For a round of 1,000
replies those calls are most of what reading costs (~2–4 µs a reply against ~0.7), so the
intake reads the entries directly — only where this module has shown they are there:

- :data:`KNOWN` is true only for flwr ``1.42.*`` (the range the test suite pins and
  checks these reads against the public accessors on), and only if an empty
  ``RecordDict`` and ``ArrayRecord`` keep their entries in a ``_data`` dict;
- each read is of an object of the exact flwr type (a subclass may override an
  accessor), and any look-up that fails sends that reply to the public accessors.

Any other flwr in the extra's range (``>=1.42,<2``) is read through its public accessors
only: slower, never different. Nothing here writes to a flwr object.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

__all__ = ["KNOWN", "RECORD_TYPES", "fields", "known_layout"]

RECORD_TYPES: frozenset[type[Any]] = frozenset(
    {RecordDict, ArrayRecord, MetricRecord, ConfigRecord}
)
"""flwr's record types whose entries are one ``_data`` dict in 1.42 (``TypedDict``)."""


def known_layout(flwr_version: str) -> bool:
    """Whether ``flwr_version`` stores replies as this module reads them (1.42.*) and the
    installed record types agree."""
    major, _, rest = flwr_version.partition(".")
    minor = rest.partition(".")[0]
    if (major, minor) != ("1", "42"):
        return False
    try:
        return all(type(t().__dict__["_data"]) is dict for t in RECORD_TYPES)
    except Exception:  # another constructor or layout: the public accessors
        return False


def _installed() -> str:
    try:
        return version("flwr")
    except PackageNotFoundError:  # imported from a source tree: no direct reads
        return ""


KNOWN = known_layout(_installed())
"""Whether the installed flwr's replies may be read directly (module docstring)."""


def fields(reply: Message) -> tuple[int, Any, Any]:
    """``(src node id, error or None, content or None)`` of ``reply``, as its public
    accessors give them (``metadata.src_node_id``, ``error`` when ``has_error()``,
    ``content`` otherwise, None if reading it raises); directly from flwr 1.42's storage
    when :data:`KNOWN`."""
    if KNOWN and type(reply) is Message:
        try:
            d = reply.__dict__
            return d["_metadata"].__dict__["_src_node_id"], d["_error"], d["_content"]
        except (KeyError, AttributeError):  # not the layout after all: the accessors
            pass
    node = reply.metadata.src_node_id
    if reply.has_error():
        return node, reply.error, None
    try:
        return node, None, reply.content
    except Exception:  # no content either: the caller reads it again where it is judged
        return node, None, None
