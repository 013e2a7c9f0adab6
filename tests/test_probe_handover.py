"""`trainplan probe handover`: a loader worker's CPU per frame besides decoding, into the calibration
file and from there into the plan's decode stage (docs/measurement.md, docs/pipeline-and-bill.md)."""

from __future__ import annotations

import pytest

from trainplan.measure import handover
from trainplan.workload import calibration


def _sets() -> list[str]:
    # in order (g = 1), 1080p, 8 cores at 120 frames/s, no video engines: the decode stage binds
    return ["data.access=\"sequential\"", "data.width=1920", "data.height=1080", "cluster.cores=8",
            "cluster.core_fps_1080p=120", "cluster.nvdec=false"]


def test_the_probe_writes_the_hand_over_and_the_plan_charges_it(cli, tmp_path):
    pytest.importorskip("torch")
    from trainplan.accounts import pipeline as pl
    from trainplan.planning.evaluate import pipeline_inputs
    from trainplan.workload.load import load_workload

    cal = tmp_path / "cal.toml"
    res = cli("probe", "handover", "--side", "32", "--batch", "8", "--seconds", "1", "--output", str(cal))
    assert res.returncode == 0, res.stderr
    assert "data.loader_cpu_per_frame for the plan" in res.stdout
    o = calibration.load(cal)["data.loader_cpu_per_frame"][0]
    # a worker handing over 32 px frames: more than nothing, far less than a decode (a millisecond)
    assert 0 < o < 1e-3
    w = load_workload(None, _sets(), cal)
    prov = w.provenance["data.loader_cpu_per_frame"]
    assert prov.kind == "measured" and "`trainplan probe handover`" in prov.source
    p = pl.pipeline_account(**pipeline_inputs(w))
    # by hand: 8 cores, each frame costs 1/120 s of decode plus o of hand-over
    assert p.supply_fps == pytest.approx(8 / (1 / 120 + o), rel=1e-12)
    assert p.cores_needed == pytest.approx(p.demand_fps * (1 / 120 + o), rel=1e-12)


def test_the_probe_result_adds_up():
    pytest.importorskip("torch")
    r = handover.handover(side=16, batch=4, seconds=0.5)
    assert r.frames > 0 and r.frames % 4 == 0  # whole batches of 4
    assert r.worker_cpu_per_frame == pytest.approx(r.worker_cpu_seconds / r.frames)
    assert r.loader_cpu_per_frame == pytest.approx(max(r.worker_cpu_per_frame - r.making_cpu_per_frame, 0.0))


@pytest.mark.parametrize(("args", "key"), [(["--batch", "0"], "batch"), (["--side", "0"], "side"),
                                           (["--seconds", "0"], "seconds")])
def test_bad_settings_are_one_line_and_exit_2(cli, tmp_path, args, key):
    cal = tmp_path / "cal.toml"
    res = cli("probe", "handover", *args, "--output", str(cal))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in res.stderr
    assert not cal.exists()


def test_without_torch_it_says_why_and_skips(cli, tmp_path, monkeypatch):
    def no_torch():
        raise handover.ProbeSkipped("hand-over: needs torch's DataLoader (pip install torch)")

    monkeypatch.setattr(handover, "_torch", no_torch)
    cal = tmp_path / "cal.toml"
    res = cli("probe", "handover", "--output", str(cal))
    assert res.returncode == 0
    assert res.stderr.strip().splitlines() == ["trainplan: skipped: hand-over: needs torch's DataLoader (pip install torch)"]
    assert not cal.exists()
