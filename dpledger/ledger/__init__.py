"""The durable ledger: the :class:`Ledger` facade and its stores."""

from dpledger.ledger.core import Ledger
from dpledger.ledger.records import Entry, Release, VerifyReport

__all__ = ["Entry", "Ledger", "Release", "VerifyReport"]
