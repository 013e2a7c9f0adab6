"""`trainplan simulate --vary`: 1,000 simulations of 1e5 frames, against SimPy and the pure-Python engine.

    .venv/bin/python benchmarks/bench_simulate_vary.py [--frames 100000] [--jobs 0] [--anchor-runs 3]

The grid is 10 buffer sizes x 10 decode cvs x 10 core counts of the default workload
(1,000 simulations), run as the command runs it (trainplan.simulate.grid: workers across
every core, the compiled engine when numba is installed). In the same process, one after
the other: `--anchor-runs` configurations of the grid simulated one at a time by SimPy
(tests/simpy_reference.py) and by the pure-Python engine, scaled to 1,000 simulations;
the ratios are the grid's speed against theirs. Both anchors run on one core, the grid
on all of them: the ratio includes the parallelism, as a user sees it.

Target: the grid in under 60 s with the compiled engine (120 s under CI=true, a loaded
machine), and >= 20x SimPy (>= 5x under CI). Prints one JSON object; exits 1 when a bound
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from simpy_reference import simulate_simpy  # noqa: E402

from trainplan.simulate import fast, grid  # noqa: E402
from trainplan.planning.simulation import queue_spec_from_workload  # noqa: E402
from trainplan.simulate.queue import sample_service_times, simulate  # noqa: E402
from trainplan.workload.load import load_workload  # noqa: E402

VARY = ["buffer=1,2,4,8,16,32,64,128,256,512", "cv=0,0.1,0.2,0.3,0.5,0.7,1,1.5,2,3", "cores=4:40:4"]
SECONDS = 60.0
SECONDS_CI = 120.0
VS_SIMPY = 20.0
VS_SIMPY_CI = 5.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--anchor-runs", type=int, default=3)
    args = ap.parse_args()
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")

    def base_spec(sets: list[str]):
        w = load_workload(None, sets, None)
        return queue_spec_from_workload(w, frames=args.frames)[0]

    varies = [grid.parse_vary(v) for v in VARY]
    t_build = time.perf_counter()
    points, specs = grid.grid_specs(base_spec, varies, 250)
    build_seconds = time.perf_counter() - t_build
    engine = "compiled" if fast.available() else "python"
    jobs = args.jobs or grid.default_jobs()
    t0 = time.perf_counter()
    rows = grid.run_grid(specs, engine, jobs)
    grid_seconds = time.perf_counter() - t0
    assert len(rows) == len(specs) == 1000

    # anchors: a few configurations spread over the grid, one at a time on one core
    picks = [specs[i * len(specs) // args.anchor_runs + len(specs) // (2 * args.anchor_runs)]
             for i in range(args.anchor_runs)]
    t_simpy = t_python = 0.0
    agree = True
    for spec in picks:
        times = sample_service_times(spec)
        t = time.perf_counter()
        ref = simulate_simpy(times.read_seconds, times.decode_work, spec.decoder_seconds_per_frame,
                             times.step_seconds, spec.buffer_frames, spec.read_ahead_frames)
        t_simpy += time.perf_counter() - t
        t = time.perf_counter()
        r = simulate(spec, times, timeline_limit=0, engine="python")
        t_python += time.perf_counter() - t
        agree &= abs(r.busy - ref.busy) < 1e-9
    scale = len(specs) / len(picks)
    report = {
        "simulations": len(specs), "frames": args.frames, "engine": engine, "jobs": jobs,
        "grid_build_seconds": build_seconds,
        "grid_seconds": grid_seconds,
        "seconds_per_simulation": grid_seconds / len(specs),
        "simpy_seconds_for_the_grid": t_simpy * scale,
        "python_engine_seconds_for_the_grid": t_python * scale,
        "vs_simpy": t_simpy * scale / grid_seconds,
        "vs_python_engine_one_core": t_python * scale / grid_seconds,
        "anchor_busy_agrees_with_simpy": agree,
        "load_average": os.getloadavg(),
        "measured": "in one process, one after the other",
    }
    failures = []
    limit = SECONDS_CI if ci else SECONDS
    if engine == "compiled" and grid_seconds > limit:
        failures.append(f"1,000 simulations took {grid_seconds:.1f} s > {limit:.0f} s")
    floor = VS_SIMPY_CI if ci else VS_SIMPY
    if report["vs_simpy"] < floor:
        failures.append(f"grid only {report['vs_simpy']:.1f}x SimPy < {floor:.0f}x")
    if not agree:
        failures.append("the python engine and SimPy disagree on an anchor configuration")
    if engine != "compiled":
        report["note"] = f"pure-Python engine (no numba): {fast.INSTALL_HINT}"
    report["failures"] = failures
    print(json.dumps(report, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
