"""The command line: a thin layer over planning.evaluate.build_report and the accounts.

Commands live in interfaces/commands/*.py, each with `register(app)`. COMMANDS below names
each command and its module with a one-line help: `trainplan --help` lists them from the
table and a command's module is imported only when that command runs, so start-up pays
for what is used (benchmarks/bench_startup.py). The table is the only registry: nothing in
commands/ is discovered, so a module that registers sub-commands of another (probe_model's
`probe model`) adds no top-level command (issue 27).
"""

from __future__ import annotations

import importlib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

# typer >= 0.20 vendors its own click (and click itself may be absent); older typer uses click.
try:
    from typer._click import exceptions as _click_exceptions
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as _click_exceptions

_EXIT = (typer.Exit,)
_ABORT = (typer.Abort,)
_USAGE = (_click_exceptions.ClickException,)

from trainplan.errors import UserError
from trainplan.interfaces.helptext import WordedGroup

# command name -> (module in interfaces/commands, one-line help shown by `trainplan --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "params": ("params", "Exact parameter count of a Hugging Face config.json."),
    "profile": ("profile", "Run a training script: measured busy fraction, slowest hop."),
    "serve": ("serve", "Serving: KV cache, batch, tokens/s, cost per request."),
    "roofline": ("serve", "Roofline of the accelerator: ridge point and intensities."),
    "simulate": ("simulate", "The input pipeline as a queue: busy fraction, waits."),
    "solve": ("solve", "The smallest (or largest) value of a key that meets a target."),
    "sweep": ("sweep", "The report's figures over a grid of workloads."),
    "ui": ("ui", "An interactive page: the workload on sliders."),
    "data": ("data", "Data: `data inspect` measures your files (local or s3://, shards); `data mix` the epochs "
                     "of a mixture; `data demos` person-hours of demonstrations."),
    "probe": ("probe", "Measure what the plan assumes; write a calibration file."),
    "scaling": ("scaling", "Scaling laws: compute-optimal N and D; fit a law to runs."),
    "formats": ("formats", "Number formats: bytes, bits, stored values and their errors."),
    "layout": ("layout", "Parallel layouts of a model on N devices: the fastest that fit."),
    "validate-against": ("layout", "Predicted against published step times (sets of published runs)."),
}


def _command_from_module(name: str) -> Any:
    """The click command `name` as its module registers it (imported now, not at start-up)."""
    module = importlib.import_module(f"trainplan.interfaces.commands.{COMMANDS[name][0]}")
    holder = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)
    module.register(holder)
    group = typer.main.get_group(holder)
    return group.commands.get(name)


def _option_name(param: Any) -> str:
    """How the user wrote a parameter: its longest option name, or its metavar for an argument."""
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")] or list(getattr(param, "opts", []))
    if getattr(param, "param_type_name", "") == "argument" or not opts:
        return (getattr(param, "metavar", None) or param.name or "argument").upper()
    return max(opts, key=len)


def _check_number_params(ctx: Any) -> None:
    """The numeric boundary for options and arguments (issue 29): an int or float option passes
    units.number (finite, within float range, no subnormal; an int within 2^53) before the command
    runs, so `--devices 1e40`-sized ints, `--seconds inf` and `--budget 5e-324` are one line, exit 2."""
    from trainplan import units

    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                units.number(item, _option_name(param), whole=isinstance(item, int))


def _check_output_params(ctx: Any) -> None:
    """A file to write (`--output`, `-o`, a `--plot` file) is checked before the command's work: a
    device, a FIFO, a link to nothing, a read-only file or a missing folder fails at once, not after
    a 13-second sweep or an 18-second probe (issue 29). The writer checks again when it writes."""
    from trainplan.outputs import FILE_OPTIONS, STDOUT_NAME, check_output_path

    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if not isinstance(value, Path) or not set(getattr(param, "opts", [])) & set(FILE_OPTIONS):
            continue
        if str(value) != STDOUT_NAME:
            check_output_path(value, _option_name(param), may_replace_input=True)  # no input is read yet
            if _writes_calibration(ctx) and value.is_file():
                # a probe updates a calibration file: one that is not (a workload, a video, a config.json)
                # is refused now, not after the measurement
                from trainplan.errors import UserError
                from trainplan.workload.calibration import read_file

                try:
                    read_file(value, as_input=False)
                except UserError as err:
                    raise UserError(_option_name(param), f"expected a calibration file to update or a new file "
                                    f"({err.where}: {err.expected.split('; this is a workload file')[0]})") from None


def _writes_calibration(ctx: Any) -> bool:
    """Whether the command's --output is a calibration file it updates (every `probe` subcommand)."""
    parent = ctx.parent
    return parent is not None and parent.command is not None and parent.command.name == "probe"


def _check_set_params(ctx: Any) -> None:
    """A key given twice by --set with different values is refused (workload/load.py check_each_key_once)."""
    from trainplan.workload.load import check_each_key_once

    for name in ("set_", "sets"):
        given = ctx.params.get(name)
        if isinstance(given, (list, tuple)) and all(isinstance(a, str) for a in given):
            check_each_key_once(given)


def _with_number_check(command: Any) -> Any:
    """`command` (and every subcommand of a group) checking its numeric parameters before it runs."""
    if command is None or getattr(command, "_numbers_checked", False):
        return command
    original = command.invoke

    def invoke(ctx: Any) -> Any:
        _check_set_params(ctx)
        _check_number_params(ctx)
        _check_output_params(ctx)
        return original(ctx)

    command.invoke = invoke
    command._numbers_checked = True
    for sub in getattr(command, "commands", {}).values():
        _with_number_check(sub)
    return command


class LazyGroup(WordedGroup):
    """The top-level group: commands of COMMANDS are listed from the table and built on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(super().list_commands(ctx)) + [n for n in COMMANDS if n not in self.commands]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = _command_from_module(cmd_name)
            if command is not None:
                self.commands[cmd_name] = command
        return _with_number_check(command)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None:
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
            else:
                rows.append((name, COMMANDS[name][1]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _version(value: bool) -> None:
    if value:
        from trainplan import __version__

        typer.echo(f"trainplan {__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=LazyGroup,
    name="trainplan",
    help="What a training or serving job needs: compute, memory, network, storage, input pipeline, bill.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _options(version: Annotated[Optional[bool], typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")] = None) -> None:
    """What a training or serving job needs: compute, memory, network, storage, input pipeline, bill."""


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    csv = "csv"


# the one set of options every planning command takes (interfaces/options.py)
from trainplan.interfaces.options import CalibrationOpt, OutputOpt, SetOpt, WorkloadArg  # noqa: E402,F401


def render(report: dict, fmt: Format, workload=None, detail: bool = False) -> str:  # noqa: ANN001
    from trainplan.present import render as r

    if fmt == Format.json:
        return r.to_json(report)
    if fmt == Format.csv:
        return r.to_csv(report)
    if fmt == Format.markdown:
        return r.to_markdown(report)
    if fmt == Format.html:
        try:
            from trainplan.present.html import render_html
        except ImportError:
            raise UserError("--format", "html output needs trainplan.present.html (not installed)") from None
        return render_html(report, workload)
    return r.to_table(report, detail=detail)


@app.command()
def plan(
    file: WorkloadArg = None,
    set_: SetOpt = None,
    calibration: CalibrationOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", metavar="table|json|markdown|html|csv",  # noqa: A002
                                        help="table (default) or json, markdown, html, csv (a figure a row)")] = "table",
    output: OutputOpt = None,
    simulate: Annotated[bool, typer.Option("--simulate", help="check the busy fraction with the queue simulation")] = False,
    frames: Annotated[int, typer.Option(metavar="N", help="frames for --simulate (1,000 to 20 million)", min=1000, max=20_000_000)] = 200_000,
    detail: Annotated[bool, typer.Option("--all", "--detail", help="every figure with its meaning, and the "
                                         "assumptions with their sources")] = False,
) -> None:
    """The plan: fit, time, cost, and what the accelerator waits on."""
    from trainplan.outputs import write_output
    from trainplan.planning.evaluate import build_report
    from trainplan.workload.load import load_workload

    from trainplan.interfaces.options import check_format

    fmt = Format(check_format(format, tuple(f.value for f in Format)))  # the one wording of a wrong --format
    workload = load_workload(file, set_ or [], calibration)
    report = build_report(workload)
    if simulate:
        from trainplan.planning.simulation import simulated_check_of

        report["simulation"] = simulated_check_of(workload, frames=frames)
    write_output(render(report, fmt, workload, detail), output)


@app.command()
def validate(file: WorkloadArg = None, set_: SetOpt = None, calibration: CalibrationOpt = None,
             output_format: Annotated[str, typer.Option("--format", "-f", metavar="table|json",
                                                        help="table (default) or json")] = "table",
             output: OutputOpt = None) -> None:
    """Check a workload without planning it (the built-in default without a file)."""
    import json

    from trainplan.interfaces.options import check_format
    from trainplan.outputs import write_output
    from trainplan.planning.evaluate import resolve_model
    from trainplan.workload.load import load_workload

    fmt = check_format(output_format, ("table", "json"))
    workload = load_workload(file, set_ or [], calibration)
    resolve_model(workload)
    name = str(file) if file is not None else "the built-in default workload"
    if fmt == "json":
        write_output(json.dumps({"workload": None if file is None else str(file), "valid": True,
                                 "keys": len(workload.provenance), "accelerator": workload.accelerator.key},
                                indent=2) + "\n", output)
    else:
        write_output(f"{name}: valid ({len(workload.provenance)} keys, accelerator {workload.accelerator.key})\n",
                     output)


def _reads_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_ascii_numbers(argv: list[str]) -> None:
    """Refuse a number written in other than ASCII digits ("٣", "１６"), naming the option it was given to:
    click reads options with int() and float(), which take any script's digits (as 3 and 16), where a person
    checking the command line, TOML and the workload's own parser do not (issue 29)."""
    for i, token in enumerate(argv):
        option, value = (token.split("=", 1) if token.startswith("--") and "=" in token
                         else (argv[i - 1] if i and argv[i - 1].startswith("-") else "argument", token))
        if not value.isascii() and _reads_as_number(value):
            raise UserError(option, f"expected a number in the digits 0-9, got {value!r}")


def refuse_repeated_options(argv: list[str]) -> None:
    """An option that takes one value given twice (`--calibration a.toml --calibration b.toml`, `-f json -f
    table`) is refused, naming it: click keeps the last one silently (issue 29). Options that collect values
    (--set, --vary, --price ...) are left to their own readers; a script's own arguments after `--` are not
    read."""
    command: Any = typer.main.get_command(app)
    tokens = list(argv)
    i = 0
    while hasattr(command, "list_commands") and i < len(tokens):  # the (sub)command the line names
        if tokens[i].startswith("-"):
            break
        try:
            sub = command.get_command(command.context_class(command), tokens[i])
        except Exception:  # noqa: BLE001 - a lazy command that fails to load is reported by the run itself
            return
        if sub is None:
            break
        command, i = sub, i + 1
    # (typer carries its own click: options are told by their kind, not by click's classes)
    single = {opt: param.opts[0] for param in getattr(command, "params", ())
              if getattr(param, "param_type_name", "") == "option" and not param.multiple
              and not getattr(param, "count", False) and not getattr(param, "is_flag", False)
              for opt in (*param.opts, *param.secondary_opts)}
    takes_value = {opt for param in getattr(command, "params", ())
                   if getattr(param, "param_type_name", "") == "option" and not getattr(param, "is_flag", False)
                   for opt in param.opts}
    seen: dict[str, str] = {}
    rest = iter(tokens[i:])
    for token in rest:
        if token == "--":
            break  # what follows is a script's own (profile SCRIPT ... -- ARGS): click reads options up to it
        name = token.split("=", 1)[0] if token.startswith("--") else token
        if name in takes_value and "=" not in token:
            next(rest, None)  # the option's value, whatever it looks like
        if name in single:
            canonical = single[name]
            if canonical in seen:
                also = "" if seen[canonical] == name else f" (as {seen[canonical]} and as {name})"
                raise UserError(canonical, f"expected one value, got it twice{also}: only the last would be used")
            seen[canonical] = name


def _replace_unencodable() -> None:
    """A terminal or pipe in a legacy encoding (PYTHONIOENCODING=ascii, latin-1) cannot write the report's
    '×' or '§': such a character is shown as '?' instead of ending the run in an internal error. A UTF-8
    stream is unchanged."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # a stream that is not a text file (a test's capture)
            pass


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors -> one line on stderr and exit 2; internal errors -> exit 1."""
    import warnings

    from trainplan.limits import forget_inputs, os_error_text, printable

    forget_inputs()  # --output may not replace a file this run reads (issue 16)
    _replace_unencodable()
    # numpy's overflow/invalid warnings are never the user's business: the figures they would
    # flag are refused at the boundary or shown as "n.a." (issue 16)
    warnings.simplefilter("ignore", RuntimeWarning)
    previous = _on_sigterm()
    try:
        from trainplan.outputs import check_output_arguments

        given = list(sys.argv[1:] if argv is None else argv)
        check_output_arguments(given)
        check_ascii_numbers(given)
        refuse_repeated_options(given)
        code = app(args=argv, standalone_mode=False)
        # typer returns the status of an Exit it caught, and turns Ctrl-C (KeyboardInterrupt) into
        # Exit(130): the status is kept, not dropped for 0 (issue 29)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            if code == EXIT_INTERRUPTED:
                print("trainplan: interrupted", file=sys.stderr)
            sys.exit(code)
    except KeyboardInterrupt:  # Ctrl-C outside a command (while parsing, or before typer runs)
        print("trainplan: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Terminated:
        print("trainplan: terminated", file=sys.stderr)
        sys.exit(EXIT_TERMINATED)
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
    except MemoryError:  # past the checked sizes (TRAINPLAN_MEMORY_LIMIT raised above what the machine has)
        print("trainplan: memory: the run asked for more memory than this machine gave it; lower the sizes "
              "asked for (or TRAINPLAN_MEMORY_LIMIT, if it was raised)", file=sys.stderr)
        sys.exit(2)
    except Exception as err:  # an internal error: one line, traceback only on request
        if os.environ.get("TRAINPLAN_DEBUG"):
            raise
        print(f"trainplan: internal error: {type(err).__name__}: {err} (set TRAINPLAN_DEBUG=1 for a traceback)",
              file=sys.stderr)
        sys.exit(1)
    finally:
        _restore_sigterm(previous)
    sys.exit(0)


#: Exit statuses of a run stopped by a signal: 128 + the signal's number, as a shell reports it.
EXIT_INTERRUPTED = 130  # SIGINT (2), Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM (15)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every `finally` runs (a temporary file removed, a
    worker pool stopped) before the process exits with EXIT_TERMINATED. A BaseException, as
    KeyboardInterrupt is: no `except Exception` swallows it."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def _on_sigterm() -> Any:
    """Install the SIGTERM handler (main thread only, and only over the default action); the handler
    it replaced, to restore, or None when nothing was installed."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        return None


def _restore_sigterm(previous: Any) -> None:
    import signal

    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except (ValueError, OSError):  # pragma: no cover
            pass
