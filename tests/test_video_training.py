"""The end-to-end example: a real DataLoader decoding H.264 with PyAV feeds a real model on the CPU,
and the profiler's measured busy fraction agrees with the plan's prediction, calibrated by the
probes on the same machine, within 15 % relative, for two model sizes (issue 6).

The comparison needs the trainer and the decoder to get the same share of a CPU (each its own
core, or time-sliced alike); on a machine shared with other work a run that did not is
measured again, and if none did the test is skipped with the figures rather than asserting
on the scheduler. Small clips (640x360, 60 frames) and 3 s per setting keep it near a minute.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import video_training as vt  # noqa: E402

TOLERANCE = 0.15


def test_measured_busy_matches_the_plan(tmp_path):
    cfg = vt.Config(seconds=3.0, clips=4)
    settings = [vt.Setting(1, 64, 1), vt.Setting(1, 128, 1)]
    out = vt.run(cfg, settings, workdir=tmp_path, attempts=3)
    rows = out["settings"]
    report = "; ".join(
        f"{r['setting']}: predicted {r['predicted_busy']:.3f}, measured {r['measured_busy']:.3f} "
        f"({r['relative_error'] * 100:+.1f} %), CPU share step {r['step_cpu_share']:.2f} / decode "
        f"{r['decode_cpu_share']:.2f}, worker/probe decode rate {r['worker_to_probe_decode_ratio']:.2f}"
        for r in rows)
    # the plan's side is what the probes measured, put through the workload and the pipeline account
    for r in rows:
        assert r["predicted_bottleneck"] == ("decode" if r["predicted_busy"] < 1 else "accelerator")
        assert r["predicted_demand_fps"] == pytest.approx(r["demand_fps_cpu"], rel=1e-6)
        assert r["predicted_supply_fps"] == pytest.approx(r["workers"] * r["decode_probe_frames_per_cpu_second"],
                                                          rel=1e-6)
        assert r["slowest_hop"] == "decode"
    # two different operating points, so the agreement is not one number twice
    assert rows[1]["predicted_busy"] > rows[0]["predicted_busy"] * 1.3, report
    for r in rows:
        if not r["contended"]:
            assert abs(r["relative_error"]) <= TOLERANCE, report
    if any(r["contended"] for r in rows):
        pytest.skip(f"the machine's other work kept the trainer and decoders from equal CPU shares: {report}")
