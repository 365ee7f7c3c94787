"""Child-process bodies for the store contract tests (races and crashes).

They live in their own importable module because ``spawn``/``forkserver`` children
import the function they run by name; the test preloads dpledger in the forkserver,
so each child starts by forking an interpreter that has already imported dpledger,
numpy, OpenDP and psycopg (about 2 s of imports per process otherwise).

Each child opens its own :class:`~dpledger.Ledger` — its own connection, as a separate
host would — and reports back through a queue or pipe; exceptions are reported as
text, never swallowed.
"""

from __future__ import annotations

import traceback
from multiprocessing.connection import Connection
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from dpledger.approval import ReleaseRequest
from dpledger.errors import BudgetExceeded
from dpledger.ledger import Ledger
from dpledger.policy import Policy

__all__ = ["open_together", "race", "release_until_killed"]

_HANG_GUARD_S = 300.0  # only so that a broken sibling cannot hang the suite forever


def race(
    index: int,
    target: str,
    policy_toml: str,
    request: dict[str, Any],
    aggregate: float,
    attempts: int,
    barrier: Barrier,
    results: Queue[tuple[int, list[int], int, str | None]],
) -> None:
    """Open the ledger together with the siblings, then race ``attempts`` releases.

    Reports ``(index, accepted entry ids, refused count, error text or None)``. Only
    :class:`BudgetExceeded` counts as a refusal; any other error is reported as such.
    """
    accepted: list[int] = []
    refused = 0
    try:
        policy = Policy.from_toml(policy_toml)
        req = ReleaseRequest(**request)
        barrier.wait(_HANG_GUARD_S)  # all open at once
        with Ledger.open(target, policy, mode="create") as ledger:
            barrier.wait(_HANG_GUARD_S)  # all release at once
            for _ in range(attempts):
                try:
                    accepted.append(ledger.release(req, aggregate).entry_id)
                except BudgetExceeded:
                    refused += 1
        results.put((index, accepted, refused, None))
    except BaseException as e:
        barrier.abort()
        results.put((index, accepted, refused, f"{e!r}\n{traceback.format_exc()}"))


def release_until_killed(
    target: str,
    policy_toml: str,
    request: dict[str, Any],
    aggregate: float,
    per_epoch: int,
    out: Connection,
) -> None:
    """Release forever (``per_epoch`` per epoch, then the next epoch), reporting each.

    After :meth:`Ledger.release` returns, send ``(entry_id, noisy sum)`` to ``out``:
    every value reported was returned to a caller, so its spend must be in the ledger.
    """
    policy = Policy.from_toml(policy_toml)
    i = 0
    with Ledger.open(target, policy, mode="create") as ledger:
        while True:
            req = ReleaseRequest(**{**request, "epoch": i // per_epoch})
            r = ledger.release(req, aggregate)
            out.send((r.entry_id, float(r.noisy_sum[0])))
            i += 1


def open_together(
    index: int,
    targets: list[str],
    policy_toml: str,
    barrier: Barrier,
    results: Queue[tuple[int, list[str]]],
) -> None:
    """Open each of ``targets`` (fresh ledgers) at the same moment as the siblings.

    Reports ``(index, errors)``: one text per failed open, none when all succeeded.
    """
    errors: list[str] = []
    try:
        policy = Policy.from_toml(policy_toml)
        for target in targets:
            barrier.wait(_HANG_GUARD_S)
            try:
                with Ledger.open(target, policy, mode="create") as ledger:
                    ledger.init()
            except Exception as e:
                errors.append(f"{target}: {e!r}")
    except BaseException as e:
        barrier.abort()
        errors.append(f"{e!r}\n{traceback.format_exc()}")
    results.put((index, errors))
