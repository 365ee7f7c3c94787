"""API keys and their scopes: the key format, its salted digest, and what a key may do.

A key is ``dpl_<key id>_<secret>`` (60 characters):

- the key id is 12 lowercase hex characters (48 random bits): not secret, it names the
  key in logs, lists and ledger entries, and is how a presented key is looked up;
- the secret is ``secrets.token_urlsafe(32)`` (256 random bits, 43 characters; it may
  itself contain ``_`` and ``-``, so a key is parsed with one anchored pattern).

Only a salted SHA-256 digest of the secret is stored. The secret is machine-made with
256 bits of entropy, so a stolen key table cannot be brute-forced and a slow password
hash (scrypt: ~35 ms a check) would add nothing but a CPU lever for anyone holding a
well-formed fake key. The ``algo`` column keeps the door open should keys ever become
human-chosen. A presented key is checked in constant time: an unknown id is hashed
against a dummy record, so a miss costs what a hit costs (:func:`check_secret`).

Scopes are *actions* (:data:`ACTIONS`) and, for ``check`` and ``release``, the regions
and metrics the key may name: ``None`` means any; a list names each one, and the global
release (region ``"*"``, which spends every region's budget) must be listed explicitly.
Scope decisions read only the request's public fields (never an aggregate).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Literal, get_args

from dpledger._shown import shown
from dpledger.errors import InvalidInput, NotPermitted

__all__ = [
    "ACTIONS",
    "ALGO",
    "NAME_PATTERN",
    "Action",
    "ApiKey",
    "NewKey",
    "Scopes",
    "check_name",
    "check_secret",
    "digest",
    "display_name",
    "new_key",
    "parse_key",
]

Action = Literal["check", "release", "read", "verify", "admin"]
"""What a key may do: dry-run checks, releases (which spend), read the budget views,
entries and page, run the full audit, and manage keys."""

ACTIONS: tuple[Action, ...] = get_args(Action)
ALGO = "sha256-salted"
"""The digest stored for each key: SHA-256 over a 16-byte random salt and the secret."""

NAME_PATTERN = r"[a-z0-9][a-z0-9._-]{0,47}"
"""A key's name (who holds it, e.g. a team): lower case, digits, ``.``, ``_``, ``-``."""

_KEY = re.compile(r"dpl_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_NAME = re.compile(NAME_PATTERN)
_SCOPE_NAME = re.compile(r"[!-~]{1,64}")  # what ReleaseRequest admits for regions and metrics
_DUMMY_SALT = bytes(16)
_DUMMY_DIGEST = bytes(32)


def display_name(name: str) -> str:
    """A region or metric as a refusal names it: as sent when it could be a scope's name,
    else quoted, escaped and cut (a body's name may be a megabyte, hold a newline that
    would forge a log line, a NUL no PostgreSQL text holds, or a lone surrogate no UTF-8
    encoder writes; review 40)."""
    if _SCOPE_NAME.fullmatch(name):
        return name
    return ascii(name[:64]) + ("…" if len(name) > 64 else "")


@dataclass(frozen=True, slots=True)
class Scopes:
    """What a key may do: its actions, and the regions and metrics it may check or release.

    ``regions`` / ``metrics``: ``None`` for any, else the names allowed (``"*"`` in
    ``regions`` allows the global release, which spends every region's budget).
    """

    actions: tuple[Action, ...]
    regions: tuple[str, ...] | None = None
    metrics: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.actions:
            raise InvalidInput(f"a key needs at least one action of {list(ACTIONS)}")
        unknown = [a for a in self.actions if a not in ACTIONS]
        if unknown:
            raise InvalidInput(f"unknown action(s) {unknown}; actions are {list(ACTIONS)}")
        object.__setattr__(self, "actions", tuple(a for a in ACTIONS if a in self.actions))
        for field, names in (("region", self.regions), ("metric", self.metrics)):
            if names is None:
                continue
            if not names:
                raise InvalidInput(f"list at least one {field}, or allow any {field}")
            bad = [n for n in names if not (isinstance(n, str) and _SCOPE_NAME.fullmatch(n))]
            if bad:
                raise InvalidInput(f"{field} names are 1-64 printable characters, got {bad}")
        if self.regions is not None:
            object.__setattr__(self, "regions", tuple(sorted(set(self.regions))))
        if self.metrics is not None:
            object.__setattr__(self, "metrics", tuple(sorted(set(self.metrics))))

    def allows(self, action: Action) -> bool:
        """Whether the key may perform ``action`` at all."""
        return action in self.actions

    def missing(self, action: Action, region: str | None, metric: str | None) -> str | None:
        """The scope a request lacks (``"action release"``, ``"region eu-west"``…), or None.

        ``region`` and ``metric`` are the request's public fields; they bind only the
        actions that name them (``check`` and ``release``).
        """
        if action not in self.actions:
            return f"action {action}"
        if action not in ("check", "release"):
            return None
        if region is not None and self.regions is not None and region not in self.regions:
            if region == "*":
                return "the global release (region '*')"
            return f"region {display_name(region)}"
        if metric is not None and self.metrics is not None and metric not in self.metrics:
            return f"metric {display_name(metric)}"
        return None

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: ``regions``/``metrics`` are ``None`` for any."""
        return {
            "actions": list(self.actions),
            "regions": None if self.regions is None else list(self.regions),
            "metrics": None if self.metrics is None else list(self.metrics),
        }


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key: its id, holder's name and scopes; the digest never leaves the store.

    ``repr`` shows no salt or digest, so a logged record leaks nothing usable.
    """

    key_id: str
    name: str
    scopes: Scopes
    created_at: str
    revoked_at: str | None = None

    @property
    def principal(self) -> str:
        """Who spends, as recorded in every ledger entry: ``name/key id``."""
        return f"{self.name}/{self.key_id}"

    @property
    def active(self) -> bool:
        """False once revoked."""
        return self.revoked_at is None

    def require(self, action: Action, region: str | None = None, metric: str | None = None) -> None:
        """Raise :class:`NotPermitted` unless the key's scopes allow this request."""
        missing = self.scopes.missing(action, region, metric)
        if missing is not None:
            raise NotPermitted(
                f"key {self.key_id} ({self.name}) may not {action}: it lacks {missing}; ask "
                "the ledger's operator for a key with that scope",
                key_id=self.key_id,
                action=action,
                missing=missing,
            )

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, without any secret material."""
        return {
            "key_id": self.key_id,
            "name": self.name,
            "principal": self.principal,
            **self.scopes.as_dict(),
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


@dataclass(frozen=True, slots=True)
class NewKey:
    """A freshly made key: the full key text (shown once) and what the store keeps."""

    token: str
    key_id: str
    salt: bytes
    digest: bytes

    def __repr__(self) -> str:
        return f"NewKey(key_id={self.key_id!r}, token=<shown once>)"


def check_name(name: str) -> str:
    """A key's name, validated against :data:`NAME_PATTERN`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput(
            f"a key's name is 1-48 characters of a-z, 0-9, '.', '_', '-' starting with a "
            f"letter or digit, got {shown(name)}"
        )
    return name


def digest(secret: str, salt: bytes) -> bytes:
    """The stored digest of a key's secret: SHA-256 over the salt and the secret."""
    return hashlib.sha256(salt + secret.encode("ascii")).digest()


def new_key() -> NewKey:
    """A new random key (the caller stores ``key_id``, ``salt`` and ``digest`` only)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    return NewKey(f"dpl_{key_id}_{secret}", key_id, salt, digest(secret, salt))


def parse_key(token: str) -> tuple[str, str] | None:
    """``(key id, secret)`` of a well-formed key, else None (never an error quoting it)."""
    m = _KEY.fullmatch(token) if isinstance(token, str) else None
    return (m.group(1), m.group(2)) if m else None


def check_secret(secret: str, stored: tuple[bytes, bytes] | None) -> bool:
    """Whether ``secret`` matches a stored ``(salt, digest)``, in constant time.

    ``stored=None`` (an unknown key id) hashes against a dummy record, so that a miss
    does the same work as a hit and the time taken does not tell them apart.
    """
    salt, want = stored if stored is not None else (_DUMMY_SALT, _DUMMY_DIGEST)
    ok = hmac.compare_digest(digest(secret, salt), want)
    return ok and stored is not None
