"""Quantities with units, as a person writes them: "8 Mbit/s", "32 GB", "200 TFLOPS".

Everything is converted to SI base units on the way in (bytes, seconds, bits/s,
FLOP/s, watts, dollars) and back to a readable prefix on the way out.

Decimal prefixes mean powers of 1000 (GB = 1e9 bytes); binary ones say so
(GiB = 2**30). The table is small and explicit on purpose: pint would parse
these too, but it knows no FLOP, token or dollar, and its registry costs about
half a second at every start of the CLI, which a sweep of a million points and
a fuzz target both feel.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from trainplan.errors import UserError

Dimension = Literal[
    "count",  # plain number, k/M/B/T suffixes allowed (tokens, parameters)
    "bytes",
    "byte_rate",  # bytes per second
    "bit_rate",  # bits per second
    "flop_rate",  # FLOP per second
    "flops",  # FLOP
    "time",  # seconds
    "power",  # watts
    "fraction",  # 0.25 or "25 %"
    "frequency",  # per second (fps)
    "dollars",
    "carbon",  # grams CO2-equivalent per kWh
]

DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# Suffixes people use for counts of parameters and tokens ("7B", "1.5T").
COUNT_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}

# The one declaration of an hour in seconds; accounts import it from here.
SECONDS_PER_HOUR = 3600.0

TIME_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "us": 1e-6,
    "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}

_NUMBER = r"[-+]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)"
_GROUPED = re.compile(r"^([-+]?\d{1,3}(?:,\d{3})+)(?![\d,])")
_QUANTITY = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?P<unit>[^\d\s].*?)?\s*$", re.IGNORECASE)

EXPECTED = {
    "count": "a number such as 1e9, 7B or 93M",
    "bytes": "a size such as 32 GB, 80 GiB or 1.5e9",
    "byte_rate": "a rate such as 1.5 GB/s or 25 GB/s",
    "bit_rate": "a bit rate such as 8 Mbit/s",
    "flop_rate": "a rate such as 989.5 TFLOPS",
    "flops": "an amount such as 1e21 FLOP or 6e23",
    "time": "a duration such as 1 h, 30 min or 14 s",
    "power": "a power such as 700 W or 1.2 kW",
    "fraction": "a fraction such as 0.25 or 25 %",
    "frequency": "a rate such as 30 or 30 fps",
    "dollars": "an amount such as 2.5 or $2.5",
}


def _prefixed(unit: str, bases: tuple[str, ...]) -> float | None:
    """Multiplier of `unit` if it is an SI or binary prefix followed by one of `bases`."""
    for base in bases:
        if not unit.endswith(base):
            continue
        prefix = unit[: len(unit) - len(base)]
        if prefix in BINARY:
            return BINARY[prefix]
        if prefix in DECIMAL:
            return DECIMAL[prefix]
    return None


# Dimensions whose units are a plain table, added by the module that owns them.
_TABLES: dict[str, dict[str, float]] = {}


def register_dimension(dimension: str, table: dict[str, float], expected: str) -> None:
    """Add a dimension whose units are a fixed table of names to multipliers."""
    _TABLES[dimension] = table
    EXPECTED[dimension] = expected
    SYMBOL.setdefault(dimension, next(iter(table)))


def _unit_factor(unit: str, dimension: Dimension) -> float | None:
    """SI multiplier for `unit` in `dimension`, or None if the unit does not belong there."""
    u = unit.strip()
    if dimension in _TABLES:
        return _TABLES[dimension].get(u)
    if dimension == "count":
        return COUNT_SUFFIX.get(u.rstrip(), None) if u.lower() not in ("tokens", "params", "frames") else 1.0
    if dimension == "bytes":
        return _prefixed(u, ("B", "byte", "bytes"))
    if dimension == "byte_rate":
        for per in ("/s", "ps"):
            if u.endswith(per):
                return _prefixed(u[: -len(per)], ("B", "byte", "bytes"))
        return None
    if dimension == "bit_rate":
        for per in ("/s", "ps"):
            if u.endswith(per):
                return _prefixed(u[: -len(per)], ("bit", "bits", "b"))
        return None
    if dimension == "flop_rate":
        for base in ("FLOPS", "FLOP/s", "flops", "flop/s", "FLOPs/s"):
            f = _prefixed(u, (base,))
            if f is not None:
                return f
        return None
    if dimension == "flops":
        return _prefixed(u, ("FLOP", "FLOPs", "flop", "flops"))
    if dimension == "time":
        return TIME_UNITS.get(u)
    if dimension == "power":
        return _prefixed(u, ("W",))
    if dimension == "fraction":
        return 0.01 if u == "%" else None
    if dimension == "frequency":
        if u in ("1/s", "per s"):
            return 1.0
        # "30 fps", "1.2 kHz", and "1.5 k/s" as format_quantity writes it
        for base in ("fps", "/s", "Hz"):
            if u.endswith(base) and u[: len(u) - len(base)] in DECIMAL:
                return DECIMAL[u[: len(u) - len(base)]]
        return None
    if dimension == "dollars":
        return 1.0 if u in ("$", "USD", "usd", "dollars") else None
    return None


def parse(value: object, dimension: Dimension, key: str = "value") -> float:
    """Turn a number or a string with a unit into a float in SI base units.

    Raises UserError naming `key` and what was expected.
    """
    if isinstance(value, bool):
        raise UserError(key, f"expected {EXPECTED[dimension]}, got {value!r}")
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if dimension == "dollars" and text.startswith("$"):
            text = text[1:].strip()
        if dimension == "dollars":  # "$1,234.50" as format_quantity writes it: strict thousands groups only
            text = _GROUPED.sub(lambda m: m.group(1).replace(",", ""), text)
        m = _QUANTITY.match(text)
        if not m:
            raise UserError(key, f"expected {EXPECTED[dimension]}, got {value!r}")
        unit = (m.group("unit") or "").strip()
        factor = 1.0 if unit == "" else _unit_factor(unit, dimension)
        if factor is None:
            raise UserError(key, f"expected {EXPECTED[dimension]}, got unit {unit!r} in {value!r}")
        result = float(m.group("num").replace("_", "")) * factor
    else:
        raise UserError(key, f"expected {EXPECTED[dimension]}, got {type(value).__name__}")
    if not math.isfinite(result):
        raise UserError(key, f"expected a finite number ({EXPECTED[dimension]}), got {value!r}")
    return result


SYMBOL = {
    "bytes": "B",
    "byte_rate": "B/s",
    "bit_rate": "bit/s",
    "flop_rate": "FLOP/s",
    "flops": "FLOP",
    "time": "s",
    "power": "W",
    "frequency": "/s",
    "count": "",
    "fraction": "",
    "dollars": "$",
}

_PREFIXES = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def format_quantity(value: float, dimension: Dimension, digits: int = 3) -> str:
    """A readable string that `parse` reads back to the same value within `digits` significant digits."""
    if dimension == "fraction":
        if not math.isfinite(value * 100):  # beyond 1.8e306 the percentage overflows: write it plain
            return f"{value:.{digits}g}"
        return f"{value * 100:.{max(digits - 2, 1)}f} %"
    if dimension == "dollars":
        return f"${value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"${value:.{digits}g}"
    if dimension == "time":
        for size, name in ((86400.0, "d"), (3600.0, "h"), (60.0, "min")):
            if abs(value) >= size:
                return f"{value / size:.{digits}g} {name}"
        return f"{value:.{digits}g} s"
    symbol = SYMBOL[dimension]
    for size, prefix in _PREFIXES:
        if abs(value) >= size:
            if dimension == "count":
                prefix = {"G": "B"}.get(prefix, prefix)
            return f"{value / size:.{digits}g} {prefix}{symbol}".rstrip()
    return f"{value:.{digits}g} {symbol}".rstrip()
