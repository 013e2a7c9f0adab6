"""`trainplan data mix` (epochs of each source of a mixture) and `trainplan data demos`
(person-hours for N demonstrations), docs/serving-scaling-energy.md. Thin: the formulas are in trainplan.accounts.datamix."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from trainplan.accounts import datamix
from trainplan import units
from trainplan.errors import UserError, named_as

data_app = typer.Typer(help="Data: epochs of each source of a mixture; person-hours of demonstrations.",
                       no_args_is_help=True)


def _source(text: str) -> datamix.Source:
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise UserError("--source", f"expected NAME:TOKENS:WEIGHT such as web:2T:0.7, got {text!r}")
    name, tokens, weight = parts
    return datamix.Source(name, units.parse(tokens, "count", f"--source {name} tokens"),
                          units.parse(weight, "fraction", f"--source {name} weight"))


@data_app.command("mix")
def mix(
    tokens: Annotated[str, typer.Option("--tokens", help="tokens the run reads, e.g. 15T")],
    source: Annotated[list[str], typer.Option("--source", help="NAME:TOKENS:WEIGHT, repeated")],
) -> None:
    """Epochs of each source: tokens read (weight share x total) / tokens available."""
    with named_as({"training.tokens": "--tokens", "sources.": "--source "}):  # the flags typed (issue 16)
        result = datamix.mixture_epochs([_source(s) for s in source], units.parse(tokens, "count", "--tokens"))
    typer.echo(json.dumps(asdict(result), indent=2))


@data_app.command("demos")
def demos(
    count: Annotated[int, typer.Argument(help="demonstrations to keep", min=0)],
    task: Annotated[str, typer.Option("--task", help="seconds per task, e.g. 45s or 1 min")] = "60 s",
    reset: Annotated[str, typer.Option("--reset", help="seconds per reset")] = "20 s",
    success: Annotated[float, typer.Option("--success", help="share of attempts kept")] = 1.0,
    operators: Annotated[int, typer.Option("--operators", min=1, help="operators recording in parallel (wall hours = person-hours / operators)")] = 1,
) -> None:
    """Person-hours for N demonstrations: N / success x (task + reset)."""
    with named_as({"success_rate": "--success", "demonstrations": "N", "operators": "--operators",
                   "seconds_per_task": "--task", "seconds_per_reset": "--reset"}):
        result = datamix.demonstration_hours(count, units.parse(task, "time", "--task"),
                                             units.parse(reset, "time", "--reset"), success, operators)
    typer.echo(json.dumps(asdict(result), indent=2))


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
