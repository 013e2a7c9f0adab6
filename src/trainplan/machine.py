"""The machine's memory, for the limits that keep a grid from exhausting it (issue 29).

`available_memory_bytes()` is the memory a new allocation can use now: MemAvailable from
/proc/meminfo on Linux, else the physical memory (os.sysconf), else FALLBACK_MEMORY_BYTES.
`TRAINPLAN_MEMORY_BYTES` overrides it (a whole number of bytes), so a limit derived from it can
be raised on a machine that has more to give or lowered to test the refusal. `limit(name,
default)` reads one such override of a count (`TRAINPLAN_MAX_...`). No numpy: the CLI starts light.
"""

from __future__ import annotations

import os
from typing import Final

from trainplan.errors import UserError

MEMORY_ENV: Final = "TRAINPLAN_MEMORY_BYTES"
FALLBACK_MEMORY_BYTES: Final = 4 * 2**30  # where the system says nothing: a small machine's memory, assumed
# The share of the available memory one command's arrays may take: the rest is for the interpreter,
# the libraries, the output being formatted and everything else running.
MEMORY_SHARE: Final = 0.5


def _whole(name: str, text: str) -> int:
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        raise UserError(name, f"a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise UserError(name, f"a whole number >= 1, got {text!r}")
    return value


def available_memory_bytes() -> int:
    """Bytes of memory available to this process now (see the module's notes)."""
    text = os.environ.get(MEMORY_ENV)
    if text is not None:
        return _whole(MEMORY_ENV, text)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MEMORY_BYTES


def budget_bytes() -> int:
    """What one command's arrays may take: MEMORY_SHARE of the available memory."""
    return int(MEMORY_SHARE * available_memory_bytes())


def limit(name: str, default: int) -> int:
    """A count limit: the environment variable `name` when set (a whole number >= 1), else `default`."""
    text = os.environ.get(name)
    return default if text is None else _whole(name, text)
