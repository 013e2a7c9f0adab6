"""`trainplan probe decode PATH` on the user's own files (issue 14).

Files are encoded here with a known frame count and keyframe interval, so the counts the probe
reports are checked against the construction: every frame decoded once in order; at random access
the frames decoded per frame used are, target by target, the target's distance from its keyframe
plus one (recomputed here from the targets), and on average close to (G + 1) / 2. The figure the
calibration records is checked against the formula the plan inverts (docs/pipeline-and-bill.md)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from trainplan.measure import probe
from trainplan.workload.load import load_workload

GOPS = (10, 20)
FRAMES = 60


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("videos")
    for i, gop in enumerate(GOPS):
        clip = probe.synthesize_clip(probe.ClipFormat(256, 144, 30.0, 300e3, gop), FRAMES, seed=i)
        (d / f"v{i}.mp4").write_bytes(clip.data)
    return d


def test_in_order_and_random_access_counts(videos):
    files = sorted(videos.glob("*.mp4"))
    seq = probe.decode_files_pyav(files, access="sequential", side=64)
    assert seq.frames_decoded == seq.frames_used == FRAMES * len(files)
    assert seq.frames_decoded_per_frame_used == 1.0 and seq.expected_frames_decoded_per_frame_used == 1.0
    samples = 16
    rnd = probe.decode_files_pyav(files, access="random", side=64, samples=samples, seed=3)
    # by construction a keyframe every G frames: target t costs (t mod G) + 1 decoded frames
    expected_decoded = sum((t % gop) + 1 for gop in GOPS for t in probe.random_targets(FRAMES, gop, samples, 3))
    assert rnd.frames_used == samples * len(files)
    assert rnd.frames_decoded == expected_decoded
    g_formula = np.mean([(gop + 1) / 2 for gop in GOPS])
    assert rnd.expected_frames_decoded_per_frame_used == pytest.approx(g_formula)
    assert rnd.frames_decoded_per_frame_used == pytest.approx(g_formula, rel=0.15)
    # the figure for the plan: frames decoded per CPU-second (seeks included; the plan divides by its own g,
    # issue 25), scaled by pixels to 1080p
    assert rnd.core_fps_1080p == pytest.approx(rnd.frames_decoded / rnd.cpu_seconds * 256 * 144 / (1920 * 1080))


def test_contention_rows_and_skips(videos):
    files = sorted(videos.glob("*.mp4"))
    d = probe.decode_user_files(files, side=64, max_decoders=2, contention_seconds=0.3)
    rows = d["contention"]
    assert [r["decoders"] for r in rows] == [1, 2] and rows[0]["relative_to_one"] == 1.0
    assert rows[1]["relative_to_one"] == pytest.approx(rows[1]["frames_per_cpu_second"] / rows[0]["frames_per_cpu_second"])
    assert d["core_fps_1080p"] == pytest.approx(d["uncontended_core_fps_1080p"] * rows[1]["relative_to_one"])
    try:
        import torchcodec  # noqa: F401
    except Exception:  # noqa: BLE001 - absent, or present without FFmpeg's libraries
        assert any(s.startswith("torchcodec") for s in d["skipped"])
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu:
        assert "torchcodec CUDA (NVDEC): no GPU visible to torch here" in d["skipped"]
    assert all("\n" not in s for s in d["skipped"])


def test_cli_writes_contended_rate_the_plan_uses(videos, tmp_path, cli):
    cal = tmp_path / "cal.toml"
    res = cli("probe", "decode", str(videos), "--set", "data.side=64", "--decoders", "1", "-f", "json",
              "-o", str(cal))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    recorded = tomllib.loads(cal.read_text())
    value = [v for v in recorded["values"] if v["key"] == "cluster.core_fps_1080p"][0]["value"]
    assert value == pytest.approx(d["core_fps_1080p"])
    w = load_workload(None, ["data.width=256", "data.height=144", "data.side=64"], calibration=cal)
    from trainplan.planning.evaluate import build_report

    p = build_report(w)["pipeline"]
    core_fps = value * 1920 * 1080 / (256 * 144)
    assert p["core_fps"] == pytest.approx(core_fps)
    assert p["cores_needed"] == pytest.approx(p["demand_fps"] * 1.0 / core_fps)


def test_cli_bad_video_refused(tmp_path, cli):
    bad = tmp_path / "x.mp4"
    bad.write_bytes(b"nope")
    res = cli("probe", "decode", str(bad))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
