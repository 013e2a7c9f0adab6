"""`trainplan layout [FILE]`: the fastest parallel layouts that fit; `trainplan validate-against SET`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.errors import UserError
from trainplan.units import percent

FORMATS = ("table", "json")
REASONS_SHOWN = 5  # the top layouts given a reason in the table

FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table or json")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="write to this file instead of stdout")]


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        from trainplan.interfaces.options import check_format

        check_format(fmt, FORMATS)


def _gib(x: float) -> str:
    """Bytes as every other command writes them (decimal GB: the card reads 85.5 GB in plan and here)."""
    from trainplan.units import format_figure

    return format_figure(x, "bytes")


def _seconds(x: float) -> str:
    from trainplan.units import format_figure

    return format_figure(x, "seconds")


def layout_table(result: dict[str, Any]) -> str:
    devices = f"{result['devices']} device{'' if result['devices'] == 1 else 's'}"
    lines = [f"layouts of {devices}, global batch {result['global_batch']} x "
             f"{result['seq_len']} tokens: {result['candidates']} candidates, {result['fitting']} fit "
             f"in {_gib(result['device_memory'])}, {result['distinct']} distinct "
             f"{'layouts' if result.get('by') == 'layout' else 'step times'}"]
    if not result["layouts"]:
        lines.append("  none fits: more devices, a smaller micro-batch or recomputation")
        return "\n".join(lines)
    lines.append(f"  {'TP':>3} {'PP':>3} {'v':>2} {'CP':>3} {'EP':>3} {'DP':>4} {'SP':>3} {'b':>2} {'m':>5} "
                 f"{'recompute':>9} {'ZeRO':>4} {'step':>9} {'memory':>10} {'MFU':>7} {'bubble':>7} {'ties':>5}")
    for place, r in enumerate(result["layouts"], start=1):
        lines.append(f"  {r['tensor']:>3} {r['pipeline']:>3} {r['interleave']:>2} {r['context']:>3} "
                     f"{r['expert']:>3} {r['data']:>4} {'yes' if r['sequence'] else 'no':>3} {r['micro_batch']:>2} "
                     f"{r['micro_batches']:>5} {r['recompute']:>9} {r['zero']:>4} {_seconds(r['step_seconds']):>9} "
                     f"{_gib(r['per_device_bytes']):>10} {percent(r['mfu']):>7} {percent(r['bubble_share']):>7} {r['ties']:>5}"
                     + ("" if r["fits"] else "  (does not fit)"))
        if place <= REASONS_SHOWN:
            lines.append(f"      {r['reason']}")
    if any(r["ties"] for r in result["layouts"]):
        lines.append("  ties: other settings within 0.1 % of that step time (the one of least memory shown)"
                     if result.get("by") != "layout" else "  ties: the layout's other, slower settings")
    return "\n".join(lines)


def validation_table(result: dict[str, Any]) -> str:
    lines = [f"{result['suite']}: {result['source']}",
             f"  assumed: {result['assumed']}",
             f"  A100 GEMM curve: at most {percent(result['gemm_max'])} of peak, half of that at "
             f"{result['gemm_half_intensity']:.0f} FLOP/B (gemm_max, gemm_half_intensity; fitted on "
             f"{', '.join(result['fitted_on']) or 'given constants'}); nothing set per run",
             f"  {'set':<17} {'run':<22} {'GPUs':>6} {'TP':>3} {'PP':>3} {'v':>2} {'DP':>4} {'ZeRO':>4} "
             f"{'predicted':>10} {'measured':>9} {'error':>8} {'place':>5}  search's first"]
    for r in result["rows"]:
        place = "-" if r["search_rank"] is None else str(r["search_rank"])
        place += "b" if r["baseline"] else ""
        lines.append(f"  {r['set']:<17} {r['name']:<22} {r['devices']:>6} {r['tensor']:>3} {r['pipeline']:>3} "
                     f"{r['interleave']:>2} {r['data']:>4} {r['zero']:>4} {r['predicted_seconds']:>9.2f}s "
                     f"{r['measured_seconds']:>8.2f}s {percent(r['error'], signed=True):>8} {place:>5}  {r['search_first']}")
    lines.append(f"  in sample (catalogue constants): mean absolute error {percent(result['mean_abs_error'])}, "
                 f"max {percent(result['max_abs_error'])}, bias {percent(result['bias'], signed=True)}")
    lines.append(f"  place: where the published TP x PP stands in `trainplan layout --by layout` on the run's devices "
                 f"and batch; in the first five for {result['in_top_five']} of {result['chosen_runs']} chosen layouts"
                 + (" (b: a baseline the paper ran to compare against, not a choice)"
                    if any(r["baseline"] for r in result["rows"]) else ""))
    loso = result.get("leave_one_set_out")
    if loso:
        lines.append("  out of sample (each set predicted with constants fitted on the other sets):")
        for h in loso["held_out"]:
            runs = len(h["rows"])
            lines.append(f"    {h['set']:<17} {runs:>3} {'run ' if runs == 1 else 'runs'}  mean "
                         f"{percent(h['mean_abs_error']):>6}  max {percent(h['max_abs_error']):>6}  bias {percent(h['bias'], signed=True):>7}  "
                         f"(GEMM at most {percent(h['gemm_max'])}, half at {h['gemm_half_intensity']:.0f} FLOP/B, "
                         f"overlap cost {percent(h['overlap_cost'], digits=0)}, framework efficiency {percent(h['framework_efficiency'], digits=0)})")
        lines.append(f"    all {loso['runs']} runs: mean {percent(loso['mean_abs_error'])}, "
                     f"max {percent(loso['max_abs_error'])}, "
                     f"bias {percent(loso['bias'], signed=True)}")
    return "\n".join(lines)


def layout_command(
    file: Annotated[Optional[Path], typer.Argument(help="workload TOML file; the built-in default without one")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a workload key: KEY=VALUE")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration",
                                                        help="calibration TOML (measured links)")] = None,
    devices: Annotated[Optional[int], typer.Option(help="devices to lay out (default cluster.count)", min=1)] = None,
    top: Annotated[int, typer.Option(help="layouts listed", min=1)] = 10,
    all_: Annotated[bool, typer.Option("--all", help="list layouts that do not fit too")] = False,
    by: Annotated[str, typer.Option("--by", help="setting (every setting, twins collapsed) or layout (the fastest "
                                                 "setting of each TP x PP x CP x EP)")] = "setting",
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """The fastest parallel layouts (TP, PP, SP, CP, EP, DP, ZeRO, recompute) that fit, with memory and step time."""
    from trainplan.planning.evaluate import clean, resolve_model
    from trainplan.planning.layout import search
    from trainplan.outputs import write_output
    from trainplan.workload.load import load_workload

    _check_format(format)
    w = load_workload(file, set_ or [], calibration)
    result = clean(search(w, resolve_model(w), devices, top, all_, by))
    write_output(json.dumps(result, indent=2, allow_nan=False) if format == "json" else layout_table(result), output)


def validate_against_command(
    suite: Annotated[str, typer.Argument(help="the published runs to plan: megatron (= korthikanti), "
                                              "narayanan2021, mtnlg, bloom, llama3, opt, narayanan2021_ptd, "
                                              "zero3, mpt_h100_large, mpt_h100, mpt_a100, or all")],
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Plan a set of published training runs and compare with their measured step times (in and out of sample)."""
    from trainplan.planning.evaluate import clean
    from trainplan.planning.validation import ALIASES, leave_one_set_out, validate
    from trainplan.outputs import write_output

    _check_format(format)
    result = validate(suite).as_dict()
    loso = leave_one_set_out().as_dict()
    name = ALIASES.get(suite, suite)
    if name != "all":
        loso = dict(loso, held_out=[h for h in loso["held_out"] if h["set"] == name])
    result["leave_one_set_out"] = loso
    result = clean(result)
    write_output(json.dumps(result, indent=2, allow_nan=False) if format == "json" else validation_table(result),
                 output)


def register(app: typer.Typer) -> None:
    """Add `layout` and `validate-against` (called by cli.py's command discovery)."""
    app.command("layout")(layout_command)
    app.command("validate-against")(validate_against_command)
