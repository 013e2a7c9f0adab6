"""The one JSON-safe cleaner and the one quantity formatter of every figure a person reads.

`json_safe` turns numpy scalars into Python numbers and nan/inf into None (JSON has neither).
`format_figure(value, dimension)` writes a figure in its declared dimension
(planning/figures.py): bytes with decimal prefixes, durations in s/min/h/d, dollars with
a sign and sensible precision, shares as percentages, rates with their units. It never
writes `nan`, `inf`, `e+` or `None`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trainplan.units import TIME_UNITS

_SI = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
# counts: "B" for billions, as parameter and token counts are written
_COUNT = [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")]
# what a figure that does not exist (nan, None) and an unbounded one (inf) read as
NOT_APPLICABLE = "n/a"
UNBOUNDED = "no limit"
# decimals beyond which a tiny value is written as "< 0.000…1"
MAX_DECIMALS = 9
# at and above this (after any prefix) a number is written as a power of ten: 1.23×10^18
MAX_PLAIN = 1e15


def _scalar(x: Any) -> Any:
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, np.generic):
        x = x.item()
    return x


def json_safe(obj: Any) -> Any:
    """The one JSON-safe copy (report, sweep, web page): numpy scalars become Python ones, arrays and
    tuples lists, keys text, inf/nan None (JSON has no NaN or Infinity); anything else JSON cannot hold
    (a path, an enum) its text."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray) and obj.ndim > 0:
        return json_safe(obj.tolist())
    obj = _scalar(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def significant(x: float, digits: int = 3) -> str:
    """`digits` significant digits in fixed notation with thousands commas; never an exponent."""
    if x == 0:
        return "0"
    if not math.isfinite(x):  # a finite figure scaled past the float range (1e306 kWh in Wh)
        return UNBOUNDED if x > 0 else f"-{UNBOUNDED}"
    magnitude = math.floor(math.log10(abs(x)))
    if abs(x) >= MAX_PLAIN:  # absurd but finite: a power of ten rather than 300 digits
        return f"{significant(x / 10.0 ** magnitude, digits)}×10^{magnitude}"
    decimals = max(0, digits - 1 - magnitude)
    if decimals > MAX_DECIMALS:
        return f"< {10.0 ** -MAX_DECIMALS:.{MAX_DECIMALS}f}" if x > 0 else f"> -{10.0 ** -MAX_DECIMALS:.{MAX_DECIMALS}f}"
    text = f"{x:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _prefixed(x: float, unit: str, table: list[tuple[float, str]] = _SI, digits: int = 3) -> str:
    for size, prefix in table:
        if abs(x) >= size:
            return f"{significant(x / size, digits)} {prefix}{unit}".rstrip()
    return f"{significant(x, digits)} {unit}".rstrip()


def _seconds(x: float) -> str:
    a = abs(x)
    for unit in ("d", "h", "min"):
        if a >= TIME_UNITS[unit]:
            return f"{significant(x / TIME_UNITS[unit])} {unit}"
    if a >= 1 or a == 0:
        return f"{significant(x)} s"
    if a >= 1e-3:
        return f"{significant(x * 1e3)} ms"
    return f"{significant(x * 1e6)} µs"


def _dollars(x: float) -> str:
    sign = "-" if x < 0 else ""
    a = abs(x)
    if a >= 1000:
        return f"{sign}${a:,.0f}" if a < MAX_PLAIN else f"{sign}${significant(a)}"
    if a >= 1 or a == 0:
        return f"{sign}${a:,.2f}"
    return f"{sign}${significant(a)}"


# dimension -> SI unit written after a decimal prefix ("9.48 GB", "396 TFLOP/s", "10.8 GB/h")
_SI_UNIT = {"bytes": "B", "flops": "FLOP", "flop_rate": "FLOP/s", "byte_rate": "B/s", "watts": "W", "joules": "J",
            "bytes_per_token": "B/token", "bytes_per_hour": "B/h", "bit_rate": "bit/s", "frequency": "Hz"}
# dimension -> what is counted, written after a count ("2.77 k frames/s")
_COUNTED_UNIT = {"frames_per_second": "frames/s", "tokens_per_second": "tokens/s",
                 "requests_per_second": "requests/s", "frames_per_hour": "frames/h", "tokens_per_hour": "tokens/h",
                 "parameters": "parameters", "epochs_per_month": "epochs a month", "requests_per_day": "requests a day",
                 "tokens": "tokens", "cores": "cores", "epochs": "epochs", "attempts": "attempts",
                 "per_month": "epochs a month", "months": "months"}
# dimension -> unit after a plain number with three significant digits
_PLAIN_UNIT = {"grams_per_kwh": "g/kWh"}


def _format_number(x: float, dimension: str) -> str:
    if dimension in _SI_UNIT:
        unit = _SI_UNIT[dimension]
        base, _, per = unit.partition("/") if dimension in ("bytes_per_token", "bytes_per_hour") else (unit, "", "")
        return _prefixed(x, base) + (f"/{per}" if per else "")
    if dimension in _COUNTED_UNIT:
        unit = _COUNTED_UNIT[dimension]
        if abs(x) >= MAX_PLAIN and len(unit) > 8:  # a long name: the number in its shortest form
            return f"{significant(x)} {unit}"
        return f"{_prefixed(x, '', _COUNT)} {unit}".replace("  ", " ")
    if dimension in _PLAIN_UNIT:
        return f"{significant(x)} {_PLAIN_UNIT[dimension]}"
    if dimension == "seconds":
        return _seconds(x)
    if dimension in ("hours", "days"):
        unit = "h" if dimension == "hours" else "days"
        return f"{significant(x)} {unit}" if abs(x) < 1000 or abs(x) >= MAX_PLAIN else f"{x:,.0f} {unit}"
    if dimension == "dollars":
        return _dollars(x)
    if dimension == "dollars_per_hour":
        return f"{_dollars(x)}/h"
    if dimension == "dollars_per_gb":
        return f"{_dollars(x)}/GB"
    if dimension == "dollars_per_gb_month":
        return f"{_dollars(x)}/GB-month"
    if dimension == "speedup":
        return f"{significant(x)}x" if abs(x) < 1e4 else f"{_prefixed(x, '', _COUNT)}x".replace(" x", "x")
    if dimension == "fraction":
        return f"{significant(x * 100)} %"
    if dimension in ("count", "pixels_per_token"):
        return _prefixed(x, "", _COUNT) if abs(x) >= 1e4 else significant(x, 3 if abs(x) < 1000 else 4)
    if dimension == "kwh":
        return _prefixed(x * 1e3, "Wh")
    if dimension == "kg":
        return f"{significant(x / 1000)} t" if abs(x) >= 1000 else f"{significant(x)} kg"
    return significant(x, 4)  # ratio and anything undeclared


def format_figure(value: Any, dimension: str | None) -> str:
    """A figure as a person reads it, by its dimension (see planning/figures.py)."""
    value = _scalar(value)
    if value is None:
        return NOT_APPLICABLE
    if isinstance(value, bool) or dimension == "flag":
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        x = float(value)
        if math.isnan(x):
            return NOT_APPLICABLE
        if math.isinf(x):
            return UNBOUNDED if x > 0 else f"-{UNBOUNDED}"
        return _format_number(x, dimension or "ratio")
    if isinstance(value, (list, tuple)):
        return f"{len(value)} rows"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_figure(v, None)}" for k, v in value.items())
    return str(value)


def format_input(value: Any) -> str:
    """A workload input as a person writes it: no Python True/None, no float noise."""
    value = _scalar(value)
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return UNBOUNDED if value > 0 else NOT_APPLICABLE
        if value.is_integer() and abs(value) >= 1e4:
            return _prefixed(value, "", _COUNT)
        return significant(value, 6)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 1e4 else str(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={format_input(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(format_input(v) for v in value) or "none"
    return str(value)


def format_assumption(key: str, value: Any, dimensions: dict[str, str]) -> str:
    """A workload input with its unit ("cluster.link" 1.5e9 -> "1.5 GB/s"), else as format_input writes it;
    `dimensions`: each key's (workload/schema.input_dimensions)."""
    dimension = dimensions.get(key)
    plain = _scalar(value)
    if dimension and isinstance(plain, (int, float)) and not isinstance(plain, bool):
        return format_figure(plain, dimension)
    return format_input(value)


def key_value_lines(values: dict[str, Any], dimensions: dict[str, str], labels: dict[str, str] | None = None) -> str:
    """A small command's figures as `label  value` lines: each number through format_figure by the
    dimension named for its key (a key ending in `_flops` is FLOPs, else a plain count); text as is. A
    key's label is `labels[key]`, else the key in words (underscores as spaces); JSON keeps the keys."""
    labels = labels or {}
    shown = {labels.get(k, k.replace("_", " ")): k for k in values}
    width = max((len(label) for label in shown), default=0)
    lines = []
    for label, key in shown.items():
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            text = "n/a" if value is None else ("yes" if value is True else "no" if value is False else str(value))
        else:
            dimension = dimensions.get(key, "flops" if key.endswith("_flops") else "count")
            text = format_figure(value, dimension)
        lines.append(f"{label:<{width}}  {text}")
    return "\n".join(lines)
