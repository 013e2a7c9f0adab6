"""The input pipeline and the bill (docs/pipeline-and-bill.md): the reference point to its printed
precision from `trainplan plan` with no file, other states derived by hand, invariants."""

import math

import numpy as np
import pytest

from trainplan.accounts import bill as bill_mod
from trainplan.accounts import pipeline as pl
from trainplan.planning.evaluate import build_report, pipeline_inputs
from trainplan.workload.load import load_workload

H100_BF16 = 989.5e12


def test_reference_point_from_plan_with_no_file(plan_json):
    p = plan_json()["pipeline"]
    assert round(p["stored_bytes_per_hour"] / 1e9, 1) == 10.8
    assert round(p["decoded_bytes_per_hour"] / 1e9) == 1008
    assert p["frames_per_hour"] == 324_000
    assert round(p["tokens_per_hour"] / 1e6, 1) == 82.9
    assert round(p["demand_fps"]) == 2771
    assert round(p["demand_tokens_per_second"]) == 709_319
    assert p["supply_fps"] == 960
    assert round(p["busy"] * 100, 1) == 34.6
    assert p["bottleneck"] == "decode"
    assert round(p["cores_needed"], 1) == 23.1
    assert p["pixels_per_token"] == 8100
    assert p["decoded_bytes_per_token"] == 12150
    assert round(p["stored_bytes_per_token"]) == 130
    assert p["stages"]["decode"]["tokens_per_second"] == 245_760
    assert p["tokens_per_frame"] == 256


def test_reference_read_of_decoded_frames(plan_json):
    p = plan_json("--set", "data.access=decoded")["pipeline"]
    # 1.5 GB/s / (1.5 x 1920 x 1080 bytes per frame / 256 tokens)
    assert round(p["stages"]["read"]["tokens_per_second"]) == 123_457
    assert p["stages"]["decode"]["tokens_per_second"] is None  # no decoder: infinite capacity
    assert p["bottleneck"] == "read"
    assert p["busy"] == pytest.approx(123_456.79 / 709_319.0, rel=1e-6)


def test_tokens_per_frame_floors():
    assert pl.tokens_per_frame(224, 14) == 256
    assert pl.tokens_per_frame(384, 14) == 729  # 27.43 -> 27, floored not rounded
    assert pl.tokens_per_frame(336, 14) == 576


def _account(**over):
    w = load_workload(None, [f"{k}={v}" for k, v in over.items()])
    return pl.pipeline_account(**pipeline_inputs(w)), w


@pytest.mark.parametrize("width,height,side,patch,params,cores,access,gop,nvdec", [
    (1280, 720, 224, 14, 93e6, 8, "sequential", 30, False),
    (3840, 2160, 384, 14, 300e6, 16, "sequential", 30, False),
    (1920, 1080, 224, 16, 1e9, 4, "random", 60, False),
    (1920, 1080, 224, 14, 93e6, 8, "sequential", 30, True),
    (640, 480, 224, 14, 20e6, 2, "random", 12, True),
])
def test_states_derived_by_hand(width, height, side, patch, params, cores, access, gop, nvdec):
    p, w = _account(**{"data.width": width, "data.height": height, "data.side": side, "data.patch": patch,
                       "model.params": params, "cluster.cores": cores, "data.access": f'"{access}"',
                       "data.gop": gop, "cluster.nvdec": str(nvdec).lower()})
    n = (side // patch) ** 2
    demand = 0.4 * H100_BF16 / (6 * params * n)
    g = 1.0 if access == "sequential" else (gop + 1) / 2
    scale = 1920 * 1080 / (width * height)
    core_fps = 120 * scale
    decoders = cores * core_fps + (7 * 771 * scale if nvdec else 0.0)
    decode_fps = decoders / g  # frames used per second
    read_fps = 1.5e9 / (g * 8e6 / (8 * 30))  # bytes per frame = g x bitrate / (8 fps)
    transfer_fps = 25e9 / (3 * side * side)
    supply = min(decode_fps, read_fps, transfer_fps)
    assert p.tokens_per_frame == n
    assert p.demand_fps == pytest.approx(demand)
    assert p.supply_fps == pytest.approx(supply)
    assert p.busy == pytest.approx(min(1.0, supply / demand))
    assert p.pixels_per_token == pytest.approx(g * width * height / n)
    engines_fps = 7 * 771 * scale if nvdec else 0.0
    assert p.cores_needed == pytest.approx(max(0.0, demand * g - engines_fps) / core_fps)
    assert p.cores_needed_cpu_only == pytest.approx(demand * g / core_fps)
    assert p.threshold_params == pytest.approx(0.4 * H100_BF16 / (6 * n * supply))
    expected = "accelerator" if supply >= demand else ("decode" if supply == decode_fps else "read")
    assert p.bottleneck == expected


def test_threshold_is_where_busy_reaches_one():
    p, _ = _account()
    at, _ = _account(**{"model.params": p.threshold_params})
    assert at.busy == pytest.approx(1.0)
    below, _ = _account(**{"model.params": p.threshold_params * 0.99})
    assert below.busy < 1.0 and below.bottleneck == "decode"


def test_prefetch_off_adds_load_to_compute():
    p, _ = _account(**{"cluster.prefetch": "false"})
    s, d = 960.0, 2770.777329749104
    assert p.busy == pytest.approx(s / (s + d))  # step = load + compute


def test_tokens_kind_read_and_tokenize():
    p, _ = _account(**{"data.kind": '"tokens"', "training.tokens": "1e9", "data.bytes_per_token": 2,
                       "data.tokenize_online": "true", "cluster.cores": 4, "model.params": 1e6})
    demand = 0.4 * H100_BF16 / (6 * 1e6)
    supply = min(1.5e9 / 2, 4 * 1e6, 25e9 / 2)
    assert p.demand_tokens_per_second == pytest.approx(demand)
    assert p.supply_tokens_per_second == pytest.approx(supply)
    assert p.bottleneck == "tokenize"


def test_vectorized_equals_scalar():
    _, w = _account()
    cores = np.arange(0, 40)
    arr = pl.pipeline_arrays(**pipeline_inputs(w, cores=cores))
    for c in (0, 7, 23, 24, 39):
        one = pl.pipeline_account(**pipeline_inputs(w, cores=float(c)))
        assert arr["busy"][c] == pytest.approx(one.busy)


def test_more_cores_never_lower_busy_and_busy_at_most_one():
    _, w = _account()
    for access in ("sequential", "random", "decoded"):
        for nvdec in (False, True):
            arr = pl.pipeline_arrays(**pipeline_inputs(w, cores=np.linspace(0, 64, 257), access=access,
                                                       nvdec=nvdec))
            busy = arr["busy"]
            assert np.all(np.diff(busy) >= -1e-15) and np.all(busy <= 1.0) and np.all(busy >= 0.0)


def test_bill_by_hand():
    r = build_report(load_workload())
    b, p = r["bill"], r["pipeline"]
    useful = 324_000 / p["demand_fps"]
    wall = useful / p["busy"]
    assert b["storage"] == pytest.approx(10.8 * 0.023)  # 10.8 GB for a month
    assert b["transfer"] == pytest.approx(10.8 * 0.01)  # read once, sequentially
    assert b["cores"] == pytest.approx(8 * wall / 3600 * 0.05)
    assert b["idle_accelerator"] == pytest.approx((wall - useful) / 3600 * 3.0)
    assert b["total"] == pytest.approx(b["bytes"] + b["cores"] + b["idle_accelerator"])
    assert sum(b["shares"].values()) == pytest.approx(1.0)
    # the decisions
    assert b["epoch_seconds"] == pytest.approx(1000 * wall)
    assert b["epoch_seconds_at_cores_needed"] == pytest.approx(1000 * useful)
    extra_storage = (1007.7696 - 10.8) * 0.023
    decode_per_epoch = 324_000 / 120 / 3600 * 0.05
    assert b["decoded_break_even_epochs_per_month"] == pytest.approx(extra_storage / decode_per_epoch)
    a = b["add_cores"]
    assert a["cores_added"] == 16 and a["busy_after"] == 1.0
    assert a["extra_core_cost"] == pytest.approx((24 * useful - 8 * wall) / 3600 * 0.05)
    assert a["idle_removed"] == pytest.approx(b["idle_accelerator"])


def test_verdict_names_the_cheapest_change(cli):
    import json

    report = json.loads(cli("plan", "--format", "json").stdout)
    assert report["verdict"].startswith(
        "Decode binds: the accelerator is busy 34.6 %. 23.1 cores needed, 8 present: add 16 cores")
    # the first screen says the same: 23.09 cores needed, ceil -> 24, 8 present -> add 16
    out = " ".join(cli("plan").stdout.split())
    assert "Waits on decode (the accelerator is busy 34.6 %). Cheapest fix: add 16 CPU cores (23.1 needed, 8 present)" in out


def test_bill_terms_linear_in_hours():
    kw = dict(demand_fps=2770.0, busy=0.35, cores=8, accelerator_hour=3.0, core_hour=0.05,
              storage_gb_month=0.023, transfer_gb=0.01)
    one = bill_mod.bill_per_hour(frames_per_hour=324_000, stored_bytes_per_hour=10.8e9, read_bytes_per_hour=10.8e9, **kw)
    five = bill_mod.bill_per_hour(frames_per_hour=5 * 324_000, stored_bytes_per_hour=5 * 10.8e9,
                                  read_bytes_per_hour=5 * 10.8e9, **kw)
    for term in ("bytes", "cores", "idle_accelerator", "total"):
        assert getattr(five, term) == pytest.approx(5 * getattr(one, term))


def test_transport_share_independent_of_budget():
    shares = [bill_mod.budget_split(b, 0.58, 10.0)["share"] for b in (1e3, 1e6, 3.7e8)]
    assert shares == pytest.approx([0.058] * 3)
    assert bill_mod.transport_share(0.58, 10.0) == pytest.approx(0.058)


def test_sources_ranked_by_cost_per_useful_hour(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text("""
[[sources]]
name = "fleet-4k"
format = "video"
price_hour = 4.0
exchange_rate = 0.5
width = 3840
height = 2160
bitrate = "20 Mbit/s"

[[sources]]
name = "vendor-decoded"
format = "decoded"
price_hour = 12.0
exchange_rate = 0.9

[[sources]]
name = "lab-1080p"
format = "video"
price_hour = 8.0
exchange_rate = 1.0
""")
    r = build_report(load_workload(f))
    rows = r["bill"]["sources"]
    assert [row["rank"] for row in rows] == [1, 2, 3]
    costs = [row["cost_per_useful_hour"] for row in rows]
    assert costs == sorted(costs)
    for row in rows:
        assert row["cost_per_useful_hour"] == pytest.approx(
            (row["price_hour"] + row["transport_per_hour"]) / row["exchange_rate"])
    lab = next(row for row in rows if row["name"] == "lab-1080p")
    assert lab["transport_per_hour"] == pytest.approx(r["bill"]["total"])  # same format as the main data


# ---------------------------------------------------------------- figures computed when read (issue 17)

def _slowest_by_hand(caps):
    """Stage by stage, `cap if cap < supply else supply`, one point at a time in plain Python."""
    shape = np.broadcast_shapes(*(np.shape(c) for c in caps))
    flat = [np.broadcast_to(np.asarray(c, float), shape).ravel().tolist() for c in caps]
    out = []
    for values in zip(*flat):
        supply = values[0]
        for cap in values[1:]:
            supply = cap if cap < supply else supply
        out.append(supply)
    return np.array(out).reshape(shape)


def _bitwise_equal(a, b) -> bool:
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    same_nan = np.isnan(a) == np.isnan(b)
    both = ~np.isnan(a)
    return bool(np.all(same_nan) and np.array_equal(a[both], b[both])
                and np.array_equal(np.signbit(a[both]), np.signbit(b[both])))


def test_slowest_stage_equals_the_pairwise_rule_with_nan_zero_and_infinity():
    """The fold's one-ufunc steps (fmin, minimum, skipping +inf) give the rule's value bit for bit,
    NaN, -0.0 and inf included, for every mix of numbers and arrays; so does the indexed fold."""
    rng = np.random.default_rng(17)
    special = [np.nan, 0.0, -0.0, np.inf, 1.0, 2.5]
    for _ in range(400):
        caps = []
        for _ in range(4):
            if rng.random() < 0.5:
                caps.append(float(rng.choice(special)) if rng.random() < 0.5 else float(rng.uniform(0, 3)))
            else:
                x = rng.uniform(0, 3, 9)
                mask = rng.random(9) < 0.4
                x[mask] = rng.choice(special, int(mask.sum()))
                caps.append(x)
        want = _slowest_by_hand(caps)
        fast, _ = pl._fold_slowest(tuple(caps), index=False)
        indexed, _ = pl._fold_slowest(tuple(caps), index=True)
        assert _bitwise_equal(fast, want), (caps, fast, want)
        assert _bitwise_equal(indexed, want), (caps, indexed, want)


def test_busy_read_alone_equals_the_full_account():
    """Reading busy alone computes it from fewer figures and the fast fold; the full account read
    bottleneck first takes the indexed (np.where) fold: the same bits, over cores including 0."""
    _, w = _account()
    for access in ("sequential", "random", "decoded"):
        for prefetch in (True, False):
            args = pipeline_inputs(w, cores=np.linspace(0, 64, 129), access=access, prefetch=prefetch)
            alone = pl.pipeline_arrays(**args)
            busy = alone["busy"]
            assert "bottleneck_index" not in alone.__dict__ and "decoded_bytes_per_hour" not in alone.__dict__
            full = pl.pipeline_arrays(**args)
            full["bottleneck_index"]
            every = dict(full)
            assert _bitwise_equal(busy, every["busy"]), access
            assert list(every) == list(pl.FIGURES) and len(full) == len(pl.FIGURES)


def test_busy_alone_by_hand_on_the_reference_workload():
    """busy = min(1, cores x 120 / demand) on the reference workload (decode binds below 23.1 cores)."""
    _, w = _account()
    cores = np.arange(0.0, 40.0)
    busy = pl.pipeline_arrays(**pipeline_inputs(w, cores=cores))["busy"]
    demand = 0.4 * H100_BF16 / (6 * 93e6 * 256)
    assert busy == pytest.approx(np.minimum(1.0, cores * 120.0 / demand), rel=1e-12)
    with pytest.raises(KeyError):
        pl.pipeline_arrays(**pipeline_inputs(w))["no_such_figure"]


# ---------------------------------------------------------------- the loader's CPU per frame used (o)


def test_hand_over_cpu_only_by_hand():
    """1080p in order, 8 cores at 120 frames/s, o = 0.2 ms: a frame used costs a core 1/120 + 0.0002
    = 0.0085333 s, so 8 cores use 8 / 0.0085333 = 937.5 frames/s (240,000 tokens/s at 256 a frame);
    the cores needed for the demand D = 2,770.78 frames/s are D x 0.0085333 = 23.644."""
    p, _ = _account(**{"data.loader_cpu_per_frame": '"0.2 ms"'})
    d = 0.4 * H100_BF16 / (6 * 93e6 * 256)
    assert p.supply_fps == pytest.approx(937.5)
    assert p.stage_tokens_per_second["decode"] == pytest.approx(240_000.0)
    assert p.busy == pytest.approx(937.5 / d)
    assert p.cores_needed == pytest.approx(23.644, abs=5e-4)
    assert p.cores_needed_cpu_only == pytest.approx(23.644, abs=5e-4)
    assert p.decoder_fps == 960.0  # the decoders' own rate, the hand-over not taken out
    assert p.bottleneck == "decode"


def test_hand_over_with_engines_by_hand():
    """1080p random access with a keyframe every 9 frames (g = 5), 7 engines at 771 frames/s (H100),
    o = 1 ms. Engines: 7 x 771 / 5 = 1,079.4 used frames/s, whose hand-over takes 1.0794 cores.
    8 cores: 6.9206 left, at 5/120 + 0.001 = 0.0426667 s a frame, 162.2016 more: 1,241.6016.
    1 core: less than the engines' hand-over needs, so 1 / 0.001 = 1,000 frames/s.
    Cores needed: (5 D - 5,397) / 120 + D x 0.001 with D = 2,770.777 -> 70.4741 + 2.7708 = 73.2449."""
    over = {"data.access": '"random"', "data.gop": 9, "cluster.nvdec": "true", "data.loader_cpu_per_frame": 0.001}
    p, _ = _account(**over)
    assert p.supply_fps == pytest.approx(1241.6016, abs=1e-4)
    assert p.cores_needed == pytest.approx(73.2449, abs=1e-4)
    assert p.cores_needed_cpu_only == pytest.approx(5 * 2770.777 / 120 + 2.770777, abs=1e-3)  # 118.220
    one, _ = _account(**over, **{"cluster.cores": 1})
    assert one.supply_fps == pytest.approx(1000.0)
    none, _ = _account(**over, **{"cluster.cores": 0})
    assert none.supply_fps == 0.0 and none.bottleneck == "decode"  # no core for the hand-over


def test_hand_over_of_decoded_frames_by_hand():
    """Pre-decoded frames need no decoder, but each still costs o: 8 cores at 1 ms, 8,000 frames/s
    (2,048,000 tokens/s), under the 1.5 GB/s link's 482.25 decoded 1080p frames/s."""
    p, _ = _account(**{"data.access": '"decoded"', "data.loader_cpu_per_frame": 0.001})
    assert p.stage_tokens_per_second["decode"] == pytest.approx(8000 * 256)
    assert p.supply_fps == pytest.approx(1.5e9 / (1.5 * 1920 * 1080))
    assert p.cores_needed == pytest.approx(2770.777 * 0.001, rel=1e-6)
    slow, _ = _account(**{"data.access": '"decoded"', "data.loader_cpu_per_frame": 0.05})
    assert slow.supply_fps == pytest.approx(160.0) and slow.bottleneck == "decode"  # 8 / 0.05 < 482.25


def test_hand_over_leaves_tokens_alone():
    """Token data has no frames: o does not enter."""
    over = {"data.kind": '"tokens"', "training.tokens": "1e9", "model.params": 1e6}
    p, _ = _account(**over)
    q, _ = _account(**over, **{"data.loader_cpu_per_frame": 0.5})
    assert repr(p) == repr(q)  # every field the same (repr: NaN, the figures token data lacks, equals itself)


def _old_decode_tokens(args: dict) -> np.ndarray:
    """The decode stage before o, written out: (cores x core rate + engines x engine rate) / g x n,
    rates scaled from 1080p by pixels; infinite for pre-decoded frames (g = 0)."""
    scale = 1920 * 1080 / (np.asarray(args["width"], float) * args["height"])
    engines = args["video_decoders"] if args["nvdec"] else 0.0
    decoded = np.asarray(args["cores"]) * args["core_fps_1080p"] * scale + engines * args["nvdec_fps_1080p"] * scale
    n = np.floor(args["side"] / args["patch"]) ** 2
    if args["access"] == "decoded":
        return np.full(np.shape(decoded), np.inf)
    g = 1.0 if args["access"] == "sequential" else (args["gop"] + 1) / 2
    return decoded / g * n


@pytest.mark.parametrize("access", ["sequential", "random", "decoded"])
@pytest.mark.parametrize("nvdec", [False, True])
def test_hand_over_zero_is_the_formula_without_it(access, nvdec):
    """o = 0 given as an array (the general formula, not the shortcut a single 0 takes) gives the
    figures of the formula without o, over cores from 0 to 64 and several frame sizes."""
    _, w = _account()
    for width, height, gop in ((1920, 1080, 30), (640, 480, 12), (3840, 2160, 61)):
        cores = np.linspace(0, 64, 129)
        args = pipeline_inputs(w, cores=cores, access=access, nvdec=nvdec, width=width, height=height, gop=gop)
        zero = pl.pipeline_arrays(**{**args, "loader_cpu_per_frame": np.zeros_like(cores)})
        plain = pl.pipeline_arrays(**args)
        np.testing.assert_allclose(zero["decode_tokens_per_second"], _old_decode_tokens(args), rtol=1e-12)
        for name in ("decode_tokens_per_second", "supply_tokens_per_second", "busy", "cores_needed",
                     "cores_needed_cpu_only", "threshold_params", "bottleneck_index"):
            np.testing.assert_allclose(zero[name], plain[name], rtol=1e-12, err_msg=name)


def test_hand_over_cost_is_monotone_and_continuous():
    """More CPU per frame never raises supply; across the point where the engines' hand-over fills
    the cores (cores = E o) the two branches meet."""
    _, w = _account()
    o = np.linspace(0, 0.01, 2001)
    args = pipeline_inputs(w, cores=2.0, access="random", gop=9, nvdec=True, loader_cpu_per_frame=o)
    fps = pl.pipeline_arrays(**args)["decode_tokens_per_second"] / 256
    assert np.all(np.diff(fps) <= 1e-9)
    e = 7 * 771 / 5  # used frames/s from the engines
    at = 2.0 / e  # o where E o = cores
    left = pl.pipeline_arrays(**{**args, "loader_cpu_per_frame": at * (1 - 1e-12)})["decode_tokens_per_second"]
    right = pl.pipeline_arrays(**{**args, "loader_cpu_per_frame": at * (1 + 1e-12)})["decode_tokens_per_second"]
    assert left / 256 == pytest.approx(e, rel=1e-9) and right / 256 == pytest.approx(e, rel=1e-9)
