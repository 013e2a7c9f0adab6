"""Persistent training state per device: named recipes, ZeRO 1/2/3, FSDP, LoRA and QLoRA (issue 12).

Per parameter, bytes (catalogue/state_recipes.toml): w weights, g gradients, m fp32 master,
q fp32 master gradients (the copy an fp32 optimizer steps on, where the recipe keeps one),
o optimizer moments, p the precision of the gradient partition ZeRO keeps for the optimizer.
Over n data-parallel devices, P parameters, P_layer the largest layer's parameters:

    no sharding   (w + g + m + q + o) P
    ZeRO-1, -2    w P + (g + p + m + o) P / n       DeepSpeed 0.19.8: 2 P + 18 P / n for mixed Adam
    ZeRO-3        (w + p + m + o) P / n + 4 P_layer  DeepSpeed 0.19.8: 18 P / n + 4 P_layer
    FSDP          (w + g + m + q + o) P / n + u w P_layer (u units unsharded at once)

The ZeRO lines are DeepSpeed's own estimators, no offload (estimate_zero2_model_states_mem_needs
in runtime/zero/stage_1_and_2.py, which serves stages 1 and 2, and estimate_zero3_model_states_
mem_needs in stage3.py, as of DeepSpeed 0.16 through 0.19.8): their 18 is 2 (16-bit gradients,
partitioned) + 4 (fp32 gradient partition) + 4 (fp32 master) + 8 (Adam moments); DeepSpeed 0.14
and older wrote 4 P + 16 P / n (16-bit gradients unpartitioned). The fp32 gradient partition is
the master gradient there, so q is not added again under ZeRO.

P_layer is, for ZeRO-3, the module with the most parameters of its own (DeepSpeed's
largest_layer_params: the embedding, the head, or a layer's fused experts module), for FSDP one
wrapped decoder block. LoRA keeps the frozen weights at their dtype (NF4 for QLoRA) with no
gradients or moments, and the recipe's full state for the adapters only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan import catalogue
from trainplan.errors import UserError
from trainplan.workload.schema import sharding_of_zero as schema_sharding_of_zero

# DeepSpeed reduces gradients into an fp32 partition for the optimizer (stage_1_and_2.py, stage3.py)
FP32_GRAD_PARTITION_BYTES = 4.0
SHARDING = ("none", "zero1", "zero2", "zero3", "fsdp")
METHODS = ("full", "lora", "qlora")


def table() -> dict[str, Any]:
    return catalogue.table("state_recipes")


@dataclass(frozen=True)
class Recipe:
    name: str
    weights: float
    grads: float
    master: float
    moments: float
    grad_partition: float
    source: str
    master_grads: float = 0.0  # fp32 gradient copy the optimizer steps on (0 where it reads g)

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.master_grads + self.moments


def recipe(name: str) -> Recipe:
    recipes = table()["recipe"]
    if name not in recipes:
        raise UserError("training.state_recipe", f"one of {', '.join(recipes)}, got {name!r}")
    r = recipes[name]
    return Recipe(name, float(r["weights"]), float(r["grads"]), float(r["master"]), float(r["moments"]),
                  float(r["grad_partition"]), r["source"], float(r.get("master_grads", 0.0)))


def recipes() -> tuple[str, ...]:
    return tuple(table()["recipe"])


def recipe_for(precision: str, optimizer: str) -> str:
    """The recipe the older keys (training.precision, training.optimizer) mean."""
    if optimizer == "sgd":
        return "sgd_momentum"
    return "autocast_fp32" if precision == "fp32" else "mixed_fp32_master"


@dataclass(frozen=True)
class StateAccount:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float  # master + moments (+ the fp32 gradient partition under ZeRO-2/3)
    gathered_bytes: float  # ZeRO-3 / FSDP: the unsharded layer(s) in flight
    trainable_params: float
    frozen_params: float

    @property
    def total(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.gathered_bytes


def sharded(params: float, r: Recipe, sharding: str, devices: int, largest_layer_params: float = 0.0) -> StateAccount:
    """Per-device state of `params` trainable parameters under a sharding scheme (module docstring)."""
    if sharding not in SHARDING:
        raise UserError("training.sharding", f"one of {', '.join(SHARDING)}, got {sharding!r}")
    n = devices  # numbers or numpy arrays alike (trainplan sweep)
    g = table()["gathered"]
    gathered = 0.0
    if sharding == "none":
        w, gr, opt = r.weights * params, r.grads * params, (r.master + r.master_grads + r.moments) * params
    elif sharding in ("zero1", "zero2"):
        # DeepSpeed runs stages 1 and 2 with one optimizer (stage_1_and_2.py) and one estimator:
        # the 16-bit weights whole, the 16-bit gradients, the fp32 gradient partition, master and
        # moments partitioned over the n ranks (2 P + 18 P / n for mixed Adam, DeepSpeed >= 0.16)
        w, gr = r.weights * params, r.grads * params / n
        opt = (r.master + r.moments + r.grad_partition) * params / n
    elif sharding == "zero3":
        w, gr = r.weights * params / n, r.grad_partition * params / n
        opt = (r.master + r.moments) * params / n
        gathered = g["zero3_bytes_per_layer_param"] * largest_layer_params
    else:  # fsdp
        # one sharded copy of each parameter: the master where the recipe keeps one (FSDP's flat parameter
        # stays fp32 and its 16-bit copy exists only gathered), its gradient in the same dtype, the moments;
        # the separate 16-bit weights and fp32 gradient buffers of other frameworks are not kept
        stored = r.master or r.weights
        w, gr = stored * params / n, (r.master or r.grads) * params / n
        opt = r.moments * params / n
        gathered = (g["fsdp_units_in_flight"] * r.weights + fsdp_backward_transient_bytes(r)) * largest_layer_params
    return StateAccount(w, gr, opt, gathered, params, 0.0)


def fsdp_backward_transient_bytes(r: Recipe) -> float:
    """Bytes a parameter of the largest unit that FSDP's backward holds beside the gathered weights: the unit's
    unsharded gradient (the compute dtype, r.weights) and its reduce-scatter input (the reduce dtype). On a
    GPU the reduce-scatter runs on its own stream while the next unit's backward computes, so both overlap
    the two units in flight: 2 x 2 + 2 + 4 = 10 bytes a parameter of the unit for bf16 with fp32 reduction."""
    return r.weights + float(table()["gathered"]["fsdp_reduce_bytes"])


sharding_of_zero = schema_sharding_of_zero  # declared with training.zero (workload/schema.py)


# ---------------------------------------------------------------- LoRA / QLoRA

#: what each target name adapts in one layer: (input width, output width) in terms of the shape
TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


#: Fused projections a family's module holds (one matrix for several targets): "qkv" one d -> (h + 2 g) k
#: matrix for q, k and v (Phi-3 qkv_proj, Falcon and GPT-NeoX query_key_value, GPT-2 c_attn), "gate_up"
#: one d -> 2 f matrix for gate and up (Phi-3 gate_up_proj). A LoRA target on any of them adapts the
#: fused matrix once, as peft does with its module name.
FUSED_GROUPS = {"qkv": ("q", "k", "v"), "gate_up": ("gate", "up")}


def lora_params_per_layer(width: int, ffn_width: int, heads: int, kv_heads: int, head_dim: int, rank: int,
                          targets: tuple[str, ...] | list[str], fused: tuple[str, ...] = (),
                          gated: bool = True) -> int:
    """Adapter parameters of one layer: r (in + out) per adapted matrix (A is r x in, B out x r).
    `fused`: the family's fused projections (FUSED_GROUPS); `gated`: whether the MLP has a gate
    (a plain MLP has no gate matrix to adapt)."""
    hk, gk = heads * head_dim, kv_heads * head_dim
    shapes = {"q": (width, hk), "k": (width, gk), "v": (width, gk), "o": (hk, width),
              "gate": (width, ffn_width), "up": (width, ffn_width), "down": (ffn_width, width)}
    for t in targets:
        if t not in shapes:
            raise UserError("training.lora_targets", f"names among {', '.join(TARGETS)}, got {t!r}")
    chosen = set(targets)
    if not gated:
        chosen.discard("gate")
    total = 0
    for group in fused:
        members = FUSED_GROUPS[group]
        if chosen & set(members):
            outputs = sum(shapes[m][1] for m in members if gated or m != "gate")
            total += rank * (width + outputs)
        chosen -= set(members)
    for t in TARGETS:
        if t in chosen:
            i, o = shapes[t]
            total += rank * (i + o)
    return total


def frozen_bytes_per_param(method: str) -> float:
    """Bytes a frozen weight is kept in: bf16 for LoRA; for QLoRA, bitsandbytes' NF4 with double
    quantisation (catalogue/state_recipes.toml [lora]): 4 bits a weight, its block's absmax quantised
    to 8 bits (one byte per block of 64 weights), and one fp32 scale per 256 of those absmax values:
    0.5 + 1/64 + 4/(64 x 256) = 0.515869 bytes a weight."""
    lo = table()["lora"]
    if method == "qlora":
        block = lo["nf4_block_size"]
        return (lo["frozen_bytes_nf4"] + lo["nf4_absmax_quantised_bytes"] / block
                + lo["nf4_absmax_scale_bytes"] / (block * lo["nf4_absmax_block_size"]))
    return float(lo["frozen_bytes_bf16"])


def lora_state(base_params: float, adapter_params: float, r: Recipe, method: str,
               unquantised_params: float = 0.0) -> StateAccount:
    """Frozen base at its dtype, no gradient or moments; the adapters with the recipe's full state.
    QLoRA quantises the linear layers only: `unquantised_params` (the embedding, the output head,
    norms: bitsandbytes' Linear4bit replaces nn.Linear alone, and transformers keeps lm_head out)
    stay bf16."""
    if method not in ("lora", "qlora"):
        raise UserError("training.method", f"one of {', '.join(METHODS)}, got {method!r}")
    kept = unquantised_params if method == "qlora" else 0.0
    frozen = frozen_bytes_per_param(method) * (base_params - kept) + table()["lora"]["frozen_bytes_bf16"] * kept
    return StateAccount(frozen + r.weights * adapter_params, r.grads * adapter_params,
                        (r.master + r.moments) * adapter_params, 0.0, adapter_params, base_params)


def lora_flops_per_token(matmul_params: float, adapter_params: float) -> float:
    """Forward 2 N + 2 N_a; backward passes gradients through the frozen weights (2 N) but
    computes no weight gradient for them; the adapters take the full 4 N_a: 4 N + 6 N_a."""
    return 4.0 * matmul_params + 6.0 * adapter_params
