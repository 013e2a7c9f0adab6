"""The one exception type for bad input: the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations

import contextlib
import math
from typing import Iterator


class UserError(Exception):
    """Bad input from the user: a key, a file or a value that is not what was expected.

    `where` names the key or file; `expected` says what would have been accepted.
    """

    def __init__(self, where: str, expected: str) -> None:
        # a key or value may come from a file or a request: no terminal escapes, no line
        # breaks, and no more than a screenful, in a message that is one line
        from trainplan.workload.limits import printable

        self.where = _shorten(printable(str(where), one_line=True), _WHERE_CHARS)
        self.expected = _shorten(printable(str(expected), one_line=True), _EXPECTED_CHARS)
        super().__init__(f"{self.where}: {self.expected}")


# The longest key and explanation a message shows (characters); longer ones are cut with "...".
_WHERE_CHARS = 200
_EXPECTED_CHARS = 800


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


@contextlib.contextmanager
def named_as(names: dict[str, str]) -> Iterator[None]:
    """Within the block, a UserError naming an account's argument ("budget", "sources.web.weight")
    is re-raised naming what the user typed ("--budget", "--source web.weight"): the longest
    matching prefix of `names` is replaced."""
    try:
        yield
    except UserError as err:
        for prefix in sorted(names, key=len, reverse=True):
            if err.where == prefix or (prefix.endswith(".") and err.where.startswith(prefix)):
                raise UserError(names[prefix] + err.where[len(prefix):], err.expected) from None
        raise
