"""Where flwr 1.42 keeps a reply's fields, for reading a round of thousands without accessors.

A ``Message``'s ``metadata``, ``content`` and ``has_error()``, ``Metadata.src_node_id``
and a record's ``items()`` are Python-level properties and methods; in flwr 1.42 each
returns one entry of its object's ``__dict__`` (``_metadata``, ``_content``, ``_error``,
``_src_node_id``; a record's ``_data`` dict) and does nothing else (``content`` and
``error`` raise when theirs is None). For a round of 1,000 replies those calls are a
large share of what reading costs, so the intake reads the entries directly — only where
this module has shown they are there:

- :data:`KNOWN` is true only for a final (or post) release of flwr 1.42 (the range the
  test suite pins and checks these reads against the public accessors on; not a 1.42
  pre-release, which sorts before 1.42.0), and only if an empty record of each type in
  :data:`RECORD_TYPES` keeps its entries in a ``_data`` dict;
- :func:`stored` reads only a ``Message`` and ``Metadata`` of flwr's exact types (a
  subclass may override an accessor) whose entries are all there; the intake reads any
  other reply through the public accessors, in the order it always has; a record's
  entries are read directly only for the exact flwr record types.

Any other flwr in the extra's range (``>=1.42,<2``) is read through its public accessors
only: slower, never different. Nothing here writes to a flwr object.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Message, Metadata, MetricRecord, RecordDict

__all__ = ["KNOWN", "RECORD_TYPES", "known_layout", "stored"]

RECORD_TYPES: frozenset[type[Any]] = frozenset(
    {RecordDict, ArrayRecord, MetricRecord, ConfigRecord}
)
"""flwr's record types whose entries are one ``_data`` dict in 1.42 (``TypedDict``)."""

_RELEASE_1_42 = re.compile(r"1\.42(\.\d+)*(\.post\d+)?(\+[A-Za-z0-9.]+)?")
"""A final or post release of flwr 1.42, with any local label (PEP 440); no pre-release
(``rc``, ``a``, ``b``) or ``.dev`` build: those sort before 1.42.0."""


def known_layout(flwr_version: str) -> bool:
    """Whether ``flwr_version`` stores replies as this module reads them (a final 1.42
    release) and the installed record types agree."""
    if not _RELEASE_1_42.fullmatch(flwr_version):
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


def stored(reply: object) -> tuple[int, Any, Any] | None:
    """``(src node id, error or None, content or None)`` of ``reply`` as flwr 1.42 stores
    them — what ``metadata.src_node_id``, ``error`` and ``content`` give — or None when it
    is not read directly: :data:`KNOWN` is false, ``reply`` or its metadata is not of
    flwr's exact type, or an entry is missing. Never raises."""
    if not (KNOWN and type(reply) is Message):
        return None
    d = reply.__dict__
    meta = d.get("_metadata")
    if type(meta) is not Metadata:
        return None
    node = meta.__dict__.get("_src_node_id", _MISSING)
    error, content = d.get("_error", _MISSING), d.get("_content", _MISSING)
    if node is _MISSING or error is _MISSING or content is _MISSING:
        return None
    return node, error, content


_MISSING = object()
