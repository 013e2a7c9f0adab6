"""Every worked figure of the planning lessons (issue 18), each derived here by hand from its inputs
and formula, then compared with the accounts and with the text the examples print (to the precision
the lessons print). Outside references: torch (bf16/fp8 casts, quantize_per_tensor/channel, a real
TransformerEncoderLayer with AdamW) and Python's struct (IEEE binary32)."""

from __future__ import annotations

import json
import math
import runpy
import struct
from pathlib import Path

import pytest

from trainplan.accounts import compute as compute_mod
from trainplan.accounts import datamix
from trainplan.accounts import formats
from trainplan.accounts import memory as memory_mod
from trainplan.accounts import roofline as roofline_mod
from trainplan.accounts import serving as serving_mod
from trainplan.accounts import training_cost as cost_mod
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.errors import UserError
from trainplan.planning import decisions
from trainplan.planning.evaluate import build_report
from trainplan.workload.load import load_workload

LESSONS = Path(__file__).resolve().parent.parent / "examples" / "lessons"
GIB = 2.0**30
DAY = 86400.0
YEAR = 365 * DAY


def printed(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What an example script prints."""
    runpy.run_path(str(LESSONS / name), run_name="__main__")
    return capsys.readouterr().out


def three_figures(x: float) -> float:
    return float(f"{x:.3g}")


# ---------------------------------------------------------------- training cost


# (params, tokens, devices, dollars as printed, wall time as printed)
RUNS = [
    (7e9, 5e7, 1, "$7", None),
    (7e9, 1e9, 1, "$147", None),
    (7e9, 1.4e12, 64, "$206,000", "27 days on 64"),
    (400e9, 15e12, 64, "$126 M", "45 years on 64"),
]


@pytest.mark.parametrize("params,tokens,devices,dollars_text,wall_text", RUNS)
def test_training_costs(params: float, tokens: float, devices: int, dollars_text: str, wall_text: str | None,
                        capsys: pytest.CaptureFixture[str]) -> None:
    # by hand: F = 6 N D; seconds = F / (989e12 x 0.40); dollars = seconds / 3600 x $5 (one clean run)
    flops = 6 * params * tokens
    seconds = flops / (989e12 * 0.40)
    dollars = seconds / 3600 * 5.0
    hours = cost_mod.accelerator_hours(compute_mod.training_flops(params, tokens, "none"), 989e12, 0.40, 1.0)
    bill = cost_mod.training_bill(hours, 5.0, attempts=1)
    assert bill.dollars_per_attempt == pytest.approx(dollars, rel=1e-12)
    if dollars >= 1e6:
        assert f"${dollars / 1e6:,.0f} M" == dollars_text
    else:
        assert f"${three_figures(dollars):,.0f}" == dollars_text
    wall = seconds / devices
    if wall_text == "27 days on 64":
        assert round(wall / DAY) == 27
    elif wall_text == "45 years on 64":
        assert round(wall / YEAR) == 45
    out = printed("training_cost.py", capsys)
    assert dollars_text in out
    if wall_text:
        assert wall_text in out


def test_lora_about_an_hour() -> None:
    # 6 x 7e9 x 5e7 = 2.1e18 FLOP / 395.6e12 FLOP/s = 5,308 s: an hour and a half, "about an hour"
    seconds = 6 * 7e9 * 5e7 / (989e12 * 0.40)
    assert seconds == pytest.approx(5308.4, abs=0.1)
    assert 1.0 <= seconds / 3600 < 2.0


def test_one_b_on_four_accelerators(capsys: pytest.CaptureFixture[str]) -> None:
    flops = 6 * 1e9 * 2e11
    hand = {name: flops / (peak * mfu) / 3600 * price for name, peak, mfu, price in (
        ("consumer GPU", 80e12, 0.35, 0.40), ("A100", 312e12, 0.45, 2.50),
        ("H100", 989e12, 0.45, 5.00), ("8 x H100 node", 7912e12, 0.40, 40.00))}
    mod = runpy.run_path(str(LESSONS / "training_cost.py"))
    rows = {r["name"]: r for r in mod["one_b_costs"]()}
    for name, dollars in hand.items():
        assert rows[name]["dollars"] == pytest.approx(dollars, rel=1e-12)
    # the node is 8 H100s at the same $5 per GPU-hour: its bill differs from one H100's only by the MFU
    assert hand["8 x H100 node"] / hand["H100"] == pytest.approx(0.45 / 0.40)
    # ... and it buys time: 7,912 x 0.40 / (989 x 0.45) = 7.1x sooner
    assert rows["H100"]["hours"] / rows["8 x H100 node"]["hours"] == pytest.approx(7912 * 0.40 / (989 * 0.45))
    assert f"${hand['H100']:,.0f}" == "$3,745" and f"${hand['8 x H100 node']:,.0f}" == "$4,213"


def test_pretrain_7b_plan() -> None:
    """The same bill from `trainplan plan`: 64 H100s at 989 TFLOPS x 0.40, perfect scaling, $5/h."""
    w = load_workload(LESSONS / "pretrain-7b.toml")
    r = build_report(w)
    seconds = 6 * 7e9 * 1.4e12 / (64 * 989e12 * 0.40)
    assert r["compute"]["seconds"] == pytest.approx(seconds, rel=1e-9)
    assert round(seconds / DAY) == 27
    # the plan also stops for its checkpoints: 7e9 x 14 bytes at 1 GB/s, 98 s every hour
    wall = seconds * (1 + 7e9 * 14 / 1e9 / 3600)
    assert r["compute"]["wall_seconds"] == pytest.approx(wall, rel=1e-9)
    one = wall * 64 / 3600 * 5.0
    assert r["training_cost"]["dollars_per_attempt"] == pytest.approx(one, rel=1e-9)
    assert f"${three_figures(one):,.0f}" == "$212,000"
    assert r["training_cost"]["budget"] == pytest.approx(3 * one, rel=1e-9)
    from trainplan.present.render import verdict_text

    assert f"budgets 3 attempts" in verdict_text(r)
    # whole dollars from $1,000, as the Cost line writes them
    assert f"${one:,.0f} for one clean run, ${3 * one:,.0f} in all" in verdict_text(r)


# ---------------------------------------------------------------- memory


def test_fp32_adam_7b(capsys: pytest.CaptureFixture[str]) -> None:
    gib = 7e9 * (4 + 4 + 8) / GIB  # weights, gradients, two fp32 moments
    assert state_bytes_per_param("fp32", "adamw").total == 16
    assert round(gib) == 104 and gib > 80
    assert "7 B needs 104 GiB (does not fit an 80 GiB card)" in printed("memory.py", capsys)


def test_activation_gib(capsys: pytest.CaptureFixture[str]) -> None:
    # 32 layers x 4,096 wide x 16 tensors x 2 bytes = 4 MiB a token: 512 tokens 2 GiB, 32,768 tokens 128 GiB
    for tokens, gib in ((512, 2), (32768, 128)):
        hand = 32 * 4096 * 16 * 2 * tokens / GIB
        assert hand == gib
        assert memory_mod.activation_bytes(1, tokens, 4096, 32, bytes_per_element("bf16"), 16) / GIB == gib
    assert "2 GiB at 512 tokens, 128 GiB at 32,768" in printed("memory.py", capsys)


def test_training_budget_180_gb(capsys: pytest.CaptureFixture[str]) -> None:
    params = 12 * 32 * 4096**2 + 128_000 * 4096  # 12 L d^2 + V d (tied)
    assert params == 6_966_738_944
    weights, grads, master, adam = 2 * params, 2 * params, 4 * params, 8 * params
    acts = 4 * 4096 * 32 * 4096 * 16 * 2  # 4 sequences x 4,096 tokens x L x d x 16 tensors x bf16
    parts = [round(x / 1e9) for x in (weights, grads, master, adam, acts)]
    assert parts == [14, 14, 28, 56, 69]
    assert round((weights + grads + master + adam + acts) / 1e9) == 180
    one_per_block = weights + grads + master + adam + 4 * 4096 * 32 * 4096 * 1 * 2
    assert round(one_per_block / 1e9) == 116
    extra = (6 + 2) / 6 - 1  # full recomputation runs the forward (2 N D) again
    assert compute_mod.training_flops(1, 1, "full") / compute_mod.training_flops(1, 1, "none") - 1 == pytest.approx(extra)
    assert f"+{extra * 100:.0f} %" == "+33 %"
    out = printed("memory.py", capsys)
    assert "180 GB = 14 + 14 + 28 + 56 + 69" in out
    assert "one activation kept per block: 116 GB, +33 % arithmetic" in out


def test_encoder_layer_adamw_state() -> None:
    torch = pytest.importorskip("torch")
    d, ffn = 512, 2048
    # by hand: in_proj 3d^2 + 3d, out_proj d^2 + d, linear1 d ffn + ffn, linear2 ffn d + d, two norms 2 x 2d
    params = 3 * d * d + 3 * d + d * d + d + d * ffn + ffn + ffn * d + d + 4 * d
    assert params == 3_152_384
    tensors = 12  # parameter tensors, each with one AdamW 'step' scalar
    state = 2 * params + tensors  # exp_avg and exp_avg_sq per parameter
    assert state == 6_304_780
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, 8, ffn)
    opt = torch.optim.AdamW(layer.parameters())
    layer(torch.randn(3, 2, d)).sum().backward()
    opt.step()
    assert sum(p.numel() for p in layer.parameters()) == params
    assert len(list(layer.parameters())) == tensors
    measured = sum(t.numel() for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    assert measured == state
    assert f"{measured / params:.1f}" == "2.0"
    # the account: AdamW keeps 8 bytes = two fp32 numbers per parameter
    assert state_bytes_per_param("bf16", "adamw").optimizer / bytes_per_element("fp32") == 2.0


# ---------------------------------------------------------------- serving


def test_serving_7b(capsys: pytest.CaptureFixture[str]) -> None:
    tps = 989e12 * 0.30 / (2 * 7e9)
    assert f"{tps:,.0f}" == "21,193"
    per_request = 5.0 / 3600 / (tps / 600)
    e = serving_mod.compute_bound_serving(7e9, 989e12, 0.30, 5.0, 600)
    assert e.tokens_per_second == pytest.approx(tps, rel=1e-12)
    assert e.cost_per_request == pytest.approx(per_request, rel=1e-12)
    assert e.cost_per_thousand_requests == pytest.approx(1000 * per_request, rel=1e-12)
    out = printed("serving.py", capsys)
    assert "21,193 tokens/s" in out and f"${per_request:.7f} a request" in out and "$0.0393 per 1,000" in out


@pytest.mark.parametrize("rate,day", [(1e4, "523,887"), (1e6, "5,239"), (1e8, "52"), (1e9, "5")])
def test_crossover_days(rate: float, day: str, capsys: pytest.CaptureFixture[str]) -> None:
    per_request = 5.0 / 3600 / (989e12 * 0.30 / (2 * 7e9) / 600)
    days = 206_000 / (rate * per_request)
    assert f"{days:,.0f}" == day
    assert serving_mod.crossover_days(206_000, rate * per_request) == pytest.approx(days)
    assert f"training bill on day {day}\n" in printed("serving.py", capsys)


def test_serving_ladder(capsys: pytest.CaptureFixture[str]) -> None:
    def per_million(params: float, speed: float = 1.0, tokens: float = 600) -> float:
        return 5.0 / 3600 / (989e12 * 0.30 * speed / (2 * params) / tokens) * 1e6

    big, small = per_million(70e9), per_million(1e9, 2.0)
    assert f"${big:.0f}" == "$393" and f"${small:.2f}" == "$2.81"
    assert big / small == pytest.approx(140)  # 70x fewer parameters, 2x int8 speed
    lr = per_million(1e4, 1.0, 1)  # one prediction of 2 x 1e4 FLOP per request
    mod = runpy.run_path(str(LESSONS / "serving.py"))
    rows = {r["name"]: r for r in mod["ladder"]()}
    assert rows["70 B fp16"]["cost_per_million_requests"] == pytest.approx(big, rel=1e-12)
    assert rows["1 B distilled int8"]["cost_per_million_requests"] == pytest.approx(small, rel=1e-12)
    assert rows["logistic regression 1e4"]["cost_per_million_requests"] == pytest.approx(lr, rel=1e-12)
    assert rows["1 B distilled int8"]["times_cheaper"] == pytest.approx(140)
    out = printed("serving.py", capsys)
    assert "$393 per million" in out and "$2.81 per million" in out and "140x cheaper" in out


# ---------------------------------------------------------------- number formats


def test_parameter_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    for fmt, per, text in (("fp32", 4, "27.9"), ("bf16", 2, "13.9"), ("int8", 1, "7.0"), ("int4", 0.5, "3.5")):
        assert f"{6.97e9 * per / 1e9:.1f}" == text
        assert formats.parameter_bytes(6.97e9, fmt) == 6.97e9 * per
    assert "fp32 27.9 GB, bf16 13.9 GB, int8 7.0 GB, int4 3.5 GB" in printed("formats.py", capsys)


def test_bit_layouts() -> None:
    torch = pytest.importorskip("torch")
    hand = {"fp32": (32, 1, 8, 23), "fp16": (16, 1, 5, 10), "bf16": (16, 1, 8, 7)}
    theirs = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    for fmt, (bits, sign, exponent, fraction) in hand.items():
        lay = formats.bit_layout(fmt)
        assert (lay.bits, lay.sign, lay.exponent, lay.fraction) == (bits, sign, exponent, fraction)
        info = torch.finfo(theirs[fmt])  # eps = 2^-fraction; bits = 1 + exponent + fraction
        assert -math.log2(info.eps) == fraction and info.bits == bits
        assert lay.largest == info.max


def test_stored_value_fp32() -> None:
    stdlib = struct.unpack("<f", struct.pack("<f", 0.1))[0]  # IEEE binary32, round to nearest
    row = formats.stored_values([0.1], "fp32")[0]
    assert row.stored == stdlib and f"{row.stored:.10f}" == "0.1000000015"
    assert row.relative_error == pytest.approx(abs(stdlib - 0.1) / 0.1)


def test_stored_value_bf16() -> None:
    torch = pytest.importorskip("torch")
    nearest = formats.stored_values([0.1], "bf16")[0]
    assert nearest.stored == torch.tensor(0.1).to(torch.bfloat16).item()
    assert f"{nearest.stored:.10f}" == "0.1000976562"  # 0x3DCD: what a cast stores
    # the lessons' 0.0996093750: the top 16 bits of fp32 0.1 (0x3DCCCCCD), chopped to 0x3DCC
    assert struct.unpack("<I", struct.pack("<f", 0.1))[0] == 0x3DCCCCCD
    chopped = struct.unpack("<f", struct.pack("<I", 0x3DCC0000))[0]
    truncated = formats.stored_values([0.1], "bf16", "truncate")[0]
    assert truncated.stored == chopped and f"{truncated.stored:.10f}" == "0.0996093750"
    assert truncated.relative_error == pytest.approx((0.1 - chopped) / 0.1)


def test_stored_value_fp8() -> None:
    torch = pytest.importorskip("torch")
    for fmt, theirs in (("fp8_e4m3", torch.float8_e4m3fn), ("fp8_e5m2", torch.float8_e5m2)):
        values = [0.1, -0.37, 3.3, 200.0]
        ours = [r.stored for r in formats.stored_values(values, fmt)]
        assert ours == torch.tensor(values).to(theirs).float().tolist()
    assert formats.stored_values([1000.0], "fp8_e4m3")[0].overflow  # beyond 448: no number to print


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_stored_value_int8_shared_scale() -> None:
    torch = pytest.importorskip("torch")
    scale = 9.5 / 127  # absmax of the tensor (0.1, 9.5) over the 127 int8 levels
    assert f"{scale:.6f}" == "0.074803"
    rows = formats.stored_values([0.1, 9.5], "int8")
    assert rows[0].scale == scale and rows[0].level == 1  # round(0.1 / 0.0748) = round(1.34) = 1
    q = torch.quantize_per_tensor(torch.tensor([0.1, 9.5], dtype=torch.float64).float(), scale, 0, torch.qint8)
    assert [r.stored for r in rows] == pytest.approx(q.dequantize().double().tolist(), rel=1e-6)
    assert f"{rows[0].stored:.10f}" == "0.0748031496"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_int8_per_channel_against_shared() -> None:
    torch = pytest.importorskip("torch")
    matrix = [[0.1, -0.2, 0.3], [9.5, 1.0, -2.0]]
    c = formats.compare_scales(matrix, "int8")
    assert c.shared_scale == 9.5 / 127
    assert c.channel_scales == (0.3 / 127, 9.5 / 127)
    t = torch.tensor(matrix)
    per = torch.quantize_per_channel(t, torch.tensor(c.channel_scales, dtype=torch.float64),
                                     torch.zeros(2, dtype=torch.long), 0, torch.qint8).dequantize()
    shared = torch.quantize_per_tensor(t, c.shared_scale, 0, torch.qint8).dequantize()
    assert [v for r in c.per_channel for v in r] == pytest.approx(per.flatten().tolist(), rel=1e-6)
    assert [v for r in c.shared for v in r] == pytest.approx(shared.flatten().tolist(), rel=1e-6)

    def mean_error(scales: list[float]) -> float:  # |round(x / s) s - x| / |x|, averaged
        errs = [abs(round(v / s) * s - v) / abs(v) for row, s in zip(matrix, scales) for v in row]
        return sum(errs) / len(errs)

    assert c.shared_mean_relative_error == pytest.approx(mean_error([9.5 / 127] * 2))
    assert c.per_channel_mean_relative_error == pytest.approx(mean_error([0.3 / 127, 9.5 / 127]))
    assert c.per_channel_mean_relative_error < c.shared_mean_relative_error / 5


def test_formats_command(capsys: pytest.CaptureFixture[str]) -> None:
    from trainplan.interfaces.cli import main

    with pytest.raises(SystemExit) as ex:
        main(["formats", "0.1", "9.5", "--params", "6.97B", "--rounding", "truncate",
              "--channel", "0.1,-0.2,0.3", "--channel", "9.5,1.0,-2.0"])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    for text in ("27.9 GB", "13.9 GB", "7.0 GB", "3.5 GB", "0.1000000015", "0.0996093750", "0.1000976562",
                 "0.0748031496", "0.074803 (level 1)"):
        assert text in out
    assert " bf16         16     1         8         7" in out
    with pytest.raises(SystemExit) as ex:
        main(["formats", "0.1", "--dtype", "int8", "-f", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["stored"][0]["stored"] == 0.1  # a lone value is its own absmax: level 127
    for argv, key in ((["formats", "abc"], "values"), (["formats", "--dtype", "fp9"], "--dtype"),
                      (["formats", "--params", "-3"], "--params"), (["formats", "--scale", "0"], "--scale"),
                      (["formats", "--channel", ","], "--channel")):
        with pytest.raises(SystemExit) as ex:
            main(argv)
        assert ex.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and key in err[0]


# ---------------------------------------------------------------- roofline


def test_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    ridge = 400e12 / 2e12
    assert ridge == 200
    for side, text in ((1024, "341"), (16384, "5,461")):
        hand = 2 * side**3 / (3 * side**2 * 2)  # 2 n^3 FLOP over 3 n^2 bf16 elements
        assert f"{hand:,.0f}" == text
        assert roofline_mod.square_matmul_intensity(side, 2).intensity == pytest.approx(hand)
    add = 1 / (3 * 2)  # one FLOP over two reads and one write of 2 bytes
    assert f"{add:.2f}" == "0.17"
    w, a = 4096 * 4096, 4096 + 4096

    def intensity(batch: int) -> float:
        return 2 * batch * w / (w * 2 + batch * a * 2)

    assert intensity(128) < ridge <= intensity(256)  # trying 1, 2, 4, ...: compute-bound first at 256
    layer = roofline_mod.compute_bound_batch(w, 400e12, 2e12, 2, a, 2)
    assert layer.compute_bound_batch == pytest.approx(ridge * w * 2 / (2 * w - ridge * a * 2))
    assert roofline_mod.compute_bound_power_of_two(layer) == 256
    out = printed("roofline.py", capsys)
    assert "341 FLOP/byte at side 1,024, 5,461 at 16,384" in out and "0.17" in out and "batch of 256" in out


def test_power_of_two_edges() -> None:
    exact = roofline_mod.compute_bound_batch(1e6, 200e12, 2e12, 2.0)  # weights only: B* = 100 x 2 / 2 = 100
    assert exact.compute_bound_batch == pytest.approx(100)
    assert roofline_mod.compute_bound_power_of_two(exact) == 128
    never = roofline_mod.compute_bound_batch(10, 400e12, 2e12, 2.0, 1e6, 2.0)  # activations swamp it
    assert roofline_mod.compute_bound_power_of_two(never) is None


# ---------------------------------------------------------------- data


def test_demonstrations(capsys: pytest.CaptureFixture[str]) -> None:
    per_hour = 3600 / (25 + 12)
    assert f"{per_hour:.0f}" == "97"
    assert datamix.demonstrations_per_person_hour(25, 12) == pytest.approx(per_hour)
    out = printed("data.py", capsys)
    for n in (10_000, 100_000, 1_000_000):
        hours = n * 37 / 3600
        assert datamix.demonstration_hours(n, 25, 12).person_hours == pytest.approx(hours)
        assert f"{n:>9,} demonstrations: {hours:,.0f} person-hours" in out


def test_examples_per_person_hour(capsys: pytest.CaptureFixture[str]) -> None:
    out = printed("data.py", capsys)
    for name, rate, hours in (("teleoperation", 3600 / 37, 1e5 * 37 / 3600), ("cross-embodiment data", 1250, 80),
                              ("model-generated", 500, 200), ("human video", 2000, 50), ("simulation", 5000, 20)):
        assert datamix.person_hours_for(1e5, rate) == pytest.approx(hours)
        assert f"{name:<22} {rate:>6,.0f}  {hours:>6,.0f} h" in out
    with pytest.raises(UserError):
        datamix.person_hours_for(1e5, 0)


# ---------------------------------------------------------------- the planning questions


@pytest.mark.parametrize("load,compute,serial,overlapped,busy,speedup,ceiling", [
    (0.100, 0.100, 0.200, 0.100, "50 %", "2", "compute"),
    (0.200, 0.100, 0.300, 0.200, "33 %", "1.5", "loader"),
])
def test_overlap(load: float, compute: float, serial: float, overlapped: float, busy: str, speedup: str,
                 ceiling: str) -> None:
    o = decisions.overlap(load, compute)
    assert o.serial_step_seconds == pytest.approx(load + compute) == pytest.approx(serial)
    assert o.overlapped_step_seconds == pytest.approx(max(load, compute)) == pytest.approx(overlapped)
    assert f"{compute / (load + compute) * 100:.0f} %" == busy
    assert f"{o.serial_utilisation * 100:.0f} %" == busy
    assert f"{o.speedup:.2g}" == speedup == f"{(load + compute) / max(load, compute):.2g}"
    assert o.ceiling == ceiling
    sentence = decisions.overlap_sentence(o)
    assert f"{busy} busy" in sentence and f"({speedup}x faster" in sentence
    assert ("loader is the ceiling" in sentence) == (ceiling == "loader")


def test_negligible_loading_is_written_each_in_its_own_prefix() -> None:
    """21.8 µs of loading against 1.884 s of compute: microseconds and seconds, not 0.0218 ms vs 1,884 ms."""
    sentence = decisions.overlap_sentence(decisions.overlap(21.8e-6, 1.884))
    assert "21.8 µs a step" in sentence and "1.88 s of compute" in sentence
    assert "0.0218" not in sentence and "1,884" not in sentence


def test_overlap_in_a_plan_matches_the_pipeline_without_prefetch() -> None:
    """Two paths to the un-overlapped utilisation: the decisions' c / (l + c) from one step, and the
    pipeline account's S / (S + D) with prefetch off."""
    r = build_report(load_workload(None))
    load = r["compute"]["tokens_per_step"] / r["pipeline"]["supply_tokens_per_second"]  # one device
    assert r["decisions"]["loading"]["load_seconds"] == pytest.approx(load)
    no_prefetch = build_report(load_workload(None, ["cluster.prefetch=false"]))
    assert r["decisions"]["loading"]["serial_utilisation"] == pytest.approx(no_prefetch["pipeline"]["busy"], rel=1e-9)


def test_sanity_checks() -> None:
    hit = decisions.revenue_check(3.93e-5, 1e-5)
    assert hit.triggered and "ends the project" in hit.sentence and "$0.0000393" in hit.sentence
    assert not decisions.revenue_check(3.93e-5, 1e-4).triggered
    assert not decisions.revenue_check(3.93e-5, None).applies
    assert decisions.crossover_check(29.9).triggered and "optimise serving" in decisions.crossover_check(29.9).sentence
    assert not decisions.crossover_check(30.0).triggered
    assert not decisions.crossover_check(math.inf).applies
    assert decisions.small_bill_check(99.99).triggered
    assert "stop planning and run it" in decisions.small_bill_check(22.11).sentence
    assert not decisions.small_bill_check(100.0).triggered


def test_recurring() -> None:
    r = decisions.recurring(618_000, 90 * DAY, 3932.0)
    assert r.trainings_per_year == pytest.approx(365 / 90)
    assert r.training_per_year == pytest.approx(618_000 * 365 / 90)
    assert r.serving_per_year == pytest.approx(3932 * 365)
    assert decisions.recurring(618_000, None, 10).training_per_year == 0
    with pytest.raises(UserError):
        decisions.recurring(1, -5, None)


def test_finetune_and_serve_plan() -> None:
    w = load_workload(LESSONS / "finetune-and-serve-7b.toml")
    r = build_report(w)
    d = r["decisions"]
    saves = 1 + 7e9 * 14 / 1e9 / 3600  # a 98 s checkpoint save every hour of training
    one = 6 * 7e9 * 5e7 / (989e12 * 0.40) * saves / 3600 * 5.0
    assert d["attempts"]["dollars_per_attempt"] == pytest.approx(one, rel=1e-9)
    assert d["attempts"]["budget"] == pytest.approx(3 * one, rel=1e-9)
    checks = {c["name"]: c for c in d["checks"]}
    s = r["serving"]
    paid = s["serving_cost_per_day"] / s["requests_per_day"]
    assert d["cost_per_request_paid"] == pytest.approx(paid)
    assert checks["cost_above_revenue"]["triggered"] == (paid > 0.00002) is True
    assert checks["serving_passes_training_within_a_month"]["triggered"] == (s["crossover_days"] < 30) is True
    assert checks["training_under_100_dollars"]["triggered"] == (3 * one < 100) is True
    rec = d["recurring"]
    assert rec["training_per_year"] == pytest.approx(3 * one * 365 / 30, rel=1e-9)
    assert rec["serving_per_year"] == pytest.approx(s["serving_cost_per_day"] * 365)
    from trainplan.present.render import to_markdown, to_table

    for text in (" ".join(to_table(r).split()), to_markdown(r)):  # the table wraps its lines
        for sentence in d["sentences"]:
            assert sentence in text
    assert "ends the project" in to_markdown(r) and "stop planning and run it" in to_markdown(r)
    json.dumps(r, allow_nan=False)


def test_new_keys_refuse_bad_values(capsys: pytest.CaptureFixture[str]) -> None:
    from trainplan.interfaces.cli import main

    for assignment, key in (("serving.revenue_per_request=-1", "serving.revenue_per_request"),
                            ("training.retrain_every=soon", "training.retrain_every"),
                            ("training.retrain_every=0", "training.retrain_every")):
        with pytest.raises(SystemExit) as ex:
            main(["plan", "--set", assignment])
        assert ex.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and key in err[0]
    w = load_workload(None)
    assert w.serving.revenue_per_request is None and w.training.retrain_every is None
    assert "source" in build_report(w)["assumptions"]["training.retrain_every"]


def test_decision_examples_print(capsys: pytest.CaptureFixture[str]) -> None:
    out = printed("decisions.py", capsys)
    assert "step 200 ms without overlap (50% busy), 100 ms with it; speed-up 2x" in out
    assert "step 300 ms without overlap (33% busy), 200 ms with it; speed-up 1.5x, ceiling: loader" in out


@pytest.mark.parametrize("side,text", [(1024, "341"), (16384, "5,461")])
def test_roofline_command(side: int, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The same roofline from `trainplan roofline` on the lesson's accelerator."""
    from trainplan.interfaces.cli import main

    with pytest.raises(SystemExit) as ex:
        main(["roofline", str(LESSONS / "roofline.toml"), "--side", str(side), "-f", "json"])
    assert ex.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ridge_intensity"] == 400e12 / 2e12
    assert f"{out['matmul_intensity']:,.0f}" == text == f"{2 * side / (3 * 2):,.0f}"
    assert f"{out['elementwise_add_intensity']:.2f}" == "0.17"
    w, a, ridge = 4096 * 4096, 4096 + 4096, 200.0
    assert out["compute_bound_batch"] == pytest.approx(ridge * w * 2 / (2 * w - ridge * a * 2))


def test_overlap_bounds() -> None:
    """Overlap never slows a step, gains at most 2x (at l = c), and never makes a step shorter than
    either part; checked over a grid of load/compute ratios."""
    for load in (0.0, 1e-6, 0.05, 0.1, 0.3, 7.0, 1e4):
        for compute in (1e-6, 0.1, 2.0):
            o = decisions.overlap(load, compute)
            assert 1.0 <= o.speedup <= 2.0 + 1e-12
            assert o.overlapped_step_seconds >= max(load, compute)
            assert 0 < o.serial_utilisation <= o.overlapped_utilisation <= 1.0
    for bad in ((-1.0, 0.1), (math.inf, 0.1), (0.1, 0.0), (0.1, math.nan)):
        with pytest.raises(UserError):
            decisions.overlap(*bad)


def test_formats_refuse_what_they_cannot_store() -> None:
    with pytest.raises(UserError):
        formats.stored_values([5e-324], "int8")  # its scale would underflow to zero
    with pytest.raises(UserError):
        formats.stored_values([0.1], "fp8_e4m3", "truncate")  # truncation is defined for bf16 only
    with pytest.raises(UserError):
        formats.stored_values([math.nan], "bf16")
    with pytest.raises(UserError):
        formats.compare_scales([], "int8")


def test_extensions_refuse_bad_input() -> None:
    with pytest.raises(UserError):
        serving_mod.compute_bound_serving(7e9, 989e12, 1.5, 5.0, 600)  # an MFU above 1
    with pytest.raises(UserError):
        serving_mod.compute_bound_serving(7e9, 989e12, 0.3, 5.0, 600, speedup=0)
    with pytest.raises(UserError):
        datamix.demonstrations_per_person_hour(0, 0)  # no time per demonstration: no rate
    assert datamix.demonstrations_per_person_hour(25, 12, 0.5) == pytest.approx(0.5 * 3600 / 37)
