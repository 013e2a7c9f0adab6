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
from typing import Any

import numpy as np

from trainplan.accounts import collectives

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
    for c in np.unique(code):
        st = ts.sharded(params_device, r, SHARDING_OF_CODE[int(c)], shard, largest)
        where = code == c
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
                     flops_per_token: tuple[float, float] | None = None) -> ParallelAccount:
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
    from trainplan.accounts import compute as compute_mod

    f = np.float64
    t, p, v = np.asarray(tensor, f), np.asarray(pipeline, f), np.asarray(interleave, f)
    c, e, d = np.asarray(context, f), np.asarray(expert, f), np.asarray(data, f)
    sp = np.asarray(sequence_parallel, dtype=bool)
    b, m = np.asarray(micro_batch, f), np.asarray(micro_batches, f)
    code = _recompute_code(recompute)
    zero = np.asarray(zero)
    h, a, l, V = float(model.width), float(model.heads), float(model.layers), float(model.vocab)
    s = model.seq_len / c  # tokens per device of each sequence under context parallelism
    s_full = float(model.seq_len)
    layers_per_stage = l / p
    sp_div = np.where(sp, t, 1.0)
    n_devices = t * p * c * d

    # ---- memory: state of the first stage (embedding there), sharded by TP, experts by EP, ZeRO by d·c
    dense_stage = layers_per_stage * model.dense_layer_params + model.embedding_params \
        + np.where(p == 1, model.head_params, 0.0)
    expert_stage = layers_per_stage * model.expert_params / l / e
    params_device = (dense_stage + expert_stage) / t
    shard = d * c
    largest = np.maximum(model.largest_layer_params / t, 0.0)
    weights, grads, optimizer, gathered = state_of(params_device, shard, zero, largest)

    # ---- activations: the one account's per-layer bytes, divided as the layout divides them
    la = activations
    tokens_mb = s * b  # tokens of one micro-batch on one device
    rep = la.replicated / sp_div
    kept_token = np.select([code == 2, code == 1], [la.full_kept / sp_div, rep + la.selective_split / t],
                           rep + la.split / t)
    # the layer being re-run during its backward holds what recomputation dropped
    working_token = np.select([code == 2, code == 1], [rep + la.split / t, (la.split - la.selective_split) / t],
                              0.0)
    per_layer = tokens_mb * kept_token
    working = tokens_mb * working_token
    stored = layers_per_stage * per_layer * p * in_flight_factor(p, m, v, schedule)
    in_flight = np.where(_schedule_code(schedule) == 1, m, np.minimum(p, m))
    first_outside = tokens_mb * in_flight * la.outside_first / sp_div
    last_outside = tokens_mb * la.outside_last / t
    activations_first = stored + first_outside + working + np.where(p == 1, last_outside, 0.0)
    # the last stage (p > 1) holds the same state (Megatron keeps a copy of tied embeddings there, or
    # the untied head) but only one micro-batch in flight under 1F1B (GPipe: all m)
    last_in_flight = np.where(_schedule_code(schedule) == 1, m, 1.0)
    last_activations = layers_per_stage * per_layer * last_in_flight + last_outside + working
    activations_out = np.where(p > 1, np.maximum(activations_first, last_activations), activations_first)
    state_bytes = weights + grads + optimizer + gathered + hw.runtime_buffers
    first_stage = (state_bytes + activations_first) * (1.0 + hw.headroom)
    last_stage = np.where(p > 1, (state_bytes + last_activations) * (1.0 + hw.headroom), first_stage)
    per_device = (state_bytes + activations_out) * (1.0 + hw.headroom)

    # ---- FLOPs per token (accounts/compute.py, the one FLOPs account), by recomputation
    head = model.embedding_params  # the logits' matmul, tied or not
    matmul_params = model.matmul_params if model.matmul_params is not None else model.active_layer_params * l + head
    attention_width = float(h if model.attention_width is None else model.attention_width)
    by_code = [compute_mod.flops_per_token(matmul_params, int(l), attention_width, s_full, r, attention,
                                           head_params=head) for r in ("none", "selective", "full")]
    executed_token = np.select([code == 2, code == 1], [by_code[2].executed, by_code[1].executed],
                               by_code[0].executed)
    model_token = by_code[0].model
    if flops_per_token is not None:
        model_token, executed_token = flops_per_token
    head_token = (compute_mod.FORWARD_FLOPS_PER_PARAM_TOKEN + compute_mod.BACKWARD_FLOPS_PER_PARAM_TOKEN) * head
    attention_fwd_token = by_code[0].attention_model / (1 + BACKWARD_PER_FORWARD) \
        * compute_mod.CAUSAL_EXECUTED_SHARE[attention]

    # ---- compute per micro-batch on one device: the layers' executed FLOPs split over t, the logits'
    layer_flops = b * s * (executed_token - head_token) / l / t
    logit_flops = b * s * head_token / t
    attention_fwd = b * s * attention_fwd_token / l / t
    rate = hw.peak_flops * hw.matmul_efficiency
    layer_compute = layer_flops / rate

    # element-wise traffic: four passes over the bytes a layer stores without recomputation, plus one
    # more over what a recomputation rebuilds
    stored_plain = tokens_mb * (rep + la.split / t)
    recomputed = np.select([code == 2, code == 1], [stored_plain, working], 0.0)
    layer_memory = (ELEMENTWISE_PASSES * stored_plain + recomputed) / hw.memory_bandwidth

    # tensor parallelism: all-reduces (or RS + AG with SP, the same bus bytes) of b s h
    tp_inter = _tier(t, hw.devices_per_node)
    tp_bw = np.where(tp_inter, hw.inter_bus_bandwidth, hw.intra_bus_bandwidth)
    tp_lat = np.where(tp_inter, hw.inter_latency, hw.intra_latency)
    tp_message = b * s * h * activation_bytes_per_value
    tp_count = TP_COLLECTIVES_FORWARD + TP_COLLECTIVES_BACKWARD + np.where(code == 2, TP_COLLECTIVES_FORWARD, 0.0)
    layer_tp = tp_count * collectives.collective_seconds("all_reduce", tp_message, t, tp_bw, tp_lat)
    layer_tp_bytes = tp_count * collectives.bus_bytes("all_reduce", tp_message, t)

    # context parallelism: all-gather K and V in forward, reduce-scatter their gradients in backward;
    # it overlaps with the attention computation (ring attention), only the excess is exposed
    cp_inter = _tier(t * c, hw.devices_per_node)
    cp_bw = np.where(cp_inter, hw.inter_bus_bandwidth, hw.intra_bus_bandwidth)
    cp_lat = np.where(cp_inter, hw.inter_latency, hw.intra_latency)
    kv_message = 2.0 * b * s_full * h * (model.kv_heads / model.heads) / t * activation_bytes_per_value
    cp_count = 2.0 + np.where(code == 2, 1.0, 0.0)
    cp_time = cp_count * collectives.collective_seconds("all_gather", kv_message, c, cp_bw, cp_lat)
    layer_cp = np.maximum(0.0, cp_time - attention_fwd * (1 + BACKWARD_PER_FORWARD) / rate)
    layer_cp_bytes = cp_count * collectives.bus_bytes("all_gather", kv_message, c)

    # expert parallelism: all-to-all of the k routed copies of b s h over e ranks (spaced t apart)
    ep_inter = _tier(t * e, hw.devices_per_node)
    ep_bw = np.where(ep_inter, hw.inter_bus_bandwidth, hw.intra_bus_bandwidth)
    ep_lat = np.where(ep_inter, hw.inter_latency, hw.intra_latency)
    ep_message = b * s * h * activation_bytes_per_value * model.experts_per_token / sp_div
    moe = 1.0 if model.experts > 1 else 0.0
    layer_ep = moe * EP_ALL_TO_ALLS_PER_LAYER * collectives.collective_seconds("all_to_all", ep_message, e, ep_bw,
                                                                               ep_lat)
    layer_ep_bytes = moe * EP_ALL_TO_ALLS_PER_LAYER * collectives.bus_bytes("all_to_all", ep_message, e)

    layer_comm = layer_tp + layer_cp + layer_ep  # on the critical path (Megatron does not overlap them)
    logit_seconds = logit_flops / rate
    batch = b * m * d
    model_flops = batch * s_full * model_token  # the whole step, no recomputation (what MFU counts)
    executed_flops = batch * s_full * executed_token
    predicted = utilisation is None
    if predicted:
        # the last stage also computes the logits: it is the slowest, and sets the pace of the pipeline
        stage_compute = layers_per_stage * (layer_compute + layer_memory) + logit_seconds
        compute_seconds = m * (layers_per_stage * layer_compute + logit_seconds)
        memory_seconds = m * layers_per_stage * layer_memory
    else:
        flops = executed_flops if utilisation_kind == "hfu" else model_flops
        compute_seconds = flops / (n_devices * hw.peak_flops * utilisation * scaling_efficiency)
        memory_seconds = np.zeros_like(compute_seconds)
        stage_compute = compute_seconds / m
    stage_seconds = stage_compute + layers_per_stage * layer_comm

    # pipeline sends: one activation forward, one gradient back per micro-batch per chunk boundary;
    # with t > 1 each of the t ranks sends 1/t of it (Narayanan's scatter/gather)
    pp_inter = _tier(n_devices, hw.devices_per_node)
    pp_bw = np.where(pp_inter, hw.inter_bus_bandwidth, hw.intra_bus_bandwidth)
    pp_lat = np.where(pp_inter, hw.inter_latency, hw.intra_latency)
    pp_message = b * s * h * activation_bytes_per_value / t
    send = np.where(p > 1, 2.0 * v * (pp_message / pp_bw + pp_lat), 0.0)

    ideal = m * (stage_seconds + send)
    bubble_share = pipeline_bubble(p, m, v)
    bubble = ideal * bubble_share

    # data parallelism over d·c ranks (spaced t apart): gradients of this device's parameters
    dp_inter = _tier(t * c * d, hw.devices_per_node)
    dp_bw = np.where(dp_inter, hw.inter_bus_bandwidth, hw.intra_bus_bandwidth)
    dp_lat = np.where(dp_inter, hw.inter_latency, hw.intra_latency)
    grad_message = params_device * grad_bytes
    weight_message = params_device * weight_bytes
    all_reduce = collectives.collective_seconds("all_reduce", grad_message, shard, dp_bw, dp_lat)
    scatter = collectives.collective_seconds("reduce_scatter", grad_message, shard, dp_bw, dp_lat)
    gather = collectives.collective_seconds("all_gather", weight_message, shard, dp_bw, dp_lat)
    # ZeRO-0: one all-reduce; ZeRO-1/2: reduce-scatter the gradients, all-gather the updated
    # weights; both hide behind the last micro-batch's backward where they fit
    last_backward = stage_compute * BACKWARD_PER_FORWARD / (1 + BACKWARD_PER_FORWARD)
    sync = np.where(zero == 0, all_reduce, scatter + gather)
    # ZeRO-3: every micro-batch all-gathers the weights for forward and again for backward and
    # reduce-scatters the gradients; prefetching hides what fits under that micro-batch's compute
    zero3 = m * np.maximum(0.0, 2.0 * gather + scatter - stage_compute)
    dp_exposed = np.where(zero >= 3, zero3, np.maximum(0.0, sync - last_backward))
    dp_sync = np.where(zero >= 3, m * (2.0 * gather + scatter), sync)
    dp_bytes = np.where(zero >= 3,
                        m * (2.0 * collectives.bus_bytes("all_gather", weight_message, shard)
                             + collectives.bus_bytes("reduce_scatter", grad_message, shard)),
                        np.where(zero == 0, collectives.bus_bytes("all_reduce", grad_message, shard),
                                 collectives.bus_bytes("reduce_scatter", grad_message, shard)
                                 + collectives.bus_bytes("all_gather", weight_message, shard)))

    # optimizer step: read gradient and weight, read and write master and moments (memory-bound);
    # a given utilisation holds it already
    optimizer_traffic = params_device / np.where(zero >= 1, shard, 1.0) * (grad_bytes + weight_bytes) \
        + 2.0 * optimizer
    optimizer_seconds = optimizer_traffic / hw.memory_bandwidth if predicted else np.zeros_like(optimizer)

    if end_to_end and not predicted:
        step = compute_seconds + np.zeros_like(bubble)  # a whole-step measurement: nothing more is added
    else:
        step = ideal + bubble + dp_exposed + optimizer_seconds

    flops_device = m * (layers_per_stage * layer_flops + logit_flops)
    with np.errstate(divide="ignore", invalid="ignore"):
        mfu = model_flops / (n_devices * hw.peak_flops * step)
        hfu = executed_flops / (n_devices * hw.peak_flops * step)

    stage_layers = layers_per_stage
    collective_bytes = m * stage_layers * (layer_tp_bytes + layer_cp_bytes + layer_ep_bytes) \
        + np.where(p > 1, m * 2.0 * v * pp_message, 0.0) + dp_bytes
    tier_name = np.array(["intra", "inter"])
    return ParallelAccount(
        data=d, micro_batches=m,
        weights_bytes=weights, grads_bytes=grads, optimizer_bytes=optimizer, gathered_bytes=gathered,
        activation_bytes=activations_out,
        first_stage_bytes=first_stage, last_stage_bytes=last_stage, per_device_bytes=per_device,
        fits=per_device <= hw.device_memory,
        compute_seconds=compute_seconds, memory_bound_seconds=memory_seconds,
        tensor_seconds=m * stage_layers * layer_tp, context_seconds=m * stage_layers * layer_cp,
        expert_seconds=m * stage_layers * layer_ep, pipeline_send_seconds=m * send,
        bubble_seconds=bubble, bubble_share=bubble_share, data_parallel_seconds=dp_exposed,
        optimizer_seconds=optimizer_seconds, step_seconds=step,
        flops_per_device=flops_device, model_flops=model_flops, executed_flops=executed_flops, mfu=mfu, hfu=hfu,
        model_flops_per_token=model_token, executed_flops_per_token=executed_token, tokens_per_step=batch * s_full,
        data_parallel_sync_seconds=dp_sync, last_backward_seconds=last_backward, gradient_bytes=grad_message,
        data_bus_bytes=dp_bytes,
        compute_source="predicted" if predicted else utilisation_kind, bytes_per_step=collective_bytes,
        tensor_tier=tier_name[tp_inter.astype(int)], pipeline_tier=tier_name[pp_inter.astype(int)],
        data_tier=tier_name[dp_inter.astype(int)],
    )


# ---------------------------------------------------------------- checks of a layout


def check_layout(count: int, tensor: int = 1, pipeline: int = 1, interleave: int = 1, context: int = 1,
                 expert: int = 1, data: int | None = None, schedule: str = "1f1b", sequence: bool = False,
                 heads: int | None = None, layers: int | None = None, experts: int = 1,
                 seq_len: int | None = None, micro_batches: int | None = None) -> int:
    """The data-parallel degree of a valid layout; UserError naming the key that breaks it."""
    from trainplan.errors import UserError

    model_split = tensor * pipeline * context
    if data is not None:
        if model_split * data != count:
            raise UserError("parallel.data", f"expected tensor x pipeline x context x data = cluster.count "
                            f"({count}), got {tensor} x {pipeline} x {context} x {data} = {model_split * data}")
    elif count % model_split:
        raise UserError("cluster.count", f"expected a multiple of parallel.tensor x pipeline x context "
                        f"({tensor} x {pipeline} x {context} = {model_split}), got {count}")
    d = data if data is not None else count // model_split
    if heads is not None and heads % tensor:
        raise UserError("parallel.tensor", f"expected a divisor of model.heads ({heads}), got {tensor}")
    if schedule == "interleaved" and interleave < 2:
        raise UserError("parallel.interleave", f"expected 2 or more virtual stages with schedule = 'interleaved', "
                        f"got {interleave}")
    if schedule != "interleaved" and interleave > 1:
        raise UserError("parallel.schedule", f"expected 'interleaved' with parallel.interleave = {interleave}, "
                        f"got {schedule!r}")
    if interleave > 1 and pipeline < 2:
        raise UserError("parallel.interleave", "expected 1 without pipeline parallelism (parallel.pipeline = 1)")
    if layers is not None and layers % (pipeline * interleave):
        key = "parallel.interleave" if interleave > 1 else "parallel.pipeline"
        raise UserError(key, f"expected parallel.pipeline x interleave ({pipeline} x {interleave}) to divide "
                        f"model.layers ({layers})")
    if expert > 1 and experts % expert:
        raise UserError("parallel.expert", f"expected a divisor of model.experts ({experts}), got {expert}")
    if expert > 1 and (d * context) % expert:
        raise UserError("parallel.expert", f"expected a divisor of data x context ({d} x {context}): experts are "
                        f"spread over the data-parallel ranks, got {expert}")
    if seq_len is not None and seq_len % context:
        raise UserError("parallel.context", f"expected a divisor of training.seq_len ({seq_len}), got {context}")
    if schedule == "interleaved" and micro_batches is not None and micro_batches % pipeline:
        raise UserError("training.grad_accum", f"expected a multiple of parallel.pipeline ({pipeline}): the "
                        f"interleaved schedule runs micro-batches in groups of p, got {micro_batches}")
    if sequence and tensor < 2:
        raise UserError("parallel.sequence", "expected parallel.tensor > 1: sequence parallelism splits over the "
                        "tensor-parallel ranks")
    return d
