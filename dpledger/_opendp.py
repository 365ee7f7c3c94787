"""The slice of OpenDP dpledger uses, imported without ``opendp.prelude``.

``opendp.prelude`` also imports OpenDP's scikit-learn extras whenever scikit-learn is
installed, which costs seconds at start-up; these submodules are all a release needs.
"""

from opendp import combinators as c
from opendp import domains, metrics
from opendp import measurements as m
from opendp.mod import Measurement, enable_features

__all__ = [
    "Measurement",
    "absolute_distance",
    "atom_domain",
    "c",
    "enable_features",
    "l1_distance",
    "l2_distance",
    "m",
    "vector_domain",
]

atom_domain = domains.atom_domain
vector_domain = domains.vector_domain
absolute_distance = metrics.absolute_distance
l1_distance = metrics.l1_distance
l2_distance = metrics.l2_distance

enable_features("contrib")
