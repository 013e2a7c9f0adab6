"""The end-to-end example: a real DataLoader decoding H.264 with PyAV feeds a real model on the CPU,
and the profiler's measured busy fraction agrees with the plan's prediction, calibrated by the
probes on the same machine, within 15 % relative, for two model sizes (issue 6).

Each setting is probed and run five times and judged by its median run: on a shared VM the
rates wander by 10-25 % from one minute to the next. A run in which the trainer and the
decoder did not get the same share of a CPU answers a question about the scheduler, not the
plan; if most runs of a setting were such, the test is skipped with the figures. A setting whose
median misses is run again once, and the miss is reported as a warning, never silent: on this
2-core VM a neighbour's minute of work can move every run of one setting together. Small clips
(640x360, 60 frames), 1.5 s probes and 3 s runs keep it near a minute and a half on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# The example forks its probes and DataLoader workers. Forked from this test process, which earlier tests
# left with threads (a local S3 server, a Dask cluster, the web server), a child can inherit a lock one of
# them held and wait on it for ever; so the example runs in an interpreter of its own.
RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
import video_training as vt
cfg = vt.Config(seconds=3.0, probe_seconds=1.5, clips=4)
out = vt.run(cfg, [vt.Setting(1, 96, 1), vt.Setting(1, 144, 1)], workdir=__import__("pathlib").Path(sys.argv[2]), repeats=5)
print(json.dumps(out, default=str))
"""

TOLERANCE = 0.15
DISTINCT_POINTS = 0.1  # predicted busy this much apart (relative) makes two operating points


def _describe(r: dict) -> str:
    runs = ", ".join(f"{x['relative_error'] * 100:+.1f} %" for x in r["runs"])
    return (f"{r['setting']}: predicted {r['predicted_busy']:.3f}, measured {r['measured_busy']:.3f} "
            f"({r['relative_error'] * 100:+.1f} %; runs {runs}); supply probe {r['decode_probe_frames_per_cpu_second']:.0f} "
            f"vs delivered {r['measured_delivered_fps']:.0f} frames/s; demand probe {r['demand_fps_cpu']:.0f} vs "
            f"run {r['measured_demand_fps']:.0f}; CPU share step {r['step_cpu_share']:.2f} / decode "
            f"{r['decode_cpu_share']:.2f}")


ATTEMPTS = 2  # a second full run where the first missed; the retry is reported, never silent


def _run_example(workdir: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", RUN, str(EXAMPLES), str(workdir)], capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["settings"]


def _judged(rows: list[dict]) -> list[dict]:
    """The settings whose runs mostly gave the trainer and the decoders equal CPU shares (the others are skipped)."""
    return [r for r in rows if r["flagged_runs"] * 2 <= len(r["runs"])]


def _misses(rows: list[dict]) -> list[dict]:
    return [r for r in _judged(rows) if abs(r["relative_error"]) > TOLERANCE]


def test_measured_busy_matches_the_plan(tmp_path):
    for attempt in range(1, ATTEMPTS + 1):
        rows = _run_example(tmp_path / f"attempt{attempt}")
        report = "; ".join(_describe(r) for r in rows)
        print(report)  # shown with pytest -s or -rP: the figures for the note
        if not _misses(rows) or attempt == ATTEMPTS:
            break
        warnings.warn(f"video training attempt {attempt} missed {TOLERANCE:.0%} (retrying once): {report}",
                      stacklevel=1)
    # the plan's side is what the probes measured, put through the workload and the pipeline account
    for r in rows:
        assert r["predicted_bottleneck"] == ("decode" if r["predicted_busy"] < 1 else "accelerator")
        assert r["predicted_demand_fps"] == pytest.approx(r["demand_fps_cpu"], rel=1e-6)
        assert r["predicted_supply_fps"] == pytest.approx(r["workers"] * r["decode_probe_frames_per_cpu_second"],
                                                          rel=1e-6)
        assert r["slowest_hop"] == "decode"
    judged = _judged(rows)
    for r in judged:
        assert abs(r["relative_error"]) <= TOLERANCE, report
    if len(judged) < len(rows):
        pytest.skip(f"other work kept the trainer and decoders from equal CPU shares in most runs: {report}")
    # two different operating points, so the agreement is not one number twice: the larger model demands
    # fewer frames a second, so its busy is higher (capped at 1, where the decoders keep up). How far apart
    # they land depends on this machine's speed at the time; one point twice cannot test the plan
    assert rows[1]["predicted_demand_fps"] < rows[0]["predicted_demand_fps"], report
    if rows[1]["predicted_busy"] <= rows[0]["predicted_busy"] * (1.0 + DISTINCT_POINTS):
        pytest.skip(f"this machine put both settings at one operating point: {report}")
