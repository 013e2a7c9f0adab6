"""Help texts in words: every command's and subcommand's --help, run in process, names values by
what they are (KEY=VALUE, FILE, N) and never by a Python type (`<list[str]>`, `<int>`, `<path>`);
every option and argument says what it is for."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import pytest
import typer

from trainplan.interfaces import cli
from trainplan.interfaces.helptext import word_for

PYTHON_TYPES = ("<list", "<int", "<float", "<str", "<path", "<bool", "<enum", "<dict")


def _commands() -> list[tuple[list[str], Any]]:
    """(argv path, click command) for the top level and every command and subcommand, found the way
    the command line finds them (list_commands / get_command, so lazily built commands count)."""
    root = typer.main.get_command(cli.app)
    found: list[tuple[list[str], Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        found.append((path, command))
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name])

    walk(root, [])
    return found


COMMANDS = _commands()


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        cli.main([*argv, "--help"])
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_every_command_is_found() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    # one of each kind: a top-level command, a command of cli.py, and subcommands of three groups
    assert {"", "plan", "serve", "sweep", "solve", "probe decode", "data demos", "scaling fit"} <= names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) or "trainplan" for p, _ in COMMANDS])
def test_help_names_values_in_words(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(path, capsys)
    assert "Usage:" in text
    for python_type in PYTHON_TYPES:
        assert python_type not in text, f"{' '.join(path)} --help shows {python_type}...>"


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) or "trainplan" for p, _ in COMMANDS])
def test_every_option_and_argument_has_help(path: list[str], command: Any) -> None:
    for param in command.params:
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        assert (param.help or "").strip(), f"{' '.join(path)}: {'/'.join(param.opts)} has no help text"


def test_words_by_kind_of_value() -> None:
    """The word each kind of value gets, checked on options built the way typer builds them."""
    app = typer.Typer()

    @app.command()
    def one(
        target: Annotated[Path, typer.Argument(help="a file")],
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="k=v")] = None,
        frames: Annotated[int, typer.Option("--frames", help="n")] = 1,
        share: Annotated[float, typer.Option("--share", help="x")] = 0.5,
        read_latency: Annotated[str, typer.Option("--read-latency", help="t")] = "1ms",
        output: Annotated[Optional[Path], typer.Option("--output", help="f")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="q")] = False,
    ) -> None:  # pragma: no cover - never invoked
        pass

    @app.command()
    def two() -> None:  # pragma: no cover - never invoked
        pass

    group = typer.main.get_command(app)
    params = {p.name: p for p in group.commands["one"].params}
    assert word_for(params["target"]) == "TARGET"
    assert word_for(params["set_"]) == "KEY=VALUE"
    assert word_for(params["frames"]) == "N"
    assert word_for(params["share"]) == "NUMBER"
    assert word_for(params["read_latency"]) == "LATENCY"
    assert word_for(params["output"]) == "FILE"
    assert word_for(params["quiet"]) is None  # a flag takes no value


def test_a_metavar_given_in_a_command_module_wins(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["params"], capsys)
    assert "CONFIG.json" in text  # params.py names its argument itself
