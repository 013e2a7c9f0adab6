"""`trainplan probe model`: measured by torch on a random-weight model, written to the calibration
file, and used by `plan --calibration` with provenance `measured`.

The measured figures are checked against outside references: the saved bytes against a
by-hand sum of the tensors the Llama code keeps (the listing the probe records), FLOPs against
FlopCounterMode's own arithmetic for one matmul, the AdamW state against torch's two moments
per parameter in the parameters' dtype.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainplan.interfaces import cli  # noqa: E402
from trainplan.measure import model_probe as mp  # noqa: E402
from trainplan.workload import calibration  # noqa: E402


def main(argv: list[str]) -> int:
    try:
        cli.main(argv)
    except SystemExit as done:
        return int(done.code or 0)
    return 0

TINY = dict(model_type="llama", hidden_size=64, intermediate_size=176, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=500)
SETS = [f"--set={k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in TINY.items()]


def test_saved_bytes_by_storage_and_layer():
    """Two layers of the same shape save the same bytes; every storage is counted once; parameters
    are not counted (a weight saved by a matmul is the model's, not an activation)."""
    model = mp.build_model(TINY)
    saved = mp.saved_bytes(model, 2, 32, keep_listing=True)
    assert saved.per_layer[1] > 0 and saved.outside > 0
    # the listing of the last layer adds up to its figure
    assert sum(n for _, _, n in saved.listing["1"]) == saved.per_layer[1]
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    assert all(n < params for _, _, n in saved.listing["1"])


def test_optimizer_state_is_two_moments_in_the_parameter_dtype():
    model = mp.build_model(TINY)
    n = sum(p.numel() for p in model.parameters())
    assert mp.optimizer_state_bytes(model) == 2 * 2 * n  # exp_avg, exp_avg_sq in bf16


def test_flop_counter_one_layer_by_hand():
    """FlopCounterMode's count is 2 m n k per matmul: check the probe's wrapper against it on the
    head alone (a width-64, vocab-500 model with no layers is not buildable, so the difference
    of two depths isolates one layer: 6 (2 d hk + 2 d gk + 3 d f) per token + 12 hk S)."""
    one = mp.counted_flops({**TINY, "num_hidden_layers": 1}, 256) / 256
    two = mp.counted_flops(TINY, 256) / 256
    d, hk, gk, f, s = 64, 64, 32, 176, 256
    assert two - one == pytest.approx(6 * (2 * d * hk + 2 * d * gk + 3 * d * f) + 12 * hk * s)


def test_cli_writes_calibration_and_plan_uses_it(tmp_path: Path, capsys):
    cal = tmp_path / "cal.toml"
    rc = main(["probe", "model", *SETS, "--batch", "2", "--seq-len", "32", "--flop-seq-lens", "64",
               "--format", "json", "--output", str(cal)])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    m = d["measured"]
    assert (m["cuda_devices"] != []) == torch.cuda.is_available()
    workload = tmp_path / "w.toml"
    workload.write_text('[model]\nlayers = 2\nwidth = 64\nvocab = 500\nffn_width = 176\nheads = 4\nkv_heads = 2\n'
                        'family = "llama"\n[training]\ntokens = "1M"\nmicro_batch = 4\nseq_len = 64\n'
                        '[data]\nkind = "tokens"\n')
    assert main(["plan", str(workload), "--calibration", str(cal), "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    mem = r["memory"]
    # measured per-token figures times this plan's b S, plus the bf16 logits (2 V bytes a token)
    by_hand = 4 * 64 * (2 * m["activation_bytes_per_layer_token"] + m["activation_bytes_outside_token"] + 2 * 500)
    assert mem["activation_bytes"] == pytest.approx(by_hand)
    assert r["assumptions"]["training.activation_bytes_per_layer_token"]["provenance"] == "measured"
    assert "activations_formula" in mem  # the plan's own formula reported beside the measured figure


def test_probe_model_bad_input_exits_2(capsys):
    assert main(["probe", "model", "--set", "hidden_size=64"]) == 2
    err = capsys.readouterr().err
    assert "model_type" in err and "Traceback" not in err
    assert main(["probe", "model", *SETS, "--attention", "fast"]) == 2


def _one_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def test_config_overrides_are_checked_before_the_banner(capsys):
    # transformers' LlamaConfig types num_hidden_layers as an int: true is refused before 'probe model: ...'
    assert main(["probe", "model", *SETS, "--set", "num_hidden_layers=true"]) == 2
    line = _one_line(capsys)
    assert line.startswith("trainplan: num_hidden_layers:") and "probe model:" not in line


def test_unknown_set_keys_are_refused(capsys):
    assert main(["probe", "model", *SETS, "--set", "bogus_key=3"]) == 2
    assert _one_line(capsys).startswith("trainplan: --set: unknown config key 'bogus_key' for model_type 'llama'")
    assert main(["probe", "model", *SETS, "--set", "num_hidden_layerz=2"]) == 2
    line = _one_line(capsys)
    assert line.startswith("trainplan: --set: unknown config key 'num_hidden_layerz'")
    assert "did you mean 'num_hidden_layers'" in line


def test_set_keys_the_config_class_knows_are_accepted():
    # gpt2 maps num_hidden_layers to n_layer (its attribute_map); llama takes the legacy rope_theta and
    # torch_dtype, which transformers 5 converts into rope_parameters and dtype
    gpt2 = mp.load_config(None, ["model_type=gpt2", "num_hidden_layers=3", "n_embd=64"])
    assert gpt2["num_hidden_layers"] == 3 and gpt2["n_embd"] == 64
    llama = mp.load_config(None, [*(s.removeprefix("--set=") for s in SETS), "rope_theta=500000.0",
                                  "torch_dtype=bfloat16"])
    assert llama["rope_theta"] == 500000.0 and llama["torch_dtype"] == "bfloat16"


# ---------------------------------------------------------------- issue 24: never more than it needs

LLAMA_7B_TWO_LAYERS = dict(model_type="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=2,
                           num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)


def test_probe_builds_no_weights_and_records_its_settings(tmp_path: Path, capsys) -> None:
    """Two Llama-2-7B layers (0.67 B parameters, 1.3 GB in bf16 were they built): the probe traces them on the
    meta device; its resident memory grows by far less than the weights would take. The figures equal the
    hand formulas the Llama traits claim, and the calibration records what they were measured at."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA_7B_TWO_LAYERS))
    cal = tmp_path / "cal.toml"
    rc = main(["probe", "model", str(cfg), "--batch", "1", "--seq-len", "256", "--flop-seq-lens", "256",
               "--attention", "eager", "--precision", "bf16", "--recompute", "selective", "--format", "json",
               "--output", str(cal)])
    assert rc == 0
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < 0.4 * 2 * 673_000_000
    out = capsys.readouterr()
    assert out.err.startswith("probe model: llama (2 layers). Measuring:")
    m = json.loads(out.out)["measured"]
    assert (m["attention"], m["precision"], m["recompute"]) == ("eager", "bf16", "selective")
    assert m["optimizer_state_bytes_per_param"] == 4  # AdamW: two moments in the bf16 parameters' dtype
    import tomllib

    settings = tomllib.loads(cal.read_text())
    text = json.dumps(settings)
    for key in ('"attention": "eager"', '"precision": "bf16"', '"recompute": "selective"', '"seq_len": 256'):
        assert key in text


def test_calibration_matches_names_what_differs() -> None:
    measured_at = {"attention": "sdpa", "precision": "bf16", "recompute": "none", "seq_len": 128}
    assert calibration.calibration_matches(measured_at, "flash", "fp16", "none") == []
    assert calibration.calibration_matches(measured_at, "eager", "fp32", "full") == [
        "attention sdpa measured, eager planned", "precision bf16 measured, fp32 planned",
        "recompute none measured, full planned"]


def test_a_config_its_class_validators_reject_is_one_line(capsys):
    """transformers' config classes validate across fields (the width a multiple of the heads): a config
    they reject is the config's fault, in one line, not an internal error."""
    sets = ["--set", "model_type=llama", "--set", "num_hidden_layers=2", "--set", "hidden_size=64",
            "--set", "intermediate_size=128", "--set", "num_attention_heads=5", "--set", "vocab_size=256"]
    assert main(["probe", "model", *sets, "--batch", "1", "--seq-len", "16", "--flop-seq-lens", "16"]) == 2
    line = _one_line(capsys)
    assert line.startswith("trainplan: config: expected a config transformers' llama class accepts")
    assert "not a multiple of the number of attention heads (5)" in line


def test_transformers_warnings_stay_off_stderr(capsys):
    """gpt2's default token ids (50256) past a 256-token test vocabulary make transformers warn; the probe's
    refusal of the heads is still the one line on stderr."""
    sets = ["--set", "model_type=gpt2", "--set", "n_layer=2", "--set", "n_embd=64", "--set", "n_head=5",
            "--set", "vocab_size=256"]
    assert main(["probe", "model", *sets, "--batch", "1", "--seq-len", "16", "--flop-seq-lens", "16"]) == 2
    assert _one_line(capsys).startswith("trainplan: n_head:")


GPT2_77 = Path(__file__).resolve().parent / "fixtures" / "hf_configs" / "tiny-gpt2-untied.json"  # n_positions 77


def test_learned_position_tables_are_found_on_the_module():
    # GPT-2's wpe and OPT's embed_positions (96 + its 2 offset rows) bound the sequence; a rotary model has no table
    assert mp.learned_position_rows(json.loads(GPT2_77.read_text())) == 77
    opt = mp.load_config(None, ["model_type=opt", "num_hidden_layers=1", "hidden_size=64", "ffn_dim=128",
                                "num_attention_heads=4", "vocab_size=256", "max_position_embeddings=96",
                                "word_embed_proj_dim=64"])
    assert mp.learned_position_rows(opt) == 96
    assert mp.learned_position_rows(TINY) is None


@pytest.mark.parametrize("args,key,also", [
    (["--seq-len", "4096"], "--seq-len", "at most 77 tokens"),
    # the defaults' own values, written out, are the user's: refused past the table, not cut to it
    (["--seq-len", "128"], "--seq-len", "at most 77 tokens"),
    (["--seq-len", "64", "--flop-seq-lens", "512,2048,8192"], "--flop-seq-lens", "got 512"),
    (["--seq-len", "64", "--flop-seq-lens", "32,100"], "--flop-seq-lens", "got 100"),
    (["--seq-len", "64", "--flop-seq-lens", "32,,64"], "--flop-seq-lens", "no empty item"),
])
def test_a_sequence_past_the_learned_position_table_is_refused(capsys, args, key, also):
    """Past GPT-2's n_positions the position lookup indexes outside its table: the module runs on no device,
    so a measurement there (on the meta device, which checks no index) would describe nothing (issue 29)."""
    assert main(["probe", "model", str(GPT2_77), "--batch", "1", *args]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"trainplan: {key}: ") and also in line


def test_the_defaults_past_the_table_are_cut_to_it(capsys):
    # the default S=128 and FLOP lengths 512, 2048, 8192 all pass 77 rows: the probe measures at 77 instead
    assert main(["probe", "model", str(GPT2_77), "--batch", "1", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)["measured"]
    assert out["seq_len"] == 77 and set(out["flops_per_token"]) == {"77"}
