"""The answer a person came for, in words: the lines of the first screen as report fields.

`answer(report)` returns {"fits", "time", "cost", "waits_on", "measure", "layout", "network",
"decide", "range", "unused"} (absent where a line does not apply), each one sentence or a few, every number through
the one formatter by its declared dimension. The terminal's first screen (present/summary.py),
markdown, HTML, JSON (`answer`) and the web page show these same lines.
"""

from __future__ import annotations

from typing import Any

from trainplan.planning.figures import section_figures
from trainplan.units import SECONDS_PER_HOUR
from trainplan.units import format_figure as fmt
from trainplan.quantities import format_assumption
from trainplan.workload.schema import IMAGES_PER_SECOND, KEY_ROLES, input_dimensions

#: the label each line carries on the first screen and in the reports
LABELS = {"fits": "Fits?", "time": "Time", "cost": "Cost", "waits_on": "Waits on", "measure": "Measure",
          "layout": "Layout", "network": "Network", "decide": "Decide", "range": "Sampled",
          "unused": "Unused"}


# the assumed workload key behind each bottleneck, and the command that measures it
MEASURE_FOR: dict[str, tuple[str, str]] = {
    "decode": ("cluster.core_fps_1080p", "trainplan probe decode"),
    "read": ("cluster.link", "trainplan probe read"),
    "transfer": ("cluster.host_to_device", "trainplan probe"),
    "tokenize": ("data.tokenizer_rate", "trainplan probe"),
    "accelerator": ("cluster.mfu", "trainplan profile"),
}


def _layout(report: dict[str, Any]) -> dict[str, Any] | None:
    """The parallel section when the workload lays the model out beyond plain data parallelism
    (tensor, pipeline, context or expert parallel)."""
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
    """Memory per device of the one execution model (the fullest stage), and how to make it fit."""
    m = report["memory"]
    par = _layout(report)
    per, card = fmt(m["per_device_bytes"], "bytes"), fmt(m["device_memory"], "bytes")
    where = f"per device under {_layout_name(par['layout'])}" if par is not None else "per device"
    if m["fits"]:
        return f"yes: {per} {where} of {card} ({fmt(m['per_device_bytes'] / m['device_memory'], 'fraction')})."
    text = f"NO: {per} {where} against {card}."
    fit = report.get("fit") or {}
    if fit.get("change"):
        devices = report["assumptions"].get("cluster.count", {}).get("value", fit["devices"])
        on = "" if fit["devices"] == devices else f" on {fit['devices']} devices"
        text += (f" It fits with {fit['change']}{on}: {fmt(fit['per_device_bytes'], 'bytes')} per device, a step of "
                 f"{fmt(fit['step_seconds'], 'seconds')} (`trainplan layout` lists the others).")
    elif fit.get("reason"):
        text += f" {fit['reason'][0].upper()}{fit['reason'][1:]}."
    return text


def _time(report: dict[str, Any]) -> str:
    c, w = report["compute"], report["workload"]
    devices = report["assumptions"].get("cluster.count", {}).get("value", 1)
    wall = c.get("wall_seconds")
    text = f"{fmt(wall, 'seconds') if wall is not None else 'never ends'} on {devices} x {w['accelerator_name']}"
    train = c.get("train_wall_seconds")
    if wall is not None and train is not None and c["seconds"] < train * 0.999:
        text += f" ({fmt(c['seconds'], 'seconds')} if the accelerator never waited)"
    if wall is not None and train is not None and train < wall * 0.99:
        text += f", {fmt(wall - train, 'seconds')} of it blocking checkpoint saves"
    tc = report.get("training_cost", {})
    if "accelerator_hours" in tc:
        text += f"; {fmt(tc['accelerator_hours'], 'hours').removesuffix(' h')} accelerator-hours"
    step = c.get("seconds_per_step")
    if step is not None:
        source = c.get("time_follows")
        mfu = c.get("mfu")
        assumed = report["assumptions"]
        text += f". A step of {fmt(step, 'seconds')}"
        if source == "predicted":
            text += " predicted from the layout" + (f" (MFU {fmt(mfu, 'fraction')})" if mfu is not None else "")
            if c.get("step_error_text"):
                text += f", {c['step_error_text']}"
        elif source in ("mfu", "hfu"):
            given = assumed.get(f"cluster.{source}", {}).get("value")
            text += f" at cluster.{source} {fmt(given, 'fraction')}" if given is not None else ""
            if mfu is not None and given is not None and source == "mfu" and abs(mfu - given) > 0.005 * given:
                text += f" ({fmt(mfu, 'fraction')} over the whole step)"
    return text + "."


def _cost(report: dict[str, Any]) -> str | None:
    tc = report.get("training_cost", {})
    if "budget" not in tc:
        return tc.get("skipped")
    attempts = tc["attempts"]
    return (f"{fmt(tc['budget'], 'dollars')}: {fmt(tc['dollars_per_attempt'], 'dollars')} a run x "
            f"{fmt(attempts, 'ratio')} attempts at {fmt(tc['dollars_per_accelerator_hour'], 'dollars_per_hour')} "
            "per accelerator.")


def data_unit(kind: str) -> str:
    """What the bill's "hour of data" is, in words: an hour of video, or 3,600 images (one a second of data).
    The CLI's first screen and the page's bill label both read it."""
    return f"{SECONDS_PER_HOUR * IMAGES_PER_SECOND:,.0f} images" if kind == "images" else "hour of video"


#: Below this busy fraction after the cores are added, the first screen names the hop that binds next.
BUSY_AFTER_SAID = 0.99


def _waits(report: dict[str, Any]) -> str:
    p, b = report["pipeline"], report.get("bill", {})
    busy = fmt(p["busy"], "fraction")
    if p["bottleneck"] == "accelerator":
        return f"nothing: the input pipeline keeps the accelerator {busy} busy."
    text = f"{p['bottleneck']} (the accelerator is busy {busy})."
    a = b.get("add_cores")
    if p["bottleneck"] == "decode" and a:
        removed, net = a.get("idle_removed"), a.get("net_saving")
        unit = data_unit(p.get("kind", "video"))
        cores = (f"{a['cores_added']:,} CPU cores ({fmt(p['cores_needed'], 'count')} needed, "
                 f"{fmt(p['cores'], 'count')} present)")
        if removed is not None and net is not None and net <= 0:
            # more cores keep the decoders up but cost more than the idle time they save: not a fix
            text += (f" Adding {cores} would keep the decoders up, but {fmt(a['extra_core_cost'], 'dollars')} of "
                     f"cores costs more than the {fmt(removed, 'dollars')} of idle accelerator it removes per "
                     f"{unit}.")
        else:
            text += f" Cheapest fix: add {cores}"
            if removed is not None:
                text += (f": {fmt(a['extra_core_cost'], 'dollars')} of cores removes "
                         f"{fmt(removed, 'dollars')} of idle accelerator per {unit}, each epoch")
            text += "."
        after = a.get("bottleneck_after", "accelerator")
        if after != "accelerator" and a.get("busy_after") is not None and a["busy_after"] < BUSY_AFTER_SAID:
            text += f" With them {after} binds: the accelerator busy {fmt(a['busy_after'], 'fraction')}."
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
    predicted = report.get("compute", {}).get("time_follows") == "predicted"
    for bottleneck in dict.fromkeys([report["pipeline"]["bottleneck"], "accelerator"]):
        key, how = MEASURE_FOR[bottleneck]
        a = assumptions.get(key)
        if bottleneck == "accelerator" and predicted:
            picks.append(f"the step (predicted, not measured: `{how}` measures cluster.mfu)")
        elif a and a.get("provenance") == "assumed" and not written_by_user(a):
            shown = format_assumption(key, a["value"], input_dimensions())  # with its unit
            picks.append(f"{key} (assumed {shown}; `{how}`)")
    if not picks:
        return "the figures that drive this plan are given or measured."
    return " and ".join(picks) + "."


def written_by_user(assumption: dict[str, Any]) -> bool:
    """Whether a workload key's value was written by the user, in the workload file or with --set."""
    return str(assumption.get("source", "")).startswith(("workload file", "--set"))


def data_kind(report: dict[str, Any]) -> str:
    """The report's data.kind (video where the report has no assumptions table)."""
    return str(report.get("assumptions", {}).get("data.kind", {}).get("value", "video"))


def _unused_line(report: dict[str, Any]) -> str | None:
    """The keys the user wrote that this kind of data does not use (a bit rate in a token workload): said,
    because a figure typed and silently ignored reads as a figure applied. Not refused: a sweep over
    data.kind keeps one file for every kind."""
    kind = data_kind(report)
    assumptions = report.get("assumptions", {})
    unused = [key for key, a in assumptions.items()
              if (role := KEY_ROLES.get(key)) is not None and not role.applies_to(kind) and written_by_user(a)]
    parts = []
    if unused:
        names = ", ".join(unused[:-1]) + (" and " if len(unused) > 1 else "") + unused[-1]
        parts.append(f"{names} {'is' if len(unused) == 1 else 'are'} given but not used: "
                     f"data.kind = '{kind}' does not read {'it' if len(unused) == 1 else 'them'}.")
    def value(key: str) -> Any:
        return assumptions.get(key, {}).get("value")

    # keys another key's value makes unread (issue 29): (key, unread when, why)
    unread = (
        ("data.random_decodes", kind == "video" and value("data.access") != "random",
         f"data.access = '{value('data.access')}' reads frames in order"),
        ("training.selective_keep", value("training.recompute") != "selective",
         f"training.recompute = '{value('training.recompute')}' keeps no selected share"),
        ("training.lora_rank", value("training.method") == "full",
         "training.method = 'full' trains every weight, with no adapter"),
        ("training.lora_targets", value("training.method") == "full",
         "training.method = 'full' trains every weight, with no adapter"),
        ("cluster.nvdec_fps_1080p", value("cluster.nvdec") is False, "cluster.nvdec = false decodes on CPU cores only"),
        ("energy.region", value("energy.grid_intensity") is not None and written_by_user(
            assumptions.get("energy.grid_intensity", {})), "energy.grid_intensity is given and used instead"),
    )
    for key, unread_now, why in unread:
        if unread_now and key in assumptions and written_by_user(assumptions[key]):
            parts.append(f"{key} is given but not used: {why}.")
    return " ".join(parts) or None


def _layout_line(report: dict[str, Any]) -> str | None:
    par = _layout(report)
    if par is None:
        return None
    tm = par["time"]
    return (f"{_layout_name(par['layout'])}: a step takes {fmt(tm['step_seconds'], 'seconds')} "
            f"(MFU {fmt(par['mfu'], 'fraction')}, pipeline bubble {fmt(tm['bubble_share'], 'fraction')}); "
            "`trainplan layout` searches the others.")


def _network_line(report: dict[str, Any]) -> str | None:
    net = report.get("network", {})
    if net.get("verdict") != "bound":
        return None
    return (f"the gradient sync is longer than backward: {fmt(net['share_of_step'], 'fraction')} of a step, "
            f"{fmt(net['exposed_seconds_per_step'], 'seconds')} of it exposed (in the step and the wall time).")


def _range_line(report: dict[str, Any]) -> str | None:
    """The plan at the ends of a sample's intervals (planning/intervals.py), low to high."""
    r = report.get("sample_range")
    if not isinstance(r, dict):
        return None

    def span(name: str, dimension: str) -> str | None:
        low, high = r.get(f"{name}_low"), r.get(f"{name}_high")
        if low is None and high is None:
            return None
        if high is None:
            return f"{fmt(low, dimension)} to never ending"
        a, b = fmt(low, dimension), fmt(high, dimension)
        return f"{a} at either end" if a == b else f"{a} to {b}"

    # each ranged figure as planning/figures.py declares it: sample_range.NAME_low / NAME_high
    lows = [f for f in section_figures("sample_range") if f.path.endswith("_low")]
    parts = [f"{f.label.removesuffix(', low')} {text}" for f in lows
             if (text := span(f.path.removeprefix("sample_range.").removesuffix("_low"), f.dimension)) is not None]
    if not parts:
        return None
    return (f"{fmt(r['confidence'], 'fraction')} intervals of {r['keys']} (measured on a sample): "
            f"{', '.join(parts)}.")


def answer(report: dict[str, Any]) -> dict[str, str]:
    """The first screen's lines by key (LABELS), in order."""
    from trainplan.planning.decisions import sentences  # the planning questions (docs/worked-examples.md)

    said = sentences(report)
    lines = {"fits": _fit(report), "time": _time(report), "cost": _cost(report), "waits_on": _waits(report),
             "measure": _measure(report), "layout": _layout_line(report), "network": _network_line(report),
             "decide": " ".join(said) if said else None, "range": _range_line(report),
             "unused": _unused_line(report)}
    return {k: v for k, v in lines.items() if v}
