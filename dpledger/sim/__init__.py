"""Simulation: seeded synthetic fleets with planted failures, and the demo that runs one.

``fleet`` builds a fleet and ``silos`` splits a data set over silos (the only places
dpledger uses ``numpy.random``: synthetic data, never release noise); ``scenarios`` holds
the planted failures; ``demo`` runs an epoch of the shipped policy through a real ledger;
``report`` and ``plots`` render what it released.
"""

from dpledger.sim.fleet import Fleet, make_fleet

__all__ = ["Fleet", "make_fleet"]
