"""What a caller asks to release: the strict :class:`ReleaseRequest`, and its fingerprint.

The request carries only public facts (epoch, metric, region, declared cohort, the
versions the client module used); the fingerprint is what an idempotent retry under the
same release id must repeat exactly.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field

from dpledger import types as _types
from dpledger.policy import ALL, FrozenModel

__all__ = ["MAX_COHORT", "MAX_EPOCH", "ReleaseRequest", "fingerprint", "well_formed"]

MAX_EPOCH = 2**63 - 1
"""The largest epoch number: what a signed 64-bit integer column (every store) holds."""
MAX_COHORT = _types.MAX_COHORT
"""The largest cohort a release may declare (a billion clients: more than any fleet); the
planning API holds cohorts to it too (:func:`dpledger.types.cohort_size`)."""
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps(…, separators=…), built once


def _numpy_int(value: object) -> object:
    """A numpy integer as a Python int (``cohort=mask.sum()``); anything else unchanged."""
    return int(value) if isinstance(value, np.integer) else value


_Count = Annotated[int, BeforeValidator(_numpy_int)]


class ReleaseRequest(FrozenModel):
    """What a caller asks to release: epoch, metric, region (or all), cohort, versions.

    Strict: ``epoch`` and ``cohort`` must be integers (``True``, ``1.0`` and ``"2400"``
    are refused, not coerced), strings must be strings. ``release_id`` makes the release
    idempotent: a retry with the same id, request and aggregate returns the recorded
    release (no new noise, no second charge).
    """

    model_config = ConfigDict(strict=True)  # merged with FrozenModel's frozen, closed config

    epoch: _Count = Field(ge=0, le=MAX_EPOCH, description="evaluation epoch (policy budget window)")
    metric: str = Field(min_length=1, max_length=64)
    region: str = Field(
        min_length=1, max_length=64, description=f"a region, or {ALL!r} for all (explicit)"
    )
    cohort: _Count = Field(
        ge=1,
        le=MAX_COHORT,
        description="clients summed into the aggregate — under a privacy_unit = 'record' "
        "policy, RECORDS (after each silo's per-person bound) — a public number: under "
        "replace the known cohort; under add_remove the planned cohort fixed before the "
        "round, at or above the expected count (never truncate the records or clients "
        "summed to it: where that binds, one more pushes another out, twice the charged "
        "change), never the count of who reported",
    )
    edges_version: str | None = Field(default=None, min_length=1, max_length=128)
    policy_version: str | None = Field(default=None, min_length=1, max_length=64)
    release_id: str | None = Field(
        default=None,
        pattern=r"^[!-~]{1,128}$",
        description="caller-chosen idempotency key, unique per ledger: 1-128 printable "
        "ASCII characters without spaces (e.g. a UUID, or 'round-7/eu-west/loss')",
    )


_RID = re.compile(r"[!-~]{1,128}").fullmatch
"""A release id's rule (``ReleaseRequest.release_id``'s pattern), for :func:`well_formed`."""


def _text(value: object, longest: int) -> bool:
    """Plain text of 1..``longest`` characters, as validation leaves a field: not a ``str``
    subclass, whose ``__eq__`` could admit an undeclared region (review 40)."""
    return type(value) is str and 1 <= len(value) <= longest


def well_formed(request: ReleaseRequest) -> ReleaseRequest:
    """``request`` when its fields have the types and ranges validation gives them; else it
    is validated now (one built by ``model_construct`` skipped validation): a typed error
    names what is wrong, instead of a ``TypeError`` deep in a release."""
    r = request
    if r.__dict__.keys() >= _FIELD_SET and (  # model_construct may leave one out
        type(r.epoch) is int
        and 0 <= r.epoch <= MAX_EPOCH
        and type(r.cohort) is int
        and 1 <= r.cohort <= MAX_COHORT
        and _text(r.metric, 64)
        and _text(r.region, 64)
        and (r.edges_version is None or _text(r.edges_version, 128))
        and (r.policy_version is None or _text(r.policy_version, 64))
        and (r.release_id is None or (_text(r.release_id, 128) and _RID(r.release_id)))
    ):
        return r
    return ReleaseRequest.model_validate(dict(r))


def fingerprint(request: ReleaseRequest, principal: str | None = None) -> str:
    """SHA-256 of a request's public fields (all but its release id) and its principal.

    What an idempotent retry must repeat exactly (a release id belongs to whoever spent
    it). It holds nothing derived from the aggregate: the entry is readable by anyone who
    reads the ledger, and a digest of a private sum could be tested against guesses.
    The text hashed is the compact JSON array of the fields in declaration order, then
    the principal: written out directly for the field types a validated request holds,
    through the JSON encoder for anything else (the same text either way).
    """
    r = request
    epoch, cohort, ev, pv = r.epoch, r.cohort, r.edges_version, r.policy_version
    if (
        type(epoch) is int
        and type(cohort) is int
        and isinstance(r.metric, str)
        and isinstance(r.region, str)
        and (ev is None or isinstance(ev, str))
        and (pv is None or isinstance(pv, str))
        and (principal is None or isinstance(principal, str))
        and tuple(r.__dict__) == _FIELDS
    ):  # the types a validated request holds (model_construct can put any in)
        a = _ascii
        text = (
            f"[{epoch},{a(r.metric)},{a(r.region)},{cohort},"
            f"{'null' if ev is None else a(ev)},{'null' if pv is None else a(pv)},"
            f"{'null' if principal is None else a(principal)}]"
        )
    else:
        fields = [v for k, v in r.__dict__.items() if k != "release_id"]  # field order
        fields.append(principal)
        text = _COMPACT.encode(fields)
    return hashlib.sha256(text.encode()).hexdigest()


_ascii = json.encoder.encode_basestring_ascii  # str -> its JSON string (ensure_ascii)
_FIELD_SET = frozenset(ReleaseRequest.model_fields)
_FIELDS = (
    "epoch",
    "metric",
    "region",
    "cohort",
    "edges_version",
    "policy_version",
    "release_id",
)  # ReleaseRequest's fields in declaration order: the fast path's layout
