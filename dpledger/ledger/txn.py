"""A write transaction under the ledger's lock: staged drafts, chained and written at once.

:class:`WriteTxn` is what :meth:`SqlStore.write <dpledger.ledger.store.SqlStore.write>`
yields: it reads the state it needs under the lock (spend, chain head, release ids),
stages drafts so that later checks in the same transaction see their charges, and
flushes them as one chained batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpledger.accounting import EpochSpend
from dpledger.ledger.records import GENESIS, Entry, EntryDraft, hashed_outputs
from dpledger.types import fraction_text

if TYPE_CHECKING:
    from dpledger.ledger.store import SqlStore

__all__ = ["TxnState", "WriteTxn"]

_ZERO = Fraction(0)  # one zero for every first charge of a key (a Fraction is immutable)


@dataclass
class TxnState:
    """What a write transaction reads under the lock, in as few round trips as the store can."""

    spend: dict[int, dict[tuple[str, str], Fraction]]  # epoch -> (scope, metric) -> total
    head: tuple[int, str]  # (seq, hash) of the chain's last entry
    found: dict[str, Entry]  # release id -> its committed entry
    # epoch -> scope -> total over metrics, when the store kept it (else summed on load)
    scopes: dict[int, dict[str, Fraction]] | None = None


class WriteTxn:
    """A write transaction holding the ledger's write lock (see :meth:`SqlStore.write`).

    Drafts are staged first (the spend seen by later checks in the same transaction
    includes them), then written together by :meth:`flush`: one chained batch of
    entries, one spend update and one new head.
    """

    def __init__(self, store: SqlStore) -> None:
        self._s = store
        self._spend: dict[int, dict[tuple[str, str], Fraction]] = {}
        self._scopes: dict[int, dict[str, Fraction]] = {}  # the same, summed per scope
        self._found: dict[str, Entry | None] = {}
        self._head: tuple[int, str] | None = None
        self._staged: list[EntryDraft] = []
        self._bindings: dict[int, tuple[str, str] | None] = {}

    def load(self, epochs: Iterable[int], release_ids: Iterable[str]) -> None:
        """Read the spend of ``epochs``, the chain head and ``release_ids`` at once."""
        want = sorted(set(epochs) - set(self._spend))
        ids = sorted(set(release_ids) - set(self._found))
        state = self._s._load_state(want, ids)
        for epoch in want:
            totals = state.spend.get(epoch, {})
            self._spend[epoch] = totals
            kept = state.scopes.get(epoch) if state.scopes is not None else None
            self._scopes[epoch] = EpochSpend(totals).by_scope() if kept is None else kept
        for rid in ids:
            self._found[rid] = state.found.get(rid)
        self._head = state.head

    def spend(self, epoch: int) -> EpochSpend:
        """The epoch's exact spend per (scope, metric): committed plus staged."""
        if epoch not in self._spend:
            self.load([epoch], [])
        return EpochSpend(dict(self._spend[epoch]), dict(self._scopes[epoch]))

    def live_spend(self, epoch: int) -> EpochSpend:
        """:meth:`spend` without copying: valid only until the next :meth:`stage`.

        For a check that reads it at once (the hot path of a round under the lock).
        """
        if epoch not in self._spend:
            self.load([epoch], [])
        return EpochSpend(self._spend[epoch], self._scopes[epoch])

    def epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        """``(policy hash, version)`` the epoch was opened under, read under the lock.

        Read once per epoch per transaction: nobody else writes while the lock is held.
        """
        if epoch not in self._bindings:
            self._bindings[epoch] = self._s._epoch_policy(epoch)
        return self._bindings[epoch]

    def find_release(self, release_id: str) -> Entry | None:
        """The committed entry recorded under ``release_id`` (an indexed read), if any."""
        if release_id not in self._found:
            self.load([], [release_id])
        return self._found[release_id]

    def record_policy(self, policy_hash: str, name: str, version: str, body: str) -> None:
        """Record a policy body once, refusing a second content for one version."""
        self._s._record_policy(policy_hash, name, version, body)

    def stage(self, draft: EntryDraft) -> None:
        """Add a draft to this transaction; its charge counts for the checks that follow."""
        if draft.epoch not in self._spend:  # the epoch's committed totals come first
            self.load([draft.epoch], [])
        totals, scopes = self._spend[draft.epoch], self._scopes[draft.epoch]
        key, cost = (draft.region, draft.metric), draft.charge.amount
        totals[key] = totals.get(key, _ZERO) + cost
        scopes[draft.region] = scopes.get(draft.region, _ZERO) + cost
        self._staged.append(draft)

    def flush(self) -> list[Entry]:
        """Chain, insert and total the staged drafts; visible to others only after commit."""
        if not self._staged:
            return []
        if self._head is None:
            self.load([], [])
        head_seq, head_hash = self._head or (0, GENESIS)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        out: list[Entry] = []
        rows: list[tuple[Any, ...]] = []
        touched: set[tuple[int, str, str]] = set()
        hashed = hashed_outputs(head_seq + 1, now, self._staged, head_hash)
        for d, (mechanism, charge, output, h) in zip(self._staged, hashed, strict=True):
            seq = head_seq + 1
            rows.append(
                (seq, now, d.epoch, d.region, d.metric, d.policy_name, d.policy_version,
                 d.policy_hash, d.edges_version, mechanism, d.charge.unit,
                 charge, d.cohort, output, d.release_id,
                 d.request_hash, d.principal, head_hash, h)
            )  # fmt: skip
            touched.add((d.epoch, d.region, d.metric))
            out.append(Entry(seq, now, d, head_hash, h))
            head_seq, head_hash = seq, h
        spend = []
        for epoch, scope, metric in sorted(touched):
            total = self._spend[epoch][(scope, metric)]
            text = fraction_text(total)
            self._s._remember(text, total)  # read back by the next transaction's load
            spend.append((epoch, scope, metric, text))
        self._s._write_rows(rows, spend, (head_seq, head_hash))
        self._head = (head_seq, head_hash)
        self._s._flushed(self._head, self._spend, self._scopes)
        self._staged = []
        return out
