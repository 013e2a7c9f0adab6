"""Speed of the queue engine (docs/simulation.md) against the SimPy reference model, side by side.

    .venv/bin/python benchmarks/bench_queue.py [--frames-simpy N] [--frames 1000000]

1. One service-time sample of the default workload (reference workload: 8 CPU
   decoders at 1/120 s, a demand of 2,770.78 frames/s, 33 kB frames read at 1.5 GB/s),
   run by the engine (`trainplan.simulate.queue.simulate`, full result: statistics and
   timeline) and by the SimPy model of tests/simpy_reference.py, which must agree on
   the busy fraction. Frames per second of each, best of a few runs, in one process.
2. A second sample of the accelerator-bound variant (demand 900 frames/s, lognormal
   decode times, cv 0.5), where the buffer is full and decoders block: the heavier
   case for both.
3. One million frames of the default workload, sampling included: wall seconds.

Targets: the engine at least 10x the SimPy model's frames/s, and 1e6 frames in a
few seconds. Under CI (CI=true) the bounds are generous (a loaded machine): 10x and
15 s. Prints one JSON object; exits 1 when a bound is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from simpy_reference import simulate_simpy  # noqa: E402

from trainplan.simulate.queue import QueueSpec, Variability, sample_service_times, simulate  # noqa: E402

DEMAND = 0.4 * 989.5e12 / (6 * 93e6 * 256)  # frames/s, reference workload
READ = 8e6 / 30 / 8 / 1.5e9  # seconds per 33,333-byte frame at 1.5 GB/s
DEFAULT = QueueSpec(READ, (1 / 120,) * 8, 1 / DEMAND)
SPEEDUP_TARGET = 10.0
MILLION_SECONDS_TARGET = 5.0  # "a few seconds" on an idle machine
MILLION_SECONDS_CI = 15.0


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def side_by_side(spec: QueueSpec, frames: int, repeats: int) -> dict:
    spec = replace(spec, frames=frames)
    times = sample_service_times(spec)
    t_ours, ours = best_of(lambda: simulate(spec, times), repeats)
    t_ref, ref = best_of(lambda: simulate_simpy(times.read_seconds, times.decode_work,
                                                spec.decoder_seconds_per_frame, times.step_seconds,
                                                spec.buffer_frames, spec.read_ahead_frames),
                         max(1, repeats - 1))
    return {
        "frames": frames,
        "engine_seconds": t_ours,
        "simpy_seconds": t_ref,
        "engine_frames_per_second": frames / t_ours,
        "simpy_frames_per_second": frames / t_ref,
        "simpy_events": ref.events,
        "speedup": t_ref / t_ours,
        "busy_engine": ours.busy,
        "busy_simpy": ref.busy,
        "busy_agree": abs(ours.busy - ref.busy) < 1e-9,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames-simpy", type=int, default=50_000)
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")

    default = side_by_side(DEFAULT, args.frames_simpy, args.repeats)
    blocked = side_by_side(replace(DEFAULT, step_seconds_per_frame=1 / 900,
                                   variability=Variability("lognormal", 0.5)), args.frames_simpy, args.repeats)
    million_spec = replace(DEFAULT, frames=args.frames)
    t_million, res = best_of(lambda: simulate(million_spec), 1 if ci else 2)
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    bound = MILLION_SECONDS_CI if ci else MILLION_SECONDS_TARGET
    report = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_average": load},
        "default_workload": default,
        "accelerator_bound_lognormal": blocked,
        "million": {"frames": args.frames, "seconds": t_million, "frames_per_second": args.frames / t_million,
                    "busy": res.busy, "formula_busy": res.formula_busy},
        "targets": {"speedup": SPEEDUP_TARGET, "million_seconds": bound},
    }
    failures = []
    for name, row in (("default_workload", default), ("accelerator_bound_lognormal", blocked)):
        if row["speedup"] < SPEEDUP_TARGET:
            failures.append(f"{name}: engine only {row['speedup']:.1f}x the SimPy model")
        if not row["busy_agree"]:
            failures.append(f"{name}: busy {row['busy_engine']} vs SimPy {row['busy_simpy']}")
    if args.frames == 1_000_000 and t_million > bound:
        failures.append(f"1e6 frames took {t_million:.2f} s > {bound} s")
    report["failures"] = failures
    print(json.dumps(report, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
