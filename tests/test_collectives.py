"""Collective costs in NCCL's terms, and the collectives probe under torch.distributed (gloo, local processes).

Expected values are worked out by hand from NCCL's performance notes: bus bandwidth =
algorithm bandwidth x 2(n-1)/n for an all-reduce, x (n-1)/n for all-gather, reduce-scatter
and all-to-all; a ring all-reduce takes 2(n-1) steps, a tree 2 log2(n).
"""

import json
import math

import pytest

from trainplan.accounts import collectives as col
from trainplan.errors import UserError


@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 8, 2 * 7 / 8), ("all_reduce", 2, 1.0), ("all_gather", 8, 7 / 8),
    ("reduce_scatter", 4, 3 / 4), ("all_to_all", 4, 3 / 4), ("all_reduce", 1, 0.0), ("all_gather", 1, 0.0),
])
def test_bus_factor_is_nccls(op, n, factor):
    assert float(col.bus_factor(op, n)) == pytest.approx(factor)


def test_ring_all_reduce_seconds_by_hand():
    # M = 1 GB over 8 ranks at 100 GB/s bus bandwidth, 5 us a step:
    # 1e9 x 1.75 / 1e11 = 17.5 ms, plus 2 x 7 = 14 steps x 5 us = 70 us
    t = col.collective_seconds("all_reduce", 1e9, 8, 100e9, 5e-6, "ring")
    assert float(t) == pytest.approx(0.0175 + 14 * 5e-6)


def test_tree_all_reduce_pays_log_latency():
    # same bytes; 2 x ceil(log2 8) = 6 steps
    t = col.collective_seconds("all_reduce", 1e9, 8, 100e9, 5e-6, "tree")
    assert float(t) == pytest.approx(0.0175 + 6 * 5e-6)


def test_all_gather_and_all_to_all_by_hand():
    # all-gather of a 64 MB buffer over 4 ranks at 20 GB/s: 64e6 x 3/4 / 20e9 = 2.4 ms, 3 steps of 10 us
    assert float(col.collective_seconds("all_gather", 64e6, 4, 20e9, 1e-5)) == pytest.approx(2.4e-3 + 3e-5)
    assert float(col.collective_seconds("all_to_all", 64e6, 4, 20e9, 0.0)) == pytest.approx(2.4e-3)


def test_one_rank_costs_nothing():
    assert float(col.collective_seconds("all_reduce", 1e9, 1, 1e9, 1.0)) == 0.0


def test_arrays_broadcast():
    t = col.collective_seconds("all_reduce", 1e9, [2, 4, 8], 1e9)
    assert list(t) == pytest.approx([1.0, 1.5, 1.75])


def test_bus_bandwidth_of_a_measurement():
    # 100 MB all-reduced over 4 ranks in 10 ms: algbw 10 GB/s, busbw 10 x 1.5 = 15 GB/s
    assert col.bus_bandwidth_of("all_reduce", 1e8, 4, 0.01) == pytest.approx(15e9)


def test_unknown_op_is_refused():
    with pytest.raises(UserError) as err:
        col.bus_factor("allreduce", 4)
    assert err.value.where == "op"


# ---------------------------------------------------------------- the probe (torch.distributed, gloo)

torch = pytest.importorskip("torch")


@pytest.mark.slow  # spawns local processes that import torch: 10-20 s on a loaded machine
def test_probe_measures_all_four_with_gloo():
    from trainplan.measure.collectives import measure

    results = measure(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"], processes=3, size=3 * 2**20,
                      repeats=2)
    assert [r.op for r in results] == ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    for r in results:
        assert r.world_size == 3 and r.backend == "gloo" and r.launched_by == "local processes"
        assert r.bytes == 3 * 2**20  # divisible into 3 shards of float32: kept as asked
        assert r.seconds > 0 and math.isfinite(r.seconds)
        # NCCL's definitions, by hand: algbw = M / t; busbw = algbw x factor
        assert r.algorithm_bytes_per_second == pytest.approx(r.bytes / r.seconds)
        want = 2 * 2 / 3 if r.op == "all_reduce" else 2 / 3
        assert r.bus_factor == pytest.approx(want)
        assert r.bus_bytes_per_second == pytest.approx(r.bytes / r.seconds * want)


@pytest.mark.slow  # spawns local processes that import torch: 10-20 s on a loaded machine
def test_probe_cli_writes_the_calibration_and_plan_uses_it(cli, tmp_path):
    cal = tmp_path / "cal.toml"
    res = cli("probe", "allgather", "--tier", "inter", "--processes", "2", "--size", "1 MiB", "--repeats", "2",
              "-f", "json", "-o", str(cal))
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr, res.stderr  # torch's deprecation notices are not the person's to read
    measured = json.loads(res.stdout)["results"][0]
    assert measured["op"] == "all_gather" and measured["bus_factor"] == pytest.approx(0.5)
    text = cal.read_text()
    assert 'key = "cluster.node_link"' in text and 'probe = "collectives"' in text
    res = cli("plan", "--calibration", str(cal), "-f", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    # issue 25: local processes talk over this host's loopback; that stands for no cluster link, so the plan
    # keeps the catalogue's figure and says what it left out
    link = report["assumptions"]["cluster.node_link"]
    assert link["provenance"] == "assumed" and "loopback" in link["source"] and "left out" in link["source"]
    assert link["value"] != pytest.approx(measured["bus_bytes_per_second"])


def test_a_link_measured_on_the_plans_kind_of_machine_is_applied(tmp_path):
    from trainplan.workload import calibration
    from trainplan.planning.evaluate import build_report
    from trainplan.workload.load import load_workload

    cal = tmp_path / "cal.toml"
    h100 = {"hostname": "node-0", "cpu_model": "x", "gpu": "NVIDIA H100 80GB HBM3"}
    calibration.write(cal, "collectives", settings={"tier": "inter", "backend": "nccl", "world_size": 16,
                                                    "launched_by": "torchrun"},
                      results={}, values=[{"key": "cluster.node_link", "value": 42e9, "note": "by hand"}],
                      machine=h100)
    w = load_workload(None, [], calibration=cal)  # the default plan: H100-SXM
    assert w.provenance["cluster.node_link"].kind == "measured"
    # a measured link is a bus bandwidth already: the layout uses it as it is
    assert build_report(w)["parallel"]["network"]["inter_bus_bandwidth"] == pytest.approx(42e9)
    a100 = load_workload(None, ['cluster.accelerator="a100-sxm-80gb"'], calibration=cal)
    assert a100.provenance["cluster.node_link"].kind == "assumed"
    assert "measured on gpu: NVIDIA H100" in a100.provenance["cluster.node_link"].source


def test_probe_cli_bad_ops_exit_2(cli):
    res = cli("probe", "collectives", "--ops", "allreduse")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("trainplan: --ops:") and "\n" not in res.stderr.strip()


@pytest.mark.slow  # spawns local processes that import torch: 10-20 s on a loaded machine
def test_probe_under_torchrun_joins_the_job(tmp_path):
    # the same command a GPU cluster runs (NCCL there); here torchrun starts 2 gloo ranks on the CPU
    import socket
    import subprocess
    import sys

    from conftest import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cal = tmp_path / "cal.toml"
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                          f"--master_port={port}", "-m", "trainplan", "probe", "alltoall", "--size", "1 MiB",
                          "--repeats", "2", "-f", "json", "-o", str(cal)],
                         capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    start = res.stdout.index("{")
    r = json.loads(res.stdout[start:])["results"][0]  # only rank 0 reports
    assert r["launched_by"] == "torchrun" and r["world_size"] == 2 and r["op"] == "all_to_all"
    assert r["bus_bytes_per_second"] == pytest.approx(r["bytes"] / r["seconds"] * 0.5)
    assert 'key = "cluster.interconnect"' in cal.read_text()
