"""The one exception type for bad input: the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations

import contextlib
import difflib
import math
import re
from collections.abc import Iterable
from typing import Iterator


class UserError(Exception):
    """Bad input from the user: a key, a file or a value that is not what was expected.

    `where` names the key or file; `expected` says what would have been accepted.
    """

    def __init__(self, where: str, expected: str) -> None:
        # a key or value may come from a file or a request: no terminal escapes, no line
        # breaks, and no more than a screenful, in a message that is one line
        self.where = _shorten(printable(str(where), one_line=True), _WHERE_CHARS)
        self.expected = _shorten(printable(str(expected), one_line=True), _EXPECTED_CHARS)
        super().__init__(f"{self.where}: {self.expected}")


# ESC-introduced sequences (CSI, OSC, DCS..., two-character escapes) and every other C0/C1
# control character except tab and newline.
_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(\x07|\x1b\\)?|[PX^_][^\x1b]*(\x1b\\)?|[ -~]?)")
# Unicode's direction overrides and isolates can make a line read other than it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAK = re.compile(r"[\n\r\u2028\u2029\x85]")


def printable(text: str, one_line: bool = False) -> str:
    """`text` without terminal escape sequences or control characters (each shown as '?');
    with `one_line`, line breaks too (a message is one line)."""
    if not isinstance(text, str):
        text = str(text)
    text = _CONTROL.sub("?", _ESCAPE.sub("?", text))
    return _LINE_BREAK.sub(" ", text).replace("\t", " ") if one_line else text


# The longest key and explanation a message shows (characters); longer ones are cut with "...".
_WHERE_CHARS = 200
_EXPECTED_CHARS = 800


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


def expected_wording(msg: str) -> str:
    """A pydantic message in the wording every refusal here uses: "Input should be X" reads "expected X"."""
    prefix = "Input should be "
    return "expected " + msg[len(prefix):] if msg.startswith(prefix) else msg


def comma_items(where: str, text: str, expected: str) -> list[str]:
    """The items of a comma-separated list, each stripped of spaces. An empty item ("1,,2", a trailing
    comma, or an empty list) is a slip, not a value to leave out: refused, naming `where` and what an item
    is (`expected`). The one reader of every comma-separated option and --vary list."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise UserError(where, f"{expected}, separated by single commas with no empty item, got {text!r}")
    return items


def refuse_repeats(where: str, values: Iterable[object], text: str) -> None:
    """A list of values, each a row of its own, that names one value twice is a slip ("4,4,16"):
    refused, naming the value, rather than shown as two identical rows."""
    seen: set[object] = set()
    for value in values:
        if value in seen:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise UserError(where, f"each value once, got {shown} twice in {text!r}")
        seen.add(value)
