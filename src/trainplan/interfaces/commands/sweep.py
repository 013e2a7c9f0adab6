"""`trainplan sweep [FILE.toml] --vary KEY=START:STOP[:STEP|xFACTOR] ... [--format csv|parquet|json]` (docs/index.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainplan.errors import UserError, comma_items

FORMATS = ("csv", "parquet", "json", "table", "markdown")
#: Rows a table for people shows at most (the file formats keep every row).
TABLE_ROWS = 200
PLOT_FORMATS = ("svg", "png", "pdf")


def sweep_command(
    file: Annotated[Optional[Path], typer.Argument(metavar="WORKLOAD.toml", help="workload TOML file; the built-in default without one")] = None,
    vary: Annotated[Optional[list[str]], typer.Option(
        "--vary", metavar="KEY=GRID", help="KEY=START:STOP[:STEP] (STOP included, STEP 1 by default), KEY=START:STOP:xFACTOR, "
                       "or KEY=a,b,c; units allowed")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE", help="override a workload key (units allowed)")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", metavar="FILE", help="calibration TOML")] = None,
    format_given: Annotated[Optional[str], typer.Option("--format", "-f", metavar="csv|parquet|json|table|markdown",
                                                         help="csv (default), parquet or json rows; table or markdown for "
                                                         "people")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="write to this file")] = None,
    figures: Annotated[Optional[str], typer.Option(
        "--figures", metavar="FIGURE,...", help="comma-separated figures to keep (all by default), e.g. pipeline.busy,bill.total")] = None,
    plot: Annotated[Optional[str], typer.Option("--plot", metavar="FIGURE", help="draw this figure instead of writing the table")] = None,
    against: Annotated[Optional[str], typer.Option("--against", metavar="KEY", help="the varied key on the x axis of --plot")] = None,
) -> None:
    """The report's figures over a grid of workloads: one row per point."""
    from trainplan.planning import sweep
    from trainplan.outputs import write_output

    output_format = "csv" if format_given is None else format_given
    if output_format not in FORMATS:
        from trainplan.interfaces.options import check_format
        check_format(output_format, FORMATS)
    if plot is not None and format_given is not None:  # the plot is drawn in its file's format, not -f's
        raise UserError("--format", "expected no --format with --plot (the plot's format is its --output suffix)")
    if plot is not None:
        if output is None or output.suffix.lstrip(".").lower() not in PLOT_FORMATS:
            raise UserError("--output", f"--plot needs --output PATH ending in .{', .'.join(PLOT_FORMATS)}")
        if against is None:
            raise UserError("--against", "--plot needs --against KEY, one of the varied keys")
    elif against is not None:  # --against names the x axis of --plot: without a plot it would be unused
        raise UserError("--against", "expected --plot FIGURE with it (the varied key on the plot's x axis)")
    elif output_format == "parquet" and output is None:
        raise UserError("--output", "parquet is binary: give --output PATH")
    # `--figures ,` or `--figures ''` is no figure, not every figure
    keep = None if figures is None else comma_items(
        "--figures", figures, "expected figure names such as pipeline.busy,bill.total")
    if keep is not None and plot is not None and plot not in keep:
        keep.append(plot)
    result = sweep.sweep(file, set_ or [], vary or [], calibration, keep)
    if plot is not None:
        write_output(sweep.plot(result, plot, against, output.suffix.lstrip(".").lower()), output)  # type: ignore[arg-type]
    elif output_format == "csv":
        write_output(sweep.to_csv(result), output)
    elif output_format == "parquet":
        write_output(sweep.to_parquet(result), output)
    elif output_format in ("table", "markdown"):
        write_output(rows_text(result, markdown=output_format == "markdown"), output)
    else:
        write_output(sweep.to_json(result), output)


def rows_text(result: "object", markdown: bool = False) -> str:
    """The sweep's rows for people: each column under its label, each value through format_value by
    its declared dimension (a varied workload key with its unit); at most TABLE_ROWS rows."""
    from trainplan.quantities import format_assumption
    from trainplan.workload.schema import input_dimensions
    from trainplan.present.render import format_value, label_of

    columns = result.columns  # type: ignore[attr-defined]
    keys = set(result.keys)  # type: ignore[attr-defined]
    dims = input_dimensions()
    names = list(columns)
    heads = [name if name in keys else label_of(name) for name in names]
    count = len(next(iter(columns.values()))) if columns else 0
    body = []
    for i in range(min(count, TABLE_ROWS)):
        row = []
        for name in names:
            value = columns[name][i]
            value = value.item() if hasattr(value, "item") else value
            row.append(format_assumption(name, value, dims) if name in keys else format_value(name, value))
        body.append(row)
    more = f"({count - TABLE_ROWS:,} more rows: --format csv writes all)" if count > TABLE_ROWS else ""
    if markdown:
        lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines + ([more] if more else [])) + "\n"
    widths = [max(len(h), *(len(r[j]) for r in body)) if body else len(h) for j, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in body]
    return "\n".join(lines + ([more] if more else [])) + "\n"


def register(app: typer.Typer) -> None:
    """Add `sweep` to the trainplan app (called by cli.py's command discovery)."""
    app.command("sweep")(sweep_command)
