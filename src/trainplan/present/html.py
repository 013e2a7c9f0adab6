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

from trainplan.present.quantities import format_input
from trainplan.present.render import ACCOUNTS, flatten, format_value, label_of, section_rows, verdict_text

# Points of the busy-against-cores curve.
CURVE_POINTS = 400
# Frames simulated to draw a timeline when the plan's simulation kept none, and intervals kept.
TIMELINE_FRAMES = 4000
TIMELINE_INTERVALS = 600

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
.verdict{font-size:1.1em;background:#f4f6f8;border-left:4px solid #3b6ea5;padding:.6em 1em}
dl.answer{display:grid;grid-template-columns:max-content 1fr;gap:.3em 1em}dl.answer dt{font-weight:600}
dl.answer dd{margin:0}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em;display:block;max-width:100%;overflow-x:auto}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
td.v{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f6f8}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plot{flex:0 1 540px}.plot svg{width:100%;height:auto}
.muted{color:#777;font-size:.85em}
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
    if workload is None or p.get("kind") != "video":
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
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Busy against cores", fontsize=10)
    return _svg(fig)


MEMORY_PARTS = (("weights_bytes", "weights"), ("grads_bytes", "gradients"), ("optimizer_bytes", "optimizer"),
                ("activation_bytes", "activations"), ("runtime_buffers", "runtime buffers"),
                ("headroom_bytes", "headroom"))


def memory_plot(report: dict[str, Any]) -> str:
    """Memory per device stacked by part, against the card's size."""
    m = report["memory"]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bottom = 0.0
    colors = plt.cm.tab10.colors
    for i, (key, label) in enumerate(MEMORY_PARTS):
        v = float(m.get(key) or 0.0) / 1e9
        ax.bar([0], [v], bottom=bottom, color=colors[i], label=f"{label} {v:,.2f} GB", width=0.5)
        bottom += v
    card = float(m["device_memory"]) / 1e9
    ax.axhline(card, color="#c0392b", lw=1.5, label=f"device memory {card:,.1f} GB")
    ax.set_xticks([0], ["per device"])
    ax.set_xlim(-0.6, 1.8)
    ax.set_ylabel("GB")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(f"Memory per device: {'fits' if m['fits'] else 'does not fit'}", fontsize=10)
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
        ax.text(v, y, f" ${v:,.3f}", va="center", fontsize=8)
    ax.set_xlabel("dollars per hour of data (one epoch)")
    ax.set_xlim(0, max(values + [1e-9]) * 1.3)
    total = b.get("total")
    ax.set_title(f"Bill split: ${total:,.3f} per hour of data" if total is not None else "Bill split",
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
    from trainplan.simulate import queue

    try:
        spec, _account, _notes = queue.queue_spec_from_workload(
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


def _table(rows: list[tuple[str, str]], head: tuple[str, ...]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td{" class=v" if i == 1 else ""}>{_esc(c)}</td>' for i, c in enumerate(r))
                   + "</tr>")
    out.append("</table>")
    return "".join(out)


def _answer_html(report: dict[str, Any]) -> str:
    """The first screen's lines (the report's `answer`), as a definition list."""
    from trainplan.planning.answer import LABELS

    lines = report.get("answer")
    if not lines:
        return f"<p class=verdict>{_esc(verdict_text(report) if 'verdict' in report else '')}</p>"
    rows = "".join(f"<dt>{_esc(LABELS[k])}</dt><dd>{_esc(v)}</dd>" for k, v in lines.items())
    verdict = f"<p class=verdict>{_esc(verdict_text(report))}</p>" if "verdict" in report else ""
    return f"<dl class='verdict answer'>{rows}</dl>{verdict}"


def render_html(report: dict[str, Any], workload: Any = None) -> str:
    """The whole report as one self-contained HTML page."""
    plots = [("busy", busy_plot(report, workload)), ("memory", memory_plot(report)), ("bill", bill_plot(report))]
    intervals = _timeline(report, workload)
    timeline = timeline_plot(intervals) if intervals else None
    w = report.get("workload", {})
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width,initial-scale=1'>",
        f"<title>trainplan: {_esc(w.get('accelerator_name', 'plan'))}</title><style>{STYLE}</style></head><body>",
        "<h1>trainplan</h1>",
        _answer_html(report),
        f"<p class=muted>{_esc(w.get('accelerator_name', ''))}, {format_value('workload.params', w.get('params'))} "
        f"parameters ({_esc(w.get('params_source', ''))}), {format_value('workload.tokens', w.get('tokens'))} "
        "training tokens.</p>",
        "<div class=plots>",
    ]
    parts += [f"<div class=plot id=plot-{name}>{svg}</div>" for name, svg in plots if svg]
    parts.append("</div>")
    if timeline:
        parts.append(f"<h2>queue timeline</h2><div class=plot id=plot-timeline>{timeline}</div>")
    sim = report.get("simulation")
    if isinstance(sim, dict):
        rows = [(label_of(f"simulation.{k}"), format_value(f"simulation.{k}", v)) for k, v in flatten(sim).items()
                if k not in ("timeline", "buffer_trace", "stages") and not isinstance(v, list)]
        parts.append("<h2>simulation</h2>" + _table(rows, ("figure", "value")))
    for account in ACCOUNTS:
        if account not in report or not isinstance(report[account], dict):
            continue
        flat = flatten(report[account], f"{account}.")
        rows = list(section_rows(report, account))
        parts.append(f"<h2 id={_esc(account)}>{_esc(account)}</h2>" + _table(rows, ("figure", "value", "meaning")))
        for k, v in flat.items():
            if isinstance(v, list) and v and isinstance(v[0], dict):
                cols = list(v[0])
                parts.append(f"<p class=muted>{_esc(k)}</p>" + _table(
                    [tuple(format_value(f"{k}.{c}", r.get(c)) for c in cols) for r in v], tuple(cols)))
    assumptions = report.get("assumptions", {})
    if assumptions:
        rows = [(k, format_input(a.get("value")), a.get("provenance", ""),
                 a.get("source", "")) for k, a in assumptions.items()]
        parts.append("<h2 id=assumptions>assumptions</h2>" + _table(rows, ("key", "value", "provenance", "source")))
    parts.append("<p class=muted>Written by trainplan; formulas in the docs/ folder of trainplan.</p></body></html>")
    return "\n".join(parts)
