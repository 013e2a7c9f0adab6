"""The one JSON-safe cleaner, and the report's inputs written with their units.

`json_safe` turns numpy scalars into Python numbers and nan/inf into None (JSON has neither).
`format_figure(value, dimension)`, the writer of every figure, lives in units.py beside the
parsers (bytes with decimal prefixes, durations in s/min/h/d, dollars, shares as
percentages, rates with their units); this module writes a workload's inputs with it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trainplan.units import NOT_APPLICABLE, UNBOUNDED, format_figure, significant

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
            return format_figure(value, "count")
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
