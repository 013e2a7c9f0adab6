"""`trainplan probe loader MODULE:FACTORY` (issue 25): the user's own Dataset measured per item.

The datasets here are built to cost a known amount an item: a sleep (a slow fetch: wall time, no CPU) and a
spin on the thread's CPU clock (a slow transform: CPU time). The probe's CPU and wall per item are checked
against those amounts (generous bounds: a shared machine adds to both), and the calibration rate against
the formula I x g x W H / (1920 x 1080) by hand, then through the plan: its decode hop delivers I items a
second a core."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from trainplan.workload.load import load_workload

SLEEP, SPIN = 0.02, 0.01  # seconds an item: fetch (asleep), transform (on a core)


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "h25_slowdata.py").write_text(textwrap.dedent(f"""
        import time

        class Slow:
            def __len__(self):
                return 10

            def __getitem__(self, i):
                time.sleep({SLEEP})
                t = time.thread_time()
                while time.thread_time() - t < {SPIN}:
                    pass
                return i

        def make():
            return Slow()

        def stream():
            return iter(range(0))  # an iterable that yields nothing
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "h25_slowdata"
    sys.modules.pop("h25_slowdata", None)


def test_cpu_and_wall_per_item_tell_fetch_from_prep(module):
    """Timing on a shared machine: a run whose items waited for a core (load 8 on 2 cores stretches one
    item's wall to 0.7 s) is measured again, up to 3 times, and each miss is reported."""
    import warnings

    from trainplan.measure import loader

    misses = []
    for _attempt in range(3):
        r = loader.probe_loader(f"{module}:make", seconds=0.5)
        assert r.items >= 3
        assert SPIN * 0.95 <= r.cpu_per_item, r  # a CPU clock only runs on a core: never short
        assert r.wall_per_item >= (SLEEP + SPIN) * 0.95, r  # nor is the wall
        assert r.items_per_cpu_second == pytest.approx(1 / r.cpu_per_item)
        # waiting is the sleep's share of the item: 2/3 by construction (less when the machine slows the spin,
        # more when an item waited for a core)
        if r.cpu_per_item <= SPIN * 2.0 and 0.45 <= r.wait_share <= 0.72:
            break
        misses.append(f"cpu {r.cpu_per_item:.4f} s an item, wait share {r.wait_share:.2f}")
        warnings.warn(f"loader probe timing missed (measuring again): {misses[-1]}", stacklevel=1)
    else:
        pytest.fail(f"3 runs missed the sleep's share: {misses}")


@pytest.mark.parametrize("access, g", [("sequential", 1.0), ("random", 8.0)])
def test_the_loaders_rate_goes_into_the_plan(module, tmp_path, cli, access, g):
    from trainplan.planning.evaluate import build_report

    work, cal = tmp_path / "w.toml", tmp_path / "cal.toml"
    work.write_text(f'[data]\nwidth = 640\nheight = 360\ngop = 15\naccess = "{access}"\n')
    res = cli("probe", "loader", f"{module}:make", str(work), "--seconds", "0.3", "-f", "json", "-o", str(cal))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    # by hand: I items per CPU-second x g decoded per frame used ((15 + 1) / 2 at random access) x W H / 1080p
    assert d["core_fps_1080p"] == pytest.approx(d["items_per_cpu_second"] * g * 640 * 360 / (1920 * 1080))
    assert "the user's loader" in cal.read_text()
    w = load_workload(work, ["cluster.cores=2"], calibration=cal)
    assert w.provenance["cluster.core_fps_1080p"].kind == "measured"
    p = build_report(w)["pipeline"]
    value = (lambda v: v["value"] if isinstance(v, dict) else v)
    per_core = value(p["stages"]["decode"]["tokens_per_second"]) / value(p["tokens_per_frame"]) / 2
    assert per_core == pytest.approx(d["items_per_cpu_second"], rel=1e-9)


def test_bad_factories_one_line_exit_2(module, cli):
    for spec in ("no_colon", "h25_missing_module:make", f"{module}:absent", f"{module}:stream"):
        res = cli("probe", "loader", spec, "--seconds", "0.1")
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, (spec, res.stderr)
