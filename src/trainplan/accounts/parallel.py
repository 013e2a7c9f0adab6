"""Memory per device and time per step under a parallel layout (issue 13).

A layout splits N devices as N = t x p x c x d: tensor (t), pipeline (p, with v virtual
stages per device when interleaved), context (c) and data (d) parallelism; expert
parallelism (e) splits the experts of a MoE layer across e of the d x c data/context ranks;
sequence parallelism (SP) splits the non-tensor-parallel part of a layer over the t ranks.
Ranks are ordered as Megatron-LM orders them, tensor innermost, then context, data and
pipeline outermost: TP sits inside a node, pipeline neighbours are t·c·d ranks apart.

Per-layer terms (named so they can later be unified with accounts/activations.py):

Activations, Korthikanti et al. 2022 (§4, 16-bit activations, one micro-batch of b sequences
of s tokens, width h, a heads), bytes per layer per device:

    no recompute, no SP   s b h (10 + 24/t + 5 a s / (h t))
    no recompute, SP      s b h (34 + 5 a s / h) / t
    selective, no SP      s b h (10 + 24/t)             (attention core recomputed)
    selective, SP         s b h 34 / t
    full                  2 s b h  (2 s b h / t with SP) (only each layer's input kept)

FLOPs, Narayanan et al. 2021 (§5.1): a layer's forward pass is 24 b s h^2 + 4 b s^2 h
(matmuls of the 12 h^2 weights, and the attention scores QK^T and their product with V),
the logit layer 2 b s h V. Backward is twice forward, so per step of B sequences over l layers:

    no recompute     3 x forward  = 72 B s l h^2 (1 + s/(6h) + V/(12 h l))
    full recompute   4 x forward of the layers, 3 x the logits
                                  = 96 B s l h^2 (1 + s/(6h) + V/(16 h l))
    selective        3 x forward + the attention core again (4 B s^2 h per layer)
                                  = 72 B s l h^2 (1 + 2s/(9h) + V/(12 h l))

Here the 24 b s h^2 is written 2 b s P_layer (P_layer = 12 h^2 for the standard block) so
that grouped-query attention, SwiGLU and MoE (active parameters) are counted as they are.

Time per step: the slowest pipeline stage's time per micro-batch, times m micro-batches
plus the bubble (p-1)/(m v) of them (1F1B, interleaved with v chunks, GPipe with v = 1),
where a stage's time is its matmul FLOPs at the accelerator's matmul efficiency, its
element-wise memory traffic at HBM bandwidth and its tensor/context/expert collectives
(not overlapped: Megatron runs them on the critical path), plus the pipeline sends, the
data-parallel gradient sync not hidden behind the last backward pass, ZeRO-3's parameter
all-gathers per micro-batch, and the optimizer step (memory-bound).

Every function works on numpy arrays of layouts (the layout search evaluates a grid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from trainplan.accounts import collectives, step_ops

# Korthikanti et al. 2022, §4.1: bytes per s·b·h of one layer with 16-bit activations.
KORTHIKANTI_REPLICATED = 10.0  # layer norms, dropout masks, residual inputs: not split by TP
KORTHIKANTI_TENSOR_PARALLEL = 24.0  # QKV, attention output, MLP inputs: split by TP
KORTHIKANTI_ATTENTION_SCORES = 5.0  # x a s / h: softmax output, its dropout mask, scores
KORTHIKANTI_FULL_RECOMPUTE = 2.0  # one 16-bit input tensor per layer
KORTHIKANTI_BYTES_PER_VALUE = 2.0  # the formulas count 16-bit activations
# Korthikanti §4.3: the input embedding's dropout mask, one byte per value, on the first stage
EMBEDDING_DROPOUT_BYTES = 1.0
# Korthikanti §4.3: the output layer keeps 4 s b h / t (1 + V / h) bytes: its 16-bit input and
# layer norm, and the fp32 logits of the cross-entropy
OUTPUT_LAYER_BYTES = 4.0

# Narayanan et al. 2021, §5.1: FLOPs of one layer's forward pass.
MATMUL_FLOPS_PER_PARAM_TOKEN = 2.0  # one multiply-add per weight per token
ATTENTION_FLOPS = 4.0  # x b s^2 h: QK^T (2 b s^2 h) and scores x V (2 b s^2 h)
BACKWARD_PER_FORWARD = 2.0  # backward computes input and weight gradients: twice the forward
# A fused (flash) attention kernel's backward pass recomputes the scores Q K^T from Q and K (it keeps no S x S
# tensor) beside its four gradient products: five s x s x head_dim products against the forward's two, 2.5 times
# the forward's FLOPs (Dao 2023, FlashAttention-2, section 3.1.2 and its FLOPs count), where the counted backward
# is twice. The extra half forward is time the kernel spends, not a FLOP of the model's or hardware count.
FLASH_BACKWARD_PER_FORWARD = 2.5

# Element-wise (memory-bound) traffic of a layer: each byte the layer stores for backward is
# written once in forward, read once in backward, and its gradient written and read once in
# backward: four passes. A recomputation writes the recomputed bytes once more.
ELEMENTWISE_PASSES = 4.0

# Megatron's pattern (Shoeybi et al. 2019): two all-reduces of the b·s·h activations per layer
# in forward (after attention, after the MLP) and two in backward; with SP each becomes a
# reduce-scatter + all-gather of the same bytes. Full recomputation repeats the forward two.
TP_COLLECTIVES_FORWARD = 2.0
TP_COLLECTIVES_BACKWARD = 2.0
# A MoE layer exchanges tokens twice in forward (dispatch, combine) and twice in backward.
EP_ALL_TO_ALLS_PER_LAYER = 4.0

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
SCHEDULE_CODES = {"1f1b": 0, "interleaved": 0, "gpipe": 1}


# ---------------------------------------------------------------- the pipeline schedule


def pipeline_bubble(p: Any, m: Any, v: Any = 1) -> Any:
    """Idle share of the ideal step: (p - 1) / (m v) for 1F1B (v = 1), interleaved and GPipe."""
    return (np.asarray(p, dtype=np.float64) - 1.0) / (np.asarray(m, dtype=np.float64) * v)


def in_flight_factor(p: Any, m: Any, v: Any = 1, schedule: Any = "1f1b") -> Any:
    """Micro-batches of activations the first stage holds, in units of p (so x l/p layers gives l):
    1F1B keeps min(p, m); interleaving adds (p-1)/(p v) of them (Korthikanti §4.2.3); GPipe keeps m."""
    p = np.asarray(p, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    gpipe = _schedule_code(schedule) == 1
    one_f_one_b = np.minimum(p, m) / p
    interleave_extra = np.where(np.asarray(v) > 1, (p - 1.0) / (p * v), 0.0)
    return np.where(gpipe, m / p, one_f_one_b * (1.0 + interleave_extra))


def stage_partition(layers: Any, pipeline: Any, embedding_stages: Any = 0) -> tuple[Any, Any]:
    """Layers of the fullest stage before the last, and of the last stage (which also runs the logits).

    Without partition units (`embedding_stages` = 0) the p stages hold l/p layers each. With the
    embedding and the head as partition units (DeepSpeed's 'type:transformer|embedding', Llama 3's
    one layer fewer on the first and last stages), l + 2 units are split evenly: q = (l + 2)/p per
    stage, the first stage holds the embedding and q - 1 layers, the last q - 1 layers and the head."""
    l = np.asarray(layers, dtype=np.float64)
    p = np.asarray(pipeline, dtype=np.float64)
    u = np.asarray(embedding_stages, dtype=np.float64) * (p > 1)
    q = np.ceil((l + 2.0 * u) / p)
    first = q - u
    last = l - first - np.maximum(p - 2.0, 0.0) * q
    fullest = np.where(p > 2, q, first)
    return np.where(p > 1, fullest, l), np.where(p > 1, last, l)


def _recompute_code(recompute: Any) -> Any:
    if isinstance(recompute, str):
        return np.asarray(RECOMPUTE_CODES[recompute])
    arr = np.asarray(recompute)
    if arr.dtype.kind in "US":
        return np.vectorize(RECOMPUTE_CODES.__getitem__)(arr)
    return arr


def _schedule_code(schedule: Any) -> Any:
    if isinstance(schedule, str):
        return np.asarray(SCHEDULE_CODES[schedule])
    arr = np.asarray(schedule)
    if arr.dtype.kind in "US":
        return np.vectorize(SCHEDULE_CODES.__getitem__)(arr)
    return arr


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class ModelShape:
    """What the layout needs of the model. Parameter counts are totals (all experts)."""

    layers: int
    width: int
    heads: int
    kv_heads: int
    vocab: int
    seq_len: int
    params: float  # all parameters
    active_params: float  # used per token (MoE: the routed experts only)
    embedding_params: float  # vocab x width, one copy
    tied: bool  # input and output embeddings shared (else a second vocab x width on the last stage)
    experts: int = 1
    experts_per_token: int = 1
    attention_width: int | None = None  # heads x head width (None: the model width)
    largest_layer_params: float = 0.0  # the largest module ZeRO-3/FSDP gathers whole (training_state.py)
    matmul_params: float | None = None  # parameters in matrix products per token (None: from the counts)
    checkpoint_tail_params: float = 0.0  # of those, the last products full recomputation does not re-run

    @property
    def head_params(self) -> float:
        return 0.0 if self.tied else self.embedding_params

    @property
    def expert_params(self) -> float:
        """Parameters in experts, from the two counts: total - active = (E - k)/E x experts."""
        if self.experts <= 1 or self.experts_per_token >= self.experts:
            return 0.0  # dense, or every expert active: the counts cannot tell experts apart
        return (self.params - self.active_params) * self.experts / (self.experts - self.experts_per_token)

    @property
    def dense_layer_params(self) -> float:
        """Parameters of one layer outside the experts."""
        outside = self.params - self.embedding_params - self.head_params - self.expert_params
        return np.maximum(outside, 0.0) / self.layers

    @property
    def active_layer_params(self) -> float:
        """Parameters one token touches in one layer (what its matmul FLOPs scale with)."""
        active = self.active_params - self.embedding_params - self.head_params
        return np.maximum(active, 0.0) / self.layers


@dataclass(frozen=True)
class Hardware:
    peak_flops: float
    matmul_efficiency: float
    memory_bandwidth: float
    device_memory: float
    runtime_buffers: float
    headroom: float
    devices_per_node: int
    intra_bus_bandwidth: float  # achieved bus bandwidth of the intra-node tier, B/s
    intra_latency: float
    inter_bus_bandwidth: float  # per device, achieved
    inter_latency: float
    kernels: step_ops.KernelEfficiency | None = None  # GEMM curve and kernel efficiencies; None: the flat model
    intra_half_bytes: float = 0.0  # message size at half the tier's bus bandwidth (collective_efficiency.toml)
    inter_half_bytes: float = 0.0
    intra_send_half_bytes: float = 0.0  # the same for a point-to-point send
    inter_send_half_bytes: float = 0.0


@dataclass(frozen=True)
class ParallelAccount:
    """Each field a number, or an array over a grid of layouts."""

    data: Any
    micro_batches: Any
    # memory per device, first pipeline stage (the fullest under 1F1B)
    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any
    gathered_bytes: Any  # ZeRO-3 / FSDP: the unsharded module(s) in flight
    activation_bytes: Any  # the fuller stage's (with the output layer when there is one stage)
    first_stage_bytes: Any
    last_stage_bytes: Any
    per_device_bytes: Any  # the fuller of the first and last stages
    fits: Any
    # time per step
    compute_seconds: Any  # matmul FLOPs at the matmul efficiency, all micro-batches
    memory_bound_seconds: Any  # element-wise traffic
    tensor_seconds: Any
    context_seconds: Any
    expert_seconds: Any
    pipeline_send_seconds: Any
    bubble_seconds: Any
    bubble_share: Any
    data_parallel_seconds: Any  # the gradient sync's exposed part (and ZeRO-3's all-gathers)
    optimizer_seconds: Any
    step_seconds: Any
    # per device per step
    flops_per_device: Any  # executed (recomputation included)
    achieved_matmul_efficiency: Any  # executed FLOPs / (peak x compute time): the GEMM curve's average here
    model_flops: Any  # the whole step, no recomputation (what MFU counts)
    executed_flops: Any  # the whole step as run (recomputation, causal kernels)
    mfu: Any
    hfu: Any
    model_flops_per_token: Any
    executed_flops_per_token: Any
    tokens_per_step: Any  # micro-batch x sequence x micro-batches x data-parallel degree
    data_parallel_sync_seconds: Any  # the gradient sync (and ZeRO-3 gathers) before any overlap
    gradient_bytes: Any  # this device's gradients, the data-parallel message
    data_bus_bytes: Any  # bytes each device moves in the data-parallel collectives of a step
    last_backward_seconds: Any  # the backward pass the sync may hide behind
    compute_source: str  # "predicted", "mfu" or "hfu"
    bytes_per_step: Any  # all collectives, bytes each device moves
    tensor_tier: Any  # "intra" | "inter"
    pipeline_tier: Any
    data_tier: Any


def _tier(group_span: Any, devices_per_node: int) -> Any:
    """A group spanning more consecutive ranks than a node holds crosses nodes."""
    return np.asarray(group_span) > devices_per_node


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one layer keeps per token for its backward pass, split by what the layout divides.

    One activation account gives these numbers (accounts/activations.py for a known architecture,
    a measured or per-layer figure otherwise; `korthikanti` for the published GPT-block figures);
    the layout only divides them: the replicated part by t under sequence parallelism, the split
    part by t always, the head and loss part (vocabulary-parallel) by t on the last stage."""

    replicated: float  # norms, linear-layer inputs, residual dropout masks (per token, one layer)
    split: float  # attention core, scores, MLP (per token, one layer, no recomputation)
    selective_split: float  # the split part kept under selective recomputation (the core re-run)
    full_kept: float  # full recomputation: the layer's input hidden state (replicated)
    outside_first: float = 0.0  # per token per micro-batch in flight, on the first stage (embedding side)
    outside_last: float = 0.0  # per token, on the last stage (final norm, head input, loss, logits)

    @classmethod
    def korthikanti(cls, width: float, heads: float, seq_len: float, vocab: float, attention_scores: bool = True,
                    bytes_per_value: float = KORTHIKANTI_BYTES_PER_VALUE) -> "LayerActivations":
        """Korthikanti et al. 2022's GPT block (16-bit activations, scaled to `bytes_per_value`):
        10 s b h replicated, 24 s b h + 5 a s^2 b split, 2 s b h kept under full recomputation; the
        embedding's dropout mask per micro-batch in flight, and 4 s b (h + V) for the output layer."""
        scale = bytes_per_value / KORTHIKANTI_BYTES_PER_VALUE
        scores = KORTHIKANTI_ATTENTION_SCORES * heads * seq_len * float(attention_scores)
        return cls(KORTHIKANTI_REPLICATED * width * scale, (KORTHIKANTI_TENSOR_PARALLEL * width + scores) * scale,
                   KORTHIKANTI_TENSOR_PARALLEL * width * scale, KORTHIKANTI_FULL_RECOMPUTE * width * scale,
                   EMBEDDING_DROPOUT_BYTES * width, OUTPUT_LAYER_BYTES * (width + vocab))


#: zero codes of the layout arrays and the training-state sharding each stands for
SHARDING_OF_CODE = ("none", "zero1", "zero2", "zero3", "fsdp")


def default_state(recipe: Any = None) -> Any:
    """The state of a dense model under a recipe (accounts/training_state.py; mixed precision with an
    fp32 master copy when none is named), as `state_of(params_device, shard, code, largest)`."""
    from trainplan.accounts import training_state as ts

    r = recipe or ts.recipe("mixed_fp32_master")

    def state_of(params_device: Any, shard: Any, code: Any, largest: Any) -> tuple[Any, Any, Any, Any]:
        return sharded_state(params_device, shard, code, largest, r)
    return state_of


def sharded_state(params_device: Any, shard: Any, code: Any, largest: Any, r: Any) -> tuple[Any, Any, Any, Any]:
    """(weights, grads, optimizer, gathered) per device by training_state.sharded, code by code (arrays)."""
    from trainplan.accounts import training_state as ts

    code = np.asarray(code)
    out = [np.zeros(np.broadcast(params_device, shard, code).shape) for _ in range(4)]
    for c, sharding in enumerate(SHARDING_OF_CODE):  # a vectorised test a code (np.unique imports numpy.ma)
        where = code == c
        if not where.any():
            continue
        st = ts.sharded(params_device, r, sharding, shard, largest)
        for i, v in enumerate((st.weights_bytes, st.grads_bytes, st.optimizer_bytes, st.gathered_bytes)):
            out[i] = np.where(where, v, out[i])
    return tuple(out)  # type: ignore[return-value]


def parallel_account(model: ModelShape, hw: Hardware, *, tensor: Any = 1, pipeline: Any = 1, interleave: Any = 1,
                     context: Any = 1, expert: Any = 1, data: Any = 1, sequence_parallel: Any = False,
                     micro_batch: Any = 1, micro_batches: Any = 1, recompute: Any = "none", zero: Any = 0,
                     schedule: Any = "1f1b", attention: str, activations: LayerActivations,
                     activation_bytes_per_value: float, state_of: Any, weight_bytes: float,
                     grad_bytes: float, utilisation: Any = None, utilisation_kind: str = "mfu",
                     scaling_efficiency: Any = 1.0, end_to_end: bool = False,
                     flops_per_token: tuple[float, float] | None = None, dp_overlap: Any = True,
                     zero3_prefetch: int = 1, overlap_cost: float = 0.0,
                     embedding_stages: Any = 0, dp_node_links: bool = True) -> ParallelAccount:
    """Memory per device and time per step of layouts (numbers, or arrays of a grid).

    `activations`: the per-layer bytes of the one activation account; `state_of(params_device,
    shard, zero_code, largest_layer_params)` -> (weights, grads, optimizer, gathered) bytes, the one
    training-state account; `attention` ("flash", "sdpa", "eager") the kernel, for the FLOPs it
    executes; `weight_bytes`/`grad_bytes` per parameter, what the collectives move.

    The compute part of a step is predicted from the FLOPs at the matmul efficiency and the
    element-wise traffic at memory bandwidth, unless `utilisation` is given: an MFU (model FLOPs,
    recomputation not counted) or, with `utilisation_kind="hfu"`, an HFU (executed FLOPs), times
    `scaling_efficiency`. Exposed communication and the pipeline bubble are added to it either way,
    except with `end_to_end` (an MFU measured over whole steps on these devices already holds them).
    `flops_per_token` (model, executed) replaces the FLOPs of the shape where the caller counted
    them for the architecture (planning/model_terms.py: LoRA, a config.json)."""
    lay = _layout(model, tensor, pipeline, interleave, context, expert, data, sequence_parallel, micro_batch,
                  micro_batches, recompute, zero)
    m = lay.m
    params_device, shard, (weights, grads, optimizer, gathered) = _training_state(model, lay, state_of)
    acts = _stage_activations(activations, lay, schedule)
    first_stage, last_stage, per_device = _memory_per_device((weights, grads, optimizer, gathered), acts, hw, lay.p)
    token = _token_flops(model, lay, attention, flops_per_token)
    kern = hw.kernels if hw.kernels is not None else step_ops.flat_efficiency(hw.matmul_efficiency)
    layer = _layer_compute(model, hw, lay, token, attention, kern)
    layer_memory = _layer_memory_seconds(acts, lay.code, hw, kern)
    tp_inter, (layer_tp, layer_cp, layer_ep), layer_bytes = _layer_collectives(
        model, hw, lay, activation_bytes_per_value, layer.attention_forward_seconds)
    layer_comm = layer_tp + layer_cp + layer_ep  # on the critical path (Megatron does not overlap them)
    step_tokens, model_flops, executed_flops = _step_flops(lay, token)
    predicted = utilisation is None
    stage = _stage_times(lay, hw, layer, layer_memory, layer_comm, executed_flops if utilisation_kind == "hfu"
                         else model_flops, utilisation, scaling_efficiency, embedding_stages)
    pp_inter, pp_message, send = _pipeline_sends(hw, lay, activation_bytes_per_value)
    ideal = m * (stage.stage_seconds + send)
    bubble_share = pipeline_bubble(lay.p, m, lay.v)
    bubble = ideal * bubble_share
    dp = _data_parallel(model, hw, lay, params_device, shard, weight_bytes, grad_bytes, stage, dp_overlap,
                        zero3_prefetch, overlap_cost if predicted else 0.0, dp_node_links)
    optimizer_seconds = _optimizer_seconds(params_device, shard, lay.zero, grad_bytes, weight_bytes, optimizer, hw,
                                           kern) if predicted else np.zeros_like(optimizer)
    # a whole-step measurement: nothing more is added
    step = stage.compute_seconds + np.zeros_like(bubble) if end_to_end and not predicted \
        else ideal + bubble + dp.exposed + optimizer_seconds
    flops_device = m * (stage.last_layers * layer.layer_flops + layer.logit_flops)
    mfu, hfu, achieved = _utilisations(model_flops, executed_flops, flops_device, stage.compute_seconds, step,
                                       lay.n_devices, hw.peak_flops)
    collective_bytes = m * stage.last_layers * layer_bytes + np.where(lay.p > 1, m * 2.0 * lay.v * pp_message, 0.0) \
        + dp.bus_bytes
    tier_name = np.array(["intra", "inter"])
    return ParallelAccount(
        data=lay.d, micro_batches=m,
        weights_bytes=weights, grads_bytes=grads, optimizer_bytes=optimizer, gathered_bytes=gathered,
        activation_bytes=acts.fuller,
        first_stage_bytes=first_stage, last_stage_bytes=last_stage, per_device_bytes=per_device,
        fits=per_device <= hw.device_memory,
        compute_seconds=stage.compute_seconds, memory_bound_seconds=stage.memory_seconds,
        tensor_seconds=m * stage.last_layers * layer_tp, context_seconds=m * stage.last_layers * layer_cp,
        expert_seconds=m * stage.last_layers * layer_ep, pipeline_send_seconds=m * send,
        bubble_seconds=bubble, bubble_share=bubble_share, data_parallel_seconds=dp.exposed,
        optimizer_seconds=optimizer_seconds, step_seconds=step,
        flops_per_device=flops_device, achieved_matmul_efficiency=achieved, model_flops=model_flops,
        executed_flops=executed_flops, mfu=mfu, hfu=hfu,
        model_flops_per_token=token.model, executed_flops_per_token=token.executed,
        tokens_per_step=step_tokens,
        data_parallel_sync_seconds=dp.sync, last_backward_seconds=dp.last_backward, gradient_bytes=dp.gradient_bytes,
        data_bus_bytes=dp.bus_bytes,
        compute_source="predicted" if predicted else utilisation_kind, bytes_per_step=collective_bytes,
        tensor_tier=tier_name[tp_inter.astype(int)], pipeline_tier=tier_name[pp_inter.astype(int)],
        data_tier=tier_name[dp.inter.astype(int)],
    )


@dataclass(frozen=True)
class _Layout:
    """A layout's degrees as float arrays (of a grid), and the model's sizes they divide."""

    t: Any  # tensor
    p: Any  # pipeline
    v: Any  # virtual stages per device (interleaving)
    c: Any  # context
    e: Any  # expert
    d: Any  # data
    sp: Any  # sequence parallelism
    b: Any  # micro-batch, sequences
    m: Any  # micro-batches
    code: Any  # recomputation code (RECOMPUTE_CODES)
    zero: Any  # ZeRO stage code
    h: float  # width
    a: float  # heads
    l: float  # layers
    V: float  # vocabulary
    s: Any  # tokens per device of each sequence under context parallelism
    s_full: float  # tokens of a sequence
    layers_per_stage: Any
    sp_div: Any  # what sequence parallelism divides the replicated activations by
    n_devices: Any


def _layout(model: ModelShape, tensor: Any, pipeline: Any, interleave: Any, context: Any, expert: Any, data: Any,
            sequence_parallel: Any, micro_batch: Any, micro_batches: Any, recompute: Any, zero: Any) -> _Layout:
    """The layout of parallel_account's arguments, its degrees as float arrays."""
    f = np.float64
    t, p, v = np.asarray(tensor, f), np.asarray(pipeline, f), np.asarray(interleave, f)
    c, e, d = np.asarray(context, f), np.asarray(expert, f), np.asarray(data, f)
    sp = np.asarray(sequence_parallel, dtype=bool)
    b, m = np.asarray(micro_batch, f), np.asarray(micro_batches, f)
    h, a, l, V = float(model.width), float(model.heads), float(model.layers), float(model.vocab)
    return _Layout(t, p, v, c, e, d, sp, b, m, _recompute_code(recompute), np.asarray(zero), h, a, l, V,
                   s=model.seq_len / c, s_full=float(model.seq_len), layers_per_stage=l / p,
                   sp_div=np.where(sp, t, 1.0), n_devices=t * p * c * d)


def _training_state(model: ModelShape, lay: _Layout, state_of: Any) -> tuple[Any, Any, tuple[Any, Any, Any, Any]]:
    """(parameters per device, ZeRO shard, (weights, grads, optimizer, gathered) bytes) of the first stage:
    the embedding there, sharded by TP, experts by EP, ZeRO by d·c."""
    dense_stage = lay.layers_per_stage * model.dense_layer_params + model.embedding_params \
        + np.where(lay.p == 1, model.head_params, 0.0)
    expert_stage = lay.layers_per_stage * model.expert_params / lay.l / lay.e
    params_device = (dense_stage + expert_stage) / lay.t
    shard = lay.d * lay.c
    largest = np.maximum(model.largest_layer_params / lay.t, 0.0)
    return params_device, shard, state_of(params_device, shard, lay.zero, largest)


class _StageActivations(NamedTuple):
    """Activation bytes per device: the one activation account's per-layer bytes, divided as the layout divides them."""

    plain_layer: Any  # what a layer stores of one micro-batch without recomputation
    working: Any  # what the layer being re-run during its backward holds (what recomputation dropped)
    first: Any  # the first stage's
    last: Any  # the last stage's (p > 1)
    fuller: Any  # the fuller stage's (with the output layer when there is one stage)


def _stage_activations(la: LayerActivations, lay: _Layout, schedule: Any) -> _StageActivations:
    """The activation bytes of the first and last stages, and of one layer, under the layout."""
    code, t, p, m, sp_div = lay.code, lay.t, lay.p, lay.m, lay.sp_div
    tokens_mb = lay.s * lay.b  # tokens of one micro-batch on one device
    rep = la.replicated / sp_div
    plain_token = rep + la.split / t
    kept_token = np.select([code == 2, code == 1], [la.full_kept / sp_div, rep + la.selective_split / t],
                           plain_token)
    # the layer being re-run during its backward holds what recomputation dropped
    working_token = np.select([code == 2, code == 1], [plain_token, (la.split - la.selective_split) / t], 0.0)
    per_layer = tokens_mb * kept_token
    working = tokens_mb * working_token
    stored = lay.layers_per_stage * per_layer * p * in_flight_factor(p, m, lay.v, schedule)
    in_flight = np.where(_schedule_code(schedule) == 1, m, np.minimum(p, m))
    first_outside = tokens_mb * in_flight * la.outside_first / sp_div
    last_outside = tokens_mb * la.outside_last / t
    activations_first = stored + first_outside + working + np.where(p == 1, last_outside, 0.0)
    # the last stage (p > 1) holds the same state (Megatron keeps a copy of tied embeddings there, or
    # the untied head) but only one micro-batch in flight under 1F1B (GPipe: all m)
    last_in_flight = np.where(_schedule_code(schedule) == 1, m, 1.0)
    last_activations = lay.layers_per_stage * per_layer * last_in_flight + last_outside + working
    activations_out = np.where(p > 1, np.maximum(activations_first, last_activations), activations_first)
    return _StageActivations(tokens_mb * plain_token, working, activations_first, last_activations, activations_out)


def _memory_per_device(state: tuple[Any, Any, Any, Any], acts: _StageActivations, hw: Hardware,
                       p: Any) -> tuple[Any, Any, Any]:
    """(first stage, last stage, fuller stage) bytes per device: state, runtime buffers, activations, headroom."""
    weights, grads, optimizer, gathered = state
    state_bytes = weights + grads + optimizer + gathered + hw.runtime_buffers
    first_stage = (state_bytes + acts.first) * (1.0 + hw.headroom)
    last_stage = np.where(p > 1, (state_bytes + acts.last) * (1.0 + hw.headroom), first_stage)
    per_device = (state_bytes + acts.fuller) * (1.0 + hw.headroom)
    return first_stage, last_stage, per_device


class _TokenFlops(NamedTuple):
    """FLOPs per token (accounts/compute.py, the one FLOPs account), by recomputation."""

    model: Any  # no recomputation (what MFU counts)
    executed: Any  # as run
    head: float  # the logits' matmul, forward and backward
    attention_forward: Any  # the attention core's forward, as the kernel executes it
    attention_width: float  # heads x head width


def _token_flops(model: ModelShape, lay: _Layout, attention: str,
                 flops_per_token: tuple[float, float] | None) -> _TokenFlops:
    """The FLOPs per token of the model under the layout's recomputation (or the caller's count)."""
    from trainplan.accounts import compute as compute_mod

    code, l = lay.code, lay.l
    head = model.embedding_params  # the logits' matmul, tied or not
    matmul_params = model.matmul_params if model.matmul_params is not None else model.active_layer_params * l + head
    attention_width = float(lay.h if model.attention_width is None else model.attention_width)
    by_code = [compute_mod.flops_per_token(matmul_params, int(l), attention_width, lay.s_full, r, attention,
                                           head_params=head, tail_params=model.checkpoint_tail_params)
               for r in ("none", "selective", "full")]
    executed_token = np.select([code == 2, code == 1], [by_code[2].executed, by_code[1].executed],
                               by_code[0].executed)
    model_token = by_code[0].model
    if flops_per_token is not None:
        model_token, executed_token = flops_per_token
    head_token = (compute_mod.FORWARD_FLOPS_PER_PARAM_TOKEN + compute_mod.BACKWARD_FLOPS_PER_PARAM_TOKEN) * head
    attention_fwd_token = by_code[0].attention_model / (1 + BACKWARD_PER_FORWARD) \
        * compute_mod.CAUSAL_EXECUTED_SHARE[attention]
    return _TokenFlops(model_token, executed_token, head_token, attention_fwd_token, attention_width)


def _step_flops(lay: _Layout, token: _TokenFlops) -> tuple[Any, Any, Any]:
    """(tokens, model FLOPs, executed FLOPs) of the whole step; the model FLOPs without recomputation (what MFU
    counts)."""
    batch = lay.b * lay.m * lay.d
    return batch * lay.s_full, batch * lay.s_full * token.model, batch * lay.s_full * token.executed


class _LayerCompute(NamedTuple):
    """Compute per micro-batch on one device: the layers' executed FLOPs split over t, and the logits'."""

    layer_flops: Any
    logit_flops: Any
    layer_seconds: Any  # a layer's GEMMs and attention core, forward and backward (recomputation included)
    logit_seconds: Any
    attention_forward_seconds: Any  # a layer's attention core, forward


def _layer_compute(model: ModelShape, hw: Hardware, lay: _Layout, token: _TokenFlops, attention: str,
                   kern: Any) -> _LayerCompute:
    """The FLOPs and seconds of one layer and of the logits per micro-batch, each operation timed from its shape
    (accounts/step_ops.py): without a kernel curve every GEMM and attention kernel runs at the one matmul
    efficiency (the flat model)."""
    b, s, t, code, h, a, l, V = lay.b, lay.s, lay.t, lay.code, lay.h, lay.a, lay.l, lay.V
    layer_flops = b * s * (token.executed - token.head) / l / t
    logit_flops = b * s * token.head / t
    attention_fwd = b * s * token.attention_forward / l / t
    peak = hw.peak_flops
    tokens = b * s  # rows of every GEMM of one micro-batch on this device
    q_width = token.attention_width if token.attention_width > 0 else h  # heads x head width
    kv_width = q_width * model.kv_heads / max(model.heads, 1)
    head_dim = q_width / max(a, 1.0)
    gemm_per_flop = _gemm_seconds_per_flop(model, lay, tokens, q_width, kv_width, peak, kern)
    # the attention core: b a/t heads of s queries against s_full keys, flash (fused) or not
    fused = attention != "eager"
    core_flops = 2.0 * step_ops.FLOPS_PER_MULTIPLY_ADD * b * a / t * s * lay.s_full * head_dim
    core_seconds = step_ops.attention_core_seconds(b * a / t, s, lay.s_full, head_dim, peak, kern, fused)
    with np.errstate(divide="ignore", invalid="ignore"):
        attention_per_flop = np.where(core_flops > 0, core_seconds / np.where(core_flops > 0, core_flops, 1.0), 0.0)
    # executed attention of a layer: forward, twice that in backward, once more under recomputation
    attention_layer = attention_fwd * (1 + BACKWARD_PER_FORWARD + np.where(code > 0, 1.0, 0.0))
    attention_seconds_fwd = attention_fwd * attention_per_flop
    layer_compute = np.maximum(layer_flops - attention_layer, 0.0) * gemm_per_flop + attention_layer * attention_per_flop
    if fused:  # the scores the flash backward recomputes
        layer_compute = layer_compute + (FLASH_BACKWARD_PER_FORWARD - BACKWARD_PER_FORWARD) * attention_seconds_fwd
    logit_seconds = (1 + BACKWARD_PER_FORWARD) * step_ops.gemm_seconds(tokens, V / t, h, peak, kern) \
        * np.where(logit_flops > 0, 1.0, 0.0)
    return _LayerCompute(layer_flops, logit_flops, layer_compute, logit_seconds, attention_seconds_fwd)


def _gemm_seconds_per_flop(model: ModelShape, lay: _Layout, tokens: Any, q_width: float, kv_width: float,
                           peak: float, kern: Any) -> Any:
    """Seconds per FLOP of a layer's GEMMs as shaped: QKV, attention output, MLP up and down (TP splits their
    inner sizes), and a MoE layer's routed experts."""
    t, e, h, l = lay.t, lay.e, lay.h, lay.l
    width_div = max(h, 1.0)  # a model without a shape has no GEMMs to shape (width 0)
    attention_params = h * (q_width + 2.0 * kv_width) + q_width * h
    # a token's MLP parameters: the dense (or shared) MLP, and k routed experts of a MoE layer
    expert_each = model.expert_params / l / model.experts if model.experts > 1 else 0.0
    routed_params = model.experts_per_token * expert_each
    mlp_params = np.maximum(model.active_layer_params - attention_params - routed_params, 0.0)
    mlp_width = mlp_params / (2.0 * width_div)  # as two GEMMs h -> f -> h (a gated MLP's three fold into these)
    expert_width = expert_each / (2.0 * width_div)
    # the forward GEMMs of one layer; their FLOPs and seconds give the layer's GEMM seconds per FLOP
    shapes = [(tokens, (q_width + 2.0 * kv_width) / t, h), (tokens, h, q_width / t),
              (tokens, mlp_width / t, h), (tokens, h, mlp_width / t)]
    shaped_flops = sum(step_ops.FLOPS_PER_MULTIPLY_ADD * mm * nn * kk for mm, nn, kk in shapes)
    shaped_seconds = sum(step_ops.gemm_seconds(mm, nn, kk, peak, kern) for mm, nn, kk in shapes)
    if np.any(np.asarray(routed_params) > 0):
        # each of the E/e local experts receives e b s k / E tokens (the all-to-all brings them from the e
        # ranks): the routed FLOPs 2 b s k P_expert / t run as GEMMs of that many rows
        expert_rows = e * tokens * model.experts_per_token / model.experts
        routed_flops = MATMUL_FLOPS_PER_PARAM_TOKEN * tokens * routed_params / t / 2.0  # each of up and down
        shaped_flops = shaped_flops + 2.0 * routed_flops
        shaped_seconds = shaped_seconds \
            + step_ops.gemm_seconds_of_flops(routed_flops, expert_rows, expert_width / t, h, peak, kern) \
            + step_ops.gemm_seconds_of_flops(routed_flops, expert_rows, h, expert_width / t, peak, kern)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(shaped_flops > 0, shaped_seconds / np.where(shaped_flops > 0, shaped_flops, 1.0),
                        1.0 / (peak * kern.gemm_max))


def _layer_memory_seconds(acts: _StageActivations, code: Any, hw: Hardware, kern: Any) -> Any:
    """Seconds of a layer's element-wise traffic per micro-batch: four passes over the bytes it stores without
    recomputation, plus one more over what a recomputation rebuilds."""
    recomputed = np.select([code == 2, code == 1], [acts.plain_layer, acts.working], 0.0)
    return step_ops.elementwise_seconds(ELEMENTWISE_PASSES * acts.plain_layer + recomputed, hw.memory_bandwidth,
                                        kern)


def _links(span: Any, hw: Hardware, send: bool = False, stride: Any = None) -> tuple[Any, Any, Any, Any]:
    """(crosses nodes, bus bandwidth, latency, message size at half the bandwidth) of a group spanning `span`
    consecutive ranks, its ranks `stride` apart, for its collectives or (`send`) its point-to-point sends.

    A ring collective of a group crossing nodes runs one ring per NIC (NCCL), so each of the group's ranks on
    a node drives its own NIC: the bus bandwidth between nodes is the per-device rate times the group's
    ranks on each node, at most the rate inside the node. A send, or a group with one rank a node (`stride`
    a node or more, or None), has one device's NIC."""
    inter = _tier(span, hw.devices_per_node)
    half = np.where(inter, hw.inter_send_half_bytes, hw.intra_send_half_bytes) if send else \
        np.where(inter, hw.inter_half_bytes, hw.intra_half_bytes)
    local = 1.0 if send or stride is None else ranks_per_node(stride, hw.devices_per_node)
    between = shared_nic_bandwidth(local, hw.inter_bus_bandwidth, hw.intra_bus_bandwidth)
    return (inter, np.where(inter, between, hw.intra_bus_bandwidth),
            np.where(inter, hw.inter_latency, hw.intra_latency), half)


def shared_nic_bandwidth(local_ranks: Any, inter_bus_bandwidth: Any, intra_bus_bandwidth: Any) -> Any:
    """Bus bandwidth between nodes of a ring collective whose group has `local_ranks` on each node: each drives
    its own NIC (NCCL's ring per NIC), so the per-device rate times them, at most the rate inside the node."""
    return np.minimum(local_ranks * np.asarray(inter_bus_bandwidth, dtype=np.float64),
                      np.maximum(inter_bus_bandwidth, intra_bus_bandwidth))


def ranks_per_node(stride: Any, devices_per_node: int) -> Any:
    """Ranks of a group whose ranks are `stride` apart that share one node: devices_per_node / stride, at
    least one."""
    return np.maximum(1.0, np.floor(devices_per_node / np.maximum(np.asarray(stride, dtype=np.float64), 1.0)))


def _layer_collectives(model: ModelShape, hw: Hardware, lay: _Layout, activation_bytes_per_value: float,
                       attention_seconds_fwd: Any) -> tuple[Any, tuple[Any, Any, Any], Any]:
    """(tensor group crosses nodes, (tensor, context, expert) seconds, their bus bytes) of a layer's collectives
    per micro-batch."""
    tp_inter, layer_tp, layer_tp_bytes = _tensor_parallel(hw, lay, activation_bytes_per_value)
    layer_cp, layer_cp_bytes = _context_parallel(model, hw, lay, activation_bytes_per_value, attention_seconds_fwd)
    layer_ep, layer_ep_bytes = _expert_parallel(model, hw, lay, activation_bytes_per_value)
    return tp_inter, (layer_tp, layer_cp, layer_ep), layer_tp_bytes + layer_cp_bytes + layer_ep_bytes


def _tensor_parallel(hw: Hardware, lay: _Layout, activation_bytes_per_value: float) -> tuple[Any, Any, Any]:
    """(crosses nodes, seconds, bus bytes) of a layer's tensor-parallel collectives per micro-batch: all-reduces
    of b s h, or with SP a reduce-scatter and an all-gather each (the same bus bytes, twice the latency steps)."""
    t, code = lay.t, lay.code
    tp_inter, tp_bw, tp_lat, tp_half = _links(t, hw, stride=1)
    tp_message = lay.b * lay.s * lay.h * activation_bytes_per_value
    tp_count = TP_COLLECTIVES_FORWARD + TP_COLLECTIVES_BACKWARD + np.where(code == 2, TP_COLLECTIVES_FORWARD, 0.0)
    layer_tp = tp_count * np.where(
        lay.sp, 2.0 * step_ops.collective_seconds("all_gather", tp_message, t, tp_bw, tp_lat, tp_half),
        step_ops.collective_seconds("all_reduce", tp_message, t, tp_bw, tp_lat, tp_half))
    layer_tp_bytes = tp_count * collectives.bus_bytes("all_reduce", tp_message, t)
    return tp_inter, layer_tp, layer_tp_bytes


def _context_parallel(model: ModelShape, hw: Hardware, lay: _Layout, activation_bytes_per_value: float,
                      attention_seconds_fwd: Any) -> tuple[Any, Any]:
    """(exposed seconds, bus bytes) of a layer's context-parallel collectives per micro-batch: all-gather K and V
    in forward, reduce-scatter their gradients in backward; they overlap with the attention computation (ring
    attention), only the excess is exposed."""
    t, c = lay.t, lay.c
    cp_inter, cp_bw, cp_lat, cp_half = _links(t * c, hw, stride=t)
    kv_message = 2.0 * lay.b * lay.s_full * lay.h * (model.kv_heads / model.heads) / t * activation_bytes_per_value
    cp_count = 2.0 + np.where(lay.code == 2, 1.0, 0.0)
    cp_time = cp_count * step_ops.collective_seconds("all_gather", kv_message, c, cp_bw, cp_lat, cp_half)
    layer_cp = np.maximum(0.0, cp_time - attention_seconds_fwd * (1 + BACKWARD_PER_FORWARD))
    layer_cp_bytes = cp_count * collectives.bus_bytes("all_gather", kv_message, c)
    return layer_cp, layer_cp_bytes


def _expert_parallel(model: ModelShape, hw: Hardware, lay: _Layout,
                     activation_bytes_per_value: float) -> tuple[Any, Any]:
    """(seconds, bus bytes) of a layer's expert-parallel all-to-alls per micro-batch: the k routed copies of b s h
    over e ranks (spaced t apart)."""
    e = lay.e
    ep_inter, ep_bw, ep_lat, ep_half = _links(lay.t * e, hw)
    ep_message = lay.b * lay.s * lay.h * activation_bytes_per_value * model.experts_per_token / lay.sp_div
    moe = 1.0 if model.experts > 1 else 0.0
    layer_ep = moe * EP_ALL_TO_ALLS_PER_LAYER * step_ops.collective_seconds("all_to_all", ep_message, e, ep_bw,
                                                                            ep_lat, ep_half)
    layer_ep_bytes = moe * EP_ALL_TO_ALLS_PER_LAYER * collectives.bus_bytes("all_to_all", ep_message, e)
    return layer_ep, layer_ep_bytes


class _StageTimes(NamedTuple):
    """The pace of the pipeline: per layer and per stage, and the compute of a step."""

    layer_seconds: Any  # a layer per micro-batch, its communication included
    stage_seconds: Any  # the slowest stage per micro-batch
    compute_seconds: Any  # matmul FLOPs at the matmul efficiency (or the given utilisation), all micro-batches
    memory_seconds: Any  # element-wise traffic, all micro-batches
    stage_layers: Any  # layers of the fullest middle stage
    last_layers: Any  # layers of the last stage (which also runs the logits)


def _stage_times(lay: _Layout, hw: Hardware, layer: _LayerCompute, layer_memory: Any, layer_comm: Any,
                 utilised_flops: Any, utilisation: Any, scaling_efficiency: Any, embedding_stages: Any) -> _StageTimes:
    """The stages' times per micro-batch: predicted from each layer's operations, or (`utilisation` given) the
    step's `utilised_flops` at that utilisation, with the layers' communication added."""
    m, layers_per_stage = lay.m, lay.layers_per_stage
    # stages: the fullest middle stage holds `stage_layers`; the last holds `last_layers` and the logits
    stage_layers, last_layers = stage_partition(lay.l, lay.p, embedding_stages)
    if utilisation is None:
        layer_seconds = layer.layer_seconds + layer_memory + layer_comm
        # the pace of the pipeline: the fuller of a middle stage and the last (its layers and the logits)
        stage_seconds = np.maximum(stage_layers * layer_seconds, last_layers * layer_seconds + layer.logit_seconds)
        compute_seconds = m * (last_layers * layer.layer_seconds + layer.logit_seconds)
        memory_seconds = m * last_layers * layer_memory
    else:
        compute_seconds = utilised_flops / (lay.n_devices * hw.peak_flops * utilisation * scaling_efficiency)
        memory_seconds = np.zeros_like(compute_seconds)
        stage_compute = compute_seconds / m
        stage_seconds = stage_compute + layers_per_stage * layer_comm
        layer_seconds = stage_seconds / layers_per_stage
        last_layers = layers_per_stage + np.zeros_like(stage_seconds)
        stage_layers = last_layers
    return _StageTimes(layer_seconds, stage_seconds, compute_seconds, memory_seconds, stage_layers, last_layers)


def _pipeline_sends(hw: Hardware, lay: _Layout, activation_bytes_per_value: float) -> tuple[Any, Any, Any]:
    """(crosses nodes, message bytes, seconds per micro-batch) of the pipeline sends: one activation forward, one
    gradient back per micro-batch per chunk boundary; with t > 1 each of the t ranks sends 1/t of it (Narayanan's
    scatter/gather)."""
    pp_inter, pp_bw, pp_lat, pp_half = _links(lay.n_devices, hw, send=True)
    pp_message = lay.b * lay.s * lay.h * activation_bytes_per_value / lay.t
    send = np.where(lay.p > 1, 2.0 * lay.v * step_ops.collective_seconds("send", pp_message, 2, pp_bw, pp_lat,
                                                                         pp_half), 0.0)
    return pp_inter, pp_message, send


def _exposed(exchange: Any, behind: Any, cost: Any) -> Any:
    """Seconds of an exchange not hidden behind compute, plus `cost` of the hidden part (NCCL's kernels take
    SMs and HBM bandwidth)."""
    return np.maximum(0.0, exchange - behind) + cost * np.minimum(exchange, behind)


class _DataParallel(NamedTuple):
    """Data parallelism over d·c ranks (spaced t apart): the gradients of this device's parameters."""

    inter: Any  # crosses nodes
    exposed: Any  # the gradient sync's exposed part (and ZeRO-3's all-gathers), a step
    sync: Any  # the gradient sync (and ZeRO-3 gathers) before any overlap
    bus_bytes: Any  # bytes each device moves in the data-parallel collectives of a step
    last_backward: Any  # the backward pass the sync may hide behind
    gradient_bytes: Any  # this device's gradients, the data-parallel message


def _data_parallel(model: ModelShape, hw: Hardware, lay: _Layout, params_device: Any, shard: Any,
                   weight_bytes: float, grad_bytes: float, stage: _StageTimes, dp_overlap: Any, zero3_prefetch: int,
                   cost: Any, node_links: bool = True) -> _DataParallel:
    """The data-parallel exchanges of a step by ZeRO stage, and what of them is exposed; `cost` of an exchange
    hidden behind compute lands on the step (0 for a given MFU or HFU, a measured compute rate); `node_links`:
    the group's ranks on a node share its NICs (else each runs at one device's NIC rate)."""
    m, zero, stage_seconds = lay.m, lay.zero, stage.stage_seconds
    dp_inter, dp_bw, dp_lat, dp_half = _links(lay.t * lay.c * lay.d, hw, stride=lay.t * lay.c if node_links else None)
    grad_message = params_device * grad_bytes
    weight_message = params_device * weight_bytes
    all_reduce = step_ops.collective_seconds("all_reduce", grad_message, shard, dp_bw, dp_lat, dp_half)
    scatter = step_ops.collective_seconds("reduce_scatter", grad_message, shard, dp_bw, dp_lat, dp_half)
    gather = step_ops.collective_seconds("all_gather", weight_message, shard, dp_bw, dp_lat, dp_half)
    # what the framework hides the gradient exchange behind (nothing where it does not overlap):
    # the backward pass of the micro-batch whose gradients it exchanges
    overlap = np.asarray(dp_overlap, dtype=bool)
    last_backward = stage_seconds * BACKWARD_PER_FORWARD / (1 + BACKWARD_PER_FORWARD)
    hidden = np.where(overlap, last_backward, 0.0)
    # ZeRO-0: one all-reduce after the last micro-batch; ZeRO-1: one reduce-scatter of the gradients
    # and one all-gather of the updated weights per step; ZeRO-2 (gradients sharded) reduce-scatters
    # after every micro-batch's backward, then all-gathers the weights once; the all-gather of the
    # updated weights overlaps the next forward only where the framework overlaps
    plain = _exposed(all_reduce, hidden, cost)
    zero1 = _exposed(scatter, hidden, cost) + np.where(overlap, cost * gather, gather)
    zero2 = m * _exposed(scatter, hidden, cost) + np.where(overlap, cost * gather, gather)
    zero3, zero3_sync = _zero3_seconds(model, lay, shard, weight_bytes, grad_bytes, stage, (dp_bw, dp_lat, dp_half),
                                       (gather, scatter), zero3_prefetch, cost)
    dp_exposed = np.select([zero >= 3, zero == 2, zero == 1], [zero3, zero2, zero1], plain)
    dp_sync = np.select([zero >= 3, zero == 2, zero == 1], [zero3_sync, m * scatter + gather, scatter + gather],
                        all_reduce)
    dp_bytes = _data_parallel_bytes(zero, m, grad_message, weight_message, shard)
    return _DataParallel(dp_inter, dp_exposed, dp_sync, dp_bytes, last_backward, grad_message)


def _zero3_seconds(model: ModelShape, lay: _Layout, shard: Any, weight_bytes: float, grad_bytes: float,
                   stage: _StageTimes, links: tuple[Any, Any, Any], stage_exchanges: tuple[Any, Any],
                   zero3_prefetch: int, cost: Any) -> tuple[Any, Any]:
    """(exposed, before any overlap) seconds of ZeRO-3's exchanges in a step.

    Every micro-batch all-gathers each layer's weights for forward and again for backward and
    reduce-scatters its gradients. With `zero3_prefetch` layers gathered ahead, a layer's gather runs
    under the previous layer's forward (its gather and reduce-scatter under the backward), so per layer
    only the excess over that layer's compute is exposed, and the first layer's gather of each pass;
    without prefetch every exchange is exposed."""
    dp_bw, dp_lat, dp_half = links
    gather, scatter = stage_exchanges  # the whole stage's weights and gradients
    stage_seconds, stage_layers, layer_seconds = stage.stage_seconds, stage.stage_layers, stage.layer_seconds
    layer_weights = (model.dense_layer_params + model.expert_params / lay.l / lay.e) / lay.t
    layer_gather = step_ops.collective_seconds("all_gather", layer_weights * weight_bytes, shard, dp_bw, dp_lat,
                                               dp_half)
    layer_scatter = step_ops.collective_seconds("reduce_scatter", layer_weights * grad_bytes, shard, dp_bw, dp_lat,
                                                dp_half)
    layer_forward = layer_seconds / (1 + BACKWARD_PER_FORWARD + np.where(lay.code == 2, 1.0, 0.0))
    layer_backward = layer_seconds - layer_forward
    prefetched = stage_layers * (_exposed(layer_gather, layer_forward, cost)
                                 + _exposed(layer_gather + layer_scatter, layer_backward, cost)) + 2.0 * layer_gather
    if lay.h <= 0:  # no shape (a parameter count alone): no layers to gather one by one, the stage as one unit
        prefetched = _exposed(2.0 * gather + scatter, stage_seconds, cost)
        layer_gather, layer_scatter, stage_layers = gather, scatter, np.ones_like(stage_seconds)
    unhidden = 2.0 * layer_gather + layer_scatter  # a layer's exchanges, none hidden
    return lay.m * np.where(zero3_prefetch > 0, prefetched, stage_layers * unhidden), lay.m * stage_layers * unhidden


def _data_parallel_bytes(zero: Any, m: Any, grad_message: Any, weight_message: Any, shard: Any) -> Any:
    """Bytes each device moves in the data-parallel collectives of a step, by ZeRO stage."""
    return np.select([zero >= 3, zero == 2],
                     [m * (2.0 * collectives.bus_bytes("all_gather", weight_message, shard)
                           + collectives.bus_bytes("reduce_scatter", grad_message, shard)),
                      m * collectives.bus_bytes("reduce_scatter", grad_message, shard)
                      + collectives.bus_bytes("all_gather", weight_message, shard)],
                     np.where(zero == 0, collectives.bus_bytes("all_reduce", grad_message, shard),
                              collectives.bus_bytes("reduce_scatter", grad_message, shard)
                              + collectives.bus_bytes("all_gather", weight_message, shard)))


def _optimizer_seconds(params_device: Any, shard: Any, zero: Any, grad_bytes: float, weight_bytes: float,
                       optimizer: Any, hw: Hardware, kern: Any) -> Any:
    """Seconds of the optimizer step: read gradient and weight, read and write master and moments (memory-bound)."""
    optimizer_traffic = params_device / np.where(zero >= 1, shard, 1.0) * (grad_bytes + weight_bytes) \
        + 2.0 * optimizer
    return step_ops.elementwise_seconds(optimizer_traffic, hw.memory_bandwidth, kern)


def _utilisations(model_flops: Any, executed_flops: Any, flops_device: Any, compute_seconds: Any, step: Any,
                  n_devices: Any, peak_flops: float) -> tuple[Any, Any, Any]:
    """(MFU, HFU, achieved matmul efficiency) of a step."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mfu = model_flops / (n_devices * peak_flops * step)
        hfu = executed_flops / (n_devices * peak_flops * step)
        achieved = np.where(compute_seconds > 0, flops_device / (peak_flops * np.where(compute_seconds > 0,
                                                                                       compute_seconds, 1.0)), 0.0)
    return mfu, hfu, achieved


# ---------------------------------------------------------------- checks of a layout


