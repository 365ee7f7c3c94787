"""What one service process holds: the ledger connections, the key store, the refusal log.

The ledger is opened ``mode="write"``: it must exist (``dpledger ledger init``), so a
mistyped ``--ledger`` fails at start instead of opening a new budget history, and no
read ever creates one. Each of the :attr:`Settings.connections` connections is a
:class:`~dpledger.ledger.Ledger` of its own, lent to one request at a time; writers on
any connection, any replica, are serialised by the ledger's own write lock (SQLite
``BEGIN IMMEDIATE``, a PostgreSQL advisory lock), so no budget is overspent however
many replicas run.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from dpledger._files import postgres_url
from dpledger._path_text import check_path_text, check_unpadded
from dpledger._shown import shown
from dpledger.approval import ReleaseRequest
from dpledger.errors import (
    DpLedgerError,
    InvalidInput,
    NotPermitted,
    ReleaseRefused,
    StoreError,
    error_code,
)
from dpledger.ledger import Ledger, VerifyReport
from dpledger.policy import Policy
from dpledger.service.auth import Authenticator
from dpledger.service.keys import ApiKey, display_name
from dpledger.service.store import Refusal, ServiceStore, default_location
from dpledger.types import MAX_DIMENSION

__all__ = [
    "BODY_OVERHEAD",
    "BYTES_PER_VALUE",
    "DEFAULT_MAX_BODY_BYTES",
    "ServiceState",
    "Settings",
    "body_bytes_needed",
]

DEFAULT_MAX_BODY_BYTES = 1 << 20
"""Largest request body, in bytes (1 MiB: an aggregate of tens of thousands of numbers)."""
BYTES_PER_VALUE = 48
"""Room for one aggregate number in a JSON body, whatever its digits: the longest number a
valid aggregate is written with (24 characters for a float's ``repr``, e.g.
``-2.2250738585072014e-308``; 29 for an integer within the policy's bounds, 1e27, with its
sign), its comma, and a newline with up to 16 spaces of indentation (``json.dumps(body,
indent=8)``). 32 bytes covered only compact JSON: written with ``indent=4`` a number takes
up to 34, so a neighbour's longer digits crossed a limit its own did not (review 43)."""
BODY_OVERHEAD = 8192
"""Room for the rest of a body: the request's fields (each bounded) and whitespace."""


def body_bytes_needed(policy: Policy) -> int:
    """The body limit below which a valid aggregate's digits could decide a 413.

    A body limit must admit every aggregate of the right shape whatever its values, or
    the status (413 or not) would depend on the data.
    """
    largest = max((spec.size for spec in policy.metrics.values()), default=1)
    return BODY_OVERHEAD + BYTES_PER_VALUE * largest


_POOL_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class Settings:
    """How to run the service: which ledger and policy, where its keys live, its limits."""

    ledger: str
    policy: Policy
    keys: str | None = None  # the service store; default beside the ledger
    connections: int = 4
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if not isinstance(self.policy, Policy):
            raise InvalidInput("the service needs a dpledger Policy")
        if isinstance(self.connections, bool) or not 1 <= self.connections <= 64:
            raise InvalidInput(f"connections must lie in [1, 64], got {shown(self.connections)}")
        if isinstance(self.max_body_bytes, bool) or not 1024 <= self.max_body_bytes <= 1 << 30:
            raise InvalidInput(
                f"max_body_bytes must lie in [1 KiB, 1 GiB], got {shown(self.max_body_bytes)}"
            )
        wide = [n for n, spec in self.policy.metrics.items() if spec.size > MAX_DIMENSION]
        if wide:  # a histogram's len(edges) + 1 is not held to MAX_DIMENSION by the policy
            raise InvalidInput(
                f"the service takes aggregates of at most {MAX_DIMENSION:,} values, and metric "
                f"{wide[0]!r} has {self.policy.metrics[wide[0]].size:,}: it could never be "
                "released over the API; give it fewer bins (or release it with the library)"
            )
        needed = body_bytes_needed(self.policy)
        if self.max_body_bytes < needed:
            raise InvalidInput(
                f"a body limit of {self.max_body_bytes} bytes is too small for this policy: its "
                f"largest aggregate may need {needed} bytes, and a limit that a valid "
                f"aggregate's digits could cross would let the data decide a 413; raise "
                f"--max-body-bytes to at least {needed}"
            )

    @property
    def keys_location(self) -> str:
        """Where the key store is: :attr:`keys`, or beside the ledger."""
        return self.keys or default_location(self.ledger)


@dataclass(frozen=True, slots=True)
class Verified:
    """A verification of the chain up to ``head``, and when it ran (Unix time)."""

    head: tuple[int, str]
    report: VerifyReport
    at: float


class ServiceState:
    """The ledger connections, key store and authenticator of one service process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policy = settings.policy
        self.store = ServiceStore.open(
            settings.keys_location, ledger=None if settings.keys else settings.ledger
        )
        self._pool: queue.Queue[Ledger] = queue.Queue()
        self._open: list[Ledger] = []
        try:
            self.auth = Authenticator(self.store)
            # a file by its absolute path: the location a 4xx message hides is then never
            # a bare word ("--ledger ledger") that the message's own text also holds. The
            # text is checked, then joined to the working directory as it is: abspath would
            # drop padding or a final separator (refused) and fold "link/.." lexically (not
            # the file the OS, the key store and the CLI name through a symlink)
            target = settings.ledger
            if target and postgres_url(target) is None and not os.path.isabs(target):
                target = os.path.join(os.getcwd(), check_unpadded(check_path_text(target)))
            for _ in range(settings.connections):
                ledger = Ledger.open(target, self.policy, mode="write")
                self._open.append(ledger)
                self._pool.put(ledger)
            # the policy the ledger validated and enforces, for every view (plan, page)
            self.policy = self._open[0].policy  # Settings holds connections >= 1
        except BaseException:
            self.close()
            raise
        self._verify_lock = threading.Lock()
        self._verified: Verified | None = None

    @property
    def location(self) -> str:
        """Where the ledger is (a path, or its URL without password)."""
        return self._open[0].location

    @contextmanager
    def ledger(self) -> Iterator[Ledger]:
        """Borrow one ledger connection for the length of a request."""
        try:
            ledger = self._pool.get(timeout=_POOL_WAIT_S)
        except queue.Empty:
            raise StoreError(
                f"all {len(self._open)} ledger connections stayed busy for {_POOL_WAIT_S:g} s"
            ) from None
        try:
            yield ledger
        finally:
            self._pool.put(ledger)

    def verified(self, *, max_age_s: float = 300.0) -> Verified:
        """The page's verification: re-run when the head moved or it is ``max_age_s`` old."""
        with self._verify_lock, self.ledger() as ledger:
            head = ledger.head(checked=False)  # as recorded: the report names any damage
            last = self._verified
            if last is None or last.head != head or time.time() - last.at > max_age_s:
                report = ledger.verify()
                last = self._verified = Verified(head, report, time.time())
            return last

    def log_refusal(
        self,
        key: ApiKey,
        action: str,
        request: ReleaseRequest | None,
        exc: DpLedgerError,
        status: int,
    ) -> None:
        """Append a refusal to the operator's log: public fields and check names only."""
        if isinstance(exc, ReleaseRefused) and exc.verdict is not None:
            failed = tuple(c.name for c in exc.verdict.failures)
        elif isinstance(exc, NotPermitted):
            failed = (f"scope: {exc.missing}",)
        else:
            failed = ()
        r = request
        self.store.log_refusal(
            Refusal(
                at="",  # the store stamps it
                principal=key.principal,
                action=action,
                status=status,
                error=error_code(exc),
                epoch=None if r is None else r.epoch,
                region=None if r is None else display_name(r.region),  # NUL: review 40
                metric=None if r is None else display_name(r.metric),
                cohort=None if r is None else r.cohort,
                release_id=None if r is None else r.release_id,
                failed=failed,
            )
        )

    def close(self) -> None:
        """Close every ledger connection and the key store."""
        for ledger in self._open:
            with suppress(DpLedgerError):
                ledger.close()
        self.store.close()
