"""The key reference (docs/keys.md), generated from each key's declaration on its field.

Every workload key is declared once, in workload/schema.py: its type (which names its unit), its
bounds and plausible range, its default with the source of that default, the report figures it
feeds and how a sweep varies it (`Q(...)`, `KeyRole`). This module writes that declaration as
Markdown; `python -m trainplan.present.keydocs` rewrites docs/keys.md and `--check` says whether the
file is current (tests/test_key_declarations.py runs the check).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import annotated_types

from trainplan.quantities import format_assumption
from trainplan.workload import schema

DOCS_FILE = Path(__file__).resolve().parents[3] / "docs" / "keys.md"

# a dimension of workload/schema.input_dimensions, as a person writes its unit
UNIT_WORDS: dict[str, str] = {
    "bytes": "bytes", "byte_rate": "bytes/s", "bit_rate": "bit/s", "flop_rate": "FLOP/s", "seconds": "seconds",
    "hours": "hours", "months": "months", "watts": "W", "fraction": "fraction", "dollars": "dollars",
    "dollars_per_hour": "dollars an hour", "dollars_per_gb": "dollars a GB", "dollars_per_gb_month": "dollars a GB-month",
    "requests_per_day": "requests a day", "bytes_per_token": "bytes a token", "tokens": "tokens", "cores": "cores",
    "epochs": "epochs", "attempts": "attempts", "frames_per_second": "frames/s", "grams_per_kwh": "g CO2/kWh",
    "parameters": "parameters", "tokens_per_second": "tokens/s", "sequence_length": "tokens in a sequence",
}
SWEEP_WORDS: dict[str, str] = {
    "array": "array", "shape": "array (a shape-sized model)", "rebuild": "a workload per value",
}
HEADER = """# Workload keys

Generated from the declarations in `src/trainplan/workload/schema.py` by
`python -m trainplan.present.keydocs`; do not edit by hand (a test fails when this file and the
declarations differ). Each key is declared once, on its field: its unit (its type), its bounds (what
the key means) and plausible range (beyond it a typo or a unit slip; exclusive, in SI units), its
default with the source of that default, the report figures it feeds and how `trainplan sweep`
varies it. [workload.md](workload.md) says how keys are written; [trust.md](trust.md) why the ranges
are where they are.

- **feeds**: the JSON figures of the report a change of the key moves. The first-screen figures are
  listed (`memory.per_device_bytes`, `compute.seconds_per_step`, `compute.wall_seconds`,
  `training_cost.budget`, `pipeline.busy`, `pipeline.cores_needed`, `bill.total`,
  `storage.retained_bytes`, `energy.kg_co2`, `serving.cost_per_request`); a key that moves none of
  them lists the figures it does move. Measured on the test's workloads (video, tokens, a shape, a
  layout, LoRA), so a key that matters only in other settings may move more there.
- **unit**: "(video data only)" marks a key a workload of another `data.kind` does not use; the
  table, Markdown and HTML reports leave it out there unless it was given (JSON lists every key).
- **sweep**: `array`: the key enters the formulas as an array, so a sweep of 10^7 values is one pass;
  a workload per value: each value is planned on its own.
"""


def _unit(key: str, info: Any, dims: dict[str, str]) -> str:
    choices = schema._literal_choices(info.annotation)
    if choices:
        return ", ".join(f"`{c}`" for c in choices)
    if info.annotation is bool:
        return "true/false"
    if key in dims:
        return UNIT_WORDS.get(dims[key], dims[key])
    text = str(info.annotation)
    if "Whole" in text or "int" in text:
        return "count"
    if "str" in text:
        return "text"
    return "number"


def _bounds(info: Any, role: schema.KeyRole) -> str:
    """The field's definitional bounds and its plausible range, in SI units."""
    parts = []
    low, high = role.plausible or (None, None)
    for meta in info.metadata:
        for kind, sign in ((annotated_types.Ge, ">="), (annotated_types.Gt, ">"), (annotated_types.Le, "<="),
                           (annotated_types.Lt, "<")):
            if isinstance(meta, kind):
                value = getattr(meta, kind.__name__.lower())
                if value in (low, high):
                    continue  # the plausible range, written below
                parts.append(f"{sign} {_g(value)}")
    if low is not None and high is not None:
        parts.append(f"plausible {_g(low)} to {_g(high)}")
    elif high is not None:
        parts.append(f"plausible below {_g(high)}")
    elif low is not None:
        parts.append(f"plausible above {_g(low)}")
    return "; ".join(parts)


def _g(x: float) -> str:
    return re.sub(r"e\+0*", "e", f"{x:g}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def key_reference() -> str:
    """docs/keys.md: one table per part of the workload, a row per key."""
    dims = schema.input_dimensions()
    lines = [HEADER]
    for section, model in (*schema.SECTIONS.items(), ("sources", schema.SourceSpec)):
        lines += [f"## `{section}`" if section != "sources" else "## `[[sources]]` (each source)", "",
                  "| key | unit | default | bounds | source of the default | feeds | sweep |",
                  "|---|---|---|---|---|---|---|"]
        for name, info in model.model_fields.items():
            key = f"{section}.{name}"
            role = schema.key_role(info)
            default = info.default
            shown = "required" if info.is_required() else (
                "none" if default is None else format_assumption(key, default, dims))
            feeds = ", ".join(f"`{f}`" for f in role.feeds) or "—"
            sweep = SWEEP_WORDS[role.sweep] + (f" (`{role.argument}`)" if role.argument else "") + (
                ", read by the execution model" if role.execution else "")
            lines.append("| " + " | ".join(_cell(c) for c in (
                f"`{key}`", _unit(key, info, dims) + (f" ({' or '.join(role.kinds)} data only)" if role.kinds else ""),
                shown, _bounds(info, role), info.description or "", feeds,
                sweep if section != "sources" else "—")) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Write docs/keys.md, or with --check say whether it is current (exit 1 if not)."""
    text = key_reference()
    if "--check" in argv:
        current = DOCS_FILE.read_text(encoding="utf-8") if DOCS_FILE.exists() else ""
        if current != text:
            print(f"{DOCS_FILE}: out of date; run python -m trainplan.present.keydocs", file=sys.stderr)
            return 1
        return 0
    DOCS_FILE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
