"""The stall split (issue 14): the wait on data divided into fetch (I/O) and prep (CPU) stalls,
from the hop timers and from DS-Analyzer's differential passes. Loaders and steps sleep for set
times, so every expected figure is written out by hand; sleeps are robust to a loaded machine,
the tolerances allow for a few milliseconds of scheduler jitter."""

from __future__ import annotations

import json
import math
import time

import pytest

from trainplan.measure import profiler as profile


def test_split_formula_by_hand():
    """W = 2 loader processes, read 5 ms and decode 10 ms of wall time a frame, wait 20/30 of the wall:
    fetch = 20/30 x 5/15, prep = 20/30 x 10/15; cores to remove the prep stall = 400 frames/s x 8 ms."""
    hops = {
        "read": profile.HopStats("read", 2, 10, 10, 0.05, 0.001, 1e-4, 0.005, 1e4, 0.02),
        "decode": profile.HopStats("decode", 2, 10, 10, 0.1, 0.08, 0.008, 0.010, 125, 0.8),
    }
    stall, basis, cores = profile.stall_split(hops, wait_share=20 / 30, seconds_per_step=0.030,
                                              body_seconds_per_step=0.010, frames_per_step=4, demand_fps=400,
                                              workers=2)
    assert stall["fetch"] == pytest.approx(20 / 30 * 5 / 15)
    assert stall["prep"] == pytest.approx(20 / 30 * 10 / 15)
    assert "2 loader process" in basis
    assert cores == pytest.approx(400 * 0.008)  # Little's law: demand x prep CPU-seconds a frame
    # serial loading (no workers): in proportion of the hops' wall seconds a frame, 5 : 10
    stall, _, _ = profile.stall_split(hops, wait_share=0.6, seconds_per_step=0.1, body_seconds_per_step=0.04,
                                      frames_per_step=4, demand_fps=100, workers=0)
    assert stall["fetch"] == pytest.approx(0.6 * 5 / 15) and stall["prep"] == pytest.approx(0.6 * 10 / 15)
    # no I/O hop timed: all prep; no hops: cannot split
    only_prep = {"decode": hops["decode"]}
    assert profile.stall_split(only_prep, wait_share=0.5, seconds_per_step=1, body_seconds_per_step=0.5,
                               frames_per_step=1, demand_fps=1, workers=1)[0]["prep"] == 0.5
    assert profile.stall_split({}, wait_share=0.5, seconds_per_step=1, body_seconds_per_step=0.5,
                               frames_per_step=1, demand_fps=1, workers=1)[0]["fetch"] is None


def loader(n: int, io: float, prep: float, frames: int = 4):
    for _ in range(n):
        with profile.hop("read", frames=frames):
            time.sleep(io)
        with profile.hop("decode", frames=frames):
            time.sleep(prep)
        yield [0.0] * frames


def test_serial_loop_split_by_hand():
    """In the loop's own process (no workers): read 20 ms, prep 10 ms, step 10 ms a batch.
    T = 40 ms; busy = AU = 10/40; wait 30/40 split 20 : 10 -> fetch 0.5, prep 0.25."""
    with profile.Profiler(warmup=1, workers=0) as prof:
        for _ in prof.wrap(loader(13, 0.02, 0.01)):
            time.sleep(0.01)
        r = prof.result()
    d = r.to_dict()
    assert d["au"] == d["busy"] == pytest.approx(0.25, abs=0.04)
    assert d["stall"]["fetch"] == pytest.approx(0.5, abs=0.05)
    assert d["stall"]["prep"] == pytest.approx(0.25, abs=0.04)
    assert d["busy"] + d["stall"]["fetch"] + d["stall"]["prep"] == pytest.approx(1.0, abs=1e-6)


def test_differential_passes_by_hand(tmp_path):
    """Passes of a loop whose batches cost prep 10 ms (every pass), read 10 ms only when cold, step 5 ms:
    T_s = 5 ms (batches replayed), T_w = 15 ms, T_c = 25 ms -> busy 0.2, prep 10/25, fetch 10/25."""
    data = tmp_path / "shard.bin"
    data.write_bytes(b"x" * 4096)
    calls = []

    def run_pass(prof):
        cold = len(calls) % 3 == 2  # synthetic, warm, cold; three times
        calls.append(prof.replay)
        for i, _ in enumerate(prof.wrap(loader(12, 0.01 if cold else 0.0, 0.01))):
            time.sleep(0.005)
            if i == 11:  # a generator has no length: replayed batches run until the loop stops
                break

    out = profile.differential_stalls(run_pass, [data], warmup=2)
    assert calls == [True, False, False] * 3
    t = out["seconds_per_step"]
    assert t["synthetic"] == pytest.approx(0.005, abs=0.003)
    assert t["warm"] == pytest.approx(0.015, abs=0.004)
    assert t["cold"] == pytest.approx(0.025, abs=0.005)
    assert out["busy"] == out["au"] == pytest.approx(0.2, abs=0.06)
    assert out["stall"]["prep"] == pytest.approx(0.4, abs=0.08)
    assert out["stall"]["fetch"] == pytest.approx(0.4, abs=0.08)
    assert all(p["steps"] == 10 for p in out["passes"]["synthetic"])  # replayed as many as the loop asked for
    assert math.isfinite(out["cores_needed_prep"])
    assert out["busy"] + out["stall"]["fetch"] + out["stall"]["prep"] == pytest.approx(1.0, abs=1e-9)
    assert out["stall"]["split"] is True
    assert [s["runs"] for s in out["seconds_per_step_spread"].values()] == [3, 3, 3]


def test_a_slow_fetch_the_page_cache_cannot_serve_is_fetch(tmp_path):
    """A loader that sleeps 10 ms on every read (an object store: warm or cold alike), prep 5 ms, step 5 ms:
    T_s = 5, T_w = T_c = 20 ms -> busy 0.25; nothing for the page cache, and the wait 0.75 split as the warm
    passes' loader did it, read 10 : decode 5 -> fetch 0.5, prep 0.25 (dropping the page cache alone called
    all of it prep)."""
    data = tmp_path / "shard.bin"
    data.write_bytes(b"x" * 4096)

    def run_pass(prof):
        for i, _ in enumerate(prof.wrap(loader(12, 0.01, 0.005))):
            time.sleep(0.005)
            if i == 11:
                break

    out = profile.differential_stalls(run_pass, [data], warmup=2)
    assert out["busy"] == pytest.approx(0.25, abs=0.06)
    assert out["stall"]["fetch"] == pytest.approx(0.5, abs=0.08)
    assert out["stall"]["prep"] == pytest.approx(0.25, abs=0.06)
    assert out["busy"] + out["stall"]["fetch"] + out["stall"]["prep"] == pytest.approx(1.0, abs=1e-9)


SCRIPT = '''
import time
import torch
from torch.utils.data import DataLoader, Dataset
from trainplan.measure import profiler as p

class Slow(Dataset):
    def __len__(self):
        return 48
    def __getitem__(self, i):
        with p.hop("read"):
            time.sleep(0.004)
        with p.hop("decode"):
            time.sleep(0.002)
        return torch.zeros(3)

for batch in DataLoader(Slow(), batch_size=4, num_workers=0):
    time.sleep(0.006)
'''


def test_cli_stalls_json(tmp_path, cli):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    data = tmp_path / "data.bin"
    data.write_bytes(b"y" * 8192)
    res = cli("profile", str(script), "--stalls", "--data", str(data), "--warmup", "2", "-f", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for key in ("busy", "au", "stall", "seconds_per_step", "cores_needed_prep", "passes"):
        assert key in out
    assert set(out["stall"]) >= {"fetch", "prep"}
    # per step: batch of 4 at 6 ms each = 24 ms loading, 6 ms step; replayed: 6 ms. Sleeps only ever run
    # long, by several ms at a load average of 8 on this 2-core machine: bounds from below tight, above generous
    t = out["seconds_per_step"]
    assert 0.0055 <= t["synthetic"] <= 0.016 and 0.029 <= t["cold"] <= 0.06 and t["synthetic"] < t["cold"] / 2, t
    one = cli("profile", str(script), "-f", "json")
    d = json.loads(one.stdout)
    assert d["stall"]["fetch"] == pytest.approx(0.8 * 16 / 24, abs=0.1)  # serial: wait 24/30 split 16 : 8
    assert d["au"] == d["busy"]
