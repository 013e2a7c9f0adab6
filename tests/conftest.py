import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_cli_subprocess(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m trainplan ARGS` in a subprocess, as a user would (the smoke tests)."""
    return subprocess.run([sys.executable, "-m", "trainplan", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `trainplan ARGS` in this process through cli.main(argv): exit status, stdout and stderr as
    a subprocess would give them, without paying the interpreter's start-up per test."""
    from trainplan.interfaces.cli import main

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    code = 0
    here = os.getcwd()
    try:
        os.chdir(cwd or ROOT)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        os.chdir(here)
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8", errors="replace"))
    return subprocess.CompletedProcess(["trainplan", *args], code, texts[0], texts[1])


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def cli_subprocess():
    return run_cli_subprocess


@pytest.fixture
def plan_json():
    def _plan(*args: str) -> dict:
        res = run_cli("plan", *args, "--format", "json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    return _plan


@pytest.fixture(autouse=True)
def _keep_the_scheduling_policy():
    """SVT-AV1's encoder (libsvtav1, which tests/test_inspect_corpus.py writes a clip with) switches the
    thread that calls it to SCHED_FIFO where it may (as root). Every process the suite starts afterwards
    inherits the real-time policy: a `simulate --vary -j 2` then runs its two workers at FIFO priority on
    both cores, the test's own thread cannot run until they finish, and a signal test sends its signal to a
    process that has already exited (issue 29's 'workers did not start'). The policy is put back after
    every test that changed it."""
    policy = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None
    yield
    if policy is not None and os.sched_getscheduler(0) != policy:
        os.sched_setscheduler(0, policy, os.sched_param(0))
