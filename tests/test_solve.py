"""trainplan solve: answers derived by hand from the formulas of docs/accounts.md and docs/pipeline-and-bill.md."""

from __future__ import annotations

import json
import math

import pytest

from trainplan.planning import solve
from trainplan.catalogue.accelerators import accelerators
from trainplan.errors import UserError

# reference workload: demand D = μ Φ / (6 P n) frames/s, n = floor(224/14)^2 = 256
PEAK_H100 = 989.5e12
DEMAND = 0.4 * PEAK_H100 / (6 * 93e6 * 256)  # 2,770.78 frames/s
CORE_FPS = 120.0


def test_fewest_cores_for_busy_095():
    # busy = cores x 120 / D >= 0.95  ->  cores >= 0.95 x 2770.78 / 120 = 21.93  ->  22
    assert DEMAND == pytest.approx(2770.78, abs=0.01)
    expected = math.ceil(0.95 * DEMAND / CORE_FPS)
    assert expected == 22
    r = solve.solve(None, [], "cluster.cores", ["pipeline.busy>=0.95"])
    assert r == {**r, "key": "cluster.cores", "value": 22}
    assert r["figures"]["pipeline.busy"] == pytest.approx(22 * CORE_FPS / DEMAND)


def test_largest_micro_batch_that_fits():
    # per device = (16 P + b S d (2 L k + 1 + 4) + buffers) (1 + headroom) <= memory   (docs/accounts.md):
    # Korthikanti's block, 34 bytes a width a layer, plus the embedding's dropout mask (1 byte a width, one
    # micro-batch in flight) and the output layer's 4 bytes a width (no vocabulary)
    memory = accelerators()["h100-sxm"].memory
    per_sample = 2048 * 768 * (2 * 12 * 17 + 1 + 4)
    expected = math.floor((memory / 1.1 - 16 * 93e6 - 2e9) / per_sample)
    r = solve.solve(None, [], "training.micro_batch", ["memory.fits"], largest=True)
    assert r["value"] == expected


def test_fewest_accelerators_by_a_deadline():
    # seconds = 6 P D / (n Φ μ s); D = 1000 h x 3600 x 30 fps x 3 cameras x 256 tokens. The gradient sync
    # of 93 M parameters hides in the backward pass, so the step is the compute alone; s is applied where
    # it is given: 0.9 asks for 10 devices, without it 9 do
    tokens = 1000 * 3600 * 30 * 3 * 256
    deadline = 4 * 3600
    expected = math.ceil(6 * 93e6 * tokens / (deadline * PEAK_H100 * 0.4 * 0.9))
    assert expected == 10
    assert solve.solve(None, ["cluster.scaling_efficiency=0.9"], "cluster.count",
                       ["compute.seconds<=4 h"])["value"] == expected
    assert solve.solve(None, [], "cluster.count", ["compute.seconds<=4 h"])["value"] == math.ceil(
        6 * 93e6 * tokens / (deadline * PEAK_H100 * 0.4)) == 9


def test_smallest_link_for_decoded_frames_is_a_float_bisection():
    # decoded frames: read 1.5 W H bytes a frame; busy >= 0.95 needs link >= 0.95 D x 1.5 x 1920 x 1080
    expected = 0.95 * DEMAND * 1.5 * 1920 * 1080
    r = solve.solve(None, ["data.access=decoded"], "cluster.link", ["pipeline.busy>=95 %"])
    assert r["value"] == pytest.approx(expected, rel=1e-6)
    assert r["value"] >= expected * (1 - 1e-12)


def test_largest_hand_over_for_a_busy_target():
    # busy = 8 / (1/120 + o) / D >= 0.33  ->  o <= 8 / (0.33 D) - 1/120 = 0.000416 s (0.42 ms)
    expected = 8 / (0.33 * DEMAND) - 1 / CORE_FPS
    assert expected == pytest.approx(4.16e-4, abs=1e-6)
    r = solve.solve(None, [], "data.loader_cpu_per_frame", ["pipeline.busy>=0.33"], largest=True)
    assert r["value"] == pytest.approx(expected, rel=1e-4) and r["value"] <= expected * (1 + 1e-9)
    # fewest cores for busy 0.95 with 0.2 ms a frame: 0.95 D (1/120 + 0.0002) = 22.46  ->  23
    more = solve.solve(None, ["data.loader_cpu_per_frame=0.2 ms"], "cluster.cores", ["pipeline.busy>=0.95"])
    assert more["value"] == math.ceil(0.95 * DEMAND * (1 / CORE_FPS + 2e-4)) == 23


def test_looped_key_is_bisected():
    # model.params on the default names a new model (looped); threshold: D(P) x 256 tokens <= 8 x 120 frames/s
    # busy >= 1  <->  0.4 Φ / (6 P 256) <= 960  ->  P >= 0.4 Φ / (6 x 256 x 960)
    expected = 0.4 * PEAK_H100 / (6 * 256 * 960)
    r = solve.solve(None, ["model.layers=12", "model.width=768", "cluster.mfu=0.4"], "model.params",
                    ["pipeline.busy>=1"], search_range="1e6:1e9")
    assert r["value"] == pytest.approx(expected, rel=1e-6)


def test_unmet_target_is_a_user_error():
    with pytest.raises(UserError, match="not met"):
        solve.solve(None, [], "cluster.cores", ["pipeline.busy>=0.95"], search_range="0:10")
    with pytest.raises(UserError, match="unknown figure"):
        solve.solve(None, [], "cluster.cores", ["pipeline.bussy>=0.95"])
    with pytest.raises(UserError):
        solve.parse_target("pipeline.busy=>")


def test_cheapest_accelerator_ranks_by_training_cost():
    # tokens already packed: busy 1, so wall = 6 P D / (Φ μ); cost = wall / 3600 x price
    sets = ["data.kind=tokens", "training.tokens=1e10"]
    prices = {"a100-sxm-80gb": 1.0, "h100-sxm": 3.5}
    r = solve.cheapest_accelerator(None, sets, [], prices=prices, among=["a100-sxm-80gb", "h100-sxm"])
    saves = 1 + 93e6 * 14 / 1e9 / 3600  # a 14 B/param checkpoint at 1 GB/s every hour blocks training
    cost = {k: 6 * 93e6 * 1e10 / (accelerators()[k].peak("bf16") * 0.4) * saves / 3600 * p for k, p in prices.items()}
    assert r["value"] == min(cost, key=cost.get) == "a100-sxm-80gb"
    for c in r["candidates"]:
        assert c["training_cost"] == pytest.approx(cost[c["accelerator"]])
    # a deadline the A100 misses: the H100 is the cheapest that meets it
    hours = 6 * 93e6 * 1e10 / (312e12 * 0.4) / 3600
    r = solve.cheapest_accelerator(None, sets, [f"compute.wall_seconds<={hours * 0.9} h"], prices=prices,
                                   among=["a100-sxm-80gb", "h100-sxm"])
    assert r["value"] == "h100-sxm"
    with pytest.raises(UserError, match="not met"):
        solve.cheapest_accelerator(None, sets, ["compute.wall_seconds<=1 s"])


def test_cli_solve_json_and_exit_2(cli):
    res = cli("solve", "cluster.cores", "--for", "pipeline.busy>=0.95", "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["key"] == "cluster.cores" and out["value"] == 22
    res = cli("solve", "cluster.cores", "--for", "pipeline.busy>=0.95", "--range", "0:10")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not met" in res.stderr
    res = cli("solve", "cluster.accelerator", "--cheapest", "--price", "a100-sxm-80gb=1.2", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["ranked_by"] == "training_cost"


def test_cheapest_uses_the_dated_price_table_when_no_price_is_given():
    from trainplan.accounts.training_cost import price_table

    r = solve.cheapest_accelerator(None, [], [], among=["a100-sxm-80gb", "h100-sxm"])
    rows = {c["accelerator"]: c for c in r["candidates"]}
    assert rows["a100-sxm-80gb"]["price_hour"] == price_table()["a100-sxm-80gb"].dollars_per_hour
    assert rows["h100-sxm"]["price_source"] == "prices.accelerator_hour of the workload"  # the workload's own
    for c in rows.values():
        assert c["training_cost"] == pytest.approx(c["wall_seconds"] / 3600 * c["price_hour"])


def test_cli_solve_table_reads_in_units(cli):
    # busy = min(1, 120 c / 2770.78) >= 0.95 first at c = ceil(0.95 x 2770.78 / 120) = ceil(21.93) = 22
    res = cli("solve", "cluster.cores", "--for", "pipeline.busy>=0.95")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "cluster.cores = 22"
    assert "accelerator busy (pipeline.busy) = 95.3 %" in res.stdout  # 22 x 120 / 2770.78 = 0.9528
