"""The parallel-layout account against the published per-layer formulas, worked out by hand.

References: Korthikanti et al. 2022 (activations per layer, eq. 1-2, and the pipeline's
in-flight micro-batches), Narayanan et al. 2021 (FLOPs per step, pipeline bubble),
Rajbhandari et al. 2020 (ZeRO memory: (2+2+12) psi bytes, sharded by stage), NCCL's bus factors.
"""

import pytest
from published_formulas import korthikanti_activation_bytes_per_layer, narayanan_flops_per_step

from trainplan import catalogue
from trainplan.accounts import parallel
from trainplan.errors import UserError
from trainplan.workload import layout_rules
from trainplan.planning.validation import gpt_shape

S, H, A = 2048, 12288, 96  # the 175B model of Korthikanti et al. 2022
SBH = S * 1 * H


@pytest.mark.parametrize("t,sp,recompute,per_sbh", [
    (8, False, "none", 10 + 24 / 8 + 5 * 96 * 2048 / (12288 * 8)),  # = 10 + 3 + 10 = 23
    (8, True, "none", (34 + 5 * 96 * 2048 / 12288) / 8),  # = (34 + 80) / 8 = 14.25
    (8, False, "selective", 10 + 24 / 8),  # 13
    (8, True, "selective", 34 / 8),  # 4.25
    (8, False, "full", 2.0),
    (8, True, "full", 2 / 8),
    (1, False, "none", 34 + 5 * 96 * 2048 / 12288),  # sbh(34 + 5as/h) with no parallelism
])
def test_korthikanti_per_layer(t, sp, recompute, per_sbh):
    # the published per-layer figure (tests/published_formulas.py, itself checked against the paper's
    # numbers above) equals what the account keeps per layer with the paper's per-layer bytes: the
    # difference between the same layout with one layer more and one layer fewer, halved
    assert float(korthikanti_activation_bytes_per_layer(S, 1, H, A, t, sp, recompute)) == pytest.approx(SBH * per_sbh)
    assert per_layer_kept(t, sp, recompute) == pytest.approx(SBH * per_sbh)


def per_layer_kept(t, sp, recompute, scores=True):  # noqa: ANN001, ANN201
    out = []
    for layers in (95, 97):
        m = gpt_shape(H, A, layers, 51200, S)
        a = account(m, A100, tensor=t, data=1, sequence_parallel=sp, recompute=recompute,
                    activations=parallel.LayerActivations.korthikanti(H, A, S, 51200, scores))
        out.append(float(a.activation_bytes))
    return (out[1] - out[0]) / 2


def account(m, hw, **kw):  # noqa: ANN001, ANN003, ANN201
    """The account with the paper's per-layer bytes, full attention and mixed precision (the Megatron runs)."""
    kw.setdefault("activations", parallel.LayerActivations.korthikanti(m.width, m.heads, m.seq_len, m.vocab))
    kw.setdefault("attention", "eager")
    return parallel.parallel_account(m, hw, activation_bytes_per_value=2.0, state_of=parallel.default_state(),
                                     weight_bytes=2.0, grad_bytes=2.0, **kw)


def test_flash_attention_keeps_no_scores():
    # without the 5 a s / h term: s b h (10 + 24/t) without SP, 34 s b h / t with SP, whatever the recompute
    for recompute in ("none", "selective"):
        assert float(korthikanti_activation_bytes_per_layer(S, 1, H, A, 8, False, recompute, False)) \
            == pytest.approx(SBH * 13)
        assert per_layer_kept(8, False, recompute, False) == pytest.approx(SBH * 13)
        assert per_layer_kept(8, True, recompute, False) == pytest.approx(SBH * 34 / 8)


def test_narayanan_flops_by_hand():
    # 1T model, batch 512: 72 B s l h^2 (1 + s/6h + V/12hl)
    B, s, l, h, V = 512, 2048, 128, 25600, 51200
    base = 72 * B * s * l * h * h
    assert float(narayanan_flops_per_step(B, s, l, h, V, "none")) == pytest.approx(
        base * (1 + 2048 / 153600 + 51200 / (12 * 25600 * 128)))
    assert float(narayanan_flops_per_step(B, s, l, h, V, "full")) == pytest.approx(
        96 * B * s * l * h * h * (1 + 2048 / 153600 + 51200 / (16 * 25600 * 128)))
    # selective: one more forward of the attention core, 4 B s^2 h per layer
    assert float(narayanan_flops_per_step(B, s, l, h, V, "selective")) == pytest.approx(
        base * (1 + 2048 / 153600 + 51200 / (12 * 25600 * 128)) + 4 * B * s * s * h * l)


def test_bubble_and_in_flight():
    assert float(parallel.pipeline_bubble(8, 64, 1)) == pytest.approx(7 / 64)
    assert float(parallel.pipeline_bubble(8, 64, 3)) == pytest.approx(7 / 192)
    assert float(parallel.pipeline_bubble(1, 4, 1)) == 0.0
    assert float(parallel.in_flight_factor(8, 64, 1)) == pytest.approx(1.0)  # p micro-batches x l/p layers = l
    assert float(parallel.in_flight_factor(8, 64, 3, "interleaved")) == pytest.approx(1 + 7 / 24)
    assert float(parallel.in_flight_factor(8, 4, 1)) == pytest.approx(4 / 8)  # fewer micro-batches than stages
    assert float(parallel.in_flight_factor(8, 64, 1, "gpipe")) == pytest.approx(8.0)


A100 = parallel.Hardware(peak_flops=312e12, matmul_efficiency=0.7, memory_bandwidth=2.039e12, device_memory=80 * 2**30,
                         runtime_buffers=2e9, headroom=0.1, devices_per_node=8, intra_bus_bandwidth=231e9,
                         intra_latency=5e-6, inter_bus_bandwidth=22.5e9, inter_latency=1e-5)


def test_model_flops_match_narayanan():
    # the account writes 24 b s h^2 as 2 b s P_layer; with the 12 h^2 + 13 h GPT block the only
    # difference is the 13 h biases (13 / (12 h) = 1e-4 of the total)
    m175 = gpt_shape(12288, 96, 96, 51200, 2048)
    a = account(m175, A100, tensor=8, pipeline=8, data=1, micro_batch=1, micro_batches=64)
    assert float(a.model_flops) == pytest.approx(float(narayanan_flops_per_step(64, 2048, 96, 12288, 51200)),
                                                 rel=2e-4)


def test_executed_flops_with_full_recompute_one_stage():
    # one device holds every layer and the logits: its FLOPs are the whole step's, 96 B s l h^2 (...)
    m = gpt_shape(2048, 16, 4, 50000, 1024)
    a = account(m, A100, micro_batch=2, micro_batches=3, recompute="full")
    want = narayanan_flops_per_step(6, 1024, 4, 2048, 50000, "full")
    assert float(a.flops_per_device) == pytest.approx(float(want), rel=1e-3)


def test_activations_of_the_first_stage_1t_selective_sp():
    # 1F1B: p micro-batches in flight x l/p layers = l layers of sbh 34/t, plus the embedding
    # dropout mask of the p micro-batches, s b h p / t bytes (Korthikanti §4.3), plus the layer whose
    # attention core is re-run during its backward: its 5 a s^2 b / t bytes of scores, once
    m = gpt_shape(25600, 160, 128, 51200, 2048)
    a = account(m, A100, tensor=8, pipeline=64, data=1, sequence_parallel=True, micro_batch=1,
                micro_batches=512, recompute="selective")
    want = 128 * 2048 * 25600 * 34 / 8 + 2048 * 25600 * 64 / 8 + 5 * 160 * 2048 * 2048 / 8
    assert float(a.activation_bytes) == pytest.approx(want)


def test_zero_memory_matches_deepspeeds_formulas():
    # DeepSpeed >= 0.16's estimators (estimate_zero2_model_states_mem_needs, estimate_zero3_...), on GPU:
    # none 16 psi; ZeRO-1/2 2 psi + 18 psi / N (one optimizer for both stages: gradients and the fp32
    # gradient partition, master and moments partitioned); ZeRO-3 18 psi / N + 4 x the largest layer
    # (here N = 64, psi the whole model on one stage, the largest layer set to one GPT block)
    m = gpt_shape(1024, 16, 8, 32000, 512)
    m = parallel.ModelShape(**{**vars(m), "largest_layer_params": m.dense_layer_params})
    psi = m.dense_layer_params * 8 + m.embedding_params  # one stage holds every layer and the embedding
    for zero, want in ((0, 16 * psi), (1, 2 * psi + 18 * psi / 64), (2, 2 * psi + 18 * psi / 64),
                       (3, 18 * psi / 64 + 4 * m.dense_layer_params)):
        a = account(m, A100, data=64, zero=zero)
        got = float(a.weights_bytes) + float(a.grads_bytes) + float(a.optimizer_bytes) + float(a.gathered_bytes)
        assert got == pytest.approx(want), zero


def test_tensor_parallel_all_reduces_by_hand():
    # 175B, TP 8 in a node: per layer per micro-batch 4 all-reduces (6 with full recompute) of
    # b s h x 2 bytes, each 1.75 M / W + 14 x 5 us; 12 layers a stage, 64 micro-batches
    m = gpt_shape(12288, 96, 96, 51200, 2048)
    msg = 2048 * 12288 * 2
    one = msg * 1.75 / 231e9 + 14 * 5e-6
    for recompute, count in (("selective", 4), ("full", 6)):
        a = account(m, A100, tensor=8, pipeline=8, data=1, micro_batch=1, micro_batches=64,
                                      recompute=recompute)
        assert float(a.tensor_seconds) == pytest.approx(64 * 12 * count * one)
        assert str(a.tensor_tier) == "intra" and str(a.pipeline_tier) == "inter"


def test_bubble_seconds_are_the_share_of_the_ideal_step():
    m = gpt_shape(4096, 32, 32, 32000, 2048)
    a = account(m, A100, tensor=8, pipeline=4, interleave=2, schedule="interleaved", data=1,
                                  micro_batches=8)
    assert float(a.bubble_share) == pytest.approx(3 / 16)
    ideal = float(a.step_seconds) - float(a.bubble_seconds) - float(a.data_parallel_seconds) \
        - float(a.optimizer_seconds)
    assert float(a.bubble_seconds) == pytest.approx(ideal * 3 / 16)


def test_zero3_gathers_cost_more_than_plain_data_parallel():
    m = gpt_shape(4096, 32, 32, 32000, 2048)
    plain = account(m, A100, data=64, micro_batches=4, zero=0)
    z3 = account(m, A100, data=64, micro_batches=4, zero=3)
    # per step: 4 micro-batches x (2 all-gathers of W + reduce-scatter of G) x 63/64, vs 2 x 63/64 x G
    psi = m.dense_layer_params * 32 + m.embedding_params
    assert float(z3.bytes_per_step) == pytest.approx(4 * 63 / 64 * 3 * 2 * psi)
    assert float(plain.bytes_per_step) == pytest.approx(2 * 63 / 64 * 2 * psi)


@pytest.mark.parametrize("kwargs,key", [
    (dict(count=64, tensor=8, pipeline=4, data=4), "parallel.data"),
    (dict(count=100, tensor=8), "cluster.count"),
    (dict(count=64, tensor=8, heads=12), "parallel.tensor"),
    (dict(count=64, pipeline=8, layers=12), "parallel.pipeline"),
    (dict(count=64, pipeline=4, interleave=2, schedule="interleaved", layers=12), "parallel.interleave"),
    (dict(count=64, pipeline=4, interleave=2, layers=16), "parallel.schedule"),
    (dict(count=64, expert=3, experts=8), "parallel.expert"),
    (dict(count=64, context=3, seq_len=4096), "cluster.count"),
    (dict(count=48, context=3, seq_len=4096), "parallel.context"),
    (dict(count=64, tensor=1, sequence=True), "parallel.sequence"),
])
def test_check_layout_names_the_key(kwargs, key):
    with pytest.raises(UserError) as err:
        layout_rules.check_layout(**kwargs)
    assert err.value.where == key


def test_check_layout_returns_the_data_degree():
    assert layout_rules.check_layout(512, 8, 8, heads=64, layers=80) == 8


def test_bad_layout_from_the_cli_is_one_line_exit_2(cli):
    res = cli("plan", "--set", "model.layers=12", "--set", "model.width=768", "--set", "model.heads=12",
              "--set", "cluster.count=8", "--set", "parallel.tensor=8")
    assert res.returncode == 2
    assert res.stderr.strip() == "trainplan: parallel.tensor: expected a divisor of model.heads (12), got 8"


def test_plan_report_keeps_its_keys_and_adds_parallel(plan_json):
    r = plan_json("--set", "cluster.count=8", "--set", "parallel.tensor=2", "--set", "training.zero=1")
    for section, keys in {"compute": ("seconds_per_step", "flops"), "memory": ("per_device_bytes", "fits"),
                          "network": ("ring_bytes_per_step", "floor_seconds_per_step")}.items():
        for k in keys:
            assert k in r[section]
    p = r["parallel"]
    assert p["layout"]["data"] == 4 and p["layout"]["tensor"] == 2
    assert p["time"]["step_seconds"] > 0 and p["memory"]["per_device_bytes"] > 0
    assert r["assumptions"]["parallel.tensor"]["provenance"] == "assumed"


def test_network_bytes_per_step_of_plain_data_parallelism(plan_json):
    # docs/pipeline-and-bill.md's default model (93 M parameters, bf16 gradients, 2 bytes) on 8 devices, no layout:
    # the ring all-reduce, 2 x 7/8 x 186 MB = 325.5 MB, in both accounts; ZeRO-3 with 4 micro-steps:
    # 4 x 7/8 x (2 x 186 + 186) MB = 1953 MB
    r = plan_json("--set", "cluster.count=8")
    assert r["network"]["bytes_per_step"] == pytest.approx(325.5e6)
    assert r["network"]["ring_bytes_per_step"] == pytest.approx(325.5e6)
    r = plan_json("--set", "cluster.count=8", "--set", "training.zero=3", "--set", "training.grad_accum=4")
    assert r["network"]["bytes_per_step"] == pytest.approx(1953e6)
    assert r["network"]["ring_bytes_per_step"] == pytest.approx(1953e6)


def test_output_layer_and_last_stage_by_hand():
    # one stage: the output layer's 4 s b h / t (1 + V / h) joins the first stage's activations
    m = gpt_shape(1024, 16, 8, 32000, 512)
    one = account(m, A100, micro_batch=2, micro_batches=4)
    layers = 8 * 512 * 2 * 1024 * (34 + 5 * 16 * 512 / 1024)  # l x sbh(34 + 5as/h), one micro-batch in flight
    mask = 512 * 2 * 1024 * 1  # embedding dropout mask, 1 byte a value
    output = 4 * 512 * 2 * (1024 + 32000)
    assert float(one.activation_bytes) == pytest.approx(layers + mask + output)
    # four stages, 1F1B, 16 micro-batches: the last stage holds 1 micro-batch of its 2 layers plus the output layer
    four = account(m, A100, pipeline=4, micro_batch=2, micro_batches=16)
    state = float(four.weights_bytes) + float(four.grads_bytes) + float(four.optimizer_bytes) + 2e9
    assert state == pytest.approx(16 * (2 * m.dense_layer_params + m.embedding_params) + 2e9)
    last = 2 * 512 * 2 * 1024 * (34 + 40) + output
    assert float(four.last_stage_bytes) == pytest.approx((state + last) * 1.1)
    first = 8 * 512 * 2 * 1024 * (34 + 40) + 4 * mask  # 4 micro-batches in flight x 2 layers, 4 masks
    assert float(four.first_stage_bytes) == pytest.approx((state + first) * 1.1)
    assert float(four.per_device_bytes) == pytest.approx(max(float(four.first_stage_bytes),
                                                             float(four.last_stage_bytes)))


def test_layer_flops_against_torch_flop_counter():
    # an outside count: torch's FlopCounterMode on a plain GPT block (no biases, so P_layer = 12 h^2),
    # forward and backward, against the account's executed FLOPs of one layer with no logits
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    b, s, h, heads = 2, 64, 128, 4
    lin = torch.nn.Linear
    qkv, proj, up, down = lin(h, 3 * h, bias=False), lin(h, h, bias=False), lin(h, 4 * h, bias=False), \
        lin(4 * h, h, bias=False)
    x = torch.randn(b, s, h, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        q, k, v = qkv(x).view(b, s, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (h // heads) ** 0.5, dim=-1) @ v
        y = proj(att.transpose(1, 2).reshape(b, s, h))
        out = down(torch.nn.functional.gelu(up(x + y)))
        out.sum().backward()
    shape = parallel.ModelShape(layers=1, width=h, heads=heads, kv_heads=heads, vocab=0, seq_len=s,
                                params=12 * h * h, active_params=12 * h * h, embedding_params=0, tied=True)
    a = account(shape, A100, micro_batch=b, micro_batches=1)
    assert float(a.flops_per_device) == pytest.approx(counter.get_total_flops())
    # and by hand: 3 x (24 b s h^2 + 4 b s^2 h)
    assert counter.get_total_flops() == 3 * (24 * b * s * h * h + 4 * b * s * s * h)


def test_korthikanti_against_saved_tensors_of_a_torch_layer():
    # an outside measurement: the tensors autograd saves for backward in a bf16 GPT layer written as
    # Megatron writes it (pre-LN, fused QKV, dropout after softmax, after the projection and after the
    # MLP), counted with saved_tensors_hooks and deduplicated by storage, parameters excluded.
    # Korthikanti's s b h (34 + 5 a s / h) counts 1-byte dropout masks (Megatron's CUDA kernels) and
    # no layer-norm statistics; torch on the CPU may keep 2-byte masks, and keeps the mean and rstd
    # of each layer norm (4 tensors of s b values).
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    b, s, h, a = 2, 128, 256, 4
    dt = torch.bfloat16
    ln1, ln2 = torch.nn.LayerNorm(h, dtype=dt), torch.nn.LayerNorm(h, dtype=dt)
    qkv, proj = torch.nn.Linear(h, 3 * h, dtype=dt), torch.nn.Linear(h, h, dtype=dt)
    up, down = torch.nn.Linear(h, 4 * h, dtype=dt), torch.nn.Linear(4 * h, h, dtype=dt)
    params = {p.untyped_storage().data_ptr() for m in (ln1, ln2, qkv, proj, up, down) for p in m.parameters()}
    saved: dict[int, int] = {}

    def pack(t):  # noqa: ANN001, ANN202
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.randn(s, b, h, dtype=dt, requires_grad=True)
    drop = torch.nn.functional.dropout
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        q, k, v = qkv(ln1(x)).view(s, b, 3, a, h // a).permute(2, 1, 3, 0, 4)
        probs = drop(torch.softmax((q @ k.transpose(-1, -2)) * (h // a) ** -0.5, dim=-1), 0.1, True)
        x2 = x + drop(proj((probs @ v).permute(2, 0, 1, 3).reshape(s, b, h)), 0.1, True)
        _ = x2 + drop(down(torch.nn.functional.gelu(up(ln2(x2)))), 0.1, True)
    formula = float(korthikanti_activation_bytes_per_layer(s, b, h, a))
    assert formula == s * b * h * (34 + 5 * a * s / h)
    norm_stats = 4 * s * b * 2
    wide_masks = 2 * s * b * h + a * s * s * b  # the three masks at 2 bytes instead of 1
    assert sum(saved.values()) - norm_stats - formula in (0, wide_masks)


# ---------------------------------------------------------------- the step model from the operations (issue 23)

from trainplan.accounts import step_ops  # noqa: E402

CURVE = step_ops.KernelEfficiency(key="test", gemm_max=0.8, gemm_half_intensity=200.0, flash_efficiency=0.5,
                                  elementwise_efficiency=0.8, source="test values")


def test_gemm_efficiency_from_its_intensity_by_hand():
    # 2048 x 2560 by 2560 x 20480 (the 530B layer's attention output at TP 8):
    # I = 1 / (1/2048 + 1/20480 + 1/2560) = 1079.0; efficiency 0.8 x I / (I + 200)
    intensity = 1 / (1 / 2048 + 1 / 20480 + 1 / 2560)
    assert float(step_ops.gemm_intensity(2048, 20480, 2560)) == pytest.approx(intensity)
    want = 0.8 * intensity / (intensity + 200)
    assert float(step_ops.gemm_efficiency(2048, 20480, 2560, CURVE)) == pytest.approx(want)
    # the intensity is symmetric: the two backward GEMMs (permutations of m, n, k) run at the same efficiency
    assert float(step_ops.gemm_efficiency(20480, 2560, 2048, CURVE)) == pytest.approx(
        float(step_ops.gemm_efficiency(2048, 20480, 2560, CURVE)))
    seconds = 2 * 2048 * 20480 * 2560 / (312e12 * 0.8 * intensity / (intensity + 200))
    assert float(step_ops.gemm_seconds(2048, 20480, 2560, 312e12, CURVE)) == pytest.approx(seconds)
    assert float(step_ops.gemm_seconds(2048, 0, 2560, 312e12, CURVE)) == 0.0  # an empty GEMM takes no time


def test_attention_core_flash_or_not_by_hand():
    # 4 x 64 / 8 = 32 heads of 2048 queries x 2048 keys x head size 96: 2 x 2 x 32 x 2048^2 x 96 FLOPs
    flops = 4 * 32 * 2048**2 * 96
    unfused = 1 / (1 / 2048 + 1 / 2048 + 1 / 96)
    assert float(step_ops.attention_core_seconds(32, 2048, 2048, 96, 312e12, CURVE, False)) == pytest.approx(
        flops / (312e12 * 0.8 * unfused / (unfused + 200)))
    assert float(step_ops.attention_core_seconds(32, 2048, 2048, 96, 312e12, CURVE, True)) == pytest.approx(
        flops / (312e12 * 0.5))


def test_collective_at_its_message_size_by_hand():
    # 100 MB all-reduce on 8 ranks of a 231 GB/s tier whose half size is 6 MB:
    # 2 x 7/8 x 100 MB / (231 GB/s x 100 / 106) + 14 steps x 5 us
    want = 2 * 7 / 8 * 100e6 / (231e9 * 100 / 106) + 14 * 5e-6
    assert float(step_ops.collective_seconds("all_reduce", 100e6, 8, 231e9, 5e-6, 6e6)) == pytest.approx(want)
    assert float(step_ops.bus_efficiency(6e6, 6e6)) == pytest.approx(0.5)
    assert float(step_ops.collective_seconds("all_reduce", 100e6, 1, 231e9, 5e-6, 6e6)) == 0.0


def test_catalogue_curves_carry_sources():
    for key in ("a100-sxm-80gb", "h100-sxm", "h200", "default"):
        row = step_ops.kernel_efficiency(key)
        assert 0 < row.gemm_max < 1 and row.source
    assert step_ops.kernel_efficiency("b200").key == "default"
    assert step_ops.half_bytes("nvlink3") == 6e6 and step_ops.half_bytes("ib-hdr", "send") == 1e6
    for fw in step_ops.FRAMEWORKS:
        assert step_ops.framework(fw).source
    # the workload key offers exactly the catalogue's fused attention kernels, each with a source
    from typing import get_args

    from trainplan.workload.schema import ParallelSection

    assert set(get_args(ParallelSection.model_fields["flash_kernel"].annotation)) == set(step_ops.FLASH_KERNELS)
    for kernel in step_ops.FLASH_KERNELS:
        assert catalogue.table("kernel_efficiency")["flash_kernels"][kernel]["source"]
    with pytest.raises(UserError):
        step_ops.framework("jax")


def test_the_22b_layer_compute_from_its_gemms_by_hand():
    # 22B (h 6144, 64 heads), TP 8, b 4 x s 2048 = 8192 rows, full recompute: per layer the four
    # GEMMs (QKV 8192 x 2304 x 6144, out 8192 x 6144 x 768, up 8192 x 3072 x 6144, down 8192 x 6144 x 3072)
    # and the attention core (8 x 4 heads of 2048 x 2048 x 96, unfused) run forward 4 times (3 + the
    # recomputation); the logits (8192 x 6400 x 6144) 3 times; 48 layers, one micro-batch
    hw = parallel.Hardware(**{**vars(A100), "kernels": CURVE})
    m = gpt_shape(6144, 64, 48, 51200, 2048)
    a = account(m, hw, tensor=8, micro_batch=4, micro_batches=1, recompute="full")

    def gemm(mm, n, k):
        i = 1 / (1 / mm + 1 / n + 1 / k)
        return 2 * mm * n * k / (312e12 * 0.8 * i / (i + 200))

    # the block's 12 h^2 + 13 h parameters: the MLP width is (12 h^2 + 13 h - 4 h^2) / (2 h) = 4 h + 6.5
    f = (12 * 6144**2 + 13 * 6144 - 4 * 6144**2) / (2 * 6144) / 8
    layer = gemm(8192, 2304, 6144) + gemm(8192, 6144, 768) + gemm(8192, f, 6144) + gemm(8192, 6144, f)
    attention = 4 * 32 * 2048**2 * 96 / (312e12 * 0.8 * (i := 1 / (2 / 2048 + 1 / 96)) / (i + 200))
    want = 48 * 4 * (layer + attention) + 3 * gemm(8192, 6400, 6144)
    assert float(a.compute_seconds) == pytest.approx(want, rel=1e-9)


def test_the_22b_layer_with_flash_attention_by_hand():
    # the same layer with a fused (flash) attention kernel and no recomputation: the GEMMs run 3 times
    # (forward, backward twice); the kernel runs the causal half of the 8 x 4 heads of 2048 x 2048 x 96 at the
    # flash efficiency, forward once and backward 2.5 times (FlashAttention-2's backward recomputes Q K^T
    # beside its four gradient products: five products against the forward's two)
    hw = parallel.Hardware(**{**vars(A100), "kernels": CURVE})
    m = gpt_shape(6144, 64, 48, 51200, 2048)
    a = account(m, hw, tensor=8, micro_batch=4, micro_batches=1, recompute="none", attention="flash")

    def gemm(mm, n, k):
        i = 1 / (1 / mm + 1 / n + 1 / k)
        return 2 * mm * n * k / (312e12 * 0.8 * i / (i + 200))

    f = (12 * 6144**2 + 13 * 6144 - 4 * 6144**2) / (2 * 6144) / 8
    layer = gemm(8192, 2304, 6144) + gemm(8192, 6144, 768) + gemm(8192, f, 6144) + gemm(8192, 6144, f)
    causal_forward = 4 * 32 * 2048**2 * 96 / 2 / (312e12 * 0.5)
    want = 48 * (3 * layer + 3.5 * causal_forward) + 3 * gemm(8192, 6400, 6144)
    assert float(a.compute_seconds) == pytest.approx(want, rel=1e-9)


def test_a_flash1_kernel_takes_twice_the_attention_time():
    # FlashAttention 1.x (or its Triton port) at half FlashAttention-2's speed (the FlashAttention-2 paper's
    # 2x): the same layer's step grows by exactly its flash kernel's time, 3.5 causal forwards a layer
    assert step_ops.flash_kernel_speed("flash1") == 0.5 and step_ops.flash_kernel_speed("flash2") == 1.0
    m = gpt_shape(6144, 64, 48, 51200, 2048)
    steps = []
    for kernel in ("flash2", "flash1"):
        hw = parallel.Hardware(**{**vars(A100), "kernels": CURVE.with_flash_kernel(kernel)})
        steps.append(float(account(m, hw, tensor=8, micro_batch=4, micro_batches=1, recompute="none",
                                   attention="flash").compute_seconds))
    causal_forward = 4 * 32 * 2048**2 * 96 / 2 / (312e12 * 0.5)
    assert steps[1] - steps[0] == pytest.approx(48 * 3.5 * causal_forward, rel=1e-9)


def test_stage_partition_with_embedding_units():
    # BLOOM: 70 layers + 2 units on 12 stages = 6 each; the first and last hold 5 layers
    assert tuple(map(float, parallel.stage_partition(70, 12, 1))) == (6.0, 5.0)
    # Llama 3 405B: 126 + 2 on 16 = 8 each, 7 on the first and last
    assert tuple(map(float, parallel.stage_partition(126, 16, 1))) == (8.0, 7.0)
    assert tuple(map(float, parallel.stage_partition(96, 8, 0))) == (12.0, 12.0)
    assert tuple(map(float, parallel.stage_partition(48, 1, 1))) == (48.0, 48.0)
    assert layout_rules.embedding_units(70, 12) == 1 and layout_rules.embedding_units(96, 8) == 0
    assert layout_rules.embedding_units(71, 12) is None
    assert layout_rules.check_layout(384, tensor=4, pipeline=12, layers=70) == 8
    with pytest.raises(UserError) as e:
        layout_rules.check_layout(384, tensor=4, pipeline=12, layers=71)
    assert e.value.where == "parallel.pipeline"


def test_uneven_stage_time_is_the_fuller_stage():
    # 70 layers on 12 stages: middle stages run 6 layers, the last 5 layers and the logits
    m = gpt_shape(4096, 32, 70, 32000, 2048)
    even_layers = account(m, A100, pipeline=1, micro_batches=1)
    a = account(m, A100, pipeline=12, micro_batches=1, embedding_stages=1)
    per_layer = (float(even_layers.compute_seconds) - float(
        account(gpt_shape(4096, 32, 69, 32000, 2048), A100, micro_batches=1).compute_seconds))
    assert float(a.compute_seconds) == pytest.approx(float(even_layers.compute_seconds) - 65 * per_layer)


# 16-way data parallelism over two nodes: each node's eight ranks drive its eight NICs (22.5 GB/s each, a
# ring per NIC), so the group's bus bandwidth between nodes is 8 x 22.5 GB/s, below NVLink's 231 GB/s
DP_BETWEEN = min(8 * 22.5e9, 231e9)


def _dp_times(zero, overlap, m=4, prefetch=1, node_links=True):
    # one stage, 16-way data parallelism over two nodes (10 us a step between nodes), no overlap cost
    shape = gpt_shape(4096, 32, 32, 32000, 2048)
    return shape, account(shape, A100, data=16, micro_batches=m, zero=zero, dp_overlap=overlap,
                          zero3_prefetch=prefetch, overlap_cost=0.0, dp_node_links=node_links)


def test_data_parallel_exchanges_by_hand_without_overlap():
    shape, z0 = _dp_times(0, False)
    psi = shape.dense_layer_params * 32 + shape.embedding_params  # one stage holds every parameter
    all_reduce = 2 * 15 / 16 * psi * 2 / DP_BETWEEN + 30 * 1e-5
    scatter = 15 / 16 * psi * 2 / DP_BETWEEN + 15 * 1e-5
    gather = scatter  # 2-byte weights and 2-byte gradients
    assert float(z0.data_parallel_seconds) == pytest.approx(all_reduce)
    _, z1 = _dp_times(1, False)
    assert float(z1.data_parallel_seconds) == pytest.approx(scatter + gather)
    # ZeRO-2 keeps only its gradient shard: a reduce-scatter after every micro-batch (4), not once
    _, z2 = _dp_times(2, False)
    assert float(z2.data_parallel_seconds) == pytest.approx(4 * scatter + gather)
    # ZeRO-3 without prefetch: per micro-batch per layer two gathers of the layer and a reduce-scatter
    _, z3 = _dp_times(3, False, prefetch=0)
    layer = shape.dense_layer_params * 2
    per_layer = 2 * (15 / 16 * layer / DP_BETWEEN + 15 * 1e-5) + 15 / 16 * layer / DP_BETWEEN + 15 * 1e-5
    assert float(z3.data_parallel_seconds) == pytest.approx(4 * 32 * per_layer)
    # a framework whose ranks each run at one device's NIC rate (dp_links = "device")
    _, one_nic = _dp_times(0, False, node_links=False)
    assert float(one_nic.data_parallel_seconds) == pytest.approx(2 * 15 / 16 * psi * 2 / 22.5e9 + 30 * 1e-5)


def test_a_data_parallel_group_shares_the_nics_of_its_ranks_on_a_node():
    # TP 4: the data-parallel group (ranks 4 apart) has two ranks on each node, two NICs' rate; TP 8: one
    shape = gpt_shape(4096, 32, 32, 32000, 2048)
    for tensor, nics in ((4, 2), (8, 1)):
        a = account(shape, A100, tensor=tensor, data=4, micro_batches=1, zero=0, dp_overlap=False)
        psi = (shape.dense_layer_params * 32 + shape.embedding_params) / tensor
        assert float(a.data_parallel_seconds) == pytest.approx(2 * 3 / 4 * psi * 2 / (nics * 22.5e9) + 6 * 1e-5,
                                                               rel=1e-3)
    assert parallel.ranks_per_node(3, 8) == 2 and parallel.ranks_per_node(16, 8) == 1


def test_overlap_hides_only_behind_backward_and_costs_its_share():
    _, hidden = _dp_times(2, True)
    _, exposed = _dp_times(2, False)
    assert float(hidden.data_parallel_seconds) < float(exposed.data_parallel_seconds)
    shape = gpt_shape(4096, 32, 32, 32000, 2048)
    half = account(shape, A100, data=16, micro_batches=4, zero=0, dp_overlap=True,
                                     overlap_cost=0.5)
    none = account(shape, A100, data=16, micro_batches=4, zero=0, dp_overlap=True,
                                     overlap_cost=0.0)
    psi = shape.dense_layer_params * 32 + shape.embedding_params
    all_reduce = 2 * 15 / 16 * psi * 2 / DP_BETWEEN + 30 * 1e-5
    backward = (float(none.step_seconds) - float(none.data_parallel_seconds) - float(none.optimizer_seconds)) / 4 \
        * 2 / 3
    assert float(none.data_parallel_seconds) == pytest.approx(max(0.0, all_reduce - backward))
    assert float(half.data_parallel_seconds) == pytest.approx(max(0.0, all_reduce - backward)
                                                              + 0.5 * min(all_reduce, backward))


def test_achieved_matmul_efficiency_is_flat_without_a_curve():
    # the flat model: every GEMM at the one efficiency, so executed FLOPs / (peak x compute time) = 0.7
    a = account(gpt_shape(4096, 32, 32, 32000, 2048), A100, tensor=2, micro_batches=2)
    assert float(a.achieved_matmul_efficiency) == pytest.approx(0.7)


def test_moe_expert_gemms_run_on_the_tokens_each_expert_receives():
    # 8 experts, 2 per token, no EP: each expert gets b s x 2/8 rows; the routed FLOPs (2 b s k P_expert)
    # run as GEMMs of 512 rows (b s = 2048) of width f_e = P_expert / (2h), slower than dense ones
    h, l, experts, k = 1024, 4, 8, 2
    dense_layer = 4 * h * h  # attention
    expert = 8 * h * h  # one expert's MLP (f = 4h)
    embed = 32000 * h
    params = l * (dense_layer + experts * expert) + embed
    active = l * (dense_layer + k * expert) + embed
    m = parallel.ModelShape(layers=l, width=h, heads=16, kv_heads=16, vocab=32000, seq_len=2048, params=params,
                            active_params=active, embedding_params=embed, tied=True, experts=experts,
                            experts_per_token=k)
    hw = parallel.Hardware(**{**vars(A100), "kernels": CURVE})
    a = account(m, hw, micro_batches=1)

    def gemm(mm, n, kk, flops=None):
        i = 1 / (1 / mm + 1 / n + 1 / kk)
        return (2 * mm * n * kk if flops is None else flops) / (312e12 * 0.8 * i / (i + 200))

    rows = 2048
    routed = 2 * rows * k * expert / 2  # forward FLOPs of each of the up and down GEMMs
    layer = gemm(rows, 3 * h, h) + gemm(rows, h, h) + 2 * gemm(rows * k / experts, 4 * h, h, routed)
    attention = 4 * 16 * 2048**2 * 64 / (312e12 * 0.8 * (i := 1 / (2 / 2048 + 1 / 64)) / (i + 200))
    want = l * 3 * (layer + attention) + 3 * gemm(rows, 32000, h)
    assert float(a.compute_seconds) == pytest.approx(want, rel=1e-9)
