"""Policies and aggregates for the core tests (plain functions, no fixtures)."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

from dpledger import Policy
from dpledger.ledger.sqlite_sql import GUARDS

ROOT = Path(__file__).resolve().parent.parent
SPATIAL = ROOT / "policies" / "spatial-eval.toml"

BASE = """
name = "test-policy"
version = "{version}"
neighbouring = "{neighbouring}"
epoch_epsilon = "{epoch_epsilon}"
eval_fraction = "{eval_fraction}"
allocation = "pooled"         # composition tests release one metric many times per epoch

[regions]
names = ["north", "south", "east"]

[metrics.loss]
kind = "scalar_mean"
epsilon = "{scalar_eps}"
clip = {{ low = "0", high = "2", source = "test" }}

[metrics.loss_b]
kind = "scalar_mean"
epsilon = "0.25"
clip = {{ low = "-1", high = "3", source = "test" }}

[metrics.hist5]
kind = "histogram"
epsilon = "0.5"
edges = [1.0, 2.0, 3.0, 4.0]
edges_version = "h5/v1"
cap_per_client = "4"

[metrics.hist20]
kind = "histogram"
epsilon = "0.5"
edges = [{edges20}]
edges_version = "h20/v1"
cap_per_client = "4"

[metrics.floored]
kind = "scalar_mean"
epsilon = "0.1"
target = 0.1
clip = {{ low = "0", high = "1", source = "test" }}

[metrics.gap]
kind = "vector_sum"
epsilon = "0.5"
dimension = 4
cap_per_client = "2"
nonnegative = false
"""


SPEND_GUARD = ("dpl_spend_no_decrease", "dpl_spend_no_delete", "dpl_spend_no_replace")
"""The SQLite spend guard's triggers (schema 4): an editor of the spend table drops them."""


def drop_spend_guard(conn: sqlite3.Connection) -> None:
    """What someone editing an SQLite ledger's spend totals by hand does first."""
    for name in SPEND_GUARD:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def restore_guards(conn: sqlite3.Connection) -> None:
    """Put dpledger's own triggers back after a tamper (a writer refuses a schema-4 ledger
    without them), so a test goes on to what it checks about the tampered rows."""
    for ddl in GUARDS:
        conn.execute(ddl)


def policy_text(
    *,
    neighbouring: str = "replace",
    epoch_epsilon: str = "4",
    eval_fraction: str = "0.25",
    scalar_eps: str = "0.1",
    version: str = "1",
) -> str:
    """The TOML of :func:`policy` (for a policy file a command or a server reads)."""
    edges20 = ", ".join(str(float(i)) for i in range(1, 20))
    return BASE.format(
        neighbouring=neighbouring,
        epoch_epsilon=epoch_epsilon,
        eval_fraction=eval_fraction,
        scalar_eps=scalar_eps,
        edges20=edges20,
        version=version,
    )


def policy(**fields: str) -> Policy:
    """A small policy: ε_eval = 1 by default, three regions, scalar/histogram/vector metrics.

    ``fields``: those of :func:`policy_text`.
    """
    return Policy.from_toml(policy_text(**fields), source="test-policy.toml")


def spatial() -> Policy:
    """The shipped example policy."""
    return Policy.load(SPATIAL)


def npy_with_header(header: str, body: bytes = b"\0" * 8) -> bytes:
    """An .npy file (version 1.0) with this header text, padded as numpy pads it, and
    ``body``: for headers numpy itself would never write."""
    h = header.encode("latin1")
    h += b" " * (64 - (10 + len(h) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + body
