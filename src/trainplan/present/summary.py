"""The first screen of `trainplan plan`: the answers a person came for, in at most 40 lines of 80 columns.

Does it fit (per device, against the card); how long and how many accelerator-hours; what it
costs, attempts included; what the accelerator waits on and the cheapest fix; and the one or
two assumed figures that most deserve a measurement. The lines are the report's `answer`
(planning/answer.py), the same in every format.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from trainplan.planning.answer import LABELS
from trainplan.units import format_figure as fmt

WIDTH = 80
MAX_LINES = 40


#: a number and the unit or noun after it ("40 %", "23.1 ms", "3 attempts") stay on one line
_NUMBER_AND_UNIT = re.compile(r"(\d) (%|[A-Za-z$/]+)")
_KEEP = "\u00a0"  # textwrap does not break at a no-break space; it is a plain space again once wrapped


def _wrap(label: str, text: str, width: int) -> list[str]:
    lead = f"{label:<10}"
    kept = _NUMBER_AND_UNIT.sub(rf"\1{_KEEP}\2", text)
    lines = textwrap.wrap(kept, width=width, initial_indent=lead, subsequent_indent=" " * len(lead)) or [lead]
    return [line.replace(_KEEP, " ") for line in lines]


def first_screen(report: dict[str, Any], width: int = WIDTH) -> list[str]:
    """The answers, at most MAX_LINES lines of at most `width` columns."""
    w = report["workload"]
    head = (f"trainplan: {fmt(w['params'], 'count')} parameters, {fmt(w['tokens'], 'count')} tokens, "
            f"{w['accelerator_name']}")
    lines = textwrap.wrap(head, width=width)
    lines.append("")
    for key, text in report.get("answer", {}).items():
        lines += _wrap(LABELS[key], text, width)
    lines.append("")
    lines.append("Accounts below; --all for every figure and the assumptions.")
    return lines[:MAX_LINES]
