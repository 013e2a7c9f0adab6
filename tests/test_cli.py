"""The command line: a handful of subprocess smoke tests (as a user runs it), the rest in-process,
and the lazy start-up (a command's module is imported only when that command runs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainplan import __version__
from trainplan.interfaces.cli import COMMANDS

# ---------------------------------------------------------------- subprocess smoke tests


def test_smoke_help_and_version(cli_subprocess):
    res = cli_subprocess("--help")
    assert res.returncode == 0 and "Commands:" in res.stdout
    for name in ["plan", "validate", *COMMANDS]:
        assert f"  {name} " in res.stdout, name
    res = cli_subprocess("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"trainplan {__version__}"


def test_smoke_plan_json(cli_subprocess):
    res = cli_subprocess("plan", "--format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    # busy = 8 cores x 120 frames/s / demand 0.4 x 989.5e12 / (6 x 93e6 x 256) = 960 / 2770.78 (docs/pipeline-and-bill.md)
    assert report["pipeline"]["busy"] == pytest.approx(960 / (0.4 * 989.5e12 / (6 * 93e6 * 256)), rel=1e-12)


def test_smoke_bad_input_is_one_line_and_exit_2(cli_subprocess):
    res = cli_subprocess("plan", "--set", "cluster.cores=-1")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "cluster.cores" in res.stderr
    assert "Traceback" not in res.stderr


def test_smoke_lazy_command_runs(cli_subprocess):
    res = cli_subprocess("sweep", "--vary", "cluster.cores=8,16", "--format", "json", "--figures", "pipeline.busy")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["cluster.cores"] for r in rows] == [8, 16]


# ---------------------------------------------------------------- lazy start-up


def _modules_after(argv: list[str]) -> set[str]:
    code = ("import sys, io, contextlib\nfrom trainplan.interfaces import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try: cli.main({argv!r})\n    except SystemExit: pass\n"
            "print('\\n'.join(sorted(sys.modules)))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split())


def test_help_imports_no_command_module_and_no_numpy():
    loaded = _modules_after(["--help"])
    commands = {m for m in loaded if m.startswith("trainplan.interfaces.commands.")}
    named = {f"trainplan.interfaces.commands.{module}" for module, _ in COMMANDS.values()}
    assert not commands & named
    assert "numpy" not in loaded and "pydantic" not in loaded


def test_plan_imports_only_what_it_uses():
    loaded = _modules_after(["plan", "--format", "json"])
    named = {f"trainplan.interfaces.commands.{module}" for module, _ in COMMANDS.values()}
    assert not loaded & named
    assert not any(m.startswith(("trainplan.measure", "trainplan.simulate", "matplotlib", "rich.table"))
                   for m in loaded)


# ---------------------------------------------------------------- in-process


def test_every_command_builds_and_has_help(cli):
    for name in COMMANDS:
        res = cli(name, "--help")
        assert res.returncode == 0, (name, res.stderr)
        assert "Usage:" in res.stdout


def test_unknown_command_is_a_usage_error(cli):
    res = cli("plam")
    assert res.returncode == 2 and "plam" in res.stderr


def test_in_process_matches_the_subprocess(cli, cli_subprocess):
    a, b = cli("plan", "--format", "json"), cli_subprocess("plan", "--format", "json")
    assert a.returncode == b.returncode == 0 and json.loads(a.stdout) == json.loads(b.stdout)
