"""The disjoint partition of a policy's clients into regions, and the all-regions scope."""

from __future__ import annotations

from pydantic import ConfigDict, StrictBool, model_validator

from dpledger.policy.base import NAME, FrozenModel, name_ok

__all__ = ["ALL", "Regions"]

ALL = "*"
"""The scope of a release that covers every region (a global release)."""


class Regions(FrozenModel):
    """The disjoint partition of clients: declared names, or open keys (any valid name)."""

    model_config = ConfigDict(revalidate_instances="always")  # as MetricSpec's

    names: tuple[str, ...] = ()
    open: StrictBool = False  # a TOML boolean: "yes" or 1 is refused, not coerced

    @model_validator(mode="after")
    def _valid(self) -> Regions:
        if not self.open and not self.names:
            raise ValueError("declare region names, or set open = true")
        for n in self.names:
            if not name_ok(n):
                raise ValueError(f"region name {n!r} must match {NAME.pattern}")
        if len(set(self.names)) != len(self.names):
            raise ValueError("region names must be unique")
        return self

    def admits(self, region: str) -> bool:
        """Whether ``region`` is a region of this partition."""
        if region in self.names:
            return True
        return self.open and bool(NAME.fullmatch(region))
