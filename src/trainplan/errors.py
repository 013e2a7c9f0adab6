"""The one exception type for bad input: the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a key, a file or a value that is not what was expected.

    `where` names the key or file; `expected` says what would have been accepted.
    """

    def __init__(self, where: str, expected: str) -> None:
        self.where = where
        self.expected = expected
        super().__init__(f"{where}: {expected}")
