"""The numeric boundary and the cross-checks of issue 29: every number read once, finite, in range,
whole where it must be; model keys checked against a config.json beside them.

Each refusal is run in-process through cli.main (the `cli` fixture): exit 2, stdout empty, one stderr
line naming the key, no traceback, no file written.
"""

from __future__ import annotations

import json
import sys

import pytest

from trainplan import units
from trainplan.errors import UserError

BIG = 10**400  # past float64's 1.8e308
HUGE = "1" + "0" * 5000  # past Python's 4,300-digit cap on int(str)
HUGE_INT = 10**5000  # the same number, made without converting text
LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}


def refused(cli, tmp_path, args, key, files=None, also=""):
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    res = cli(*args, cwd=tmp_path)
    assert res.returncode == 2, (res.returncode, res.stdout[-300:], res.stderr)
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainplan: "), res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert key in lines[0] and also in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output, no temporary file
    return lines[0]


# ---------------------------------------------------------------- units.number


def test_number_reads_what_float_reads_and_refuses_the_rest():
    assert units.number(3) == 3.0 and units.number("2.5") == 2.5 and units.number("1_000") == 1000.0
    assert units.number(sys.float_info.min) == sys.float_info.min  # the smallest normal float is a number
    assert str(units.number(-0.0)) == "0.0"  # -0 is 0 (no "-0 cores present")
    assert units.number("1" + "0" * 300) == 1e300  # 301 digits: float() reads them, int() need not
    for bad, said in ((BIG, "float range"), (HUGE, "float range"), ("1e400", "float range"), (5e-324, "subnormal"),
                      (float("nan"), "finite"), ("inf", "finite"), (True, "number"), ("abc", "number")):
        with pytest.raises(UserError, match=said):
            units.number(bad, "k")
    with pytest.raises(UserError, match="2\\^53"):
        units.number(2**53 + 1, "k", whole=True)


def test_shown_describes_an_integer_too_long_to_print():
    # repr() of a 5,001-digit int raises ValueError; its size is log10(2) x bits, about 5,001 digits
    assert units.shown(HUGE_INT) == "an integer of about 5,001 digits"
    assert units.shown(12) == "12" and units.shown(2**64) == "18446744073709551616"


def test_parse_refuses_a_product_past_float_range():
    with pytest.raises(UserError, match="below 1.8e\\+308"):
        units.parse("1e300 EB", "bytes", "k")  # 1e300 x 1e18 overflows
    assert units.parse("-0", "count") == 0.0 and str(units.parse("-0", "count")) == "0.0"


# ---------------------------------------------------------------- every reader


@pytest.mark.parametrize("toml,key", [
    (f"[model]\nparams = {BIG}\n", "model.params"),
    (f"[cluster]\ncount = {BIG}\n", "cluster.count"),
    (f"[cluster]\ncores = {BIG}\n", "cluster.cores"),
    (f"[cluster]\nheadroom = {BIG}\n", "cluster.headroom"),
    (f"[energy]\npue = {BIG}\n", "energy.pue"),  # a plain float field
    (f"[training]\nzero = {BIG}\n", "training.zero"),  # a plain int field
    (f"[prices]\naccelerator_hour = {BIG}\n", "prices.accelerator_hour"),
    (f'[cluster]\naccelerator = {{ peak_flops = {BIG}, memory = "80 GB" }}\n', "cluster.accelerator.peak_flops"),
    (f"[model]\nparams = {HUGE}\n", "w.toml"),  # tomllib itself refuses to convert it
    ("[cluster]\ncores = 5e-324\n", "cluster.cores"),
    # a number written as text in a plain float field (the CI fuzzer's find: it reached the answer as None)
    ('[data]\npixels_per_frame = "5e-324"\n', "data.pixels_per_frame"),
    ('[energy]\npue = "1e400"\n', "energy.pue"),
    ("[data]\npixels_per_frame = 0.5\n", "data.pixels_per_frame"),  # a frame has at least one pixel
    ("[[sources]]\nname = \"\"\n", "sources.0.name"),  # a source is referred to by its name
    ("[[sources]]\nname = \" \\t\"\n", "sources.0.name"),
])
def test_workload_numbers_past_the_boundary(cli, tmp_path, toml, key):
    refused(cli, tmp_path, ["plan", "w.toml", "--output", "out.json"], key, {"w.toml": toml})


@pytest.mark.parametrize("args,key,also", [
    (["plan", "--set", f"cluster.count={BIG}"], "cluster.count", "float range"),
    (["plan", "--set", f"model.params={HUGE}"], "model.params", "4,300 digits"),
    (["serve", "--set", f"serving.context={BIG}"], "serving.context", ""),
    # a line break in a --set value would be a second TOML key: one --set sets one key
    (["plan", "--set", "cluster.cores=8\ncluster.count=3"], "cluster.cores", "one line"),
    # digits of other scripts: float() reads "٣" as 3, TOML and a reader of the file do not
    (["plan", "--set", "cluster.count=\u0663"], "cluster.count", "a number"),
    (["plan", "--set", "data.hours=\u0661\u0660 h"], "data.hours", "a duration"),
    (["plan", "--set", "cluster.cores=\uff11\uff16"], "cluster.cores", "a number"),
    # and on options click would read with int() or float()
    (["layout", "--devices", "\u0663"], "--devices", "digits 0-9"),
    (["simulate", "--frames=\uff11\uff10\uff10\uff10"], "--frames", "digits 0-9"),
    (["data", "demos", "\u0663"], "argument", "digits 0-9"),
    (["scaling", "optimal", "--budget", "5e-324"], "--budget", "subnormal"),
    (["scaling", "optimal", "--budget", "1" + "0" * 400], "--budget", "float range"),
    (["layout", "--devices", str(BIG)], "--devices", "2^53"),
    (["data", "demos", str(BIG)], "COUNT", "2^53"),
    (["sweep", "--vary", "cluster.cores=1,,2"], "cluster.cores", "empty item"),
    (["simulate", "--vary", "seed=-1", "--frames", "2000"], "--vary seed", "from 0"),
    (["simulate", "--vary", f"seed={2**64}", "--frames", "2000"], "--vary seed", "2^63-1"),
    (["simulate", "--vary", "cv=1000", "--frames", "2000"], "--vary cv", "to 100"),
    (["simulate", "--vary", "read_cv=101", "--frames", "2000"], "--vary read_cv", "to 100"),
    (["simulate", "--vary", "keyframe_cost=1e9", "--frames", "2000"], "--vary keyframe_cost", "10000"),
    (["simulate", "--vary", "buffer=1:1000000000", "--frames", "2000"], "--vary buffer", "1,000,000,000"),
    (["simulate", "--vary", "seed=0:999999", "--frames", "2000"], "--vary seed", "at most 100,000"),
    (["simulate", "--vary", "seed=0,,1", "--frames", "2000"], "--vary seed", "empty item"),
    # one value twice is a slip, not two identical rows (a helper's audit, issue 29)
    (["simulate", "--buffers", "4,4,16", "--frames", "2000"], "--buffers", "4 twice"),
    (["simulate", "--vary", "seed=0,1,0", "--frames", "2000"], "--vary seed", "0 twice"),
    (["sweep", "--vary", "cluster.cores=8,16,8.0"], "cluster.cores", "8 twice"),
    (["sweep", "--vary", "cluster.accelerator=h100-sxm,a100-sxm-80gb,h100-sxm"], "cluster.accelerator", "h100-sxm twice"),
    (["simulate", "--vary", "buffer=1:400", "--vary", "seed=0:400", "--frames", "2000"], "--vary",
     "160,400"),
])
def test_command_line_numbers_past_the_boundary(cli, tmp_path, args, key, also):
    refused(cli, tmp_path, args, key, also=also)


def test_minus_zero_cores_are_zero_cores(plan_json):
    report = plan_json("--set", "cluster.cores=-0")
    assert report["pipeline"]["cores"] == 0 and str(report["pipeline"]["cores"]) in ("0", "0.0")


# ---------------------------------------------------------------- config.json and its neighbours


@pytest.mark.parametrize("config,key,also", [
    ({**LLAMA, "hidden_size": BIG}, "hidden_size", "at most 9.01e+15"),
    ({**LLAMA, "model_type": ["llama"]}, "model_type", "text"),
    ({**LLAMA, "vocab_size": 0}, "vocab", "above 0"),
    ({**LLAMA, "vocab_size": 10**13}, "vocab", "below 1e+09"),
    # refused when read, before a per-layer list of 10^13 entries is built (CI's fuzzer: MemoryError)
    ({**LLAMA, "num_hidden_layers": 10**13}, "num_hidden_layers", "below 100000"),
    ({**LLAMA, "text_config": {"num_hidden_layers": 10**6}}, "text_config.num_hidden_layers", "model.layers"),
    ({**LLAMA, "pad_token_id": 1000}, "pad_token_id", "below vocab_size (1,000)"),  # ids are 0..999
    ({**LLAMA, "model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 4}, "num_experts_per_tok",
     "at most experts (2)"),
])
def test_config_json_values_are_checked(cli, tmp_path, config, key, also):
    refused(cli, tmp_path, ["plan", "w.toml", "--output", "out.json"], key,
            {"w.toml": '[model]\nhf_config = "c.json"\n', "c.json": json.dumps(config)}, also)


def test_a_config_json_past_the_digit_cap(cli, tmp_path):
    text = json.dumps(LLAMA).replace('"vocab_size": 1000', f'"vocab_size": {HUGE}')
    refused(cli, tmp_path, ["plan", "w.toml"], "c.json", {"w.toml": '[model]\nhf_config = "c.json"\n',
                                                          "c.json": text}, "4,300 digits")


@pytest.mark.parametrize("line,key,config_says", [
    ("layers = 5", "model.layers", "2"),
    ("width = 512", "model.width", "256"),
    ("heads = 8", "model.heads", "4"),
    ("vocab = 5000", "model.vocab", "1000"),
    ('family = "gpt2"', "model.family", "'llama'"),
])
def test_model_keys_beside_a_config_that_disagrees(cli, tmp_path, line, key, config_says):
    message = refused(cli, tmp_path, ["plan", "w.toml", "--output", "out.json"], key,
                      {"w.toml": f'[model]\nhf_config = "c.json"\n{line}\n', "c.json": json.dumps(LLAMA)})
    assert f"expected {config_says} as model.hf_config" in message


def test_model_keys_that_agree_with_the_config_are_accepted(plan_json, tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(LLAMA))
    w = tmp_path / "w.toml"
    w.write_text('[model]\nhf_config = "c.json"\nlayers = 2\nwidth = 256\nfamily = "llama"\n')
    report = plan_json(str(w))
    # LLaMA, tied = false by default: 2 x 1000 x 256 embeddings and head, 2 layers of
    # 4 x 256^2 attention + 3 x 256 x 688 MLP + 2 x 256 norms, and the final norm of 256
    per_layer = 4 * 256 * 256 + 3 * 256 * 688 + 2 * 256
    assert report["workload"]["params"] == 2 * 1000 * 256 + 2 * per_layer + 256


def test_duplicated_lora_targets_are_refused(cli, tmp_path):
    refused(cli, tmp_path, ["plan", "--set", "model.layers=2", "--set", "model.width=256", "--set",
                            "training.method=lora", "--set", 'training.lora_targets=["q","q","v"]'],
            "training.lora_targets", also="'q' more than once")


def test_a_comma_decimal_in_an_empirical_file(cli, tmp_path):
    refused(cli, tmp_path, ["simulate", "--empirical", "e.txt", "--frames", "2000"], "e.txt: line 2",
            {"e.txt": "0.004\n0,005\n"}, "comma decimal")


def test_a_calibration_entry_without_provenance_says_so(tmp_path):
    from trainplan.workload import calibration

    path = tmp_path / "cal.toml"
    path.write_text('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 2e9\n')
    source = calibration.load(path)["cluster.link"].source
    assert "trainplan probe" not in source and "unnamed" not in source
    assert source == f"given in calibration file {path} (no probe, machine or date recorded)"


@pytest.mark.parametrize("target,also", [
    ("pipeline.bottleneck>=1", "pipeline.bottleneck is a text figure"),
    ("pipeline.busy>=nan", "finite"),
])
def test_solve_refuses_a_text_figure_and_a_non_finite_target(cli, tmp_path, target, also):
    refused(cli, tmp_path, ["solve", "cluster.cores", "--for", target], "--for", also=also)


def test_a_config_transformers_rejects_is_the_config_s_fault(cli, tmp_path):
    """A family trainplan does not count itself is built by transformers on the meta device; a padding id
    past the vocabulary fails transformers' own assertion in nn.Embedding, reported as the config's."""
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    config = {"model_type": "phimoe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
              "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 100, "pad_token_id": 400}
    refused(cli, tmp_path, ["plan", "w.toml", "--output", "out.json"], "model_type",
            {"w.toml": '[model]\nhf_config = "c.json"\n', "c.json": json.dumps(config)}, also="phimoe")


def test_an_allocation_that_fails_anyway_is_one_line(cli, monkeypatch):
    from trainplan.planning import evaluate

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(evaluate, "build_report", exhausted)
    res = cli("plan")
    assert res.returncode == 2 and res.stderr.startswith("trainplan: memory:") and "Traceback" not in res.stderr
