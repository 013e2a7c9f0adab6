"""The own-data end-to-end example (examples/video_pipeline_e2e.py), in its quick form: H.264 files
written with PyAV/libx264 -> data inspect -> probe decode -> plan -> a torch DataLoader whose worker
decodes the files into a small model, profiled.

What the test holds on a shared 2-core machine: the plan and the measured stall split name the same
hop, decode when the loader is CPU-bound and read when the reads are slowed, and the plan's busy
fraction is near the profiled one. The 10 % target of the full example is a figure of a quiet
machine (docs/measurement.md reports it); here the bound is generous, and a run in which the trainer's
step got under 80 % of a core (other work on the machine) is judged on the hop alone.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import video_pipeline_e2e as e2e  # noqa: E402

GENEROUS = 0.35  # relative: timings on a loaded CI machine wander
ATTEMPTS = 2  # a second run where the first missed a timing check; the retry is reported, never silent


def timing_misses(out: dict) -> list[str]:
    """The checks of one run that depend on timing (the hop named, busy near the plan), as lines."""
    misses = []
    for r in out["settings"]:
        if r["predicted_bottleneck"] != r["expected_hop"]:
            misses.append(f"{r['setting']}: plan binds {r['predicted_bottleneck']}, expected {r['expected_hop']}")
        if r["stall_names"] != r["expected_hop"]:
            misses.append(f"{r['setting']}: stall split names {r['stall_names']}, expected {r['expected_hop']}")
        if r["step_cpu_share"] >= 0.8 and abs(r["relative_error"]) > GENEROUS:
            misses.append(f"{r['setting']}: busy {r['measured_busy']:.3f} measured against {r['predicted_busy']:.3f} "
                          f"planned ({r['relative_error']:+.1%}, load {r['load_average']:.1f})")
    decode, read = out["settings"]
    # the read-bound loader waits on I/O: its fetch stall is most of the wait; the decode-bound one none of it
    if not read["stall_fetch"] > read["stall_prep"]:
        misses.append(f"read-bound: fetch {read['stall_fetch']} not above prep {read['stall_prep']}")
    if not decode["stall_prep"] > decode["stall_fetch"]:
        misses.append(f"decode-bound: prep {decode['stall_prep']} not above fetch {decode['stall_fetch']}")
    return misses


def test_split_names_the_binding_hop_and_busy_is_near_the_plan() -> None:
    for attempt in range(1, ATTEMPTS + 1):
        out = e2e.run_all(e2e.QUICK, seconds=2.0, repeats=1, probe_seconds=1.0, min_steps=8)
        rows = out["settings"]
        assert [r["expected_hop"] for r in rows] == ["decode", "read"]
        aggregate = out["inspect"]
        # data inspect measured what the example wrote: 640x360 H.264, a keyframe every 15 frames, 30 fps
        assert (aggregate["width"], aggregate["height"], aggregate["codec"]) == (640, 360, "h264")
        assert aggregate["gop_median"] == 15
        for r in rows:
            # every step the profile counted was fetched after the warm-up (the flaky failure: none counted)
            assert r["steps"] >= 8, r
            assert 0 < r["measured_busy"] <= 1 and 0 < r["predicted_busy"] <= 1
        misses = timing_misses(out)
        if not misses:
            return
        if attempt < ATTEMPTS:
            warnings.warn(f"e2e attempt {attempt} missed (retrying once): " + "; ".join(misses), stacklevel=1)
    raise AssertionError(f"e2e missed in {ATTEMPTS} attempts: " + "; ".join(misses))
