"""A policy's content hash: SHA-256 of its canonical JSON (not of its file bytes).

Stability contract: ledgers record this hash for every epoch they open and check a
policy against it (opening a ledger, ``verify``), so the canonical form never changes
meaning. A field added after a ledger could record a policy is left out while it holds
its default (:data:`_ADDED_FIELDS`, :data:`_ADDED_METRIC_FIELDS`): an unchanged policy
file keeps its hash, and the epochs bound to it, across dpledger versions. A new field
goes there, with the default that leaves old hashes unchanged.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["content_hash"]

_ADDED_FIELDS: dict[str, object] = {"allocation": "per_metric", "max_records_per_person": None}
"""Policy fields added after ledgers existed, with the default that leaves a hash unchanged."""

_ADDED_METRIC_FIELDS: dict[str, object] = {
    "cap_per_record": None,
    "y_clip": None,
    "y_pred_clip": None,
}
"""The same for fields of each ``[metrics.NAME]`` table (the record-level declarations)."""


def content_hash(dump: dict[str, Any]) -> str:
    """SHA-256 hex digest of a policy's ``model_dump(mode="json")``, canonicalised.

    Added fields at their defaults are dropped (the contract above); keys are sorted and
    separators compact, so the digest depends on the policy's content only. ``dump`` is
    changed in place: pass a fresh one.
    """
    for name, default in _ADDED_FIELDS.items():
        if dump.get(name) == default:
            del dump[name]
    for spec in dump["metrics"].values():
        for name, default in _ADDED_METRIC_FIELDS.items():
            if spec.get(name) == default:
                del spec[name]
    body = json.dumps(dump, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()
