"""The profiler: busy fraction of a loop whose fetch and step times are known by construction.

Fetches and steps sleep for set times, so the expected busy fraction is written out by
hand: step / (step + fetch). Sleeps are robust to a loaded machine; the tolerances
allow for scheduler jitter of a few milliseconds.
"""

from __future__ import annotations

import json
import time

import pytest

from trainplan.measure import profiler as profile


def sleepy(n: int, fetch: float, frames: int = 4, slow_first: int = 0):
    for i in range(n):
        time.sleep(0.15 if i < slow_first else fetch)
        yield [0.0] * frames


def test_busy_is_step_over_wall():
    """fetch 20 ms, step 10 ms: busy = 10 / (10 + 20) = 1/3; the demand is 4 frames / 10 ms = 400/s."""
    prof = profile.Profiler(warmup=2)
    for _ in prof.wrap(sleepy(22, 0.02, slow_first=2)):
        time.sleep(0.01)
    r = prof.result()
    assert r.steps == 20 and r.frames == 80 and r.frames_per_batch == 4
    assert r.busy == pytest.approx(1 / 3, abs=0.08)
    assert r.busy + r.wait_share == pytest.approx(1.0, abs=1e-9)  # no explicit step: all of the body is step
    assert r.demand_fps == pytest.approx(400, rel=0.3)
    assert r.delivered_fps == pytest.approx(r.frames / r.wall_seconds)
    # the slow warm-up fetches (150 ms) are not counted
    assert r.mean_fetch_seconds < 0.1
    prof.close()


def test_explicit_step_separates_other_time():
    with profile.Profiler(warmup=0) as prof:
        for _ in prof.wrap(sleepy(10, 0.005)):
            with prof.step():
                time.sleep(0.01)
            time.sleep(0.005)  # logging, say: not the accelerator's work
        r = prof.result()
    assert r.step_seconds == pytest.approx(0.1, abs=0.03)
    assert r.other_seconds == pytest.approx(0.05, abs=0.03)
    assert r.busy == pytest.approx(0.5, abs=0.1)  # 10 / (5 + 10 + 5)
    assert r.step_cpu_share < 0.5  # sleeping is not running on a CPU


def test_break_closes_the_last_step():
    with profile.Profiler(warmup=0) as prof:
        for i, _ in enumerate(prof.wrap(sleepy(100, 0.001))):
            time.sleep(0.01)
            if i == 4:
                break
        r = prof.result()
    assert r.steps == 5


def test_comparison_with_the_plan():
    with profile.Profiler(warmup=0) as prof:
        for _ in prof.wrap(sleepy(6, 0.01)):
            time.sleep(0.01)
        r = prof.result(predicted={"pipeline": {"busy": {"value": 0.5, "unit": ""}, "bottleneck": "decode"}})
    assert r.predicted == {"busy": 0.5, "bottleneck": "decode"}
    assert r.busy_relative_error == pytest.approx((r.busy - 0.5) / 0.5)
    assert "plan predicted: busy 50.0 %" in profile.summary(r)


def test_a_missing_predicted_figure_reads_n_a_not_nan():
    """The plan has no cores-needed figure (nan: nothing is decoded) and an unbounded supply (inf): the line
    says 'n/a' and 'no limit', the words of every report, and never 'nan' or 'inf'."""
    with profile.Profiler(warmup=0) as prof:
        for _ in prof.wrap(sleepy(6, 0.001)):
            pass
        r = prof.result(predicted={"busy": 1.0, "bottleneck": "accelerator", "cores_needed": float("nan"),
                                   "demand_fps": 8000.0, "supply_fps": float("inf")})
    line = next(x for x in profile.summary(r).splitlines() if "plan predicted" in x)
    assert line == ("  plan predicted: busy 100.0 %, bottleneck accelerator, cores needed n/a, "
                    "demand 8000.0 frames/s, supply no limit")


def test_hops_cores_needed_by_littles_law():
    """Spin 2 ms of CPU per frame in a 'decode' hop: τ = 2 ms, demand D; cores = D τ."""
    def spin(seconds: float) -> None:
        t = time.thread_time()
        while time.thread_time() - t < seconds:
            pass

    def loader():
        for _ in range(12):
            with profile.hop("decode", frames=2):
                spin(0.004)
            with profile.hop("read", frames=2):
                spin(0.0004)
            yield [0, 0]

    with profile.Profiler(warmup=2) as prof:
        for _ in prof.wrap(loader()):
            time.sleep(0.005)
        r = prof.result()
    assert set(r.hops) == {"decode", "read"}
    d = r.hops["decode"]
    assert d.calls == 12 and d.frames == 24
    assert d.cpu_seconds_per_frame == pytest.approx(0.002, rel=0.25)
    assert r.slowest_hop == "decode"
    assert r.cpu_seconds_per_frame == pytest.approx(d.cpu_seconds_per_frame + r.hops["read"].cpu_seconds_per_frame)
    assert r.cores_needed == pytest.approx(r.demand_fps * r.cpu_seconds_per_frame)


def test_frames_per_batch():
    np = pytest.importorskip("numpy")
    assert profile._batch_frames(np.zeros((7, 3))) == 7
    assert profile._batch_frames((np.zeros((5, 2)), np.zeros(5))) == 5
    assert profile._batch_frames({"x": np.zeros((3, 1))}) == 3
    assert profile._batch_frames([1, 2, 3]) == 3
    assert profile._batch_frames(object()) == 1
    with profile.Profiler(warmup=0, frames_per_batch=lambda b: 10) as prof:
        for _ in prof.wrap(sleepy(3, 0.001)):
            pass
        assert prof.result().frames == 30


def test_no_steps_is_an_error():
    with profile.Profiler(warmup=5) as prof:
        for _ in prof.wrap(sleepy(2, 0.0)):
            pass
        with pytest.raises(RuntimeError, match="no step was counted"):
            prof.result()


def test_cuda_timing_needs_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with profile.Profiler(sync="cuda-events") as prof:
        with pytest.raises(RuntimeError, match="CUDA"):
            list(prof.wrap([1]))


def test_custom_sync_is_called_before_each_fetch():
    calls = []
    with profile.Profiler(warmup=0, sync=lambda: calls.append(1)) as prof:
        for _ in prof.wrap(sleepy(3, 0.0)):
            pass
        r = prof.result()
    assert r.timing == "custom-sync" and len(calls) >= 4


# ---------------------------------------------------------------- across DataLoader workers


def _spin(seconds: float) -> None:
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass


class _SpinFrames:
    """An iterable dataset that spends 3 ms of CPU per frame in a 'decode' hop."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        import torch
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        share = self.n // (info.num_workers if info else 1)
        for _ in range(share):
            with profile.hop("decode"):
                _spin(0.003)
            yield torch.zeros(3)


def test_hops_reported_from_worker_processes():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, IterableDataset

    class DS(_SpinFrames, IterableDataset):
        pass

    with profile.Profiler(warmup=1) as prof:
        loader = DataLoader(DS(64), batch_size=4, num_workers=2)
        for _ in prof.wrap(loader):
            pass
        del loader
        r = prof.result()
    assert r.workers == 2
    d = r.hops["decode"]
    assert d.processes == 2
    assert 0.5 * 64 <= d.frames <= 64
    assert d.cpu_seconds_per_frame == pytest.approx(0.003, rel=0.3)
    assert torch is not None


def test_install_wraps_dataloaders():
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    original = DataLoader.__iter__
    prof = profile.Profiler(warmup=0)
    undo = profile.install(prof)
    try:
        assert profile.current() is prof
        for _ in DataLoader(list(range(12)), batch_size=3):
            time.sleep(0.002)
        r = prof.result()
        assert r.steps == 4 and r.frames == 12 and r.workers == 0
    finally:
        undo()
        prof.close()
    assert DataLoader.__iter__ is original and profile.current() is None


def test_cli_profiles_a_script(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, time\n"
        "from trainplan import profile\n"
        "prof = profile.current()\n"
        "def data():\n"
        "    for _ in range(int(sys.argv[1])):\n"
        "        time.sleep(0.01)\n"
        "        yield [0] * 4\n"
        "for batch in prof.wrap(data()):\n"
        "    time.sleep(0.01)\n")
    res = cli("profile", str(script), "--warmup", "1", "--format", "json", "--", "8")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["steps"] == 7 and d["busy"] == pytest.approx(0.5, abs=0.15)
    assert d["predicted"] is None
    # with a workload: the plan's prediction next to it, and the measured MFU recorded end-to-end
    cal = tmp_path / "cal.toml"
    res = cli("profile", str(script), "--warmup", "1", "--set", "model.params=1e6", "--output", str(cal), "--", "6")
    assert res.returncode == 0, res.stderr
    assert "plan predicted: busy" in res.stdout
    from trainplan.workload import calibration

    values = calibration.load(cal)
    assert values["cluster.mfu_end_to_end"].value is True
    assert 0 < values["cluster.mfu"].value <= 1


def test_cli_script_without_a_loop(cli, tmp_path):
    script = tmp_path / "idle.py"
    script.write_text("x = 1\n")
    res = cli("profile", str(script))
    assert res.returncode == 2 and "no step was counted" in res.stderr and "Traceback" not in res.stderr


def test_record_adds_to_a_hop():
    with profile.Profiler(warmup=0) as prof:
        profile.record("read", wall_seconds=0.2, cpu_seconds=0.1, frames=50)
        for _ in prof.wrap(sleepy(2, 0.0)):
            pass
        h = prof.result().hops["read"]
    assert h.cpu_seconds_per_frame == pytest.approx(0.002) and h.cpu_share == pytest.approx(0.5)
