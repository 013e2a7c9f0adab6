"""Bad input is refused: exit 2, stdout empty, one stderr line naming the key, no traceback,
and with --output no file (nor temporary file) left behind (issue 8).

Each case is run as a user would run it, as a subprocess: `trainplan plan FILE --output OUT`
and `trainplan validate FILE`. The table in docs/trust.md lists the same classes of input (issue 16 added the rest of this file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

# A calibration file whose decode probe ran on 4K video: it does not apply to the 1080p default.
CALIBRATION_4K = """\
format = 1
[probes.decode]
date = "2025-06-01T12:00:00+00:00"
hostname = "bench-4k"
settings = { width = 3840, height = 2160, codec = "h264" }
results = { frames_per_cpu_second = 30.1 }

[[values]]
key = "cluster.core_fps_1080p"
value = 120.4
unit = "frames/s"
probe = "decode"
hostname = "bench-4k"
"""

# A config.json of a family trainplan does not count (an encoder-only BERT).
BERT_CONFIG = '{"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "vocab_size": 30522}'


# A Llama config small enough to count at once (the fields the count reads).
LLAMA_TINY = ('{"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2, '
              '"num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, '
              '"tie_word_embeddings": false, "hidden_act": "silu"}')


@dataclass
class Case:
    id: str
    toml: str  # the workload file w.toml
    key: str  # what the one stderr line must name
    sets: list[str] = field(default_factory=list)  # --set KEY=VALUE
    files: dict[str, str | bytes] = field(default_factory=dict)  # other input files
    args: list[str] = field(default_factory=list)  # other arguments
    also: str = ""  # a second substring the line must hold (a hint)
    validate: bool = False  # also run through `trainplan validate` (one case per row of the table)


CASES = [
    # the file itself
    Case("malformed-toml", "[model\nparams = 3\n", "w.toml", also="malformed TOML", validate=True),
    Case("not-utf8", b"\xff\xfe[model]\n", "w.toml", also="UTF-8"),  # type: ignore[arg-type]
    Case("duplicate-key", "[cluster]\ncount = 2\ncount = 3\n", "w.toml"),
    # unknown keys, with a suggestion
    Case("unknown-key", "[cluster]\ncorez = 3\n", "cluster.corez", also="did you mean 'cluster.cores'", validate=True),
    Case("unknown-section", "[clutser]\ncount = 3\n", "clutser", also="did you mean 'cluster'"),
    Case("unknown-set-key", "", "data.bitrat", sets=["data.bitrat=3"], also="did you mean 'data.bitrate'", validate=True),
    Case("set-not-key-value", "", "--set", sets=["data.bitrate"]),
    Case("set-not-dotted", "", "--set", sets=["bitrate=3"]),
    Case("set-into-a-value", "", "data.bitrate", sets=["data.bitrate.x=3"]),
    # wrong or missing units, wrong types
    Case("size-for-a-rate", '[data]\nbitrate = "8 MB"\n', "data.bitrate", also="bit rate", validate=True),
    Case("unknown-unit", '[data]\nbitrate = "8 furlongs"\n', "data.bitrate"),
    Case("rate-missing-per-second", '[data]\nbitrate = "8 Mbit"\n', "data.bitrate"),
    Case("prefix-without-unit", '[cluster]\nlink = "1.5 G"\n', "cluster.link"),
    Case("no-number", '[cluster]\nlink = "fast"\n', "cluster.link"),
    Case("rate-for-a-duration", '[storage]\nsave_every = "1 GB/s"\n', "storage.save_every"),
    Case("word-for-a-count", '[cluster]\ncount = "three"\n', "cluster.count"),
    Case("bool-for-a-number", "[cluster]\ncores = true\n", "cluster.cores", validate=True),
    Case("number-for-a-bool", '[cluster]\nnvdec = "maybe"\n', "cluster.nvdec"),
    Case("fractional-count", "[model]\nlayers = 12.5\n", "model.layers", also="whole number"),
    Case("unknown-choice", '[training]\nrecompute = "some"\n', "training.recompute"),
    # zero, negative, NaN, infinite
    Case("zero-count", "[cluster]\ncount = 0\n", "cluster.count", validate=True),
    Case("zero-params", "[model]\nparams = 0\n", "model.params"),
    Case("zero-fps", "[data]\nfps = 0\n", "data.fps"),
    Case("negative-count", "[cluster]\ncount = -2\n", "cluster.count"),
    Case("negative-params", '[model]\nparams = "-5B"\n', "model.params", validate=True),
    Case("negative-cores", "[cluster]\ncores = -1\n", "cluster.cores"),
    Case("negative-price", "[prices]\naccelerator_hour = -3\n", "prices.accelerator_hour"),
    Case("nan-fraction", "[cluster]\nmfu = nan\n", "cluster.mfu", also="finite", validate=True),
    Case("nan-plain-float", "[cluster]\ncores = nan\n", "cluster.cores"),
    Case("nan-hours", "[data]\nhours = nan\n", "data.hours"),
    Case("nan-with-unit", "", "data.bitrate", sets=['data.bitrate="nan Mbit/s"']),
    Case("inf-rate", "[cluster]\nlink = inf\n", "cluster.link", also="finite"),
    Case("inf-plain-float", "[cluster]\ncores = inf\n", "cluster.cores", also="finite", validate=True),
    Case("inf-hours", "[data]\nhours = inf\n", "data.hours", also="finite"),
    Case("inf-epochs", "[training]\nepochs = inf\n", "training.epochs", also="finite"),
    Case("inf-tokens-text", '[training]\ntokens = "inf"\n', "training.tokens"),
    Case("overflowing-number", '[training]\ntokens = "1e400"\n', "training.tokens"),
    # impossible combinations
    Case("patch-larger-than-side", "[data]\npatch = 300\n", "data.patch", also="data.side", validate=True),
    Case("patch-larger-than-set-side", "", "data.patch", sets=["data.side=10"]),
    Case("mfu-above-one", "[cluster]\nmfu = 1.5\n", "cluster.mfu", also="at most 1", validate=True),
    Case("mfu-above-one-percent", '[cluster]\nmfu = "150 %"\n', "cluster.mfu"),
    Case("serving-mfu-above-one", "[serving]\nmfu = 2\n", "serving.mfu"),
    Case("efficiency-above-one", "", "cluster.scaling_efficiency", sets=["cluster.scaling_efficiency=1.2"]),
    Case("zero-stage-4", "[training]\nzero = 4\n", "training.zero", validate=True),
    Case("experts-per-token", "[model]\nexperts = 2\nexperts_per_token = 4\n", "model.experts_per_token"),
    Case("kv-heads-not-divisor", "[model]\nheads = 12\nkv_heads = 5\n", "model.kv_heads"),
    Case("tokens-without-count", '[data]\nkind = "tokens"\n', "training.tokens"),
    # the accelerator
    Case("unknown-accelerator", '[cluster]\naccelerator = "h100-pcie-9000"\n', "cluster.accelerator",
         also="known:", validate=True),
    Case("near-accelerator", '[cluster]\naccelerator = "h100"\n', "cluster.accelerator", also="did you mean"),
    Case("unknown-accelerator-figure", '[cluster]\naccelerator = { peek_flops = "200 TFLOPS" }\n',
         "cluster.accelerator.peek_flops", also="did you mean 'peak_flops'"),
    Case("negative-accelerator-memory", '[cluster]\naccelerator = { peak_flops = "200 TFLOPS", memory = -1 }\n',
         "cluster.accelerator.memory"),
    Case("unknown-set-accelerator", "", "cluster.accelerator", sets=['cluster.accelerator="tpu-v9"']),
    # a Hugging Face config.json
    Case("config-unsupported-family", '[model]\nhf_config = "cfg.json"\n', "model_type",
         files={"cfg.json": BERT_CONFIG}, also="bert", validate=True),
    Case("config-missing", '[model]\nhf_config = "nowhere.json"\n', "nowhere.json"),
    Case("config-not-json", '[model]\nhf_config = "cfg.json"\n', "cfg.json", files={"cfg.json": "{model_type: llama"}),
    # a calibration file
    Case("calibration-other-workload", "", "cal.toml", files={"cal.toml": CALIBRATION_4K},
         args=["--calibration", "{dir}/cal.toml"], also="data.width", validate=True),
    Case("calibration-wrong-format", "", "cal.toml", files={"cal.toml": "format = 7\n"},
         args=["--calibration", "{dir}/cal.toml"], also="format"),
    Case("calibration-missing", "", "nocal.toml", args=["--calibration", "{dir}/nocal.toml"]),
    Case("calibration-bad-value", "", "cluster.link",
         files={"cal.toml": 'format = 1\n[[values]]\nkey = "cluster.link"\nvalue = -3\n'},
         args=["--calibration", "{dir}/cal.toml"]),
    # issue 29, a fresh batch: keys checked against their neighbours (workload/neighbours.py)
    Case("json-duplicate-key", '[model]\nhf_config = "cfg.json"\n', "cfg.json", also="'hidden_size' twice",
         files={"cfg.json": LLAMA_TINY.replace('"hidden_size": 256,', '"hidden_size": 256, "hidden_size": 512,')}),
    Case("calibration-key-twice", "", "values[1].key", also="values[0] measures it too",
         files={"cal.toml": 'format = 1\n[[values]]\nkey = "cluster.core_fps_1080p"\nvalue = 200.0\n'
                            '[[values]]\nkey = "cluster.core_fps_1080p"\nvalue = 50.0\n'},
         args=["--calibration", "{dir}/cal.toml"]),
    Case("calibration-value-text", "", "values[0].value", also="expected a number",
         files={"cal.toml": 'format = 1\n[[values]]\nkey = "cluster.core_fps_1080p"\nvalue = "200 fps"\n'},
         args=["--calibration", "{dir}/cal.toml"]),
    Case("calibration-value-past-float", "", "values[0].value", also="an integer of 401 digits",
         files={"cal.toml": 'format = 1\n[[values]]\nkey = "cluster.core_fps_1080p"\nvalue = 1' + "0" * 400 + "\n"},
         args=["--calibration", "{dir}/cal.toml"]),
    Case("zero-beside-sharding", "", "training.sharding", also="'zero3' as training.zero = 3",
         sets=["training.zero=3", "training.sharding=none", "cluster.count=4"]),
    Case("hfu-below-mfu", "[cluster]\nmfu = 0.5\nhfu = 0.3\n", "cluster.hfu", also="at least cluster.mfu (0.5)"),
    Case("recipe-beside-precision", "", "training.state_recipe", also="pure_bf16 trains in bf16",
         sets=["training.precision=fp32", "training.state_recipe=pure_bf16"]),
    Case("recipe-beside-optimizer", "", "training.state_recipe", also="adam_8bit holds adam state",
         sets=["training.optimizer=sgd", "training.state_recipe=adam_8bit"]),
    Case("eager-beside-flash", "", "parallel.flash_attention", also="expected false",
         sets=["training.attention=eager", "parallel.flash_attention=true"]),
    Case("flash-kernel-beside-unfused", "", "parallel.flash_kernel", also="parallel.flash_attention = false",
         sets=["parallel.flash_kernel=flash1", "parallel.flash_attention=false"]),
    Case("flash-kernel-beside-eager", "", "parallel.flash_kernel", also="training.attention = 'eager'",
         sets=["training.attention=eager", "parallel.flash_kernel=flash2"]),
    Case("mlp-beside-config", '[model]\nhf_config = "cfg.json"\nmlp = "gelu"\n', "model.mlp",
         also="expected 'swiglu'", files={"cfg.json": LLAMA_TINY}),
    Case("config-activation-unknown", '[model]\nhf_config = "cfg.json"\n', "hidden_act", also="got 'swish42'",
         files={"cfg.json": LLAMA_TINY.replace("\"silu\"", "\"swish42\"")}),  # transformers' ACT2FN: KeyError
    Case("config-activation-list", '[model]\nhf_config = "cfg.json"\n', "hidden_act", also="got ['silu']",
         files={"cfg.json": LLAMA_TINY.replace("\"silu\"", "[\"silu\"]")}),
    Case("norm-beside-config", '[model]\nhf_config = "cfg.json"\nnorm = "layernorm"\n', "model.norm",
         also="expected 'rmsnorm_fp32'", files={"cfg.json": LLAMA_TINY}),
    # 8 sequences of 2,048 tokens on one device: a step is 16,384 tokens
    Case("tokens-below-one-batch", '[data]\nkind = "tokens"\n[model]\nparams = "1B"\n'
         '[training]\ntokens = 10\nmicro_batch = 8\nseq_len = 2048\n', "training.tokens",
         also="at least one global batch (16,384 tokens"),
    Case("measured-unknown-key", '[measured]\n"data.bogus" = "x"\n', "measured.data.bogus"),
    Case("measured-key-not-given", '[measured]\n"cluster.cores" = "probe"\n', "measured.cluster.cores",
         also="expected the file to give cluster.cores"),
    Case("interval-without-its-value", '[data]\nbitrate = "8 Mbit/s"\n[measured]\n"data.bitrate" = "inspect"\n'
         '[measured_interval]\n"data.bitrate" = [1e9, 2e9]\n', "measured_interval.data.bitrate",
         also="holding data.bitrate's value (8e+06)"),
    Case("float-past-range-toml", "[cluster]\ncores = 1e400\n", "w.toml", also="within float range (about 1.8e308), got 1e400"),
    Case("float-past-range-json", '[model]\nhf_config = "cfg.json"\n', "cfg.json", also="within float range",
         files={"cfg.json": LLAMA_TINY.replace('"hidden_act": "silu"', '"hidden_act": "silu", "rope_theta": 1e400')}),
    Case("source-named-twice", "[[sources]]\nname = 'a'\nprice_hour = 1\n[[sources]]\nname = 'a'\nprice_hour = 2\n",
         "sources[1].name", also="'a' again"),
    Case("cores-counted-as-epochs", "", "cluster.cores", sets=['cluster.cores="8 epochs"']),
    Case("params-counted-as-tokens", "", "model.params", sets=['model.params="7B tokens"']),
    Case("tokens-counted-as-params", '[data]\nkind = "tokens"\n', "training.tokens", sets=['training.tokens="2T params"']),
]


def _setup(tmp_path, case: Case) -> tuple[list[str], set[str]]:
    w = tmp_path / "w.toml"
    if isinstance(case.toml, bytes):
        w.write_bytes(case.toml)
    else:
        w.write_text(case.toml)
    for name, content in case.files.items():
        target = tmp_path / name
        target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    extra = [a.replace("{dir}", str(tmp_path)) for a in case.args]
    extra += [x for s in case.sets for x in ("--set", s)]
    return [str(w), *extra], {p.name for p in tmp_path.iterdir()}


def assert_refused(res, key: str, also: str = "") -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr)
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("trainplan: ") and key in lines[0], lines[0]
    assert also in lines[0], lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_plan_refuses_and_leaves_no_file(tmp_path, cli, case):
    args, before = _setup(tmp_path, case)
    res = cli("plan", *args, "--format", "json", "--output", str(tmp_path / "out.json"))
    assert_refused(res, case.key, case.also)
    assert {p.name for p in tmp_path.iterdir()} == before  # no output, no .out.json.*.tmp


@pytest.mark.parametrize("case", [c for c in CASES if c.validate], ids=[c.id for c in CASES if c.validate])
def test_validate_refuses(tmp_path, cli, case):
    args, _ = _setup(tmp_path, case)
    assert_refused(cli("validate", *args), case.key, case.also)


def test_missing_workload_file(tmp_path, cli):
    for command in ("plan", "validate"):
        assert_refused(cli(command, str(tmp_path / "nope.toml")), "nope.toml", "no such workload file")


def test_output_into_missing_directory(tmp_path, cli):
    assert_refused(cli("plan", "--output", str(tmp_path / "no" / "r.json")), "--output")
    assert not (tmp_path / "no").exists()


def test_validate_accepts_a_good_workload(cli):
    res = cli("validate", "examples/finetune-1b.toml")
    assert res.returncode == 0, res.stderr
    assert res.stderr == "" and len(res.stdout.strip().splitlines()) == 1 and "valid" in res.stdout


# Usage errors of the command line itself (typer 0.2x raises its own vendored click exceptions).
@pytest.mark.parametrize("args,key", [(["plan", "--format", "bogus"], "--format"),
                                      (["plan", "--frames", "5", "--simulate"], "--frames"),
                                      (["no-such-command"], "no-such-command")])
def test_usage_errors_exit_2(cli, args, key):
    assert_refused(cli(*args), key)


# ---------------------------------------------------------------- scaling fit RUNS.csv

@pytest.mark.parametrize("csv,key", [
    ("params,loss\n1e8,3.1\n2e8,2.9\n4e8,2.7\n", "tokens"),  # a column missing
    ("tokens,loss\n1e9,3.1\n2e9,2.9\n", "params"),
    ("", "runs.csv"),  # empty file
    ("params,tokens,loss\n" + "1e9,2e10,2.5\n" * 12, "runs.csv"),  # one point repeated: nothing to fit
])
def test_scaling_fit_refuses_missing_columns(tmp_path, cli, csv, key):
    f = tmp_path / "runs.csv"
    f.write_text(csv)
    res = cli("scaling", "fit", str(f))
    assert_refused(res, key)
    assert "runs.csv" in res.stderr or key in res.stderr


# ---------------------------------------------------------------- issue 16: hardening
# Run in process (trainplan.interfaces.cli.main, as the console script runs it) to stay fast.


def run_main(*args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from trainplan.interfaces.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def refused_in_process(args: list[str], key: str, also: str = "") -> None:
    code, out, err = run_main(*args)
    assert code == 2, (code, out[-300:], err)
    assert out == "" and "Traceback" not in err and "internal error" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainplan: ") and key in lines[0], err
    assert also in lines[0], lines[0]


HARDENING = [
    # values the schema once accepted and the accounts could not take
    (["plan", "--set", "model.params=1e308"], "model.params", "below 1e+15"),
    (["plan", "--set", "cluster.accelerator.peak_flops=1e-320"], "cluster.accelerator.peak_flops", "subnormal"),
    (["simulate", "--set", "cluster.link=1e-9"], "cluster.link", "above 1000"),
    (["simulate", "--set", "cluster.cores=1e9"], "cluster.cores", "below 1e+07"),
    (["plan", "--set", "cluster.count=1e300"], "cluster.count", ""),
    (["plan", "--set", "data.fps=1e-300"], "data.fps", ""),
    (["serve", "--set", "cluster.accelerator.memory=1"], "cluster.accelerator.memory", "write 1 GB"),
    (["serve", "--set", "cluster.accelerator.memory=1 kB"], "cluster.accelerator.memory", "plausible"),
    # true/false keys take only true or false; number keys refuse true
    (["plan", "--set", "cluster.nvdec=1"], "cluster.nvdec", "true or false"),
    (["plan", "--set", 'cluster.nvdec="yes"'], "cluster.nvdec", "true or false"),
    (["plan", "--set", "cluster.cores=true"], "cluster.cores", ""),
    # simulate's flags
    (["simulate", "--seed", "-1"], "--seed", ""),
    # options another choice makes meaningless (they ran as lognormal, or were left unread)
    (["simulate", "--decode-dist", "deterministic", "--cv", "1.5"], "--cv", "no spread"),
    (["simulate", "--decode-dist", "exponential", "--empirical", "/nonexistent/e.txt"], "--empirical",
     "--decode-dist empirical"),
    (["simulate", "--keyframe-interval", "5"], "--keyframe-interval", "--keyframe-cost"),
    # model.params beside a shape that counts itself (32 layers of 4096 with a 32,000 vocabulary: 6.57 B), not 1 B
    (["plan", "--set", "model.layers=32", "--set", "model.width=4096", "--set", "model.vocab=32000",
      "--set", "model.params=1e9"], "model.params", "what the shape counts"),
    (["simulate", "--frames", "99999999999999999999"], "--frames", ""),
    (["simulate", "--buffers", "99999999999999999999"], "--buffers", ""),
    (["simulate", "--read-latency", "1e308 s"], "--read-latency", ""),
    (["simulate", "--cv", "1e308"], "--cv", ""),
    (["simulate", "--timeline", "99999999999"], "--timeline", ""),
    (["plan", "--simulate", "--frames", "99999999999"], "--frames", ""),
    # solve's price and targets
    (["solve", "cluster.accelerator", "--price", "h100-sxm=-1"], "--price h100-sxm", ""),
    (["solve", "cluster.cores", "--for", "pipeline.busy"], "--for", "comparison"),
    (["solve", "cluster.accelerator", "--for", "pipeline.busy"], "--for", "comparison"),
    (["solve", "cluster.accelerator", "--among", ","], "--among", ""),
    (["solve", "cluster.accelerator", "--among", "h100-sxm,,a100-sxm-80gb"], "--among", "no empty item"),
    (["solve", "cluster.accelerator", "--among", "h100-sxm,"], "--among", "no empty item"),
    (["data", "inspect", ".", "--sample", "1", "--seed", "-1"], "--seed", "from 0"),
    (["data", "inspect", ".", "--batch", "5"], "--batch", "expected --full"),
    (["probe", "collectives", "--ops", "allreduce,,allgather"], "--ops", "separated by single commas"),
    (["data", "inspect", ".", "--journal", "j.jsonl"], "--journal", "expected --full"),
    (["plan", "--set", "model.width=1024", "--set", "model.layers=2", "--set", "model.width = 2048"], "model.width",
     "'1024' and then '2048' from --set"),
    (["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--range", "a:b"], "--range", ""),
    # account arguments named as the flags the user typed
    (["data", "demos", "10", "--task", "-5 s"], "--task", ""),
    (["scaling", "optimal", "--budget", "-1"], "--budget", ""),
    (["scaling", "optimal", "--budget", "1e-10"], "--budget", "at least one parameter on one token"),
    (["formats", "1e-400"], "values", "at least 4.9e-324"),  # parsed as 0: shown and stored as 0
    (["formats", "--channel", "1,2,,3"], "--channel", "no empty item"),
    (["probe", "decode", "--width", "64", "--height", "64", "--preset", "bogus"], "--preset", "x264's presets"),
    (["sweep", "--vary", "cluster.cores=1:2", "--against", "cluster.cores"], "--against", "--plot"),
    (["validate-against", "foo"], "SUITE", "megatron"),
    (["data", "mix", "--tokens", "15T", "--source", "a:1T:-1"], "--source a", ""),
    (["plan", "--set", 'model.hf_config=""'], "model.hf_config", ""),
]


@pytest.mark.parametrize("args,key,also", HARDENING, ids=[" ".join(a)[:60] for a, _, _ in HARDENING])
def test_hardening_refusals(args, key, also):
    refused_in_process(args, key, also)


def test_empirical_booleans_refused(tmp_path):
    sample = tmp_path / "e.json"
    sample.write_text("[true, false]")
    refused_in_process(["simulate", "--empirical", str(sample)], "e.json", "not true/false")


def test_empirical_times_of_no_duration_refused(tmp_path):
    sample = tmp_path / "e.json"
    sample.write_text('{"decode_seconds": [1e-320]}')
    refused_in_process(["simulate", "--empirical", str(sample)], "e.json", "mean decode time")


def test_ui_reads_the_config_json_of_its_files_at_start(tmp_path):
    import os

    pytest.importorskip("fastapi")
    os.mkfifo(tmp_path / "p")
    w = tmp_path / "w.toml"
    w.write_text('[model]\nhf_config = "p"\n')
    refused_in_process(["ui", "--no-browser", str(w)], "p", "regular")  # and never serves


def test_deep_nesting_is_one_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 2000 + "]" * 2000 + "\n")
    refused_in_process(["plan", str(deep)], "deep.toml", "nested")
    dotted = tmp_path / "dotted.toml"
    dotted.write_text("[" + ".".join(["a"] * 100) + "]\nx = 1\n")
    refused_in_process(["plan", str(dotted)], "dotted.toml", "nested")
    cfg = tmp_path / "cfg.json"
    cfg.write_text("[" * 5000 + "]" * 5000)
    w = tmp_path / "w.toml"
    w.write_text('[model]\nhf_config = "cfg.json"\n')
    refused_in_process(["plan", str(w)], "cfg.json", "nested")
    sample = tmp_path / "e.json"
    sample.write_text("[" * 5000 + "]" * 5000)
    refused_in_process(["simulate", "--empirical", str(sample)], "e.json", "nested")


def test_input_files_that_are_not_regular_files(tmp_path):
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    refused_in_process(["plan", str(fifo)], "fifo.toml", "regular")  # and it does not hang
    refused_in_process(["plan", "/dev/zero"], "/dev/zero", "regular")
    refused_in_process(["plan", str(tmp_path)], str(tmp_path), "directory")
    refused_in_process(["plan", "--calibration", str(tmp_path)], str(tmp_path), "directory")
    refused_in_process(["simulate", "--empirical", str(fifo)], "fifo.toml", "regular")
    w = tmp_path / "w.toml"
    w.write_text('[model]\nhf_config = "/dev/zero"\n')
    refused_in_process(["plan", str(w)], "/dev/zero", "regular")


def test_oversized_input_files(tmp_path):
    from trainplan.limits import MAX_BYTES

    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (MAX_BYTES["workload"] // 10 + 1))
    refused_in_process(["plan", str(big)], "big.toml", "at most 1 MiB")


def test_a_name_too_long_and_a_nul(tmp_path):
    refused_in_process(["plan", str(tmp_path / ("a" * 300 + ".toml"))], "aaa", "too long")


def test_no_numpy_warning_at_the_edges_of_the_ranges():
    """Each figure just inside its plausible range: the run succeeds and stderr is empty."""
    for sets in (["model.params=9.9e14", "training.tokens=9.9e17", "cluster.count=9.9e7"],
                 ["cluster.link=1001", "data.bitrate=9.9e12", "data.fps=99999"],
                 ["cluster.accelerator.peak_flops=1e9", "cluster.accelerator.memory=1e16", "prices.accelerator_hour=9e6"],
                 ["data.hours=1.1e-6", "storage.save_every=0.0011", "energy.pue=9.9"]):
        code, out, err = run_main("plan", "--format", "json", *[x for s in sets for x in ("--set", s)])
        assert code == 0 and err == "", (sets, err)
        assert "NaN" not in out and "Infinity" not in out


def test_simulation_coalesces_many_cores():
    """10^5 cores become MAX_CPU_DECODERS decoders of the same total rate (and a note says so)."""
    import json

    from trainplan.simulate.queue import MAX_CPU_DECODERS

    code, out, err = run_main("simulate", "--set", "cluster.cores=1e5", "--frames", "5000", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    cpu = next(d for d in rep["queue"]["decoders"] if d["name"] == "cpu")
    assert cpu["units"] == MAX_CPU_DECODERS
    # total rate = cores x core_fps_1080p x (frame pixels / 1080p pixels) / decoded per used: the default
    # workload decodes 1080p sequentially (1 decoded per used), 120 frames/s per core (docs/pipeline-and-bill.md)
    assert cpu["frames_per_second"] == pytest.approx(1e5 * 120.0, rel=1e-9)
    assert any("coalesce" in n or "decoders of" in n for n in rep["notes"])


def test_escape_sequences_never_reach_the_terminal(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text('[energy]\nregion = "\\u001b]0;pwned\\u0007\\u001b[2J"\n')
    code, out, err = run_main("plan", str(w))
    assert "\x1b" not in err and "\x07" not in err and "\x1b" not in out
    code, out, err = run_main("plan", "--set", "cluster.\x1b[31mred=1")
    assert code == 2 and "\x1b" not in err


def test_every_numeric_key_has_a_plausible_range():
    """A key added later without a range fails here: add it to schema.PLAUSIBLE_RANGES (issue 16)."""
    import typing

    from trainplan.workload.schema import PLAUSIBLE_RANGES, SECTIONS, SourceSpec

    missing = []
    for section, model in [*SECTIONS.items(), ("sources", SourceSpec)]:
        for name, info in model.model_fields.items():
            kinds = {a for a in typing.get_args(info.annotation)} | {info.annotation}
            numeric = any(k in (int, float) for k in kinds) or "Annotated[float" in str(info.annotation) \
                or "Annotated[int" in str(info.annotation)
            if numeric and info.annotation is not bool and f"{section}.{name}" not in PLAUSIBLE_RANGES \
                    and not any(hasattr(c, "le") or hasattr(c, "lt") for c in info.metadata):
                missing.append(f"{section}.{name}")
    assert not missing, missing


def test_fuzz_targets_run_and_keep_their_tables(tmp_path):
    """The harness replays the corpus and a few inputs; the workload target's VALUES table is the
    same after (an earlier harness put its own tables into documents and mutated them)."""
    import copy
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "fuzz"))
    try:
        import fuzz_workload
    finally:
        sys.path.remove(str(root / "fuzz"))
    before = copy.deepcopy(fuzz_workload.VALUES)
    for i in range(300):
        fuzz_workload.one_input(i.to_bytes(4, "little"))
    assert fuzz_workload.VALUES == before or repr(fuzz_workload.VALUES) == repr(before)
    for target in ("units", "workload", "calibration", "web"):
        res = subprocess.run([sys.executable, str(root / "fuzz" / f"fuzz_{target}.py"), "-runs=60", "-seed=3",
                              f"-artifact_prefix={tmp_path}/"], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "no crash" in res.stdout
    assert not list(tmp_path.iterdir())


def _range_edges() -> list[tuple[str, float]]:
    """Each numeric key just inside its plausible range, at both ends (whole numbers rounded in)."""
    import math

    from trainplan.workload.schema import PLAUSIBLE_RANGES, SECTIONS

    edges = []
    for key, (plausible_low, high) in PLAUSIBLE_RANGES.items():
        section, name = key.split(".")
        if section == "sources":
            continue
        info = SECTIONS[section].model_fields[name]
        lows = [float(getattr(c, a)) for c in info.metadata for a in ("gt", "ge") if hasattr(c, a)]
        low = max(lows + ([float(plausible_low)] if plausible_low is not None else [])) if lows or \
            plausible_low is not None else 0.0
        whole = "int" in str(info.annotation)
        bottom = max(1, math.ceil(low * 1.001)) if whole else (low * 1.001 if low > 0 else 1e-6)
        if high is not None:  # a range with a floor only (cluster.mfu) has no top edge
            edges.append((key, math.floor(high * 0.999) if whole else high * 0.999))
        edges.append((key, bottom))
    return edges


@pytest.mark.slow
def test_accounts_are_total_on_the_ranges():
    """build_report at each edge: refused with a UserError (a cross-field rule) or planned with no
    numpy warning at all (warnings are errors here) and no NaN/Infinity in the JSON."""
    import json
    import warnings

    from trainplan.errors import UserError
    from trainplan.planning.evaluate import build_report
    from trainplan.present.render import to_json, to_table
    from trainplan.workload.load import load_workload

    planned = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for key, value in _range_edges():
            for extra in ([], ['data.kind="tokens"', "training.tokens=1e12"], ["cluster.nvdec=true"]):
                try:
                    report = build_report(load_workload(None, [f"{key}={value!r}", *extra]))
                except UserError:
                    continue
                json.loads(to_json(report), parse_constant=lambda c: pytest.fail(f"{key}={value}: {c}"))
                to_table(report)
                planned += 1
    assert planned > 250  # most edges plan; the rest are cross-field refusals (patch > side ...)


def test_a_calibration_given_as_the_workload_and_a_workload_as_the_calibration(tmp_path, cli):
    # the two kinds of file mixed up: one line naming the file, what it is, and where it belongs
    cal = tmp_path / "cal.toml"
    cal.write_text('format = 1\nupdated = "2026-12-06"\n[machine]\nhostname = "vm"\n')
    work = tmp_path / "measured.toml"
    work.write_text('[data]\nkind = "video"\nhours = 10.0\n[measured]\n"data.hours" = "data inspect"\n')
    res = cli("plan", str(cal))
    assert_refused(res, str(cal), "--calibration FILE")
    res = cli("plan", "--calibration", str(work))
    assert_refused(res, str(work), "WORKLOAD argument")


def test_a_wrong_name_is_refused_in_the_one_wording(tmp_path, cli):
    # pydantic's "input should be ..." reads "expected ...", as every other refusal does (a workload key,
    # an enumeration of the schema's own, a calibration file's entry)
    res = cli("plan", "--set", "training.state_recipe=adam8bit")
    assert_refused(res, "training.state_recipe", "expected 'mixed_fp32_master'")
    assert "did you mean 'adam_8bit'" in res.stderr
    res = cli("plan", "--set", "training.recompute=selectiv")
    assert_refused(res, "training.recompute", "expected 'none', 'selective' or 'full'")
    cal = tmp_path / "c.toml"
    cal.write_text('format = 1\nvalues = "abc"\n')
    assert_refused(cli("plan", "--calibration", str(cal)), "values", "expected a valid list")


# Every comma-separated option and --vary list is read by one reader (errors.comma_items): a doubled or
# trailing comma is refused with one message naming the option, whatever the command.
COMMA_LISTS = [
    (["sweep", "--vary", "cluster.cores=8,,16"], "--vary"),
    (["sweep", "--vary", "cluster.cores=8,16", "--figures", "pipeline.busy,,bill.total"], "--figures"),
    (["simulate", "--vary", "seed=0,1,", "--frames", "2000"], "--vary seed"),
    (["simulate", "--buffers", "4,,16", "--frames", "2000"], "--buffers"),
    (["solve", "cluster.accelerator", "--among", "h100-sxm,,a100-sxm-80gb"], "--among"),
    (["formats", "--channel", "0.1,,0.2"], "--channel"),
    (["scaling", "optimal", "--budget", "1e21", "--law", "1.69,406.4,,0.34,0.28"], "--law"),
    (["probe", "collectives", "--ops", "allreduce,"], "--ops"),
]


@pytest.mark.parametrize("args,where", COMMA_LISTS, ids=[a[0] + " " + w for a, w in COMMA_LISTS])
def test_every_comma_list_refuses_an_empty_item_in_the_same_words(args, where):
    refused_in_process(args, where, "separated by single commas with no empty item")


def test_the_comma_reader_strips_spaces_and_keeps_order():
    from trainplan.errors import UserError, comma_items

    assert comma_items("--x", " 4, 16 ,2", "numbers") == ["4", "16", "2"]
    for text in ("", ",", "4,", ",4", "4,,16", "4, ,16"):
        with pytest.raises(UserError) as err:
            comma_items("--x", text, "numbers")
        assert err.value.where == "--x" and err.value.expected.startswith("numbers, separated by single commas")
