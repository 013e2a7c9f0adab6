"""`trainplan params CONFIG.json [-f table|json|markdown] [-o FILE]`: exact parameter count of a Hugging Face config (docs/index.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import typer

from trainplan.errors import UserError
from trainplan.interfaces.options import FormatOpt, OutputOpt, check_format, figures_markdown
from trainplan.workload.params import ParamCount, count_from_hf_config, load_hf_config

#: Output formats of the command.
FORMATS: tuple[str, ...] = ("table", "json")

#: The figures every output shows, in this order (the JSON keys of docs/parameter-counts.md).
FIGURES: tuple[str, ...] = ("total", "active", "embedding", "lm_head", "per_layer", "family")

#: Each figure in words, for the table and Markdown (the JSON keeps the names above)
LABELS: dict[str, str] = {"total": "total", "active": "active per token", "embedding": "token embedding",
                          "lm_head": "output head", "per_layer": "one layer", "family": "family"}

#: Shape fields the JSON output adds after the figures.
SHAPE_FIELDS: tuple[str, ...] = tuple(
    field.name for field in dataclasses.fields(ParamCount) if field.name not in FIGURES
)

#: Decimal prefixes for the readable column of the table (a count of parameters).
_READABLE_PREFIXES: tuple[tuple[float, str], ...] = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))
#: Significant digits of the readable column.
_READABLE_DIGITS = 3


def _readable(count: int) -> str:
    """7241732096 -> '7.24 B'."""
    for scale, prefix in _READABLE_PREFIXES:
        if count >= scale:
            return f"{count / scale:.{_READABLE_DIGITS}g} {prefix}"
    return str(count)


def as_json(count: ParamCount) -> dict[str, object]:
    """The JSON object the command prints: FIGURES first, then the shape."""
    data = dataclasses.asdict(count)
    return {key: data[key] for key in (*FIGURES, *SHAPE_FIELDS)}


def as_table(count: ParamCount, source: str) -> str:
    """Plain aligned text: one figure a line, exact and readable."""
    lines = [f"parameters of {source} (family {count.family})"]
    numbers = [name for name in FIGURES if name != "family"]
    label_width = max(len(LABELS[name]) for name in numbers)
    exact_width = max(len(f"{getattr(count, name):,}") for name in numbers)
    for name in numbers:
        value = getattr(count, name)
        lines.append(f"  {LABELS[name]:<{label_width}}  {value:>{exact_width},}  {_readable(value)}")
    if count.experts > 1:
        lines.append(f"  ({count.experts_per_token} of {count.experts} experts active per token)")
    if count.tied:
        lines.append("  (output head tied to the token embedding)")
    return "\n".join(lines)


def params_command(
    config: Path = typer.Argument(..., metavar="CONFIG.json", help="A Hugging Face config.json, or a model folder holding one."),
    output_format: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Exact parameter count of a Hugging Face config.json (what transformers would build)."""
    from trainplan.outputs import write_output

    check_format(output_format)
    if config.suffix.lower() == ".toml":  # a workload, not a model config: say so, not "valid JSON"
        raise UserError(str(config), "expected a Hugging Face config.json, got a TOML file (a workload? "
                        "`trainplan plan` plans it and names the parameter count it uses)")
    settings = load_hf_config(config)
    try:
        count = count_from_hf_config(settings)
    except UserError as error:
        raise UserError(f"{config}: {error.where}", error.expected) from None
    if output_format == "json":
        write_output(json.dumps(as_json(count), indent=2), output)
    elif output_format == "markdown":
        values = {LABELS[name]: getattr(count, name) for name in FIGURES}
        write_output(figures_markdown(f"Parameters of {config}", values,
                                      {LABELS[name]: "parameters" for name in FIGURES if name != "family"}), output)
    else:
        write_output(as_table(count, str(config)), output)


def register(app: typer.Typer) -> None:
    """Add `params` to the trainplan app (called by cli.py's command discovery)."""
    app.command("params")(params_command)
