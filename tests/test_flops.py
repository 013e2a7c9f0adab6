"""FLOPs per token against torch.utils.flop_counter.FlopCounterMode on the meta device.

FlopCounterMode counts every matrix product of one forward + backward (mm, bmm, addmm,
attention) of the real Hugging Face code; on the meta device nothing is allocated, so
tiny widths with long sequences (S = 512 to 32k) run in seconds. Target: within 2 %.
FlopCounterMode counts attention in full (not causal), which is the MFU convention
(`model` figure); the executed figure is checked by hand.
"""

from __future__ import annotations

import pytest

from trainplan.accounts import compute
from trainplan.workload.params import count_from_hf_config, matmul_params

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainplan.measure import model_probe as mp  # noqa: E402

CONFIGS = {
    "llama": dict(model_type="llama", hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=1000),
    "qwen2_tied": dict(model_type="qwen2", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, vocab_size=800, tie_word_embeddings=True),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=32768),
    "gpt_neox": dict(model_type="gpt_neox", hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, vocab_size=1000),
    "mixtral": dict(model_type="mixtral", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=1000, num_local_experts=4,
                    num_experts_per_tok=2),
}


def _predicted(config, s):
    count = count_from_hf_config(config)
    n, head = matmul_params(count)
    return compute.flops_per_token(n, count.layers, count.heads * count.head_dim, s, head_params=head)


@pytest.mark.parametrize("name", ["llama", "qwen2_tied", "gpt2", "gpt_neox"])
@pytest.mark.parametrize("s", [512, 8192, 32768])
def test_model_flops_within_2_percent_of_flop_counter(name, s):
    config = CONFIGS[name]
    counted = mp.counted_flops(config, s) / s
    assert _predicted(config, s).model == pytest.approx(counted, rel=0.02)


def test_moe_expert_matrices():
    """Mixtral: the plan counts the top-k experts a token is routed to. On the meta device transformers 5
    runs the experts as grouped matmuls (every routed copy of a token meets its expert, whatever the
    data), which the probe's counter counts (measure/model_probe.grouped_mm_flops): the counted figure
    is the whole model's; the expert term (k experts x 3 d f, 6 FLOPs per parameter) is checked by hand."""
    import dataclasses

    config = CONFIGS["mixtral"]
    counted = mp.counted_flops(config, 512) / 512
    assert _predicted(config, 512).model == pytest.approx(counted, rel=0.02)
    count = count_from_hf_config(config)
    no_experts = dataclasses.replace(count, experts_per_token=0)
    n, head = matmul_params(no_experts)
    without = compute.flops_per_token(n, count.layers, count.heads * count.head_dim, 512, head_params=head)
    active = _predicted(config, 512).model
    assert active - without.model == pytest.approx(6 * 2 * 2 * 3 * 64 * 128)  # L=2 layers, top-2, d=64, f=128


def test_six_p_alone_misses_attention_at_long_context():
    """The old 6 P (all parameters, embedding included, no attention) against counted FLOPs at 32k."""
    config = CONFIGS["llama"]
    counted = mp.counted_flops(config, 32768) / 32768
    six_p = 6 * count_from_hf_config(config).total
    assert six_p < 0.1 * counted


def test_executed_and_recompute_by_hand():
    n, head, L, d_attn, s = 1e9, 1e8, 16, 2048, 4096
    attn_fwd = 4 * L * d_attn * s
    none = compute.flops_per_token(n, L, d_attn, s, "none", "flash", head_params=head)
    assert none.model == 6 * n + 3 * attn_fwd
    assert none.executed == 6 * n + 3 * attn_fwd * 0.5
    sel = compute.flops_per_token(n, L, d_attn, s, "selective", "flash", head_params=head)
    assert sel.model == none.model and sel.executed == none.executed + attn_fwd * 0.5
    full = compute.flops_per_token(n, L, d_attn, s, "full", "flash", head_params=head)
    assert full.executed == none.executed + 2 * (n - head) + attn_fwd * 0.5
    mfu, hfu = compute.utilisation(full.model, full.executed, mfu=0.4)
    assert hfu == pytest.approx(0.4 * full.executed / full.model)
    assert compute.utilisation(full.model, full.executed, hfu=hfu)[0] == pytest.approx(0.4)


def test_input_embedding_not_counted():
    """An untied input embedding does no matrix product: N excludes it, and includes the head."""
    config = dict(CONFIGS["llama"])
    count = count_from_hf_config(config)
    n, head = matmul_params(count)
    assert n == count.total - count.embedding - count.layers * 2 * 64 - count.final_norm
    assert head == 1000 * 64


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["llama-3-8b.json", "mistral-7b-v0.1.json", "qwen2-0.5b.json", "gpt2.json",
                                     "pythia-160m.json"])
@pytest.mark.parametrize("s", [512, 32768])
def test_released_configs_within_2_percent(fixture, s):
    """The published configs, full size, built on the meta device (nothing allocated)."""
    from pathlib import Path

    from trainplan.workload.params import load_hf_config

    config = load_hf_config(Path(__file__).parent / "fixtures" / "hf_configs" / fixture)
    if config["model_type"] == "gpt2":
        config = {**config, "n_positions": s}  # learned positions must cover S
    counted = mp.counted_flops(config, s) / s
    assert _predicted(config, s).model == pytest.approx(counted, rel=0.02)


def test_sweep_agrees_with_the_plan_on_the_architecture_terms():
    """A named family: activations, FLOPs (MFU and HFU) and ZeRO state in the sweep equal the plan's."""
    import math

    from trainplan.planning import sweep
    from trainplan.planning.evaluate import build_report
    from trainplan.present.render import flatten
    from trainplan.workload.load import load_workload

    sets = ["data.kind=tokens", "training.tokens=1e9", "model.layers=4", "model.width=512", "model.vocab=32000",
            "model.ffn_width=1408", "model.heads=8", "model.kv_heads=2", 'model.family="llama"']
    result = sweep.sweep(None, sets, ["training.seq_len=1024,8192", "cluster.count=1,8", "training.zero=0,3",
                                      "cluster.mfu=0.3,0.5", 'training.recompute=none,full'])
    checked = 0
    for row in sweep.rows(result):
        point = sets + [f"{k}={sweep._override(row[k])}" for k in result.keys]
        report = flatten(build_report(load_workload(None, point)))
        for column in ("compute.flops", "compute.seconds", "memory.activation_bytes", "memory.state_bytes",
                       "memory.per_device_bytes"):
            assert math.isclose(float(row[column]), float(report[column]), rel_tol=1e-9), (column, point)
            checked += 1
    assert checked == 5 * 32


# MosaicML's published MPT training throughput on H100-80GB in bf16 (llm-foundry,
# scripts/train/benchmarking/README.md, table "H100 80GB BF16"): model, S, MFU %, tokens/s/GPU,
# NumParams. Their MFU counts 6 n_params + 12 n_layers d_model S per token, the convention of
# flops_per_token's `model` figure. MPT shapes (llm-foundry yamls): width and depth per size, a
# 4 d MLP, tied 50,368-word vocabulary, learned positions of S rows.
MPT_SHAPES = {"760m": (1536, 24), "1b": (2048, 24), "3b": (2560, 32), "7b": (4096, 32), "13b": (5120, 40),
              "30b": (7168, 48), "70b": (8192, 80)}
MPT_VOCAB = 50368
MPT_H100_BF16 = [
    ("70b", 2048, 42.57, 1039, 64862437376), ("30b", 8192, 29.92, 1384, 30019254272),
    ("30b", 2048, 38.11, 2002, 29975214080), ("13b", 32768, 31.68, 1976, 13011240960),
    ("13b", 2048, 39.79, 4792, 12853954560), ("7b", 65536, 28.59, 1956, 6918905856),
    ("7b", 32768, 30.94, 3318, 6784688128), ("7b", 8192, 37.14, 6935, 6684024832),
    ("7b", 2048, 46.44, 10643, 6658859008), ("3b", 16384, 36.34, 11152, 2688537600),
    ("3b", 512, 46.32, 27965, 2647905280), ("1b", 32768, 33.54, 12025, 1378865152),
    ("1b", 2048, 41.82, 45455, 1315950592), ("760m", 512, 40.42, 83749, 758111232),
]


@pytest.mark.parametrize("size,s,mfu_percent,published,num_params", MPT_H100_BF16)
def test_tokens_per_second_within_3_percent_of_published_mfu_runs(size, s, mfu_percent, published, num_params):
    from trainplan.catalogue.accelerators import resolve_accelerator

    d, L = MPT_SHAPES[size]
    n = 12 * d * d * L + MPT_VOCAB * d  # q k v o (4 d^2) and the 4 d MLP (8 d^2) per layer, the tied head
    # the shape is MPT's: with learned positions (S d) and the 2 L + 1 LayerNorm weights, the published count
    assert n + s * d + (2 * L + 1) * d == pytest.approx(num_params, rel=1e-3)
    per_token = compute.flops_per_token(n, L, d, s).model
    peak = resolve_accelerator("h100-sxm").peak("bf16")
    predicted = compute.tokens_per_second(peak, mfu_percent / 100, per_token)
    assert predicted == pytest.approx(published, rel=0.03)


def test_hfu_without_a_known_architecture_times_6p_at_the_hfu() -> None:
    """cluster.hfu on a model given by count and shape only (the default ViT): no architecture terms,
    so time = 6 P D / (peak x HFU) (found by the workload fuzzer: this used to reach None x float)."""
    from trainplan.planning.evaluate import build_report
    from trainplan.workload.load import load_workload

    w = load_workload(None, ["cluster.hfu=0.5", "data.kind=tokens", "training.tokens=1e9"])
    report = build_report(w)
    expected_seconds = 6 * 93e6 * 1e9 / (989.5e12 * 0.5)
    assert report["compute"]["seconds"] == pytest.approx(expected_seconds, rel=1e-12)
