"""Training state per device against DeepSpeed's published estimators and by-hand recipes.

DeepSpeed's estimators (deepspeed/runtime/zero/stage_1_and_2.py and stage3.py,
functions estimate_zero2_model_states_mem_needs and estimate_zero3_model_states_mem_needs,
documented in DeepSpeed's "Memory Requirements" page), without offload, written out here:

    zero2: gpu_mem = 4 * total_params + int(16 * total_params / total_gpus)
    zero3: gpu_mem = 4 * largest_layer_params + int(18 * total_params / total_gpus)
"""

from __future__ import annotations

import pytest

from trainplan.accounts import training_state as ts


def deepspeed_zero2_gpu(total_params: int, total_gpus: int) -> int:
    return 4 * total_params + int(16 * total_params / total_gpus)


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
    """Baseline 16 P (ZeRO paper §3). Stage 1 as DeepSpeed runs it (stage_1_and_2.py, one optimizer
    for stages 1 and 2, with the fp32 gradient partition): 4 P + 16 P / n, the ZeRO paper's
    Pos = 4 P + 12 P / n plus the 4-byte fp32 gradient partition."""
    p, n = 7.5e9, 64
    r = ts.recipe("mixed_fp32_master")
    assert ts.sharded(p, r, "none", n).total == 16 * p
    assert ts.sharded(p, r, "zero1", n).total == pytest.approx(4 * p + 12 * p / n + 4 * p / n)
    assert ts.sharded(p, r, "zero1", n).total == pytest.approx(deepspeed_zero2_gpu(int(p), n), rel=1e-9)


def test_recipes_by_hand():
    p = 1e9
    assert ts.recipe("mixed_fp32_master").total * p == 16 * p
    assert ts.recipe("autocast_fp32").total * p == (4 + 4 + 8) * p
    assert ts.recipe("pure_bf16").total * p == (2 + 2 + 4) * p
    assert ts.recipe("adam_8bit").total * p == (2 + 2 + 4 + 2) * p
    assert ts.recipe("sgd_momentum").total * p == (2 + 2 + 4 + 4) * p


def test_fsdp_by_hand():
    p, layer, n = 8e9, 218e6, 16
    got = ts.sharded(p, ts.recipe("mixed_fp32_master"), "fsdp", n, layer)
    assert got.total == pytest.approx(16 * p / n + 2 * 2 * layer)


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
    # NF4: 4 bits a weight plus one fp32 absmax per block of 64
    assert qlora.total == pytest.approx((0.5 + 4 / 64) * base + 16 * adapters)
    assert ts.lora_flops_per_token(1e9, 1e7) == 4e9 + 6e7


def test_bad_names():
    from trainplan.errors import UserError

    with pytest.raises(UserError, match="training.state_recipe"):
        ts.recipe("fp64")
    with pytest.raises(UserError, match="training.lora_targets"):
        ts.lora_params_per_layer(64, 128, 2, 2, 32, 4, ["qq"])
