"""`trainplan sweep [FILE.toml] --vary KEY=START:STOP[:STEP|xFACTOR] ... [--format csv|parquet|json]` (docs/index.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainplan.errors import UserError

FORMATS = ("csv", "parquet", "json")
PLOT_FORMATS = ("svg", "png", "pdf")


def sweep_command(
    file: Annotated[Optional[Path], typer.Argument(metavar="WORKLOAD.toml", help="workload TOML file; the built-in default without one")] = None,
    vary: Annotated[Optional[list[str]], typer.Option(
        "--vary", metavar="KEY=GRID", help="KEY=START:STOP[:STEP] (STOP included, STEP 1 by default), KEY=START:STOP:xFACTOR, "
                       "or KEY=a,b,c; units allowed")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE", help="override a workload key (units allowed)")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", metavar="FILE", help="calibration TOML")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", metavar="csv|parquet|json", help="file format of the rows")] = "csv",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="write to this file")] = None,
    figures: Annotated[Optional[str], typer.Option(
        "--figures", metavar="FIGURE,...", help="comma-separated figures to keep (all by default), e.g. pipeline.busy,bill.total")] = None,
    plot: Annotated[Optional[str], typer.Option("--plot", metavar="FIGURE", help="draw this figure instead of writing the table")] = None,
    against: Annotated[Optional[str], typer.Option("--against", metavar="KEY", help="the varied key on the x axis of --plot")] = None,
) -> None:
    """The report's figures over a grid of workloads: one row per point."""
    from trainplan.planning import sweep
    from trainplan.present.outputs import write_output

    if output_format not in FORMATS:
        raise UserError("--format", f"expected one of {', '.join(FORMATS)}, got {output_format!r}")
    if plot is not None:
        if output is None or output.suffix.lstrip(".").lower() not in PLOT_FORMATS:
            raise UserError("--output", f"--plot needs --output PATH ending in .{', .'.join(PLOT_FORMATS)}")
        if against is None:
            raise UserError("--against", "--plot needs --against KEY, one of the varied keys")
    elif output_format == "parquet" and output is None:
        raise UserError("--output", "parquet is binary: give --output PATH")
    keep = [f.strip() for f in figures.split(",") if f.strip()] if figures else None
    if keep is not None and plot is not None and plot not in keep:
        keep.append(plot)
    result = sweep.sweep(file, set_ or [], vary or [], calibration, keep)
    if plot is not None:
        write_output(sweep.plot(result, plot, against, output.suffix.lstrip(".").lower()), output)  # type: ignore[arg-type]
    elif output_format == "csv":
        write_output(sweep.to_csv(result), output)
    elif output_format == "parquet":
        write_output(sweep.to_parquet(result), output)
    else:
        write_output(sweep.to_json(result), output)


def register(app: typer.Typer) -> None:
    """Add `sweep` to the trainplan app (called by cli.py's command discovery)."""
    app.command("sweep")(sweep_command)
