import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m trainplan ARGS` in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "trainplan", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def plan_json():
    def _plan(*args: str) -> dict:
        res = run_cli("plan", *args, "--format", "json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    return _plan
