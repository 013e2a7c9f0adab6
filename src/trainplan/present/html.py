"""`trainplan plan --format html`: one self-contained page, the accounts as tables and plots.

No network is needed to view it: the style is inline, the plots are matplotlib SVG
(Agg backend, text drawn as paths) written into the page, and there is no script.
Plots: busy fraction against CPU cores with the workload's point marked (docs/pipeline-and-bill.md),
memory per device stacked by part against the card's size (§4), the bill split (§9),
and the queue's timeline when the plan was simulated (§8).
"""

from __future__ import annotations

import html as html_mod
import io
import math
import re
from typing import Any

import numpy as np

from trainplan.quantities import format_assumption

from trainplan.units import format_figure
from trainplan.workload.schema import input_dimensions
from trainplan.planning.answer import data_unit
from trainplan.present.render import (
    ACCOUNTS, SECTION_TITLES, applies, flatten, format_value, given, label_of, provenance_word, section_rows,
    shown_assumptions,
)
from trainplan.workload.codecs import FRAME_KINDS

# Points of the busy-against-cores curve.
CURVE_POINTS = 400
# Frames simulated to draw a timeline when the plan's simulation kept none, and intervals kept.
TIMELINE_FRAMES = 4000
TIMELINE_INTERVALS = 600

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em;line-height:1.4}
h3{font-size:1em;margin:1em 0 .2em}h1{font-size:1.5em;overflow-wrap:break-word}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
.answer{display:grid;grid-template-columns:max-content 1fr;gap:.25em 1em;background:#f4f6f8;
border-left:4px solid #3b6ea5;padding:.7em 1em;margin:0 0 1em}
.answer dt{font-weight:650}.answer dd{margin:0;overflow-wrap:break-word}
.verdict{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em;width:100%}table.fixed{table-layout:fixed}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word}
td.v{text-align:right;font-variant-numeric:tabular-nums}td.n{white-space:nowrap}th{background:#f4f6f8}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plot{flex:1 1 420px;min-width:0;max-width:560px}.plot svg{width:100%;height:auto}
.muted{color:#666;font-size:.85em}
@media (max-width:640px){
 body{margin:1em auto;padding:0 .6em}
 .answer{grid-template-columns:1fr}.answer dd{margin-bottom:.4em}
 table,thead,tbody,tr,td,th{display:block;width:100%}colgroup{display:none}
 tr.head{display:none}
 tr{border:1px solid #ddd;margin:0 0 .5em}
 td,th{border:none;border-bottom:1px solid #eee}
 td.v{text-align:left;white-space:normal}
 td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:#555}
}
"""


def _esc(x: Any) -> str:
    return html_mod.escape(str(x), quote=True)


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)  # drop the creator's RDF block


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "path"  # text as paths: no font needed to view the page
    return plt


def busy_plot(report: dict[str, Any], workload: Any) -> str | None:
    """Busy fraction against CPU cores per accelerator, the workload's point marked."""
    from trainplan.planning.evaluate import evaluate
    from trainplan.planning.inputs import PlanInputs

    p = report["pipeline"]
    if workload is None or p.get("kind") not in FRAME_KINDS:
        return None
    cores_now = float(p["cores"])
    needed = p.get("cores_needed") or 0.0
    top = max(4.0, 1.5 * max(cores_now, needed if math.isfinite(needed) else 0.0))
    cores = np.linspace(0.0, top, CURVE_POINTS)
    busy = np.broadcast_to(evaluate(PlanInputs.of(workload, {"cluster.cores": cores}), ["pipeline.busy"])
                           ["pipeline.busy"], cores.shape)  # the plan's own evaluation over the cores
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(cores, busy, color="#3b6ea5", label="busy fraction")
    ax.plot([cores_now], [p["busy"]], "o", color="#c0392b",
            label=f"this workload: {cores_now:g} cores, {p['busy'] * 100:.1f} %")
    if needed and math.isfinite(needed) and needed <= top:
        ax.axvline(needed, color="#888", ls="--", lw=1, label=f"cores needed {needed:.1f}")
    ax.set_xlabel("CPU cores per accelerator")
    ax.set_ylabel("accelerator busy fraction")
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    # the legend under the axes, as the memory chart's: inside it sat over the cores-needed line
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    ax.set_title("Busy against cores", fontsize=10)
    return _svg(fig)


#: The parts of a device's memory, by the memory section's key, as the report and the page draw them.
MEMORY_PARTS = (("weights_bytes", "weights"), ("grads_bytes", "gradients"), ("optimizer_bytes", "optimizer state"),
                ("activation_bytes", "activations"))


def memory_parts(report: dict[str, Any]) -> dict[str, Any]:
    """Per-device memory by part, the rest (runtime buffers and headroom), and the card: the memory
    the Fits? line reads (the fullest device under the layout). Texts via format_figure."""
    m = report["memory"]  # the one execution model: the fullest device (pipeline stage), as Fits? reads it
    per, card = float(m["per_device_bytes"]), float(m["device_memory"])
    parts = [{"key": key, "label": label, "bytes": float(m[key]), "text": format_figure(float(m[key]), "bytes")}
             for key, label in MEMORY_PARTS if m.get(key) is not None]
    rest = per - sum(part["bytes"] for part in parts)
    if rest > 0:
        parts.append({"key": "rest", "label": "runtime buffers and headroom", "bytes": rest,
                      "text": format_figure(rest, "bytes")})
    return {"parts": parts, "per_device": {"bytes": per, "text": format_figure(per, "bytes")},
            "card": {"bytes": card, "text": format_figure(card, "bytes")}, "fits": bool(m["fits"])}


def memory_plot(report: dict[str, Any]) -> str:
    """Memory per device stacked by part, against the card's size; the legend beside the axes,
    never over the card's line."""
    chart = memory_parts(report)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bottom = 0.0
    colors = plt.cm.tab10.colors
    for i, part in enumerate(chart["parts"]):
        v = part["bytes"] / 1e9
        ax.bar([0], [v], bottom=bottom, color=colors[i], label=f"{part['label']} {part['text']}", width=0.6)
        bottom += v
    card = chart["card"]["bytes"] / 1e9
    ax.axhline(card, color="#c0392b", lw=1.5, ls="--", label=f"device memory {chart['card']['text']}")
    ax.set_xticks([0], ["per device"])
    ax.set_xlim(-0.9, 0.9)
    ax.set_ylim(0, max(card, bottom) * 1.08)
    ax.set_ylabel("GB (10^9 bytes)")
    # the legend under the axes, never over the card's line, and no wider than the plot (a phone)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    verdict = "fits" if chart["fits"] else "does not fit"
    ax.set_title(f"Memory per device: {chart['per_device']['text']} of {chart['card']['text']}, {verdict}",
                 fontsize=10)
    return _svg(fig)


def bill_plot(report: dict[str, Any]) -> str:
    """The bill split: dollars per hour of data moved once, by term."""
    b = report["bill"]
    terms = [("storage", "storage"), ("transfer", "transfer"), ("cores", "CPU cores"),
             ("idle_accelerator", "idle accelerator")]
    values = [float(b.get(k) or 0.0) for k, _ in terms]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.barh([label for _, label in terms], values, color=["#7f8c8d", "#95a5a6", "#3b6ea5", "#c0392b"])
    for y, v in enumerate(values):
        ax.text(v, y, f" {format_figure(v, 'dollars')}", va="center", fontsize=8)  # $0.000339, not $0.000
    unit = data_unit(report.get("pipeline", {}).get("kind", "video"))  # an hour of video, or 3,600 images
    ax.set_xlabel(f"dollars per {unit} (one epoch)")
    ax.set_xlim(0, max(values + [1e-9]) * 1.3)
    total = b.get("total")
    ax.set_title(f"Bill split: {format_figure(total, 'dollars')} per {unit}" if total is not None else "Bill split",
                 fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return _svg(fig)


def _timeline(report: dict[str, Any], workload: Any) -> list[dict[str, Any]] | None:
    sim = report.get("simulation")
    if not isinstance(sim, dict):
        return None
    if sim.get("timeline"):
        return list(sim["timeline"])
    if workload is None or sim.get("busy") is None:
        return None
    # the plan's check keeps no timeline: simulate a short run of the same spec to draw one
    from trainplan.planning.simulation import queue_spec_from_workload
    from trainplan.simulate import queue

    try:
        spec, _account, _notes = queue_spec_from_workload(
            workload, TIMELINE_FRAMES, int(sim.get("seed") or 0), None, sim.get("buffer_frames"))
        result = queue.simulate(spec, timeline_limit=TIMELINE_INTERVALS)
    except Exception:  # noqa: BLE001 - a missing drawing must not lose the page
        return None
    return result.to_dict()["timeline"]


def timeline_plot(intervals: list[dict[str, Any]]) -> str | None:
    """Who was busy (or blocked) when, one lane per stage."""
    if not intervals:
        return None
    lanes = list(dict.fromkeys(i["who"] for i in intervals))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(lanes) + 1.4))
    colors = {"busy": "#3b6ea5", "blocked": "#e67e22"}
    for state in ("busy", "blocked"):
        for y, lane in enumerate(lanes):
            bars = [(i["start"], i["end"] - i["start"]) for i in intervals if i["who"] == lane and i["state"] == state]
            if bars:
                ax.broken_barh(bars, (y - 0.35, 0.7), color=colors[state],
                               label=state if y == next(k for k, ln in enumerate(lanes) if any(
                                   j["who"] == ln and j["state"] == state for j in intervals)) else None)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("Queue timeline: who was busy when", fontsize=10)
    return _svg(fig)


#: Each account's heading in words.
#: Columns of the tables inside a section (lists of rows), in words with their unit's dimension;
#: a column not named here is left out (wall_days repeats wall_seconds).
LIST_COLUMNS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "training_cost.accelerators": (
        ("name", "accelerator", "text"), ("key", "catalogue key", "text"), ("devices", "devices", "count"),
        ("accelerator_hours", "accelerator-hours", "hours"), ("wall_seconds", "wall time", "seconds"),
        ("dollars_per_hour", "price per accelerator-hour", "dollars_per_hour"),
        ("dollars_per_attempt", "cost of one run", "dollars"), ("budget", "cost, all attempts", "dollars"),
        ("price_source", "price source", "text")),
    "pipeline.cache.by_cached_fraction": (
        ("cached_fraction", "share of the data cached", "fraction"), ("read_rate", "read rate", "byte_rate"),
        ("busy", "accelerator busy", "fraction"), ("bottleneck", "binding stage", "text")),
}
#: Headings of those tables, in words.
LIST_TITLES = {"training_cost.accelerators": "The same run on each catalogue accelerator (compute-bound)",
               "pipeline.cache.by_cached_fraction": "Reads against the share of the data cached"}
#: Tables of a section that are planning internals, not for a design document.
HIDDEN_LISTS = frozenset({"decisions.checks"})


#: A value cell longer than this is text, written left-aligned.
SHORT_VALUE = 24
#: A list table's short figure ("4.29 d", "$1.30/h") is kept on one line (it never wraps as "4.29 / d").
SHORT_NUMBER = 14


def _table(rows: list[tuple[str, ...]], head: tuple[str, ...], numeric: int | None = 1,
           widths: tuple[int, ...] | None = None) -> str:
    """A table; `widths` in percent fixes the columns (a long value then wraps, never widens the page)."""
    fixed = " class=fixed" if widths else ""
    cols = "<colgroup>" + "".join(f"<col style='width:{w}%'>" for w in widths) + "</colgroup>" if widths else ""
    out = [f"<table{fixed}>{cols}<tr class=head>" + "".join(f"<th>{_esc(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = (" class=v" if i == numeric and len(str(c)) <= SHORT_VALUE
                   else " class=n" if numeric is None and len(str(c)) <= SHORT_NUMBER and any(ch.isdigit() for ch in str(c))
                   else "")
            cells.append(f"<td{cls} data-label='{_esc(head[i])}'>{_esc(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _list_table(key: str, rows: list[dict[str, Any]]) -> str:
    columns = LIST_COLUMNS.get(key) or tuple((c, c.replace("_", " "), "") for c in rows[0])
    body = [tuple(str(r.get(c)) if dim == "text" else
                  (format_figure(r.get(c), dim) if dim else format_value(f"{key}.{c}", r.get(c)))
                  for c, _, dim in columns) for r in rows]
    return _table(body, tuple(words for _, words, _ in columns), numeric=None)


def answer_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's `answer` (planning/answer.py) as (label, text): Fits? / Time / Cost / Waits on /
    Measure / Layout / Network / Decide, the lines of the terminal's first screen."""
    from trainplan.planning.answer import LABELS

    return [(LABELS.get(key, key), text) for key, text in (report.get("answer") or {}).items()]


def render_html(report: dict[str, Any], workload: Any = None) -> str:
    """The whole report as one self-contained HTML page: the answer first, then each account under a
    heading in words, every figure with its unit, the inputs and their sources last."""
    video = report.get("pipeline", {}).get("kind", "video") in FRAME_KINDS
    plots = [("busy", busy_plot(report, workload)), ("memory", memory_plot(report)),
             ("bill", bill_plot(report) if video else None)]
    intervals = _timeline(report, workload)
    timeline = timeline_plot(intervals) if intervals else None
    w = report.get("workload", {})
    devices = report.get("assumptions", {}).get("cluster.count", {}).get("value", 1)
    title = (f"Training plan: {format_value('workload.params', w.get('params'))} parameters, "
             f"{format_value('workload.tokens', w.get('tokens'))} tokens on {devices} x "
             f"{w.get('accelerator_name', 'accelerator')}")
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width,initial-scale=1'>",
        f"<title>{_esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_esc(title)}</h1>",
        "<dl class=answer id=answer>" + "".join(f"<dt>{_esc(label)}</dt><dd>{_esc(text)}</dd>"
                                                 for label, text in answer_lines(report)) + "</dl>",
        f"<p class=verdict>{_esc(report['verdict']) if isinstance(report.get('verdict'), str) else ''}</p>",
        f"<p class=muted>Parameter count: {_esc(w.get('params_source', ''))}.</p>",
        "<div class=plots>",
    ]
    parts += [f"<div class=plot id=plot-{name}>{svg}</div>" for name, svg in plots if svg]
    parts.append("</div>")
    if timeline:
        parts.append(f"<h2>Queue timeline</h2><div class=plot id=plot-timeline>{timeline}</div>")
    sim = report.get("simulation")
    if isinstance(sim, dict):
        rows = [(label_of(f"simulation.{k}"), format_value(f"simulation.{k}", v)) for k, v in flatten(sim).items()
                if k not in ("timeline", "buffer_trace", "stages") and not isinstance(v, list)]
        parts.append(f"<h2 id=simulation>{SECTION_TITLES['simulation']}</h2>" + _table(rows, ("figure", "value")))
    for account in ACCOUNTS:
        if account == "simulation" or not applies(report, account):  # the CLI's rule: serving when asked,
            continue  # the bill of an hour of video for video, the decisions as the Decide line
        flat = flatten(report[account], f"{account}.")
        rows = list(section_rows(report, account))
        title_words = SECTION_TITLES.get(account, account.replace("_", " ").capitalize())
        parts.append(f"<h2 id={_esc(account)}>{_esc(title_words)}</h2>"
                     + _table(rows, ("figure", "value", "what it is"), widths=(30, 20, 50)))
        for k, v in flat.items():
            if isinstance(v, list) and v and isinstance(v[0], dict) and k not in HIDDEN_LISTS:
                parts.append(f"<h3>{_esc(LIST_TITLES.get(k, label_of(k)))}</h3>" + _list_table(k, v))
    assumptions = report.get("assumptions", {})
    if assumptions:
        dims = input_dimensions()
        shown, note = shown_assumptions(report)
        rows = [(k, format_assumption(k, a.get("value"), dims), provenance_word(a),
                 a.get("source", "")) for k, a in shown]
        parts.append(f"<h2 id=assumptions>{SECTION_TITLES['assumptions']}</h2>"
                     + _table(rows, ("workload key", "value", "given, measured or assumed", "source"),
                              widths=(24, 16, 12, 48)) + (f"<p class=muted>{_esc(note)}</p>" if note else ""))
    parts.append("<p class=muted>Written by trainplan; the formulas are in the docs/ folder of trainplan.</p>"
                 "</body></html>")
    return "\n".join(parts)
