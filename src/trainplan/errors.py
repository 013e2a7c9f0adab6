"""The one exception type for bad input: the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable


class UserError(Exception):
    """Bad input from the user: a key, a file or a value that is not what was expected.

    `where` names the key or file; `expected` says what would have been accepted.
    """

    def __init__(self, where: str, expected: str) -> None:
        self.where = where
        self.expected = expected
        super().__init__(f"{where}: {expected}")


def nearest_name(name: str, choices: Iterable[str]) -> str | None:
    """The choice a mistyped `name` most likely meant. Case, spaces, - and _ are ignored; a name that
    begins a choice wins over a look-alike ("H100" means h100-sxm, not h200)."""
    def norm(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch not in " -_")

    options = list(choices)
    typed = norm(name)
    if not typed:
        return None
    starting = [c for c in options if norm(c).startswith(typed)]
    if starting:
        return min(starting, key=len)
    close = difflib.get_close_matches(typed, [norm(c) for c in options], n=1, cutoff=0.6)
    return next(c for c in options if norm(c) == close[0]) if close else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the nearest choice, or '' when none is near."""
    near = nearest_name(name, choices)
    return f" (did you mean {near!r}?)" if near is not None else ""


# Checks for the pure modules' own arguments (called from Python, not through the workload
# schema, which validates its keys itself).


def require_positive(key: str, value: float) -> None:
    """A finite number above zero, else UserError naming `key`."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise UserError(key, f"expected a positive number, got {value!r}")


def require_non_negative(key: str, value: float) -> None:
    """A finite number of zero or more, else UserError naming `key`."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise UserError(key, f"expected zero or a positive number, got {value!r}")


def require_fraction(key: str, value: float) -> None:
    """A number in (0, 1], else UserError naming `key`."""
    if not (isinstance(value, (int, float)) and 0 < value <= 1):
        raise UserError(key, f"expected a fraction in (0, 1], got {value!r}")
