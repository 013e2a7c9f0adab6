"""The command line: a thin layer over plan.build_report and the accounts.

Commands live in trainplan/commands/*.py, each with `register(app)`; this module
discovers them, so adding a command touches no shared file.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

# typer >= 0.20 vendors its own click (and click itself may be absent); older typer uses click.
try:
    from typer._click import exceptions as _click_exceptions
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as _click_exceptions

_EXIT = (typer.Exit,)
_ABORT = (typer.Abort,)
_USAGE = (_click_exceptions.ClickException,)

from trainplan.errors import UserError

app = typer.Typer(
    name="trainplan",
    help="What a training or serving job needs: compute, memory, network, storage, input pipeline, bill.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


WorkloadArg = Annotated[Optional[Path], typer.Argument(help="workload TOML file; the built-in default without one")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="override a workload key: KEY=VALUE (units allowed)")]
CalibrationOpt = Annotated[Optional[Path], typer.Option("--calibration", help="calibration TOML written by `trainplan probe`")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="write to this file instead of stdout")]


def render(report: dict, fmt: Format, workload=None) -> str:  # noqa: ANN001
    from trainplan.present import render as r

    if fmt == Format.json:
        return r.to_json(report)
    if fmt == Format.markdown:
        return r.to_markdown(report)
    if fmt == Format.html:
        try:
            from trainplan.present.html import render_html
        except ImportError:
            raise UserError("--format", "html output needs trainplan.present.html (not installed)") from None
        return render_html(report, workload)
    return r.to_table(report)


@app.command()
def plan(
    file: WorkloadArg = None,
    set_: SetOpt = None,
    calibration: CalibrationOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,  # noqa: A002
    output: OutputOpt = None,
    simulate: Annotated[bool, typer.Option("--simulate", help="check the busy fraction with the queue simulation")] = False,
    frames: Annotated[int, typer.Option(help="frames for --simulate", min=1000, max=20_000_000)] = 200_000,
) -> None:
    """The whole estimate: compute, memory, network, storage, pipeline, bill."""
    from trainplan.present.outputs import write_output
    from trainplan.planning.evaluate import build_report
    from trainplan.workload.schema import load_workload

    workload = load_workload(file, set_ or [], calibration)
    report = build_report(workload)
    if simulate:
        from trainplan.simulate.queue import simulated_check

        report["simulation"] = simulated_check(workload, frames=frames)
    write_output(render(report, format, workload), output)


@app.command()
def validate(file: Annotated[Path, typer.Argument(help="workload TOML file")],
             set_: SetOpt = None, calibration: CalibrationOpt = None) -> None:
    """Check a workload without planning it."""
    from trainplan.planning.evaluate import resolve_model
    from trainplan.workload.schema import load_workload

    workload = load_workload(file, set_ or [], calibration)
    resolve_model(workload)
    typer.echo(f"{file}: valid ({len(workload.provenance)} keys, accelerator {workload.accelerator.key})")


def _register_commands() -> None:
    from trainplan.interfaces import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"trainplan.interfaces.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors -> one line on stderr and exit 2; internal errors -> exit 1."""
    import warnings

    from trainplan.workload.limits import forget_inputs, os_error_text, printable

    forget_inputs()  # --output may not replace a file this run reads (issue 16)
    # numpy's overflow/invalid warnings are never the user's business: the figures they would
    # flag are refused at the boundary or shown as "n.a." (issue 16)
    warnings.simplefilter("ignore", RuntimeWarning)
    try:
        from trainplan.present.outputs import check_output_arguments

        check_output_arguments(list(sys.argv[1:] if argv is None else argv))
        app(args=argv, standalone_mode=False)
    except UserError as err:
        print(f"trainplan: {err}", file=sys.stderr)
        sys.exit(2)
    except _EXIT as err:
        sys.exit(getattr(err, "exit_code", 0))
    except _ABORT:
        print("trainplan: aborted", file=sys.stderr)
        sys.exit(1)
    except _USAGE as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # bare `trainplan`: the help, as asked
            print(err.ctx.get_help() if getattr(err, "ctx", None) else err.format_message(), file=sys.stderr)
            sys.exit(2)
        message = " ".join(err.format_message().split())
        print(f"trainplan: {message}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as err:  # a path the user gave that the system refused: one line, exit 2
        where = printable(str(err.filename), one_line=True) if err.filename is not None else "file"
        print(f"trainplan: {where}: {os_error_text(err)}", file=sys.stderr)
        sys.exit(2)
    except RecursionError:
        print("trainplan: input: nested too deeply to read", file=sys.stderr)
        sys.exit(2)
    except Exception as err:  # an internal error: one line, traceback only on request
        if os.environ.get("TRAINPLAN_DEBUG"):
            raise
        print(f"trainplan: internal error: {type(err).__name__}: {err} (set TRAINPLAN_DEBUG=1 for a traceback)",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
