"""``dpledger serve``: the ledger as an HTTP service for many teams, with who may spend what.

- ``keys.py``   API keys (``dpl_<id>_<secret>``), their salted digests and scopes
- ``store.py``  the service's own state beside the ledger: keys, refusal log, session secret
- ``auth.py``   bearer keys checked in constant time; signed page sessions
- ``state.py``  one process's ledger connections, key store and refusal logging
- ``app.py``    :func:`create_app`: error mapping, the authentication gate, security headers
- ``models.py`` the wire format; ``routes.py`` the ``/v1/`` API; ``page.py`` the page at ``/``

FastAPI and uvicorn (the ``service`` extra) are imported by ``app``, ``routes``, ``page``
and ``models`` only: ``dpledger keys`` works without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpledger.service.app import create_app
    from dpledger.service.state import Settings

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from dpledger.service.app import create_app

        return create_app
    if name == "Settings":
        from dpledger.service.state import Settings

        return Settings
    raise AttributeError(f"module 'dpledger.service' has no attribute {name!r}")
