"""Start-up cost of the CLI: CPU seconds of `trainplan --help` and `trainplan plan --format json`,
each as a ratio to `python -c "import numpy"` measured in the same run (issue 11).

Targets: <= 0.3 s CPU for --help, <= 0.5 s for plan --format json. CPU time (user + system of
the child) rather than wall time, and the best of several runs, so that other work on a shared
machine inflates the figures less; the ratio to the numpy import is the figure that travels
between machines.

The package's modules are byte-compiled first, as `pip install` does for an installed copy
(benchmarks/_installed.py says why).

Run: .venv/bin/python benchmarks/bench_startup.py   (with CI=true it asserts generous bounds)
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from _installed import byte_compile

RUNS = 7
TARGET_HELP_SECONDS = 0.3
TARGET_PLAN_SECONDS = 0.5
# CI bounds, as ratios to the numpy import (generous: a loaded CI machine is noisy)
CI_HELP_RATIO = 6.0
CI_PLAN_RATIO = 10.0

COMMANDS = {
    "import numpy": [sys.executable, "-c", "import numpy"],
    "trainplan --help": [sys.executable, "-m", "trainplan", "--help"],
    "trainplan plan --format json": [sys.executable, "-m", "trainplan", "plan", "--format", "json"],
}


def cpu_seconds(argv: list[str]) -> float:
    """User + system CPU seconds of one run of `argv` (its children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int = RUNS) -> dict[str, float]:
    """Best CPU seconds of each command over `runs` interleaved rounds."""
    best = {name: float("inf") for name in COMMANDS}
    for _ in range(runs):
        for name, argv in COMMANDS.items():
            best[name] = min(best[name], cpu_seconds(argv))
    return best


def main() -> None:
    compiled = byte_compile()
    print(f"package byte-compiled first, as an install does: {'yes' if compiled else 'no (not writable)'}")
    best = measure()
    numpy_s = best["import numpy"]
    for name, seconds in best.items():
        print(f"{name:<30} {seconds:6.3f} s CPU  {seconds / numpy_s:5.2f}x import numpy")
    help_s, plan_s = best["trainplan --help"], best["trainplan plan --format json"]
    print(f"targets: --help <= {TARGET_HELP_SECONDS} s ({'met' if help_s <= TARGET_HELP_SECONDS else 'missed'}), "
          f"plan --format json <= {TARGET_PLAN_SECONDS} s ({'met' if plan_s <= TARGET_PLAN_SECONDS else 'missed'})")
    if os.environ.get("CI") == "true":
        assert help_s / numpy_s < CI_HELP_RATIO, f"--help costs {help_s / numpy_s:.1f}x import numpy"
        assert plan_s / numpy_s < CI_PLAN_RATIO, f"plan --format json costs {plan_s / numpy_s:.1f}x import numpy"


if __name__ == "__main__":
    main()
