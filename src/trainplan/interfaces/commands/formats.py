"""`trainplan formats [VALUES...]`: bytes per parameter, bit layout, and the value each number
format really stores (measured by casting), with shared versus per-channel int8 scales.
Thin: the formulas are in trainplan.accounts.formats."""

from __future__ import annotations

import decimal
import json
import math
from dataclasses import asdict
from typing import Annotated, Any, Optional

import typer

from trainplan import units
from trainplan.accounts import formats as fmt_mod
from trainplan.errors import UserError, comma_items

OUTPUTS = ("table", "json")


def _number(text: str, key: str) -> float:
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise UserError(key, f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise UserError(key, f"expected a finite number, got {text!r}")
    if value == 0 and decimal.Decimal(text.replace("_", "")) != 0:
        # below the smallest float64 (4.9e-324): the value would be shown, and stored, as 0
        raise UserError(key, f"expected a number of at least 4.9e-324 in size (or 0), got {text!r}")
    return value


def _row(text: str) -> list[float]:
    return [_number(p, "--channel") for p in comma_items("--channel", text, "expected numbers such as 0.1,-0.2,9.5")]


def _plain(x: float | None, digits: int = 10) -> str:
    return "out of range" if x is None else f"{x:.{digits}f}"


def _rel(x: float | None) -> str:
    return "-" if x is None else f"{x:.3e}"


def formats_report(values: list[float], dtypes: list[str], rounding: str, params: float | None,
                   channels: list[list[float]], scale: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if params is not None:
        out["parameter_bytes"] = [{"format": d, "bytes_per_parameter": fmt_mod.bytes_per_parameter(d),
                                   "bytes": fmt_mod.parameter_bytes(params, d)} for d in dtypes]
        out["params"] = params
    out["layouts"] = [asdict(fmt_mod.bit_layout(d)) for d in dtypes]
    stored = []
    for d in dtypes:
        stored += [asdict(s) for s in fmt_mod.stored_values(values, d, scale=scale)]
        if rounding == "truncate" and d == "bf16":
            stored += [asdict(s) for s in fmt_mod.stored_values(values, d, "truncate")]
    out["stored"] = stored
    if channels:
        ints = [d for d in dtypes if d in fmt_mod.INTEGER_FORMATS] or ["int8"]
        out["scales"] = [asdict(fmt_mod.compare_scales(channels, d)) for d in ints]
    return out


def formats_table(r: dict[str, Any]) -> str:
    lines: list[str] = []
    if "parameter_bytes" in r:
        lines.append(f"bytes of {r['params'] / 1e9:,.3g} B parameters")
        for row in r["parameter_bytes"]:
            lines.append(f"  {row['format']:<10}{row['bytes_per_parameter']:>5g} B/param  "
                         f"{row['bytes'] / 1e9:,.1f} GB")
        lines.append("")
    lines.append(f"  {'format':<10}{'bits':>5}{'sign':>6}{'exponent':>10}{'fraction':>10}")
    for lay in r["layouts"]:
        lines.append(f"  {lay['name']:<10}{lay['bits']:>5}{lay['sign']:>6}{lay['exponent']:>10}{lay['fraction']:>10}")
    lines.append("")
    lines.append(f"  {'value':>14}  {'format':<18}{'stored':>16}  {'relative error':>14}  scale")
    for s in r["stored"]:
        scale = "" if s["scale"] is None else f"{s['scale']:.6f} (level {s['level']})"
        lines.append(f"  {s['value']:>14.10g}  {s['format']:<18}{_plain(s['stored']):>16}  "
                     f"{_rel(s['relative_error']):>14}  {scale}")
    for c in r.get("scales", []):
        lines.append("")
        lines.append(f"{c['format']}: one shared scale {c['shared_scale']:.6f} against a scale per channel "
                     f"({', '.join(f'{s:.6f}' for s in c['channel_scales'])})")
        lines.append(f"  mean relative error {c['shared_mean_relative_error']:.3e} shared, "
                     f"{c['per_channel_mean_relative_error']:.3e} per channel; values stored as 0: "
                     f"{c['shared_zeroed']} shared, {c['per_channel_zeroed']} per channel")
    return "\n".join(lines)


def formats_command(
    values: Annotated[Optional[list[str]], typer.Argument(help="numbers to store (default 0.1); put -- before negatives")] = None,
    dtype: Annotated[Optional[list[str]], typer.Option("--dtype", help=f"one of {', '.join(fmt_mod.FORMATS)}; repeat; default all")] = None,
    rounding: Annotated[str, typer.Option("--rounding", help="nearest (what casts do), or truncate: also bf16 by chopping fp32 bits")] = "nearest",
    params: Annotated[Optional[str], typer.Option("--params", help="parameter count to size, e.g. 6.97B")] = None,
    channel: Annotated[Optional[list[str]], typer.Option("--channel", help="one row (output channel) of a matrix, comma-separated; repeat: int8 shared vs per-channel scales")] = None,
    scale: Annotated[Optional[float], typer.Option("--scale", help="int scale to use (default: max|value| / 127)")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Number formats: bytes per parameter, sign/exponent/fraction bits, the value stored and its error."""
    if output_format not in OUTPUTS:
        raise UserError("--format", f"expected one of {', '.join(OUTPUTS)}, got {output_format!r}")
    if rounding not in fmt_mod.ROUNDINGS:
        raise UserError("--rounding", f"expected one of {', '.join(fmt_mod.ROUNDINGS)}, got {rounding!r}")
    dtypes = [fmt_mod.check_format(d) for d in (dtype or fmt_mod.FORMATS)]
    nums = [_number(v, "values") for v in (values or ["0.1"])]
    count = units.parse_counted(params, units.PARAM_NOUNS, "--params") if params is not None else None
    if count is not None and not count > 0:
        raise UserError("--params", f"expected a positive parameter count, got {params!r}")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise UserError("--scale", f"expected a positive scale, got {scale!r}")
    report = formats_report(nums, dtypes, rounding, count, [_row(c) for c in (channel or [])], scale)
    if output_format == "json":
        typer.echo(json.dumps(report, indent=2, allow_nan=False))
    else:
        typer.echo(formats_table(report))


def register(app: typer.Typer) -> None:
    app.command("formats")(formats_command)
