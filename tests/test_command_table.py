"""The command table is the one registry of top-level commands (issue 27): nothing is discovered from
files, so a module that adds sub-commands to another command adds no top-level one."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from trainplan.interfaces import cli

COMMANDS_DIR = Path(cli.__file__).parent / "commands"


def test_the_top_level_commands_are_the_tables() -> None:
    group = cli.typer.main.get_command(cli.app)
    built_in = {"plan", "validate"}  # written in cli.py itself
    assert set(group.list_commands(None)) == built_in | set(cli.COMMANDS)


def test_a_sub_command_module_adds_no_top_level_command() -> None:
    res = subprocess.run([sys.executable, "-m", "trainplan", "model", "--help"], capture_output=True, text=True)
    assert res.returncode == 2 and "No such command 'model'" in res.stderr
    res = subprocess.run([sys.executable, "-m", "trainplan", "probe", "model", "--help"], capture_output=True,
                         text=True)
    assert res.returncode == 0 and "config.json" in res.stdout


def test_every_command_module_is_reached_from_the_table() -> None:
    """Each module of interfaces/commands is named in COMMANDS or imported by one that is."""
    named = {module for module, _ in cli.COMMANDS.values()}
    reached = set(named)
    for name in named:
        tree = ast.parse((COMMANDS_DIR / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "trainplan.interfaces.commands":
                reached |= {alias.name for alias in node.names}
    modules = {p.stem for p in COMMANDS_DIR.glob("*.py") if p.stem != "__init__"}
    assert modules <= reached, f"not reached from COMMANDS: {sorted(modules - reached)}"
