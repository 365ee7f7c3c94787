"""Who is calling: bearer keys checked in constant time, and signed page sessions.

:meth:`Authenticator.authenticate` answers a presented key with the stored
:class:`~dpledger.service.keys.ApiKey` or None, and a reason for the operator's log
(``malformed``, ``unknown key id``, ``wrong secret``, ``revoked``): the caller sees one
and the same 401 whatever the reason. The key text itself is never returned, stored or
logged.

**Page sessions.** A person signs in to the page once by pasting a key with the
``read`` action; the browser then holds a session cookie, not the key:
``<key id>.<count>.<expiry>.<HMAC-SHA256(secret, key id . count . expiry)>``, with the
secret kept in the service store (shared by every replica). A session lasts
:data:`SESSION_TTL_S` and dies with its key: each request looks the key up again, so a
revocation ends its sessions at once. Signing out (:meth:`Authenticator.end_session`)
moves the key's session count in the store, which voids every page session made under
the old count, on every replica, at once: a copied cookie is worthless after sign-out.
The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's
page sends it) and ``Secure`` when served over HTTPS.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from dpledger.service.keys import ApiKey, check_secret, parse_key
from dpledger.service.store import ServiceStore

__all__ = ["SESSION_COOKIE", "SESSION_TTL_S", "Authenticator"]

SESSION_COOKIE = "dpl_session"
SESSION_TTL_S = 8 * 3600
"""How long a page session lasts, in seconds (a working day)."""
_SESSION = re.compile(r"([0-9a-f]{12})\.([0-9]{1,19})\.([0-9]{1,12})\.([0-9a-f]{64})")


class Authenticator:
    """Checks bearer keys and page sessions against one :class:`ServiceStore`."""

    def __init__(self, store: ServiceStore, *, session_ttl_s: int = SESSION_TTL_S) -> None:
        self._store = store
        self._secret = store.session_secret()
        self.session_ttl_s = session_ttl_s

    def authenticate(self, token: str | None) -> tuple[ApiKey | None, str]:
        """The active key ``token`` presents, or None and why (for the log, not the caller).

        An unknown key id is checked against a dummy digest, so that a miss costs what a
        hit costs; the database lookup by id is the one step whose time may differ, and
        the id is not a secret.
        """
        if not token:
            return None, "no key"
        parsed = parse_key(token)
        if parsed is None:
            return None, "malformed key"
        key_id, secret = parsed
        found = self._store.lookup(key_id)
        ok = check_secret(secret, None if found is None else found[1])
        if found is None:
            return None, f"unknown key id {key_id}"
        if not ok:
            return None, f"wrong secret for key {key_id}"
        key = found[0]
        if not key.active:
            return None, f"revoked key {key_id}"
        return key, "ok"

    def _mac(self, payload: str) -> str:
        return hmac.new(self._secret, payload.encode("ascii"), hashlib.sha256).hexdigest()

    def session_for(self, key: ApiKey, *, now: float | None = None) -> str:
        """A session cookie value for ``key``, valid for :attr:`session_ttl_s` seconds
        (or until the key signs out or is revoked)."""
        expires = int(time.time() if now is None else now) + self.session_ttl_s
        payload = f"{key.key_id}.{self._store.session_epoch(key.key_id)}.{expires}"
        return f"{payload}.{self._mac(payload)}"

    def from_session(self, cookie: str | None, *, now: float | None = None) -> ApiKey | None:
        """The active key a session cookie stands for, or None (forged, expired, signed
        out, revoked)."""
        m = _SESSION.fullmatch(cookie) if cookie else None
        if m is None:
            return None
        key_id, count, expires, mac = m.groups()
        if not hmac.compare_digest(self._mac(f"{key_id}.{count}.{expires}"), mac):
            return None
        if int(expires) < (time.time() if now is None else now):
            return None
        if int(count) != self._store.session_epoch(key_id):
            return None  # signed out since
        key = self._store.key(key_id)
        return key if key is not None and key.active else None

    def end_session(self, cookie: str | None, *, now: float | None = None) -> ApiKey | None:
        """Sign out: void the page sessions of the key a valid ``cookie`` stands for (every
        one of that key's sessions, on every replica); the key, or None if none was valid."""
        key = self.from_session(cookie, now=now)
        if key is not None:
            self._store.end_sessions(key.key_id)
        return key
