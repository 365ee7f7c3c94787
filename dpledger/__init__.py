"""dpledger: a differential-privacy budget ledger for federated evaluation metrics."""

__all__: list[str] = []
