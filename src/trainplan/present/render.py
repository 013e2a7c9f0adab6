"""Renderings of a report: a rich table, JSON and Markdown (HTML lives in html.py).

Labels, units and the order of figures come from planning/figures.py (FIGURES), the
formatting from quantities.py; nothing here knows what a figure means.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from trainplan.planning.answer import data_kind, data_unit, written_by_user
from trainplan.planning.figures import FIGURES, SECTION_ORDER
from trainplan.quantities import format_assumption, format_input
from trainplan.units import format_figure
from trainplan.workload.schema import KEY_ROLES, input_dimensions
from trainplan.workload.codecs import FRAME_KINDS

ACCOUNTS = SECTION_ORDER


def flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists are kept whole."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def format_value(key: str, value: Any) -> str:
    """A figure of the report by its dotted key, in its declared dimension."""
    spec = FIGURES.get(key)
    return format_figure(value, spec.dimension if spec else None)


def label_of(key: str) -> str:
    spec = FIGURES.get(key)
    return spec.label if spec else key.split(".", 1)[-1]


def section_rows(report: dict[str, Any], section: str, detail: bool = True) -> Iterator[tuple[str, str, str]]:
    """(label, formatted value, meaning) of each figure of a section, declared order first.

    Figures that do not exist at this point (null) are left out; so are lists (their own tables)
    and, unless `detail`, the figures declared as detail.
    """
    flat = flatten(report.get(section) or {}, f"{section}.")
    kind = report.get("pipeline", {}).get("kind", "video")
    video = kind in FRAME_KINDS
    unit = data_unit(kind)
    if "skipped" in (report.get(section) or {}):
        yield ("not computed", str(report[section]["skipped"]), "")
        return
    for key, value in flat.items():
        if isinstance(value, list) or value is None:
            continue
        spec = FIGURES.get(key)
        if spec is not None and ((not detail and spec.detail) or (spec.video and not video)):  # frames: video only
            continue
        label, meaning = label_of(key), spec.meaning if spec else ""
        if video:  # the bill's unit in the data's own words: an hour of video, or 3,600 images
            label, meaning = (t.replace("hour of data", unit) for t in (label, meaning))
        yield (label, format_value(key, value), meaning)


def verdict_text(report: dict[str, Any]) -> str:
    """The verdict and the planning decisions' sentences (trainplan.planning.decisions)."""
    from trainplan.planning.decisions import sentences

    return " ".join([report["verdict"], *sentences(report)])


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, allow_nan=False, default=str)


def to_csv(report: dict[str, Any]) -> str:
    """Every declared numeric figure of the report as a CSV row: its JSON key, label, value in SI units
    (as JSON has it: blank where JSON has null) and dimension; one row a figure, for a spreadsheet."""
    import csv
    import io

    from trainplan.planning.figures import FIGURES

    flat = flatten(report)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(("figure", "label", "value", "dimension"))
    for path, spec in FIGURES.items():
        if path in flat and spec.numeric and not isinstance(flat[path], (list, dict, str)):
            value = flat[path]
            writer.writerow((path, spec.label, "" if value is None else
                             (int(value) if isinstance(value, bool) else value), spec.dimension))
    return buf.getvalue()


def terminal_width() -> int:
    """Columns of the terminal stdout is, or 80 when it is piped or a file."""
    import shutil
    import sys

    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    return 80


def _console(width: int | None):  # noqa: ANN202 - rich.console.Console
    import io

    from rich.console import Console

    buf = io.StringIO()
    return buf, Console(file=buf, width=width or terminal_width(), force_terminal=False, color_system=None,
                        highlight=False, emoji=False)


def given(assumption: dict[str, Any]) -> bool:
    """Whether a workload key was written by the user (file or --set) or measured, not a default."""
    return assumption.get("provenance") in ("given", "measured") or written_by_user(assumption)


def provenance_word(a: dict[str, Any]) -> str:
    """The provenance column in words, the same in every format: measured, given (written in the file or
    with --set: JSON says assumed, as a figure the user wrote is still an assumption), assumed (a default)
    or derived."""
    return "measured" if a.get("provenance") == "measured" else "given" if given(a) else str(a.get("provenance", ""))


def shown_assumptions(report: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The workload keys a person reads for this workload, and a line on those left out: a key declared for
    another kind of data (a camera's fps in a token workload, KeyRole.kinds) is left out unless the user
    gave it or it was measured. JSON keeps every key."""
    assumptions = report.get("assumptions", {})
    kind = data_kind(report)
    words = {"video": "video", "images": "image", "tokens": "token"}
    shown, left = [], []
    for key, a in assumptions.items():
        role = KEY_ROLES.get(key)
        if role is not None and not role.applies_to(kind) and not given(a):
            left.append(role)
            continue
        shown.append((key, a))
    others = " or ".join(sorted({words.get(k, k) for role in left for k in role.kinds}))
    word = words.get(kind, kind)
    note = (f"Left out: {len(left)} keys of {others} data, which {'an' if word[0] in 'aeiou' else 'a'} {word} "
            "workload does not use "
            "(the JSON report lists every key)." if left else "")
    return shown, note


def applies(report: dict[str, Any], section: str) -> bool:
    """Whether a section belongs in the default view of this workload: serving only when the
    workload gives serving keys, the per-hour-of-data bill only for video, nothing skipped."""
    part = report.get(section)
    if not isinstance(part, dict) or "skipped" in part:
        return False
    if section == "serving":
        return any(k.startswith("serving.") and given(a) for k, a in report.get("assumptions", {}).items())
    if section == "bill":
        return report.get("pipeline", {}).get("kind") in FRAME_KINDS
    if section == "decisions":  # its sentences are the first screen's "Decide" line; figures with --all
        return False
    if section == "parallel":  # a layout: shown when one is given or there is more than one device
        assumptions = report.get("assumptions", {})
        return (any(k.startswith("parallel.") and given(a) for k, a in assumptions.items())
                or (assumptions.get("cluster.count", {}).get("value") or 1) > 1)
    return True


def to_table(report: dict[str, Any], width: int | None = None, detail: bool = False) -> str:
    """The first screen, then one compact table per account that applies; with `detail`, every
    figure of every section with its meaning, then the assumptions."""
    from rich.table import Table

    from trainplan.present.summary import first_screen

    width = width or terminal_width()
    buf, console = _console(width)
    console.print("\n".join(first_screen(report, min(width, 80))), soft_wrap=True)
    for section in ACCOUNTS:
        # --all shows every figure of the sections that apply, and the decisions' and layout's too; a
        # section about something the workload does not describe (serving, a video bill) stays out
        if section not in report or not (applies(report, section) or (detail and section in ("decisions", "parallel"))):
            continue
        rows = list(section_rows(report, section, detail))
        if not rows:
            continue
        table = Table(title=section.replace("_", " "), title_justify="left", show_header=False, box=None,
                      pad_edge=False)
        table.add_column("figure", overflow="fold", ratio=2 if detail else None)
        table.add_column("value", justify="right", overflow="fold")
        if detail:
            table.add_column("meaning", overflow="fold", style="dim", ratio=3)
        for label, text, meaning in rows:
            table.add_row(label, text, meaning) if detail else table.add_row(label, text)
        console.print()
        console.print(table)
    if detail and "assumptions" in report:
        console.print()
        console.print(assumptions_table(report))
    return buf.getvalue()


def assumptions_table(report: dict[str, Any]):  # noqa: ANN201 - rich.table.Table
    from rich.table import Table

    table = Table(title="assumptions", title_justify="left")
    table.add_column("key", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    table.add_column("provenance")
    table.add_column("source", overflow="fold")
    dims = input_dimensions()
    shown, note = shown_assumptions(report)
    for key, a in shown:
        table.add_row(key, format_assumption(key, a["value"], dims), provenance_word(a), a["source"])
    if note:
        table.caption = note
        table.caption_justify = "left"
    return table


#: Each section's heading in words (the markdown and HTML reports)
SECTION_TITLES = {
    "compute": "Compute: how long the run takes", "memory": "Device memory", "network": "Network: the gradient sync",
    "storage": "Storage and checkpoints", "pipeline": "Input pipeline: what the accelerator waits on",
    "bill": "Data-movement bill", "energy": "Energy and emissions", "training_cost": "Training cost",
    "serving": "Serving the trained model", "parallel": "Parallel layout", "simulation": "Queue simulation",
    "assumptions": "Inputs, and where each comes from",
}


def to_markdown(report: dict[str, Any]) -> str:
    from trainplan.planning.answer import LABELS

    lines = ["# trainplan", ""]
    answer = report.get("answer", {})
    lines += [f"- **{LABELS[k]}** {v}" for k, v in answer.items()] or [f"**{verdict_text(report)}**"]
    lines.append("")
    for section in ACCOUNTS:
        if section not in report or not applies(report, section):  # the table's rule: serving only when asked
            continue
        lines += [f"## {SECTION_TITLES.get(section, section.replace('_', ' ').capitalize())}", "",
                  "| figure | value | meaning |", "|---|---:|---|"]
        lines += [f"| {label} | {text} | {meaning} |" for label, text, meaning in section_rows(report, section)]
        lines.append("")
    lines += [f"## {SECTION_TITLES['assumptions']}", "", "| key | value | provenance | source |", "|---|---:|---|---|"]
    dims = input_dimensions()
    shown, note = shown_assumptions(report)
    for key, a in shown:
        value = format_assumption(key, a["value"], dims).replace("|", "\\|")
        lines.append(f"| {key} | {value} | {provenance_word(a)} | {a['source'].replace('|', '/')} |")
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"
