"""Issue 29, the stop-42 audit: a fresh batch of hostile inputs written against the command line, the
workload keys, calibration files and the web API. Each class below was an internal error or a silent
wrong answer; each is now refused with one line naming the key, or named on the first screen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_bad_input import refused_in_process, run_main  # noqa: E402 - the suite's in-process runner


# ---------------------------------------------------------------- a legacy console encoding

@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_legacy_encoding_prints_the_report_instead_of_an_internal_error(encoding):
    """The report holds '×' and '§'; a terminal in ASCII or Latin-1 gets '?' for them, and exit 0."""
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    res = subprocess.run([sys.executable, "-m", "trainplan", "plan", "--all"], capture_output=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-400:]
    assert b"internal error" not in res.stderr and b"Fits?" in res.stdout


# ---------------------------------------------------------------- counts that name another thing

@pytest.mark.parametrize("assignment,key,own", [
    ("training.micro_batch=8 tokens", "training.micro_batch", "sequences"),
    ("cluster.count=8 cores", "cluster.count", "devices"),
    ("data.side=224 tokens", "data.side", "px"),
    ("model.vocab=32000 params", "model.vocab", "tokens"),
    ("serving.batch=32 tokens", "serving.batch", "sequences"),
    ("data.gop=30 tokens", "data.gop", "frames"),
])
def test_a_whole_count_naming_another_noun_is_refused(assignment, key, own):
    refused_in_process(["plan", "--set", assignment], key, f"optionally followed by {own!r}")


@pytest.mark.parametrize("assignment,key", [
    ("data.fps=30 tokens/s", "data.fps"),
    ("cluster.core_fps_1080p=120 tokens/s", "cluster.core_fps_1080p"),
    ("data.tokenizer_rate=1M frames/s", "data.tokenizer_rate"),
])
def test_a_rate_of_the_other_thing_is_refused(assignment, key):
    refused_in_process(["plan", "--set", assignment], key, "a second")


def test_a_count_naming_its_own_noun_is_read_as_the_number():
    from trainplan.workload.load import load_workload

    w = load_workload(None, ["cluster.count=8 gpus", "data.side=224 px", "training.micro_batch=4 sequences",
                             "data.fps=25 fps", "data.tokenizer_rate=2M tokens/s"])
    assert (w.cluster.count, w.data.side, w.training.micro_batch) == (8, 224, 4)
    assert (w.data.fps, w.data.tokenizer_rate) == (25.0, 2e6)


@pytest.mark.parametrize("args,key", [
    (["scaling", "loss", "--params", "7B tokens", "--tokens", "1T"], "--params"),
    (["scaling", "loss", "--params", "7B", "--tokens", "1T params"], "--tokens"),
    (["data", "mix", "--tokens", "15T params", "--source", "a:1T:1"], "--tokens"),
    (["formats", "--params", "7B tokens"], "--params"),
])
def test_command_line_counts_naming_another_noun_are_refused(args, key):
    refused_in_process(args, key, "optionally followed by")


# ---------------------------------------------------------------- derived heads, accelerator overrides

def test_tensor_parallelism_must_divide_the_derived_heads():
    # the default model: width 768, no model.heads, so 768 / 64 = 12 heads; TP 5 does not divide 12, TP 4 does
    refused_in_process(["plan", "--set", "parallel.tensor=5", "--set", "cluster.count=5"], "parallel.tensor",
                       "(12, model.width / 64)")
    code, _, err = run_main("plan", "--set", "parallel.tensor=4", "--set", "cluster.count=4", "-f", "json")
    assert code == 0, err


@pytest.mark.parametrize("order", [0, 1])
def test_an_accelerator_figure_holds_whichever_order_the_name_comes_in(order):
    from trainplan.workload.load import load_workload

    sets = ["cluster.accelerator.memory=40 GB", "cluster.accelerator=a100-sxm-80gb"]
    w = load_workload(None, sets if order == 0 else sets[::-1])
    assert w.accelerator.key == "a100-sxm-80gb" and w.accelerator.memory == 40e9


def test_a_sweep_over_the_name_keeps_a_figure_set_beside_it(tmp_path):
    rows_file = tmp_path / "rows.json"
    code, _, err = run_main("sweep", "--vary", "cluster.accelerator=h100-sxm,a100-sxm-80gb", "--set",
                            "cluster.accelerator.memory=40 GB", "--figures", "memory.device_memory", "-f", "json",
                            "--output", str(rows_file))
    assert code == 0, err
    rows = json.loads(rows_file.read_text())  # one object a row
    assert [r["memory.device_memory"] for r in rows] == [40e9, 40e9]


# ---------------------------------------------------------------- neighbours and the Unused line

def test_a_mean_frame_far_from_the_written_size_is_refused():
    refused_in_process(["plan", "--set", "data.pixels_per_frame=100", "--set", "data.width=1920", "--set",
                        "data.height=1080"], "data.pixels_per_frame", "2,073,600 pixels")


def test_fp8_state_recipe_needs_fp8_tensor_cores():
    refused_in_process(["plan", "--set", "training.state_recipe=fp8_te", "--set", "cluster.accelerator=a100-sxm-80gb"],
                       "training.state_recipe", "no FP8 tensor cores")


def test_an_mfu_below_the_plausible_floor_is_refused():
    refused_in_process(["plan", "--set", "cluster.mfu=1e-20"], "cluster.mfu", "above 0.0001")


@pytest.mark.parametrize("assignments,named", [
    (["data.random_decodes=5"], "data.random_decodes is given but not used: data.access = 'sequential'"),
    (["training.selective_keep=0.5", "training.recompute=full"], "training.selective_keep is given but not used"),
    (["training.lora_rank=8"], "training.lora_rank is given but not used"),
    (["cluster.nvdec_fps_1080p=500"], "cluster.nvdec_fps_1080p is given but not used"),
    (["energy.region=fr", "energy.grid_intensity=500"], "energy.region is given but not used"),
])
def test_a_key_another_key_leaves_unread_is_named_on_the_first_screen(assignments, named):
    code, out, err = run_main("plan", *[a for s in assignments for a in ("--set", s)], "-f", "json")
    assert code == 0, err
    assert named in json.loads(out)["answer"]["unused"]


# ---------------------------------------------------------------- options once, options that go together

@pytest.mark.parametrize("args,key", [
    (["plan", "--calibration", "a.toml", "--calibration", "b.toml"], "--calibration"),
    (["plan", "-f", "json", "--format", "table"], "--format"),
    (["simulate", "--frames", "1000", "--frames=2000"], "--frames"),
])
def test_a_one_value_option_given_twice_is_refused(args, key):
    refused_in_process(args, key, "only the last would be used")


def test_options_that_collect_values_and_flags_may_repeat():
    code, _, err = run_main("plan", "--set", "cluster.cores=4", "--set", "cluster.count=1", "--all", "--all",
                            "-f", "json")
    assert code == 0, err


@pytest.mark.parametrize("args,key,also", [
    (["solve", "cluster.accelerator", "--for", "memory.fits", "--price", "h100-sxm=3", "--price", "h100-sxm=400"],
     "--price h100-sxm", "twice"),
    (["solve", "cluster.accelerator", "--for", "memory.fits", "--among", "h100-sxm,H100-SXM"], "--among", "twice"),
    (["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--price", "h100-sxm=3"], "--price",
     "only with KEY cluster.accelerator"),
    (["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--among", "h100-sxm"], "--among",
     "only with KEY cluster.accelerator"),
    (["solve", "cluster.accelerator", "--for", "memory.fits", "--largest"], "--largest", "numeric KEY"),
    (["sweep", "--vary", "cluster.accelerator=h100-sxm,bogus"], "--vary cluster.accelerator", "unknown accelerator"),
    (["sweep", "--vary", "energy.region=fr,FR"], "--vary energy.region", "twice"),
    (["sweep", "--vary", "cluster.accelerator=h100-sxm,a100-sxm-80gb", "--set", "cluster.accelerator=h99"],
     "cluster.accelerator", "unknown accelerator"),
    (["sweep", "--vary", "cluster.cores=1:4", "--vary", "cluster.cores=8:9"], "--vary", "cluster.cores twice"),
    (["probe", "collectives", "--ops", "allreduce,allreduce"], "--ops", "twice"),
    (["simulate", "--frames", "1000", "--decode-dist", "deterministic", "--vary", "cv=0:2"], "--vary cv",
     "deterministic"),
    (["data", "mix", "--tokens", "15T", "--source", "a:1T:0"], "--source", "positive weight"),
])
def test_options_checked_against_each_other(args, key, also):
    refused_in_process(args, key, also)


def test_scaling_fit_holds_a_constant_once(tmp_path):
    runs = tmp_path / "runs.csv"
    runs.write_text("params,tokens,loss\n" + "".join(f"{n:g},{20 * n:g},{2 + 400 / n ** 0.3:.4f}\n"
                                                      for n in (1e8, 2e8, 4e8, 8e8, 1.6e9, 3.2e9, 6.4e9, 1.3e10)))
    refused_in_process(["scaling", "fit", str(runs), "--fix", "E=1", "--fix", "E=2"], "--fix E", "twice")


def test_a_plot_and_a_table_in_one_file_are_refused(tmp_path):
    target = tmp_path / "o.png"
    refused_in_process(["simulate", "--frames", "1000", "--plot", str(target), "--output", str(target)], "--plot",
                       "other than --output")
    assert not target.exists()
    refused_in_process(["sweep", "--vary", "cluster.cores=4,8", "--plot", "pipeline.busy", "--against",
                        "cluster.cores", "--output", str(tmp_path / "p.svg"), "-f", "markdown"], "--format", "--plot")


def test_profile_frames_per_batch_and_repeats(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hello')\n")
    for bad in ("-5", "0", "1e-300"):
        refused_in_process(["profile", str(script), "--frames-per-batch", bad], "--frames-per-batch", "at least 1")
    refused_in_process(["profile", str(script), "--repeats", "3"], "--repeats", "--stalls")


def test_cameras_of_a_token_corpus_are_refused(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello world\n")
    refused_in_process(["data", "inspect", str(text), "--cameras", "3"], "--cameras", "video corpus")


# ---------------------------------------------------------------- files

def test_a_calibration_value_is_read_in_the_unit_it_names(tmp_path):
    from trainplan.workload.load import load_workload

    cal = tmp_path / "c.toml"
    cal.write_text('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 100000\nunit = "kB/s"\n')
    assert load_workload(None, [], cal).cluster.link == 100000 * 1e3  # kB/s: 10^3 bytes a second
    cal.write_text('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 100000\nunit = "bogus"\n')
    refused_in_process(["plan", "--calibration", str(cal)], "values[0].unit", "'B/s'")


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    from trainplan.accounts import scaling

    runs = tmp_path / "runs.csv"
    runs.write_bytes(b"\xef\xbb\xbfparams,tokens,loss\n1e8,2e9,3.5\n2e8,4e9,3.2\n")
    assert len(scaling.read_runs(runs)) == 2  # Excel's CSV: the header's first name is 'params'
    workload = tmp_path / "w.toml"
    workload.write_bytes(b"\xef\xbb\xbf[cluster]\ncores = 16\n")
    from trainplan.workload.load import load_workload

    assert load_workload(workload, []).cluster.cores == 16


def test_a_plain_image_size_is_bytes():
    from trainplan.workload.load import load_workload

    w = load_workload(None, ["data.kind=images", "data.image_bytes=150000"])
    assert w.data.image_bytes == 150000.0


@pytest.mark.parametrize("text,where", [("[[cluster]]\ncores = 4\n", "a [cluster] section"),
                                        ('sources = ["a"]\n', "a [[sources]] entry")])
def test_a_list_where_a_table_belongs_is_named_in_toml_words(tmp_path, text, where):
    path = tmp_path / "w.toml"
    path.write_text(text)
    refused_in_process(["plan", str(path)], "", where)


def test_the_same_value_twice_is_one_setting():
    code, _, err = run_main("plan", "--set", "cluster.cores=8", "--set", "cluster.cores=8.0", "-f", "json")
    assert code == 0, err
    refused_in_process(["plan", "--set", "cluster.cores=8", "--set", "cluster.cores=9"], "cluster.cores",
                       "and then")


def test_the_web_api_reads_a_body_only_as_declared_json():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trainplan.interfaces.web import create_app

    client = TestClient(create_app(8765), base_url="http://127.0.0.1:8765")
    body = b'{"set": {"cluster.cores": 16}}'
    assert client.post("/api/plan", content=body, headers={"content-type": "application/xml"}).status_code == 415
    assert client.post("/api/plan", content=body).status_code == 415
    assert client.post("/api/plan", content=body, headers={"content-type": "application/json"}).status_code == 200
    assert client.post("/api/plan").status_code == 200  # no body: the default workload


def test_a_token_id_type_for_text_and_a_dtype_beside_the_ladder_are_refused(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello world\n")
    refused_in_process(["data", "inspect", str(text), "--dtype", "uint32"], "--dtype", "token-id files")
    refused_in_process(["serve", "--ladder", "--set", "serving.dtype=int8"], "serving.dtype", "--ladder")


def test_a_script_s_own_arguments_after_the_separator_may_repeat(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hello')\n")
    code, _, err = run_main("profile", str(script), "--warmup", "0", "--", "--format", "a", "--format", "b")
    assert "--format" not in err and "internal error" not in err  # the script's, not profile's
    refused_in_process(["profile", str(script), "--warmup", "0", "--warmup", "1"], "--warmup", "twice")


# ---------------------------------------------------------------- config.json fields transformers' classes refuse

def _config(tmp_path, **fields):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    return str(path)


QWEN2_MOE = dict(model_type="qwen2_moe", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4, vocab_size=1000, pad_token_id=0, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64)


@pytest.mark.parametrize("change,key,also", [
    ({"num_experts_per_tok": 8}, "num_experts_per_tok", "at most experts (4)"),  # top-k of 4 experts
    # (transformers' own class refuses these two first, naming the field: "expected a list")
    ({"mlp_only_layers": 1}, "mlp_only_layers", "list"),
    ({"mlp_only_layers": [[0]]}, "mlp_only_layers", "list"),
    ({"mlp_only_layers": [5]}, "mlp_only_layers", "from 0 to 1"),
])
def test_a_moe_config_s_routing_and_layer_lists_are_checked(tmp_path, change, key, also):
    pytest.importorskip("transformers")
    refused_in_process(["plan", "--set", f"model.hf_config={_config(tmp_path, **{**QWEN2_MOE, **change})}"], key,
                       also)


def test_a_config_field_of_the_wrong_type_is_named_not_an_internal_error(tmp_path):
    pytest.importorskip("transformers")
    gemma2 = dict(model_type="gemma2", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=1000, head_dim=None)
    refused_in_process(["plan", "--set", f"model.hf_config={_config(tmp_path, **gemma2)}"], "head_dim", "expected int")


@pytest.mark.parametrize("vary", ["serving.dtype=int4,bf16", "parallel.schedule=1f1b,interleaved"])
def test_a_sweep_over_a_choice_whose_names_hold_digits_is_a_list_of_names(tmp_path, vary):
    """serving.dtype's 'int8' and parallel.schedule's 'interleaved' hold "int": a key of text choices, not a
    number to convert (an internal error before, issue 29)."""
    rows_file = tmp_path / "rows.json"
    code, _, err = run_main("sweep", "--vary", vary, "--figures", "compute.seconds", "-f", "json",
                            "--output", str(rows_file))
    assert code == 0, err
    key, names = vary.split("=")
    rows = json.loads(rows_file.read_text())
    assert [r[key] for r in rows] == names.split(",")  # each name a row, as written
    assert rows[0]["compute.seconds"] > 0


# ---------------------------------------------------------------- the second audit of stop 42: configs, layouts, CSVs

SMALL = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=1000, pad_token_id=0, tie_word_embeddings=False)


@pytest.mark.parametrize("model_type,extra", [
    ("phi3", {}), ("olmo", {}),
    ("qwen2_moe", dict(num_key_value_heads=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=48)),
])
def test_head_dim_is_counted_as_the_attention_module_reads_it(model_type, extra):
    """head_dim = 32 beside hidden_size 64 and 4 heads: q is 64 x 128, not 64 x 64. The count equals the
    parameters of the module transformers builds on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from trainplan.workload.params import count_from_hf_config

    config = {"model_type": model_type, **SMALL, "head_dim": 32, **extra}
    built = transformers.AutoConfig.for_model(model_type, **{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(built)
    assert count_from_hf_config(config).total == sum(p.numel() for p in model.parameters())


def test_two_expert_counts_that_disagree_are_refused(tmp_path):
    mixtral = {"model_type": "mixtral", **SMALL, "num_local_experts": 4, "num_experts": 8, "num_experts_per_tok": 2}
    refused_in_process(["params", _config(tmp_path, **mixtral)], "num_experts", "num_local_experts (4)")


def test_a_config_s_experts_and_layers_hold_the_layout(tmp_path):
    pytest.importorskip("transformers")
    mixtral = _config(tmp_path, model_type="mixtral", **SMALL, num_local_experts=4, num_experts_per_tok=2)
    code, _, err = run_main("plan", "--set", f"model.hf_config={mixtral}", "--set", "parallel.expert=2", "--set",
                            "cluster.count=2", "-f", "json")
    assert code == 0, err  # 4 experts: EP 2 divides them
    refused_in_process(["plan", "--set", f"model.hf_config={mixtral}", "--set", "parallel.expert=3", "--set",
                        "cluster.count=3"], "parallel.expert", "model.experts (4)")
    refused_in_process(["plan", "--set", f"model.hf_config={mixtral}", "--set", "parallel.pipeline=8", "--set",
                        "cluster.count=8"], "parallel.pipeline", "model.layers (2)")


def test_a_sequence_past_the_config_s_learned_positions_is_refused(tmp_path):
    pytest.importorskip("transformers")
    gpt2 = _config(tmp_path, model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=512)
    refused_in_process(["plan", "--set", f"model.hf_config={gpt2}", "--set", "training.seq_len=1024"],
                       "training.seq_len", "at most 512 tokens")
    refused_in_process(["serve", "--set", f"model.hf_config={gpt2}", "--set", "serving.context=1024"],
                       "serving.context", "at most 512 tokens")
    code, _, err = run_main("plan", "--set", f"model.hf_config={gpt2}", "--set", "training.seq_len=512", "-f", "json")
    assert code == 0, err


@pytest.mark.parametrize("window", [-5, 1, "4096"])
def test_a_sliding_window_of_no_tokens_or_text_is_refused(tmp_path, window):
    mistral = _config(tmp_path, model_type="mistral", **SMALL, sliding_window=window)
    refused_in_process(["serve", "--set", f"model.hf_config={mistral}"], "sliding_window", "2 or more")


def test_probe_model_of_a_model_without_attention_names_the_option(tmp_path):
    pytest.importorskip("transformers")
    mamba = _config(tmp_path, model_type="mamba", hidden_size=64, num_hidden_layers=2, vocab_size=1000, state_size=8,
                    expand=2)
    refused_in_process(["probe", "model", mamba, "--batch", "1", "--seq-len", "16", "--flop-seq-lens", "16"],
                       "--attention", "mamba")


@pytest.mark.parametrize("text,also", [
    ("params,tokens,loss\n1e8,2e9,3.5\n1,500,3e10,4.2\n", "thousands separator"),
    ("params,params,tokens,loss\n1,1e8,2e9,3.5\n", "'params' twice"),
    ("params,N,tokens,loss\n1e8,1e8,2e9,3.5\n", "one column for the parameter count"),
    ("params,tokens,flops,loss\n1e8,2e9,1e30,3.5\n", "near 6 x params x tokens = 1.2e+18"),  # 6 x 1e8 x 2e9
])
def test_a_runs_csv_that_would_be_misread_is_refused(tmp_path, text, also):
    runs = tmp_path / "runs.csv"
    runs.write_text(text)
    refused_in_process(["scaling", "fit", str(runs)], "runs.csv", also)


def test_a_runs_csv_with_consistent_tokens_and_flops_is_read():
    from trainplan.accounts import scaling
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "runs.csv"
        path.write_text("params,tokens,flops,loss\n1e8,2e9,1.2e18,3.5\n2e8,4e9,4.9e18,3.2\n")  # 6ND, and 2 % off
        assert list(scaling.read_runs(path).tokens) == [2e9, 4e9]


@pytest.mark.parametrize("fix,also", [("alpha=-1", "above 0"), ("E=-0.5", "0 or more"), ("beta=0", "above 0")])
def test_a_constant_held_outside_the_law_s_range_is_refused(tmp_path, fix, also):
    runs = tmp_path / "runs.csv"
    runs.write_text("params,tokens,loss\n" + "".join(f"{n:g},{20 * n:g},{2 + 400 / n ** 0.3:.4f}\n"
                                                      for n in (1e8, 2e8, 4e8, 8e8, 1.6e9, 3.2e9, 6.4e9, 1.3e10)))
    refused_in_process(["scaling", "fit", str(runs), "--fix", fix], f"--fix {fix.split('=')[0]}", also)


def test_lora_targets_with_the_full_method_are_named_unused():
    code, out, err = run_main("plan", "--set", 'training.lora_targets=["q"]', "-f", "json")
    assert code == 0, err
    assert "training.lora_targets is given but not used" in json.loads(out)["answer"]["unused"]


def test_source_names_that_read_alike_and_a_missing_config_in_a_sweep_are_refused(tmp_path):
    workload = tmp_path / "w.toml"
    workload.write_text('[[sources]]\nname = "cam"\n[[sources]]\nname = "Cam "\n')
    refused_in_process(["plan", str(workload)], "sources[1].name", "'Cam ' again (after 'cam')")
    present = _config(tmp_path, model_type="llama", **SMALL)
    refused_in_process(["sweep", "--vary", f"model.hf_config={present},{tmp_path / 'missing.json'}"],
                       "--vary model.hf_config", "no such")
