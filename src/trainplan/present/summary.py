"""The first screen of `trainplan plan`: the answers a person came for, in at most 40 lines of 80 columns.

Does it fit (per device, against the card); how long and how many accelerator-hours; what it
costs, attempts included; what the accelerator waits on and the cheapest fix; and the one or
two assumed figures that most deserve a measurement. Every number goes through the one
formatter (present/quantities.py) by its declared dimension.
"""

from __future__ import annotations

import textwrap
from typing import Any

from trainplan.present.quantities import format_figure as fmt
from trainplan.present.quantities import format_input

WIDTH = 80
MAX_LINES = 40
# the assumed workload key behind each bottleneck, and the command that measures it
MEASURE_FOR: dict[str, tuple[str, str]] = {
    "decode": ("cluster.core_fps_1080p", "trainplan probe decode"),
    "read": ("cluster.link", "trainplan probe read"),
    "transfer": ("cluster.host_to_device", "trainplan probe"),
    "tokenize": ("data.tokenizer_rate", "trainplan probe"),
    "accelerator": ("cluster.mfu", "trainplan profile"),
}


def _wrap(label: str, text: str, width: int) -> list[str]:
    lead = f"{label:<10}"
    return textwrap.wrap(text, width=width, initial_indent=lead, subsequent_indent=" " * len(lead)) or [lead]


def _layout(report: dict[str, Any]) -> dict[str, Any] | None:
    """The parallel section when the workload lays the model out beyond plain data parallelism
    (tensor, pipeline, context or expert parallel): then its memory per device is the one that fits."""
    par = report.get("parallel")
    if not isinstance(par, dict) or "memory" not in par or "layout" not in par:
        return None
    lay = par["layout"]
    split = lay.get("tensor", 1) * lay.get("pipeline", 1) * lay.get("context", 1) * lay.get("expert", 1)
    return par if split > 1 else None


def _layout_name(lay: dict[str, Any]) -> str:
    parts = [f"{name} {lay[key]}" for key, name in (("tensor", "TP"), ("pipeline", "PP"), ("context", "CP"),
                                                    ("expert", "EP"), ("data", "DP")) if lay.get(key, 1) > 1]
    return " x ".join(parts)


def _fit(report: dict[str, Any]) -> str:
    par = _layout(report)
    if par is not None:  # the layout's stages hold the model, not one whole replica per device
        m = par["memory"]
        per, card = fmt(m["per_device_bytes"], "bytes"), fmt(m["device_memory"], "bytes")
        where = f"per device under {_layout_name(par['layout'])}"
        if m["fits"]:
            return f"yes: {per} {where} of {card} ({fmt(m['per_device_bytes'] / m['device_memory'], 'fraction')})."
        return f"NO: {per} {where} against {card}; `trainplan layout` lists layouts that fit."
    m = report["memory"]
    per, card = fmt(m["per_device_bytes"], "bytes"), fmt(m["device_memory"], "bytes")
    if m["fits"]:
        return f"yes: {per} per device of {card} ({fmt(m['per_device_bytes'] / m['device_memory'], 'fraction')})."
    need = m.get("devices_to_train")
    more = f"; fully sharded it needs at least {need} devices" if need else "; no number of devices fits it"
    return f"NO: {per} per device against {card}{more}."


def _time(report: dict[str, Any]) -> str:
    c, w = report["compute"], report["workload"]
    devices = report["assumptions"].get("cluster.count", {}).get("value", 1)
    wall = c.get("wall_seconds")
    text = f"{fmt(wall, 'seconds') if wall is not None else 'never ends'} on {devices} x {w['accelerator_name']}"
    if wall is not None and c["seconds"] < wall * 0.999:
        text += f" ({fmt(c['seconds'], 'seconds')} if the accelerator never waited)"
    tc = report.get("training_cost", {})
    if "accelerator_hours" in tc:
        text += f"; {fmt(tc['accelerator_hours'], 'hours').removesuffix(' h')} accelerator-hours"
    return text + "."


def _cost(report: dict[str, Any]) -> str | None:
    tc = report.get("training_cost", {})
    if "budget" not in tc:
        return tc.get("skipped")
    attempts = tc["attempts"]
    return (f"{fmt(tc['budget'], 'dollars')}: {fmt(tc['dollars_per_attempt'], 'dollars')} a run x "
            f"{fmt(attempts, 'ratio')} attempts at {fmt(tc['dollars_per_accelerator_hour'], 'dollars_per_hour')} "
            "per accelerator.")


def _waits(report: dict[str, Any]) -> str:
    p, b = report["pipeline"], report.get("bill", {})
    busy = fmt(p["busy"], "fraction")
    if p["bottleneck"] == "accelerator":
        return f"nothing: the input pipeline keeps the accelerator {busy} busy."
    text = f"{p['bottleneck']} (the accelerator is busy {busy})."
    a = b.get("add_cores")
    if p["bottleneck"] == "decode" and a:
        text += (f" Cheapest fix: add {a['cores_added']} CPU cores ({fmt(p['cores_needed'], 'count')} needed, "
                 f"{fmt(p['cores'], 'count')} present)")
        removed = a.get("idle_removed")
        if removed is not None:
            text += (f": {fmt(a['extra_core_cost'], 'dollars')} of cores removes "
                     f"{fmt(removed, 'dollars')} of idle accelerator per hour of data")
        text += "."
    elif p["bottleneck"] == "read":
        text += f" The read hop needs {fmt(p['read_bytes_per_token'] * p['demand_tokens_per_second'], 'byte_rate')}."
    elif p["bottleneck"] == "transfer":
        need = p["transfer_bytes_per_token"] * p["demand_tokens_per_second"]
        text += f" Host-to-device needs {fmt(need, 'byte_rate')}."
    elif p["bottleneck"] == "decode":
        text += " No number of CPU cores keeps up at this decoder rate."
    return text


def _measure(report: dict[str, Any]) -> str:
    assumptions = report.get("assumptions", {})
    picks = []
    for bottleneck in dict.fromkeys([report["pipeline"]["bottleneck"], "accelerator"]):
        key, how = MEASURE_FOR[bottleneck]
        a = assumptions.get(key)
        if a and a.get("provenance") == "assumed":
            picks.append(f"{key} (assumed {format_input(a['value'])}; `{how}`)")
    if not picks:
        return "the figures that drive this plan are given or measured."
    return " and ".join(picks) + "."


def first_screen(report: dict[str, Any], width: int = WIDTH) -> list[str]:
    """The answers, at most MAX_LINES lines of at most `width` columns."""
    w = report["workload"]
    head = (f"trainplan: {fmt(w['params'], 'count')} parameters, {fmt(w['tokens'], 'count')} tokens, "
            f"{w['accelerator_name']}")
    lines = textwrap.wrap(head, width=width)
    lines.append("")
    lines += _wrap("Fits?", _fit(report), width)
    lines += _wrap("Time", _time(report), width)
    cost = _cost(report)
    if cost:
        lines += _wrap("Cost", cost, width)
    lines += _wrap("Waits on", _waits(report), width)
    lines += _wrap("Measure", _measure(report), width)
    par = _layout(report)
    if par is not None:
        tm = par["time"]
        lines += _wrap("Layout", f"{_layout_name(par['layout'])}: a step takes {fmt(tm['step_seconds'], 'seconds')} "
                                 f"(MFU {fmt(par['mfu'], 'fraction')}, pipeline bubble "
                                 f"{fmt(tm['bubble_share'], 'fraction')}); `trainplan layout` searches the others.",
                       width)
    net = report.get("network", {})
    if net.get("verdict") == "bound":
        lines += _wrap("Network", f"the gradient sync is longer than backward: "
                                  f"{fmt(net['share_of_step'], 'fraction')} of a step.", width)
    from trainplan.planning.decisions import sentences  # the planning questions (docs/worked-examples.md)

    said = sentences(report)
    if said:
        lines += _wrap("Decide", " ".join(said), width)
    lines.append("")
    lines.append("Accounts below; --all for every figure and the assumptions.")
    return lines[:MAX_LINES]
