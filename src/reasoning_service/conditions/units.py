"""Units: one pint registry, spellings seen in notes mapped to it, conversion to an atom's unit."""

from __future__ import annotations

from functools import cache

import pint

__all__ = ["UnitError", "check_unit", "convert", "registry"]

_COUNTS = ("event", "visit", "session", "treatment", "night")


class UnitError(ValueError):
    """A unit that pint cannot read, or two units that do not convert."""


@cache
def registry() -> pint.UnitRegistry:
    """The process-wide registry, with counted things (`event`, `visit`) as dimensionless."""
    units = pint.UnitRegistry(autoconvert_offset_to_baseunit=True)
    for name in _COUNTS:
        units.define(f"{name} = count")
    return units


@cache
def check_unit(unit: str) -> pint.Unit:
    """Parse `unit`, or raise UnitError naming it."""
    try:
        return registry().parse_units(unit)
    except (pint.errors.PintError, AttributeError, TypeError, ValueError, SyntaxError) as exc:
        raise UnitError(f"unit {unit!r} is not a known unit") from exc


def convert(value: float, from_unit: str, to_unit: str) -> float | None:
    """`value` in `from_unit` expressed in `to_unit`, or None when they do not convert."""
    try:
        source, target = check_unit(from_unit), check_unit(to_unit)
        return float(registry().Quantity(value, source).to(target).magnitude)
    except (UnitError, pint.errors.DimensionalityError):
        return None
