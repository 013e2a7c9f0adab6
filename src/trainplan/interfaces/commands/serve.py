"""`trainplan serve [FILE.toml] [--set ...] [--ladder]` and `trainplan roofline` (docs/serving-scaling-energy.md).

The workload is read for the serving, training-bill and energy accounts in trainplan.planning.evaluate
(served_model, serving_estimate, training_bill_of), which `trainplan plan` uses too.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.accounts import roofline as roofline_mod
from trainplan.accounts import serving as serving_mod
from trainplan.errors import UserError
from trainplan.planning.evaluate import clean, served_model, serving_estimate, training_bill_of
from trainplan.planning.evaluate import resolve_model as _facts

FORMATS = ("json", "table")

#: The figures (docs/serving-scaling-energy.md) that `trainplan serve` prints first, in this order.
SERVE_KEYS = ("tokens_per_second", "requests_per_second", "cost_per_million_requests",
              "kv_bytes_per_token", "kv_cache_missing", "weights_bytes", "crossover_days")


# ---------------------------------------------------------------- the ladder


@lru_cache(maxsize=1)
def reference_shapes() -> dict[str, dict[str, Any]]:
    from trainplan import catalogue

    return catalogue.table("serving_ladder")


def ladder_models(model: Any) -> list[serving_mod.ServedModel]:
    from trainplan.workload.params import count_from_shape

    rungs = [served_model(model, "workload model")]
    for name, s in reference_shapes().items():
        count = count_from_shape(s["layers"], s["width"], s["vocab"], s["ffn_width"], s["heads"], s["kv_heads"],
                                 "llama", False)
        rungs.append(serving_mod.ServedModel(params=float(count.total), layers=count.layers,
                                             kv_heads=count.kv_heads, head_dim=float(count.head_dim), name=name))
    return rungs


def ladder(w: Any, model: Any | None = None) -> list[serving_mod.ServingEstimate]:
    """Every rung (the workload's model, then the reference shapes) in every serving dtype."""
    model = model if model is not None else _facts(w)
    s = w.serving
    training = s.training_cost if s.training_cost is not None else training_bill_of(w).budget
    return [serving_estimate(w, model, training, served=m, dtype=d, refuse_unfit=False)
            for m in ladder_models(model) for d in ("fp32", "bf16", "int8", "int4")]


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f}"


def _max_batch(e: serving_mod.ServingEstimate) -> str:
    """The largest batch in words: a count, or what bounds it when the KV cache is unknown."""
    if e.max_batch is not None:
        return str(e.max_batch)
    return "weights only" if e.fits else "0"


def ladder_table(rows: list[serving_mod.ServingEstimate]) -> str:
    head = ("model", "dtype", "params", "weights GB", "devices", "max batch", "tokens/s", "bound",
            "$/1M requests", "crossover days")
    body = []
    for r in rows:
        body.append((r.name, r.dtype, f"{r.params / 1e9:.2f} B", _gb(r.weights_bytes), str(r.devices),
                     _max_batch(r), f"{r.tokens_per_second:,.0f}", r.bound,
                     f"{r.cost_per_million_requests:,.2f}" if math.isfinite(r.cost_per_million_requests) else "-",
                     f"{r.crossover_days:,.1f}" if math.isfinite(r.crossover_days) else "-"))
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(head)),
             "  ".join("-" * wd for wd in widths)]
    lines += ["  ".join(c.rjust(widths[i]) if i > 1 else c.ljust(widths[i]) for i, c in enumerate(row))
              for row in body]
    missing = {r.kv_cache_missing for r in rows if r.kv_cache_missing}
    lines += [f"{r_name}: {why}" for r_name, why in
              sorted({(r.name, r.kv_cache_missing) for r in rows if r.kv_cache_missing})] if missing else []
    return "\n".join(lines)


def serve_table(e: serving_mod.ServingEstimate, acc_name: str, training_described: bool = True) -> str:
    """The serving estimate on the terminal, each figure through format_figure (the units `plan` uses)."""
    from trainplan.units import format_figure as fig

    def days(x: float) -> str:
        return fig(x, "days") if math.isfinite(x) else "never"

    encode = e.mode == "encode"
    if encode:
        kv = "none: an encoder serves each request in one forward pass"
    elif e.kv_bytes_per_token is not None and e.kv_bytes_per_sequence is not None:
        kv = (f"{fig(e.kv_bytes_per_token, 'bytes')} per token, "
              f"{fig(e.kv_bytes_per_sequence, 'bytes')} per {e.context:,}-token sequence")
    else:
        kv = f"unknown: {(e.kv_cache_missing or '').split(';')[0]}"
    if e.max_batch is not None:
        batch = f"{e.max_batch} sequences (serving {e.batch})"
    elif e.fits:
        served = (f"{e.batch} requests of {fig(e.tokens_per_request, 'count')} tokens a pass" if encode
                  else f"serving the {e.batch} asked for")
        batch = (f"bounded by weights only ({fig(e.weights_bytes, 'bytes')} of {fig(e.usable_memory_bytes, 'bytes')} "
                 f"usable); {served}")
    else:
        batch = f"none: the weights need more than {fig(e.usable_memory_bytes, 'bytes')} usable"
    rate = fig(e.tokens_per_second, "tokens_per_second")
    step_word, unit = ("encode", "requests") if encode else ("decode", "batch")
    lines = [
        f"serving {fig(e.params, 'parameters')} in {e.dtype} on {e.devices} x {acc_name}",
        f"  weights resident        {fig(e.weights_bytes, 'bytes')}",
        f"  KV cache                {kv}",
        f"  largest batch that fits {batch}",
        f"  {step_word:<24}{rate}, {e.bound}-bound "
        f"(compute-bound above {unit} {e.compute_bound_batch:,.0f})"
        if math.isfinite(e.compute_bound_batch) and e.compute_bound_batch >= 1
        else f"  {step_word:<24}{rate}, {e.bound}-bound at any batch",
        f"  requests                {fig(e.requests_per_second, 'requests_per_second')} per replica, "
        f"{e.replicas} replica{'' if e.replicas == 1 else 's'} for {fig(e.requests_per_day, 'count')} a day",
        f"  cost                    {fig(e.cost_per_million_requests, 'dollars')} per million requests, "
        f"{fig(e.serving_cost_per_day, 'dollars')} a day",
    ]
    if training_described:  # a bill the user never described is not compared with (issue 28)
        lines.append(f"  passes the training bill ({fig(e.training_cost, 'dollars')}) after {days(e.crossover_days)}")
    if e.kv_cache_missing:
        lines.insert(5, "                          an upper bound: no KV-cache reads are counted without a shape")
    return "\n".join(lines)


# ---------------------------------------------------------------- commands


from trainplan.interfaces.options import (CalibrationOpt, FormatOpt, OutputOpt, SetOpt, WorkloadArg,  # noqa: E402
                                          check_format, figures_markdown)


def training_described(w: Any) -> bool:
    """Whether the workload describes a training run (a training.* key or serving.training_cost given in
    the file or with --set): only then does `serve` compare serving with a training bill."""
    return any((key.startswith("training.") or key == "serving.training_cost")
               and (p.kind == "measured" or p.source.startswith(("workload file", "--set")))
               for key, p in w.provenance.items())


def serve_command(
    file: WorkloadArg = None,
    set_: SetOpt = None,
    calibration: CalibrationOpt = None,
    output_format: FormatOpt = "table",
    output: OutputOpt = None,
    show_ladder: Annotated[bool, typer.Option("--ladder", help="every model size x dtype as one table")] = False,
) -> None:
    """Serving: weights, KV cache, largest batch, tokens/s, cost per request, crossover with training."""
    from trainplan.outputs import write_output
    from trainplan.workload.load import load_workload

    fmt = check_format(output_format)
    w = load_workload(file, set_ or [], calibration)
    model = _facts(w)
    if show_ladder:
        if w.given("serving.dtype"):  # the ladder runs every dtype: one given would be left unread (issue 29)
            raise UserError("serving.dtype", "expected no serving.dtype with --ladder, which shows fp32, bf16, int8 "
                            "and int4 side by side")
        rows = ladder(w, model)
        if fmt == "json":
            write_output(json.dumps([r.as_dict() for r in rows], indent=2), output)
        elif fmt == "markdown":
            body = [r.as_dict() for r in rows]
            cols = list(body[0]) if body else []
            text = "| " + " | ".join(c.replace("_", " ") for c in cols) + " |\n|" + "---|" * len(cols) + "\n"
            text += "".join("| " + " | ".join(str(r[c]) for c in cols) + " |\n" for r in body)
            write_output(text, output)
        else:
            write_output(ladder_table(rows), output)
        return
    e = serving_estimate(w, model)
    d = e.as_dict()
    out = {k: d[k] for k in SERVE_KEYS if k in d} | {k: v for k, v in d.items() if k not in SERVE_KEYS}
    if not training_described(w):  # every format alike: no comparison with a bill the user never described
        out["training_cost"] = out["crossover_days"] = None
    if fmt == "json":
        out["accelerator"] = w.accelerator.key
        write_output(json.dumps(out, indent=2), output)
    elif fmt == "markdown":
        shown = {k: v for k, v in out.items() if not (k in ("training_cost", "crossover_days") and v is None)}
        write_output(figures_markdown(f"Serving on {w.accelerator.name}", shown, declared="serving."), output)
    else:
        write_output(serve_table(e, w.accelerator.name, training_described(w)), output)


def roofline_command(
    file: WorkloadArg = None,
    set_: SetOpt = None,
    side: Annotated[int, typer.Option("--side", help="side n of a square matmul", min=1, max=2**24)] = 4096,
    output_format: FormatOpt = "table",
    output: OutputOpt = None,
    calibration: CalibrationOpt = None,
) -> None:
    """Roofline of the workload's accelerator: ridge, matmul and element-wise intensity, and the batch
    at which the model's FFN layer (d x ffn) turns compute-bound."""
    from trainplan.workload.load import load_workload

    from trainplan.outputs import write_output

    fmt = check_format(output_format)
    w = load_workload(file, set_ or [], calibration)
    acc = w.accelerator
    precision = w.training.precision
    peak, bw = acc.peak(precision), acc.memory_bandwidth
    from trainplan.catalogue.dtypes import bytes_per_element

    b = bytes_per_element(precision)
    mm = roofline_mod.square_matmul_intensity(side, b)
    ew = roofline_mod.elementwise_intensity(1.0, bytes_per_element=b)
    out: dict[str, Any] = {
        "accelerator": acc.key, "accelerator_name": acc.name, "precision": precision, "peak_flops": peak,
        "memory_bandwidth": bw,
        "ridge_intensity": roofline_mod.ridge_intensity(peak, bw),
        "matmul_side": side, "matmul_intensity": mm.intensity,
        "matmul_bound": roofline_mod.bound(mm.intensity, peak, bw),
        "elementwise_add_intensity": ew.intensity,
    }
    width = w.model.width
    if width is not None:
        ffn = w.model.ffn_width or 4 * width
        layer = roofline_mod.compute_bound_batch(width * ffn, peak, bw, b, width + ffn, b)
        out |= {"layer": f"{width} x {ffn}", "layer_weights": width * ffn,
                "compute_bound_batch": layer.compute_bound_batch,
                "compute_bound_batch_whole": layer.compute_bound_batch_whole,
                "weights_only_batch": layer.weights_only_batch}
    out = clean(out)
    dims = {"peak_flops": "flop_rate", "memory_bandwidth": "byte_rate", "ridge_intensity": "flop_per_byte",
            "matmul_intensity": "flop_per_byte", "elementwise_add_intensity": "flop_per_byte", "matmul_side": "count",
            "layer_weights": "parameters", "compute_bound_batch": "tokens", "compute_bound_batch_whole": "tokens",
            "weights_only_batch": "tokens"}
    if fmt == "json":
        write_output(json.dumps(out, indent=2), output)
    elif fmt == "markdown":
        write_output(figures_markdown(f"Roofline of {acc.name}", out, dims), output)
    else:
        from trainplan.quantities import key_value_lines

        write_output(key_value_lines(out, dims), output)


def register(app: typer.Typer) -> None:
    """Add `serve` and `roofline` (called by cli.py's discovery)."""
    app.command("serve")(serve_command)
    app.command("roofline")(roofline_command)
