"""The one execution model of a plan (docs/parallel.md, "One job, one answer").

A workload's execution is its layout (tensor, pipeline, interleave, context, expert and data
degrees, schedule, sequence parallelism), its micro-batch and micro-batches, its ZeRO stage or
FSDP, recomputation, attention kernel and precision recipe. Plain data parallelism is the
trivial layout. `execution_account(inputs)` builds it once and runs the one account
(accounts/parallel.py) with the one activation account (accounts/activations.py, or the
measured / per-layer figure), the one training-state account (accounts/training_state.py) and
the one FLOPs account (accounts/compute.py). Memory per device (the fullest stage), the step,
tokens per step and the network figures of every report, sweep, solve and layout come from it.

The compute part of the step:
  - cluster.hfu given: executed FLOPs at that utilisation;
  - cluster.mfu given (or measured), or no shape to predict from: model FLOPs at that MFU
    (the field's convention: attention counted, recomputation not);
  - otherwise predicted from the FLOPs at the platform's matmul efficiency and the element-wise
    traffic at memory bandwidth; the predicted MFU is reported.
  cluster.scaling_efficiency multiplies a given MFU/HFU only where the user gave it (the
  communication it stood for is now counted); exposed communication and the pipeline bubble
  are added whatever the source, except with cluster.mfu_end_to_end (a whole-step measurement).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.accounts import activations as act
from trainplan.accounts import memory as memory_mod
from trainplan.accounts import parallel, step_ops
from trainplan.accounts import training_state as ts
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.catalogue.interconnect import platform
from trainplan.workload.layout_rules import embedding_units
from trainplan.planning.model_terms import checkpoint_tail, recipe_of, sharding_of
from trainplan.workload.schema import Workload

DEFAULT_HEAD_WIDTH = 64  # heads = width / 64 when a shape gives no head count (GPT-3's head width)


@dataclass(frozen=True)
class Execution:
    """How the job runs: the layout and everything per device that memory and time depend on."""

    tensor: int
    pipeline: int
    interleave: int
    context: int
    expert: int
    schedule: str
    sequence: bool
    micro_batch: int
    micro_batches: int
    sharding: str  # none, zero1, zero2, zero3, fsdp
    recompute: str
    attention: str  # flash, sdpa, eager
    recipe: ts.Recipe

    @property
    def model_split(self) -> int:
        return self.tensor * self.pipeline * self.context

    @property
    def zero_code(self) -> int:
        return parallel.SHARDING_OF_CODE.index(self.sharding)

    def name(self, data: int) -> str:
        parts = [f"{n} {v}" for n, v in (("TP", self.tensor), ("PP", self.pipeline), ("CP", self.context),
                                           ("EP", self.expert), ("DP", data)) if v > 1]
        return " x ".join(parts) or "one device"


def given(w: Workload, key: str) -> bool:
    """A value the user wrote (a file, --set) or measured, not a default."""
    return w.given(key)


def attention_kind(w: Workload) -> str:
    """The kernel: training.attention, made eager where parallel.flash_attention is switched off."""
    if given(w, "parallel.flash_attention") and not w.parallel.flash_attention:
        return "eager"
    return w.training.attention


def execution_of(w: Workload) -> Execution:
    p, t = w.parallel, w.training
    recipe, _ = recipe_of(w)
    return Execution(int(p.tensor), int(p.pipeline), int(p.interleave), int(p.context), int(p.expert), p.schedule,
                     bool(p.sequence), int(t.micro_batch), int(t.grad_accum), sharding_of(w),
                     t.recompute, attention_kind(w), recipe)


def has_shape(model: Any) -> bool:
    return model.layers is not None and model.width is not None


def _largest_of_shape(w: Workload, model: Any, total: float) -> float:
    """The largest module ZeRO-3 / FSDP gathers, for a shape given without a family or config (layers and
    width, perhaps heads and an FFN width): the standard block's count (params.count_from_shape, no
    vocabulary), the rest of model.params the embedding (and the head where untied). FSDP gathers a whole
    block; ZeRO-3 module by module: the embedding or one MLP matrix, the larger."""
    from trainplan.workload.params import count_from_shape, largest_module_params

    m = w.model
    blocks = count_from_shape(int(model.layers), int(model.width), 0, ffn_width=m.ffn_width, heads=m.heads,
                              kv_heads=m.kv_heads, tied=bool(m.tied))
    embedding = max(total - float(blocks.total), 0.0) / (1 if m.tied else 2)
    sharding = sharding_of(w)
    return float(blocks.per_layer) if sharding == "fsdp" else max(embedding, float(largest_module_params(blocks)))


def model_shape(w: Workload, model: Any, params: Any = None) -> parallel.ModelShape:
    """The layout's view of the model; a model known only by its count is one block of its parameters
    (no activations, no attention, no tensor-parallel traffic can be sized)."""
    count = getattr(model, "count", None)
    total = float(model.params)
    if not has_shape(model):
        return parallel.ModelShape(layers=1, width=0, heads=1, kv_heads=1, vocab=0, seq_len=int(w.training.seq_len),
                                   params=total, active_params=float(model.active_params), embedding_params=0.0,
                                   tied=True)  # the largest module is not known: nothing gathered is counted
    heads = int(model.heads or max(1, model.width // DEFAULT_HEAD_WIDTH))
    vocab = int(model.vocab or 0)
    head_dim = int(model.head_dim or model.width // heads)
    attention_width = heads * head_dim
    if count is not None:
        from trainplan.workload.params import attention_width as width_of_attention

        attention_width = int(width_of_attention(count))
    largest = 0.0
    matmul: float | None = None
    tail = 0.0
    if count is not None:
        from trainplan.workload.params import matmul_params

        matmul = float(matmul_params(count)[0]) * float(model.active_params) / max(float(count.active), 1.0)
        tail = checkpoint_tail(w, count)[0] * float(model.active_params) / max(float(count.active), 1.0)
        # ZeRO-3 gathers module by module: the module with the most parameters of its own (embedding,
        # head, or one MLP matrix); FSDP gathers a whole wrapped block. Scaled to model.params beside a shape.
        from trainplan.workload.params import largest_module_params

        module = largest_module_params(count)  # a layer's fused experts module, read off the module if built
        sharding = sharding_of(w)
        largest = float(count.per_layer if sharding == "fsdp" else module) * total / max(count.total, 1)
    else:
        largest = _largest_of_shape(w, model, total)
    # attention FLOPs need the head layout: counted where heads are given (or read from a config.json);
    # a shape of layers and width alone is sized for memory with width / 64 heads, and its FLOPs stay 6 N
    heads_known = w.model.heads is not None or w.model.hf_config is not None
    return parallel.ModelShape(
        layers=int(model.layers), width=int(model.width), heads=heads, kv_heads=int(model.kv_heads or heads),
        vocab=vocab, seq_len=int(w.training.seq_len), params=total, active_params=float(model.active_params),
        embedding_params=float(vocab * model.width), tied=bool(w.model.tied), experts=int(model.experts),
        experts_per_token=int(model.experts_per_token), attention_width=attention_width if heads_known else 0,
        largest_layer_params=largest, matmul_params=matmul, checkpoint_tail_params=tail)


def layer_activations(w: Workload, model: Any, terms: Any) -> tuple[parallel.LayerActivations, str]:
    """The per-layer bytes of the one activation account, split as the layout divides them, and where
    they come from in words (with a `probe model` calibration left out, why: issue 24)."""
    layers, source = _layer_activations(w, model, terms)
    why = w.left_out.get("training.activation_bytes_per_layer_token")
    return layers, f"{source}; {why}" if why else source


def _layer_activations(w: Workload, model: Any, terms: Any) -> tuple[parallel.LayerActivations, str]:
    t = w.training
    a = bytes_per_element(t.precision)
    if not has_shape(model):
        return parallel.LayerActivations(0.0, 0.0, 0.0, 0.0), "no shape given: activations cannot be sized"
    tokens = t.micro_batch * t.seq_len
    if t.activation_bytes_per_layer_token is not None:
        k = float(t.activation_bytes_per_layer_token)
        outside = float(t.activation_bytes_outside_token or 0.0)
        if terms.activation_shape is not None:
            outside += terms.activation_formula.logits_bytes / tokens
        return parallel.LayerActivations(0.0, k, k, k, 0.0, outside), terms.activations_source
    if terms.activation_shape is not None and not terms.activations_source.startswith(("b S d L k", "measured")):
        # the architecture's account (its traits, or a trace of the family's own code)
        shape, formula = terms.activation_shape, terms.activation_formula
        layer = act.layer_bytes_per_token(shape, t.seq_len, t.attention, a, attention_dropout=t.dropout,
                                          hidden_dropout=t.dropout)
        replicated = layer.norms + layer.linear_inputs + layer.hidden_dropout
        split = layer.total - replicated
        if t.recompute == "selective":  # what the account keeps for this workload (a trace says it exactly)
            selective = formula.kept_per_layer_bytes_per_token - replicated
        elif shape.family in act.families():
            selective = act.selective_kept_per_token(layer, shape, t.attention, a) - replicated
        else:  # a traced family without traits: selective drops the attention tensors that grow with S
            selective = split - layer.attention_scores - layer.attention_dropout
        outside = (formula.outside_saved_bytes + formula.logits_bytes) / tokens
        return parallel.LayerActivations(replicated, split, selective, a * shape.width, 0.0, outside), \
            terms.activations_source
    if not saved_tensors_given(w) and model.heads:
        # the default k is Korthikanti et al. 2022's GPT block: state it as the paper does, its 10 s b h of
        # norms and masks not split by TP without SP, its 5 a s^2 b of scores kept by an eager kernel and
        # dropped by selective recomputation, its output layer on the last stage
        return parallel.LayerActivations.korthikanti(
            float(model.width), float(model.heads), float(t.seq_len), float(model.vocab or 0),
            attention_scores=attention_kind(w) == "eager", bytes_per_value=a), \
            "Korthikanti et al. 2022's GPT block (model given by its shape, no family named)"
    # b S d L k: k width-sized tensors a layer (training.saved_tensors_per_layer)
    width_bytes = float(model.width) * a
    k = {r: memory_mod.retained_tensors(t.saved_tensors_per_layer, r, t.selective_keep) * width_bytes
         for r in ("none", "selective", "full")}
    return parallel.LayerActivations(0.0, k["none"], k["selective"], k["full"]), \
        "b S d L k, k = training.saved_tensors_per_layer"


def saved_tensors_given(w: Workload) -> bool:
    """Whether the workload (or a measurement) set training.saved_tensors_per_layer."""
    prov = w.provenance.get("training.saved_tensors_per_layer")
    return prov is not None and not prov.source.startswith("Korthikanti")


def state_function(w: Workload, model: Any, recipe: ts.Recipe) -> Any:
    """state_of(params_device, shard, zero_code, largest) of the one training-state account."""
    t = w.training
    if t.method == "full":
        return lambda pd, shard, code, largest: parallel.sharded_state(pd, shard, code, largest, recipe)
    from trainplan.planning.model_terms import adapter_params, kept_in_bf16_params

    share = adapter_params(w, model) / float(model.params)
    kept_share = kept_in_bf16_params(w, model) / float(model.params)

    def lora(pd: Any, shard: Any, code: Any, largest: Any) -> tuple[Any, Any, Any, Any]:
        st = ts.lora_state(pd, pd * share, recipe, t.method, pd * kept_share)
        return st.weights_bytes, st.grads_bytes, st.optimizer_bytes, np.zeros_like(np.asarray(pd, np.float64))
    return lora


def hardware(w: Workload) -> parallel.Hardware:
    """Device and network tiers: the workload's figures, else the catalogue's node platform.
    A measured link (calibration file) is already a bus bandwidth; a nominal one is scaled by
    its tier's efficiency."""
    acc, c = w.accelerator, w.cluster
    plat = platform(acc.key)
    intra = nominal_intra(w)
    if not _measured(w, "cluster.interconnect"):
        intra *= plat.intra.efficiency
    inter = nominal_inter(w)
    if not _measured(w, "cluster.node_link"):
        inter *= plat.inter.efficiency
    efficiency = w.parallel.efficiency if w.parallel.efficiency is not None else plat.matmul_efficiency
    # the step's kernels (issue 23): the accelerator's GEMM curve, or one flat efficiency where the
    # workload gives parallel.efficiency; at the share the framework reaches
    kernels = step_ops.kernel_efficiency(acc.key)
    if w.parallel.efficiency is not None:
        kernels = kernels.with_values(gemm_max=float(w.parallel.efficiency), gemm_half_intensity=0.0)
    kernels = kernels.with_flash_kernel(w.parallel.flash_kernel).scaled(
        step_ops.framework(w.parallel.framework).efficiency)
    return parallel.Hardware(
        peak_flops=acc.peak(w.training.precision), matmul_efficiency=efficiency,
        memory_bandwidth=acc.memory_bandwidth, device_memory=acc.memory, runtime_buffers=c.runtime_buffers,
        headroom=c.headroom, devices_per_node=int(c.devices_per_node or plat.devices_per_node),
        intra_bus_bandwidth=intra, intra_latency=plat.intra.latency, inter_bus_bandwidth=inter,
        inter_latency=plat.inter.latency, kernels=kernels, **size_curves(w))


def size_curves(w: Workload) -> dict[str, float]:
    """The catalogue tiers' message-size curves (collective_efficiency.toml); a link rate the workload
    gives or a calibration measured is taken as it is, at every size."""
    plat, c = platform(w.accelerator.key), w.cluster
    intra = 0.0 if c.interconnect is not None else 1.0
    inter = 0.0 if c.node_link is not None else 1.0
    return {"intra_half_bytes": intra * step_ops.half_bytes(plat.intra.key),
            "inter_half_bytes": inter * step_ops.half_bytes(plat.inter.key),
            "intra_send_half_bytes": intra * step_ops.half_bytes(plat.intra.key, "send"),
            "inter_send_half_bytes": inter * step_ops.half_bytes(plat.inter.key, "send")}


def framework_kwargs(w: Workload) -> dict[str, Any]:
    """What the workload's framework overlaps (catalogue/kernel_efficiency.toml [frameworks])."""
    fw = step_ops.framework(w.parallel.framework)
    return {"dp_overlap": fw.dp_overlap, "zero3_prefetch": fw.zero3_prefetch, "overlap_cost": fw.overlap_cost,
            "dp_node_links": fw.dp_node_links}


def _measured(w: Workload, key: str) -> bool:
    prov = w.provenance.get(key)
    return prov is not None and prov.kind == "measured"


def nominal_intra(w: Workload) -> float:
    c = w.cluster
    return float(c.interconnect if c.interconnect is not None else w.accelerator.interconnect)


def nominal_inter(w: Workload) -> float:
    c, plat = w.cluster, platform(w.accelerator.key)
    return float(c.node_link if c.node_link is not None else plat.inter.bandwidth * plat.nics_per_device)


def model_given(w: Workload) -> bool:
    """The user named a model (any model key), rather than planning the built-in reference model."""
    return any(key.startswith("model.") and given(w, key) for key in w.provenance)


def compute_source(w: Workload, model: Any, varied: frozenset[str] = frozenset()) -> str:
    """What the compute part of the step follows: "hfu", "mfu" or "predicted". The reference model's
    MFU (0.4) is part of the reference workload's definition (docs/pipeline-and-bill.md), so a plan of
    the reference model follows it; a model the user gives, with a shape, is predicted."""
    if w.cluster.hfu is not None:
        return "hfu"
    if given(w, "cluster.mfu") or "cluster.mfu" in varied or not has_shape(model) or not model_given(w):
        return "mfu"
    return "predicted"


def scaling_factor(w: Workload, count: Any) -> Any:
    """cluster.scaling_efficiency where the user gave it, more than one device and no end-to-end MFU."""
    c = w.cluster
    if not given(w, "cluster.scaling_efficiency") or c.mfu_end_to_end:
        return 1.0
    return np.where(np.asarray(count) != 1, c.scaling_efficiency, 1.0)


def run(w: Workload, model: Any, terms: Any, values: Any, hw: parallel.Hardware | None = None,
        varied: frozenset[str] = frozenset()) -> tuple[parallel.ParallelAccount, Execution, str]:
    """The account of workload `w` with numeric keys from `values` (numbers or arrays of a sweep)."""
    ex = execution_of(w)
    hw = hw or hardware(w)
    if any(k in values for k in ("cluster.runtime_buffers", "cluster.headroom")):
        hw = parallel.Hardware(**{**vars(hw), "runtime_buffers": values["cluster.runtime_buffers"],
                                  "headroom": values["cluster.headroom"]})
    if values.get("cluster.interconnect") is not None and not _measured(w, "cluster.interconnect"):
        hw = parallel.Hardware(**{**vars(hw), "intra_bus_bandwidth": values["cluster.interconnect"]
                                  * platform(w.accelerator.key).intra.efficiency})
    shape = model_shape(w, model)
    count = values["cluster.count"]
    if w.parallel.data is not None and not isinstance(count, np.ndarray):
        data: Any = w.parallel.data
    else:
        data = np.asarray(count, np.float64) / ex.model_split
        if isinstance(count, np.ndarray):  # a device count the layout does not divide has no plan
            data = np.where(np.mod(count, ex.model_split) == 0, data, np.nan)
    params = values.get("model.params", model.params)
    if isinstance(params, np.ndarray):  # a sweep of model.params scales every count of the shape
        ratio = params / float(model.params)
        shape = parallel.ModelShape(**{**vars(shape), "params": ratio * shape.params,
                                       "active_params": ratio * shape.active_params,
                                       "largest_layer_params": ratio * shape.largest_layer_params})
    activations, source = layer_activations(w, model, terms)
    state = state_bytes_per_param(w.training.precision, w.training.optimizer)
    kind = compute_source(w, model, varied)
    utilisation = None
    if kind == "hfu":
        utilisation = w.cluster.hfu
    elif kind == "mfu":
        utilisation = values["cluster.mfu"]
    account = parallel.parallel_account(
        shape, hw, tensor=ex.tensor, pipeline=ex.pipeline, interleave=ex.interleave, context=ex.context,
        expert=ex.expert, data=data, sequence_parallel=ex.sequence, micro_batch=values["training.micro_batch"],
        micro_batches=values["training.grad_accum"], recompute=ex.recompute, zero=ex.zero_code,
        schedule=ex.schedule, attention=ex.attention, activations=activations,
        activation_bytes_per_value=bytes_per_element(w.training.precision),
        state_of=state_function(w, model, ex.recipe), weight_bytes=state.weights, grad_bytes=state.grads,
        utilisation=utilisation, utilisation_kind=kind, scaling_efficiency=scaling_factor(w, count),
        end_to_end=bool(w.cluster.mfu_end_to_end),
        flops_per_token=None if terms.flops_per_token_model is None or isinstance(params, np.ndarray)
        else (terms.flops_per_token_model, terms.flops_per_token_executed),
        embedding_stages=embedding_units(shape.layers, ex.pipeline, ex.interleave) or 0,
        **framework_kwargs(w))
    return account, ex, source


#: keys whose value changes what fits, so also the micro-batch chosen: a sweep plans them one by one
#: where the micro-batch is chosen (planning/sweep.py)
FIT_KEYS = frozenset({"cluster.count", "model.params", "cluster.runtime_buffers", "cluster.headroom",
                      "training.grad_accum", "training.seq_len", "training.saved_tensors_per_layer",
                      "training.selective_keep"})


def micro_batch_is_chosen(w: Workload, model: Any) -> bool:
    return not given(w, "training.micro_batch") and has_shape(model) and model_given(w)


