"""A Flower app evaluating a small numpy model through a dpledger ledger."""
