"""The options every command that plans shares (issue 28): one spelling, one help, one wording per mistake.

    WORKLOAD.toml            the workload file (the built-in default without one)
    --set KEY=VALUE          override a workload key, units allowed; repeat for more
    --calibration FILE       a calibration TOML written by `trainplan probe`
    -f, --format FORMAT      table for people (default), or a file format the command lists
    -o, --output FILE        write to this file instead of stdout

A wrong --format is refused by check_format with the one wording every command uses:
`--format: expected one of table, json, markdown, got 'csv'`. Importing this module costs
no numpy (trainplan --help stays fast).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.errors import UserError

WorkloadArg = Annotated[Optional[Path], typer.Argument(metavar="WORKLOAD.toml",
                                                       help="workload TOML file; the built-in default without one")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE",
                                                     help="override a workload key (units allowed); repeat for more")]
CalibrationOpt = Annotated[Optional[Path], typer.Option("--calibration", metavar="FILE",
                                                        help="calibration TOML written by `trainplan probe`")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE",
                                                   help="write to this file instead of stdout")]
#: The formats of a command whose answer is a handful of figures.
FIGURE_FORMATS: tuple[str, ...] = ("table", "json", "markdown")


def format_option(formats: tuple[str, ...] = FIGURE_FORMATS) -> Any:
    """The -f/--format option of a command that writes `formats` (the first is the default)."""
    return Annotated[str, typer.Option("--format", "-f", metavar="|".join(formats),
                                       help=f"{formats[0]} (default) or {', '.join(formats[1:])}")]


FormatOpt = format_option()


def check_format(value: str, formats: tuple[str, ...] = FIGURE_FORMATS) -> str:
    """`value` if it is one of `formats`, else the one refusal every command words the same."""
    if value not in formats:
        raise UserError("--format", f"expected one of {', '.join(formats)}, got {value!r}")
    return value


def figures_markdown(title: str, values: dict[str, Any], dimensions: dict[str, str] | None = None,
                     declared: str | None = None) -> str:
    """A small command's figures as a Markdown table: `| figure | value |`. A key declared in
    planning/figures.py under `declared` (e.g. "serving.") takes its label and dimension from there;
    else the dimension named in `dimensions` (a plain count by default), through format_figure."""
    from trainplan.units import format_figure

    figures: dict[str, Any] = {}
    if declared:
        from trainplan.planning.figures import FIGURES

        figures = FIGURES
    dimensions = dimensions or {}
    lines = [f"# {title}", "", "| figure | value |", "|---|---:|"]
    for key, value in values.items():
        spec = figures.get(f"{declared}{key}") if declared else None
        label = spec.label if spec else key.replace("_", " ")
        if isinstance(value, (dict, list, tuple)):
            text = json.dumps(value, default=str)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            text = format_figure(value, spec.dimension if spec else dimensions.get(key, "count"))
        else:
            text = format_figure(value, "text")
        lines.append(f"| {label} | {text.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
