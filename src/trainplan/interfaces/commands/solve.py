"""`trainplan solve KEY [FILE.toml] --for "FIGURE>=VALUE" [--largest]` (docs/index.md) -> JSON {"key": ..., "value": ...}."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainplan.errors import UserError, comma_items, refuse_repeats


def solve_command(
    key: Annotated[str, typer.Argument(metavar="KEY", help="the workload key to solve for, e.g. cluster.cores")],
    file: Annotated[Optional[Path], typer.Argument(metavar="WORKLOAD.toml", help="workload TOML file; the built-in default without one")] = None,
    for_: Annotated[Optional[list[str]], typer.Option(
        "--for", metavar="TARGET", help='target, e.g. "pipeline.busy>=0.95", "compute.seconds<=4 h", "memory.fits"; repeat for all of them')] = None,
    largest: Annotated[bool, typer.Option("--largest", help="the largest value meeting the target, not the smallest")] = False,
    cheapest: Annotated[bool, typer.Option(
        "--cheapest", help="with cluster.accelerator: rank the catalogue by training cost")] = False,
    search_range: Annotated[Optional[str], typer.Option("--range", metavar="START:STOP", help="search START:STOP (units allowed)")] = None,
    price: Annotated[Optional[list[str]], typer.Option(
        "--price", metavar="KIND=DOLLARS", help="KIND=DOLLARS per accelerator-hour for cluster.accelerator (default prices.accelerator_hour)")] = None,
    among: Annotated[Optional[str], typer.Option("--among", metavar="KIND,...", help="comma-separated catalogue entries to consider")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE", help="override a workload key (units allowed)")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", metavar="FILE", help="calibration TOML")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", metavar="table|json", help="a table for people (default) or json")] = "table",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="write to this file")] = None,
) -> None:
    """The smallest (or largest) value of KEY that meets a target; the cheapest accelerator kind."""
    from trainplan.planning import solve
    from trainplan.outputs import write_output

    if output_format not in ("json", "table"):
        from trainplan.interfaces.options import check_format
        check_format(output_format, ("table", "json"))
    entries = None if among is None else comma_items(
        "--among", among, "expected catalogue entries such as h100-sxm,a100-sxm-80gb")
    if entries is not None:  # one kind named twice would be ranked twice
        refuse_repeats("--among", [e.lower() for e in entries], among)
    # options of the other kind of solve are refused, not left unread (issue 29)
    if key != "cluster.accelerator":
        for option, given in (("--price", price), ("--among", among), ("--cheapest", cheapest or None)):
            if given:
                raise UserError(option, "expected it only with KEY cluster.accelerator (the kind of accelerator)")
    elif largest or search_range is not None:
        raise UserError("--largest" if largest else "--range",
                        "expected it only with a numeric KEY: cluster.accelerator ranks the catalogue by cost")
    if key == "cluster.accelerator":
        result = solve.cheapest_accelerator(file, set_ or [], for_ or [], calibration,
                                            solve.parse_prices(price or []),
                                            entries)
    else:
        result = solve.solve(file, set_ or [], key, for_ or [], largest, calibration, search_range)
    if output_format == "json":
        write_output(json.dumps(result, indent=2, allow_nan=False), output)
    else:
        from trainplan.quantities import format_input
        from trainplan.units import format_figure
        from trainplan.present.render import format_value, label_of

        lines = [f"{result['key']} = {format_input(result['value'])}"]
        if "candidates" in result:
            lines.append(f"ranked by {result['ranked_by']} = {result['cost_formula']}")
            for c in result["candidates"]:
                shown = format_figure(c.get("training_cost"), "dollars")
                lines.append(f"  {c.get('rank', '-')!s:>2}  {c['accelerator']:<16} {shown:>14}  "
                             f"{'meets' if c['meets'] else 'misses'} {c.get('reason', '')}".rstrip())
        else:
            lines += [f"  {label_of(f)} ({f}) = {format_value(f, v)}" for f, v in result["figures"].items()]
        write_output("\n".join(lines), output)


def register(app: typer.Typer) -> None:
    """Add `solve` to the trainplan app (called by cli.py's command discovery)."""
    app.command("solve")(solve_command)
