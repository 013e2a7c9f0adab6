"""Training state per device against DeepSpeed's published estimators and by-hand recipes.

DeepSpeed's estimators (deepspeed/runtime/zero/stage_1_and_2.py and stage3.py,
functions estimate_zero2_model_states_mem_needs and estimate_zero3_model_states_mem_needs,
documented in DeepSpeed's "Memory Requirements" page), without offload, as DeepSpeed 0.19.8's
source writes them (read from its sdist; unchanged since 0.16, where zero2's 4 P + 16 P / n
became 2 P + 18 P / n):

    zero2: gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
    zero3: gpu_mem = 4 * largest_layer_params + int(18 * total_params / total_gpus)
"""

from __future__ import annotations

import pytest

from trainplan.accounts import training_state as ts


def deepspeed_zero2_gpu(total_params: int, total_gpus: int) -> int:
    return 2 * total_params + int(18 * total_params / total_gpus)


def deepspeed_zero3_gpu(total_params: int, largest_layer_params: int, total_gpus: int) -> int:
    largest_layer_memory = 4 * largest_layer_params
    return largest_layer_memory + int(18 * total_params / total_gpus)


# Llama-2-7B: 6,738,415,616 parameters; its largest layer is the 32000 x 4096 embedding (or head)
CASES = [(6_738_415_616, 131_072_000, n) for n in (1, 8, 64, 256)] + [(124_439_808, 38_597_376, 4)]


@pytest.mark.parametrize("params,largest,n", CASES)
def test_zero2_matches_deepspeed(params, largest, n):
    got = ts.sharded(params, ts.recipe("mixed_fp32_master"), "zero2", n, largest).total
    assert got == pytest.approx(deepspeed_zero2_gpu(params, n), rel=1e-6)


@pytest.mark.parametrize("params,largest,n", CASES)
def test_zero3_matches_deepspeed(params, largest, n):
    got = ts.sharded(params, ts.recipe("mixed_fp32_master"), "zero3", n, largest).total
    assert got == pytest.approx(deepspeed_zero3_gpu(params, largest, n), rel=1e-6)


def test_zero1_and_none_by_hand():
    """Baseline 16 P (ZeRO paper §3). Stage 1 as DeepSpeed estimates it (stage_1_and_2.py, one optimizer
    and one estimator for stages 1 and 2): 2 P + 18 P / n."""
    p, n = 7.5e9, 64
    r = ts.recipe("mixed_fp32_master")
    assert ts.sharded(p, r, "none", n).total == 16 * p
    assert ts.sharded(p, r, "zero1", n).total == pytest.approx(2 * p + (2 + 4 + 4 + 8) * p / n)
    assert ts.sharded(p, r, "zero1", n).total == pytest.approx(deepspeed_zero2_gpu(int(p), n), rel=1e-9)


def test_fp32_master_gradients_recipe_by_hand():
    """bf16 + fp32 master weights and gradients: 2 + 2 + 4 + 4 + 8 = 20 bytes a parameter; under ZeRO
    the fp32 gradient partition is that master gradient (DeepSpeed's 18 P / n, not 22)."""
    p, n = 1e9, 8
    r = ts.recipe("bf16_fp32_master_grads")
    assert ts.sharded(p, r, "none", n).total == 20 * p
    assert ts.sharded(p, r, "zero2", n).total == pytest.approx(deepspeed_zero2_gpu(int(p), n), rel=1e-9)
    # FSDP keeps one fp32 shard (the master) with an fp32 gradient: the separate bf16 weights and gradients
    # are not kept (tests/test_fsdp_state_measured.py measures it), 4 + 4 + 8
    assert ts.sharded(p, r, "fsdp", n).total == pytest.approx(16 * p / n)


def test_recipes_by_hand():
    p = 1e9
    assert ts.recipe("mixed_fp32_master").total * p == 16 * p
    assert ts.recipe("autocast_fp32").total * p == (4 + 4 + 8) * p
    assert ts.recipe("pure_bf16").total * p == (2 + 2 + 4) * p
    assert ts.recipe("adam_8bit").total * p == (2 + 2 + 4 + 2 + 8 / 256) * p
    assert ts.recipe("sgd_momentum").total * p == (2 + 2 + 4 + 4) * p
    assert ts.recipe("bf16_fp32_master_grads").total * p == (2 + 2 + 4 + 4 + 8) * p
    assert ts.recipe("fp8_te").total * p == (2 + 1 + 1 + 4 + 4 + 8) * p


# ---------------------------------------------------------------- a real optimizer step on CPU


def _state_bytes_after_a_step(weights_dtype: str, autocast: bool, fp32_master: bool) -> tuple[float, int]:
    """Bytes of every tensor a training step keeps past the step (weights, gradients, master copy and
    its gradients, optimizer state), distinct storages once; and the parameter count."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model("llama", vocab_size=64, hidden_size=32, intermediate_size=48,
                                            num_hidden_layers=1, num_attention_heads=2)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(getattr(torch, weights_dtype))
    params = list(model.parameters())
    master = [p.detach().float().clone().requires_grad_(True) for p in params] if fp32_master else params
    opt = torch.optim.AdamW(master, lr=1e-3)
    ids = torch.randint(0, 64, (1, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    if fp32_master:
        for m, p in zip(master, params):
            m.grad = p.grad.float()
    opt.step()
    tensors = [*params, *(p.grad for p in params), *(m for m in master if fp32_master),
               *(m.grad for m in master if fp32_master),
               *(v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0)]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return float(sum(storages.values())), sum(p.numel() for p in params)


@pytest.mark.parametrize("name,weights,autocast,master", [
    ("pure_bf16", "bfloat16", False, False),
    ("autocast_fp32", "float32", True, False),  # what HF Trainer's bf16=True runs over fp32 weights
    ("bf16_fp32_master_grads", "bfloat16", False, True),
])
def test_recipe_equals_a_real_adamw_step(name: str, weights: str, autocast: bool, master: bool) -> None:
    measured, p = _state_bytes_after_a_step(weights, autocast, master)
    assert ts.sharded(p, ts.recipe(name), "none", 1).total == pytest.approx(measured, rel=1e-9)


def test_fsdp_by_hand():
    p, layer, n = 8e9, 218e6, 16
    got = ts.sharded(p, ts.recipe("mixed_fp32_master"), "fsdp", n, layer)
    # the fp32 shard, its fp32 gradient, two fp32 moments; two bf16 blocks gathered, and in backward a block's
    # unsharded bf16 gradient with its fp32 reduce-scatter input (2 + 4 bytes a parameter): 10 bytes in all
    assert got.total == pytest.approx(16 * p / n + (2 * 2 + 2 + 4) * layer)
    assert (got.weights_bytes, got.grads_bytes, got.optimizer_bytes, got.gathered_bytes) == pytest.approx(
        (4 * p / n, 4 * p / n, 8 * p / n, (2 * 2 + 2 + 4) * layer))


def test_lora_trainable_params_match_peft_llama2_7b():
    """peft's documented print_trainable_parameters() for Llama-2-7B, r = 8 on q_proj and v_proj:
    'trainable params: 4,194,304'."""
    per_layer = ts.lora_params_per_layer(4096, 11008, 32, 32, 128, 8, ["q", "v"])
    assert 32 * per_layer == 4_194_304


def test_lora_and_qlora_state_by_hand():
    base, adapters = 6_738_415_616, 4_194_304
    r = ts.recipe("mixed_fp32_master")
    lora = ts.lora_state(base, adapters, r, "lora")
    assert lora.total == pytest.approx(2 * base + 16 * adapters)  # frozen bf16, no grads or moments
    qlora = ts.lora_state(base, adapters, r, "qlora")
    # NF4 with double quantisation: 4 bits a weight, a 1-byte absmax per block of 64, an fp32 scale per
    # 256 absmax values
    assert qlora.total == pytest.approx((0.5 + 1 / 64 + 4 / (64 * 256)) * base + 16 * adapters)
    # the embedding and the untied head (32000 x 4096 each) stay bf16
    kept = 2 * 32000 * 4096
    qlora = ts.lora_state(base, adapters, r, "qlora", kept)
    assert qlora.total == pytest.approx((0.5 + 1 / 64 + 4 / 16384) * (base - kept) + 2 * kept + 16 * adapters)
    assert ts.lora_flops_per_token(1e9, 1e7) == 4e9 + 6e7


def test_bad_names():
    from trainplan.errors import UserError

    with pytest.raises(UserError, match="training.state_recipe"):
        ts.recipe("fp64")
    with pytest.raises(UserError, match="training.lora_targets"):
        ts.lora_params_per_layer(64, 128, 2, 2, 32, 4, ["qq"])


# ---------------------------------------------------------------- through the plan


def _plan(doc_text: str, tmp_path, *sets: str) -> dict:
    from trainplan.planning.evaluate import build_report
    from trainplan.workload.load import load_workload

    path = tmp_path / "w.toml"
    path.write_text(doc_text)
    return build_report(load_workload(path, list(sets)))


LLAMA_SHAPE = ('[model]\nlayers = 32\nwidth = 4096\nvocab = 32000\nffn_width = 11008\nheads = 32\n'
               'family = "llama"\ntied = false\n[training]\ntokens = "1B"\nmicro_batch = 1\nseq_len = 4096\n'
               '[data]\nkind = "tokens"\n[cluster]\ncount = 8\n')
LLAMA2_7B = 6_738_415_616


def test_plan_zero3_is_deepspeeds_figure(tmp_path):
    r = _plan(LLAMA_SHAPE, tmp_path, "training.zero=3")
    # DeepSpeed's largest_layer_params is the module with the most parameters of its own: the
    # 32000 x 4096 embedding (or the untied head), not a whole 202 M-parameter decoder block
    largest = 32000 * 4096
    assert r["workload"]["params"] == LLAMA2_7B
    assert r["memory"]["state_bytes"] == pytest.approx(deepspeed_zero3_gpu(LLAMA2_7B, largest, 8), rel=1e-6)
    assert r["memory"]["gathered_bytes"] == 4 * largest


SHAPE_ONLY = ('[model]\nparams = "1B"\nlayers = 16\nwidth = 2048\n[training]\ntokens = "1B"\nmicro_batch = 1\n'
              'seq_len = 2048\n[data]\nkind = "tokens"\n[cluster]\ncount = 4\n')


def test_a_shape_without_a_family_gathers_its_largest_module(tmp_path):
    # layers and width beside model.params, no family: the standard block's 12 d^2 a layer, the rest of
    # the parameters the (tied) embedding; ZeRO-3 gathers that embedding, FSDP a whole block, in fp32.
    # It read 0 B before (no count, nothing gathered).
    per_layer = 12 * 2048**2
    embedding = 1e9 - 16 * per_layer
    zero3 = _plan(SHAPE_ONLY, tmp_path, "training.zero=3")
    assert zero3["memory"]["gathered_bytes"] == pytest.approx(4 * embedding)
    fsdp = _plan(SHAPE_ONLY, tmp_path, 'training.sharding="fsdp"')
    # two bf16 blocks gathered, and a block's bf16 gradient and fp32 reduce-scatter input in backward
    assert fsdp["memory"]["gathered_bytes"] == pytest.approx((2 * 2 + 2 + 4) * per_layer)
    # untied: the rest is the embedding and the head, each half of it
    untied = _plan(SHAPE_ONLY, tmp_path, "training.zero=3", "model.tied=false")
    assert untied["memory"]["gathered_bytes"] == pytest.approx(4 * embedding / 2)


def test_plan_lora_state(tmp_path):
    r = _plan(LLAMA_SHAPE, tmp_path, 'training.method="lora"', "training.lora_rank=8",
              'training.lora_targets=["q", "v"]')
    m = r["memory"]
    assert m["trainable_params"] == 4_194_304
    assert m["state_bytes"] == pytest.approx(2 * LLAMA2_7B + 16 * 4_194_304)


def test_plan_kv_heads_without_heads_is_refused(tmp_path):
    from trainplan.errors import UserError

    with pytest.raises(UserError, match="model.heads"):
        _plan('[model]\nlayers = 2\nwidth = 256\nkv_heads = 2\n', tmp_path)


def test_plan_head_dim_sizes_attention(tmp_path):
    """Gemma-style head_dim (256 with 8 heads at width 2048): q is d -> 8 * 256 = 2048 either way, but
    with 4 heads of 256 the attention width is 1024 and q/o shrink to 2 d 1024."""
    r = _plan('[model]\nlayers = 2\nwidth = 2048\nvocab = 1000\nffn_width = 4096\nheads = 4\nhead_dim = 256\n'
              'family = "llama"\n[training]\ntokens = "1M"\n[data]\nkind = "tokens"\n', tmp_path)
    d, f, V = 2048, 4096, 1000
    per_layer = 2 * d * 1024 + 2 * d * 1024 + 3 * d * f + 2 * d
    assert r["workload"]["params"] == V * d + 2 * per_layer + d  # model.tied defaults to true


def test_plan_hfu_and_mfu_give_the_same_time_when_consistent(tmp_path):
    """Time = model FLOPs / (peak MFU) = executed FLOPs / (peak HFU): give the HFU that corresponds to
    MFU 0.4 and the time must not change; compute.mfu comes back as 0.4."""
    base = _plan(LLAMA_SHAPE, tmp_path, 'training.recompute="full"', "cluster.mfu=0.4")
    c = base["compute"]
    hfu = 0.4 * c["flops_per_token_executed"] / c["flops_per_token_model"]
    other = _plan(LLAMA_SHAPE, tmp_path, 'training.recompute="full"', f"cluster.hfu={hfu}")
    assert other["compute"]["seconds"] == pytest.approx(c["seconds"])
    assert other["compute"]["mfu"] == pytest.approx(0.4)
    # full recomputation: executed = model - causal half of attention + re-run forward (by hand)
    n, L, d_attn, S, head = c["matmul_params"], 32, 4096, 4096, 32000 * 4096
    attn_fwd = 4 * L * d_attn * S
    assert c["flops_per_token_model"] == pytest.approx(6 * n + 3 * attn_fwd)
    assert c["flops_per_token_executed"] == pytest.approx(6 * n + 1.5 * attn_fwd + 2 * (n - head) + 0.5 * attn_fwd)


def test_qlora_bytes_per_weight_equal_bitsandbytes_double_quantisation():
    """bitsandbytes' own NF4 quantisation with double quantisation (what QLoRA's Linear4bit stores, on
    CPU): packed 4-bit values, a uint8 absmax per block of 64, an fp32 absmax per 256 of those, and per
    tensor the two code tables and an offset. Per weight of a 4096 x 4096 matrix, against the recipe."""
    torch = pytest.importorskip("torch")
    functional = pytest.importorskip("bitsandbytes.functional")
    w = torch.randn(4096 * 4096, dtype=torch.bfloat16)
    packed, state = functional.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type="nf4")
    assert (state.blocksize, state.state2.blocksize) == (64, 256)
    per_weight = [packed, state.absmax, state.state2.absmax]
    measured = sum(t.numel() * t.element_size() for t in per_weight) / w.numel()
    assert ts.frozen_bytes_per_param("qlora") == pytest.approx(measured, rel=1e-12)
    assert ts.frozen_bytes_per_param("qlora") == pytest.approx(0.5 + 1 / 64 + 4 / (64 * 256))
    # per tensor, whatever its size: the NF4 and the absmax code tables (16 and 256 fp32) and an fp32
    # offset, 1,092 bytes, 0.013 % of this matrix (left out of the per-weight figure)
    per_tensor = sum(t.numel() * t.element_size() for t in (state.code, state.state2.code, state.offset))
    assert per_tensor == (16 + 256 + 1) * 4


def test_adam_8bit_moments_equal_a_bitsandbytes_step():
    """bitsandbytes' Adam8bit after one real step on CPU: the moments' bytes per parameter of a
    4096 x 1024 bf16 matrix (the two per-tensor code tables apart) are the recipe's."""
    torch = pytest.importorskip("torch")
    optim = pytest.importorskip("bitsandbytes.optim")
    w = torch.nn.Parameter(torch.zeros(4096 * 1024, dtype=torch.bfloat16))
    opt = optim.Adam8bit([w], lr=1e-3)
    w.grad = torch.ones_like(w)
    opt.step()
    state = {k: v for k, v in opt.state[w].items() if torch.is_tensor(v) and k not in ("qmap1", "qmap2")}
    measured = sum(v.numel() * v.element_size() for v in state.values()) / w.numel()
    assert ts.recipe("adam_8bit").moments == pytest.approx(measured, rel=1e-12)
