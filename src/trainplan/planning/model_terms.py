"""The model terms of a plan (issue 12): activation memory, training state and FLOPs from the
architecture, in one call from planning/evaluate.py.

Which figure a plan uses, in order:
  activations  training.activation_bytes_per_layer_token (measured by `probe model`), else the
               architecture (accounts/activations.py) when the family is known (a config.json or a
               named model.family) and training.saved_tensors_per_layer was not set, else the
               older b S d L k with k = training.saved_tensors_per_layer;
  state        the named recipe (training.state_recipe, or the one precision and optimizer
               mean) under training.sharding (or training.zero), LoRA/QLoRA by training.method;
  FLOPs        6 N + 12 L d_attn S per token (model, the MFU convention) and the executed
               figure, when the architecture is known; else 6 P. Time follows cluster.hfu
               (executed FLOPs) when given, else cluster.mfu (model FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainplan.accounts import activations as act
from trainplan.accounts import compute as compute_mod
from trainplan.accounts import memory as memory_mod
from trainplan.accounts.parallel import SHARDING_OF_CODE
from trainplan.accounts import step_ops
from trainplan.accounts import training_state as ts
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.catalogue.frameworks import offers
from trainplan.errors import UserError
from trainplan.workload.schema import Workload, is_given


# Keys the architecture's terms depend on that the sweep would otherwise vectorise (model.* keys are
# looped already when a family or config is named): with a known architecture they are looped.
SCALAR_KEYS = frozenset({"training.micro_batch", "training.seq_len"})


@dataclass
class ModelTerms:
    activations: float  # bytes per device the memory account uses
    activations_source: str
    activation_report: dict[str, Any] = field(default_factory=dict)
    state_report: dict[str, Any] = field(default_factory=dict)
    flops_per_token_model: float | None = None
    flops_per_token_executed: float | None = None
    rate_flops_per_token: float | None = None  # what time follows (model with mfu, executed with hfu)
    utilisation: float | None = None  # the mfu or hfu time follows
    mfu: float | None = None
    hfu: float | None = None
    flops_report: dict[str, Any] = field(default_factory=dict)
    activation_shape: Any = None  # act.ActivationShape when the architecture is known
    activation_formula: Any = None  # act.ActivationAccount of one micro-batch, no model parallelism


def architecture_known(w: Any, count: Any) -> bool:
    return count is not None and (w.model.hf_config is not None or w.model.family != "standard")


def kernels_of(w: Any) -> str:
    """The kernels the layers run: a named framework's ("fused" for Megatron's, catalogue/kernel_efficiency.toml),
    else the model's own code ("module"): an assumed framework does not change what the model's code keeps."""
    prov = w.provenance.get("parallel.framework")
    return offers(w.parallel.framework).kernels if prov is not None and is_given(prov) else "module"


def _shape(w: Any, count: Any) -> act.ActivationShape:
    """The activation shape: the catalogue's traits for the families the formulas cover; any other
    family of a config.json is traced from its own code (measure/trace.py, meta device), or refused
    without torch and transformers, naming the extra that installs them."""
    family = count.family if count.family in act.families() else "llama"
    if w.model.hf_config is not None:
        from trainplan.measure import trace
        from trainplan.workload.params import load_hf_config

        t = w.training
        config = load_hf_config(w.base_dir / w.model.hf_config)  # the count read it already: it parses
        _check_kinds_against_config(w, config)
        # autocast over fp32 weights (HF Trainer's bf16=True) keeps fp32 and bf16 copies the formulas do
        # not count: traced where torch is installed, whatever the family
        autocast = t.state_recipe == "autocast_fp32" and trace.available()
        if config.get("model_type") in act.families() and not autocast:
            shape = act.shape_from_hf_config(config)
            return act.ActivationShape(**{**shape.__dict__, "mlp": w.model.mlp or shape.mlp,
                                          "norm": w.model.norm, "kernels": kernels_of(w)})
        traced = trace.cached_trace(config, t.micro_batch, t.attention, "autocast" if autocast else t.precision,
                                    t.recompute)
        return act.ActivationShape(str(config.get("model_type")), count.layers, count.width, count.ffn_width,
                                   count.heads, count.kv_heads, count.head_dim, count.vocab,
                                   count.experts_per_token, experts=count.experts, traced=traced)
    return act.ActivationShape(family, count.layers, count.width, count.ffn_width, count.heads, count.kv_heads,
                               count.head_dim, count.vocab, count.experts_per_token, None, w.model.mlp,
                               w.model.norm, kernels_of(w))


#: kinds of one norm: the variants differ in the precision they compute in (the implementation's), not the model
NORM_FAMILY = {"rmsnorm": "rmsnorm", "rmsnorm_fp32": "rmsnorm", "layernorm": "layernorm"}


def _check_kinds_against_config(w: Any, config: dict[str, Any]) -> None:
    """model.mlp and model.norm written beside model.hf_config say what the config's model runs (issue 29): its
    activation, and its norm up to the precision variant; a config traced from its own code takes neither."""
    m = w.model
    for key, given in (("model.mlp", m.mlp), ("model.norm", m.norm)):
        if given is None or not w.given(key):
            continue
        model_type = config.get("model_type")
        if model_type not in act.families():
            raise UserError(key, f"expected no {key} beside model.hf_config {m.hf_config}: its model_type "
                            f"{model_type!r} is traced from its own code, which decides it; got {given!r}")
        shape = act.shape_from_hf_config(config)
        family = act.traits_table()["family"][shape.family]
        if key == "model.norm":
            said = str(family["norm"])
            same = NORM_FAMILY[given] == NORM_FAMILY.get(said, said)
        else:  # a grouped-experts SwiGLU is SwiGLU per expert
            said = shape.mlp or str(family["mlp"])
            said = "swiglu" if said.startswith("swiglu") else said
            same = given == said
        if not same:
            raise UserError(key, f"expected {said!r} as model.hf_config {m.hf_config} says, got {given!r}; "
                            "give one of the two")


def legacy_activations(w: Any, model: Any) -> float:
    """b S d bytes L k with k = training.saved_tensors_per_layer (0 without a shape)."""
    t = w.training
    if model.width is None or model.layers is None:
        return 0.0  # no shape given: activations cannot be sized (said in the assumptions)
    k = memory_mod.retained_tensors(t.saved_tensors_per_layer, t.recompute, t.selective_keep)
    return memory_mod.activation_bytes(t.micro_batch, t.seq_len, model.width, model.layers,
                                       bytes_per_element(t.precision), k)


def adapter_params(w: Any, model: Any) -> float:
    """Parameters of the LoRA/QLoRA adapters (0 for a full fine-tune or pre-training)."""
    t = w.training
    if t.method == "full":
        return 0.0
    count = getattr(model, "count", None)
    if count is None:
        raise UserError("training.method", "a model shape (model.layers and model.width, or model.hf_config) "
                        "to size LoRA adapters")
    from trainplan.workload.params import PLAIN_MLP_FAMILIES

    gated = count.family not in PLAIN_MLP_FAMILIES  # a plain MLP has no gate to adapt
    return float(count.layers * ts.lora_params_per_layer(count.width, count.ffn_width, count.heads, count.kv_heads,
                                                         count.head_dim, t.lora_rank, list(t.lora_targets),
                                                         count.fused_projections, gated))


def kept_in_bf16_params(w: Any, model: Any) -> float:
    """QLoRA quantises the linear layers: the embedding, the untied head and the norms stay bf16
    (parameters, scaled to model.params; 0 without a count or outside QLoRA)."""
    count = getattr(model, "count", None)
    if w.training.method != "qlora" or count is None:
        return 0.0
    return float((count.embedding + count.lm_head + count.final_norm) * float(model.params) / max(count.total, 1))


def evaluate(w: Any, model: Any) -> ModelTerms:
    """The model terms of workload `w` (model: evaluate.ModelFacts, with .count when one was made)."""
    t = w.training
    count = getattr(model, "count", None)
    known = architecture_known(w, count)
    a = bytes_per_element(t.precision)
    prov = w.provenance.get("training.saved_tensors_per_layer")
    k_set = prov is not None and not prov.source.startswith("Korthikanti")
    terms = ModelTerms(legacy_activations(w, model), "b S d L k, k = training.saved_tensors_per_layer")

    shape = _shape(w, count) if known else None
    formula = None
    if shape is not None:
        formula = act.activation_account(shape, t.micro_batch, t.seq_len, t.attention, a, t.recompute, t.dropout)
        terms.activation_shape, terms.activation_formula = shape, formula
        terms.activation_report = {
            "activations_layers": formula.layers_bytes, "activations_outside_layers": formula.outside_saved_bytes,
            "activations_logits": formula.logits_bytes,
            "activations_per_layer_token": formula.per_layer_bytes_per_token,
            "activations_kept_per_layer_token": formula.kept_per_layer_bytes_per_token,
            "activations_formula": formula.total_bytes,
        }
        if not k_set:
            terms.activations = formula.total_bytes
            terms.activations_source = (f"architecture ({shape.family}, {t.attention}, recompute {t.recompute}; "
                                        "catalogue/activation_traits.toml)")
            if shape.traced is not None:
                terms.activations_source = (f"traced from {shape.family}'s own code (measure/trace.py, meta device, "
                                            f"{shape.traced.attention}, {shape.traced.precision}, "
                                            f"recompute {t.recompute})")
            elif count.family not in act.families():
                terms.activations_source += (f"; {count.family} has no traits of its own yet, so Llama's are used: "
                                             "measure it with `trainplan probe model`")
    if t.activation_bytes_per_layer_token is not None and model.layers is not None:
        tokens = t.micro_batch * t.seq_len
        outside = t.activation_bytes_outside_token or 0.0
        measured = tokens * (model.layers * t.activation_bytes_per_layer_token + outside)
        if formula is not None:
            measured += formula.logits_bytes
        terms.activations = measured
        terms.activations_source = "measured (training.activation_bytes_per_layer_token, trainplan probe model)"
        terms.activation_report["activations_measured"] = measured
    terms.activation_report["activations_source"] = terms.activations_source

    # training state: its bytes are the execution model's (planning/execution.py); here what it is made of
    recipe, _ = recipe_of(w)
    adapters = adapter_params(w, model)
    trainable = adapters if t.method != "full" else float(model.params)
    terms.state_report = {"state_recipe": recipe.name, "state_recipe_source": recipe.source,
                          "sharding": sharding_of(w), "trainable_params": trainable,
                          "frozen_params": float(model.params) if t.method != "full" else 0.0}

    _flops_terms(terms, w, count, known, adapters)
    return terms


def _flops_terms(terms: ModelTerms, w: Any, count: Any, known: bool, adapters: float) -> None:
    """Nothing: the FLOPs per token, the utilisation and their report set on `terms`."""
    t, c = w.training, w.cluster
    if known:
        from trainplan.workload.params import attention_width, matmul_params

        n, head = matmul_params(count)
        tail, rerun = checkpoint_tail(w, count)
        fpt = compute_mod.flops_per_token(n, count.layers, attention_width(count), t.seq_len, t.recompute,
                                          t.attention, head_params=head, tail_params=tail)
        model_fpt, executed_fpt = fpt.model, fpt.executed
        if t.method != "full":
            # frozen weights: no weight gradients; attention's backward runs whole
            share = compute_mod.CAUSAL_EXECUTED_SHARE[t.attention]
            model_fpt = ts.lora_flops_per_token(n, adapters) + fpt.attention_model
            executed_fpt = model_fpt - fpt.attention_model * (1 - share) + fpt.recompute_extra
        terms.flops_per_token_model, terms.flops_per_token_executed = model_fpt, executed_fpt
        mfu, hfu = compute_mod.utilisation(model_fpt, executed_fpt, mfu=None if c.hfu else c.mfu, hfu=c.hfu)
        terms.mfu, terms.hfu = mfu, hfu
        # one rate either way: executed / hfu = model / mfu, so compute.flops stays the model figure
        terms.rate_flops_per_token, terms.utilisation = model_fpt, mfu
        terms.flops_report = {"flops_per_token_model": model_fpt, "flops_per_token_executed": executed_fpt,
                              "matmul_params": n, "mfu": mfu, "hfu": hfu,
                              "time_follows": "hfu (executed FLOPs)" if c.hfu is not None else "mfu (model FLOPs)"}
        if t.recompute == "full":
            terms.flops_report["recompute_rerun"] = rerun
    elif c.hfu is not None:
        # without the architecture the count is 6 P per token (8 P under full recomputation): FLOPs as
        # run, so the rate follows the HFU given (the fuzzer found the None this used to leave)
        terms.utilisation, terms.hfu = c.hfu, c.hfu


def zero_sharding(zero: int, framework: str) -> str:
    """The sharding a ZeRO stage counts its state under, in `framework`: DeepSpeed's stages, except where the
    framework's stage 3 is its own (FSDP's FULL_SHARD: catalogue/kernel_efficiency.toml `zero3_sharding`)."""
    return step_ops.framework(framework).zero3_sharding if int(zero) == 3 else ts.sharding_of_zero(int(zero))


def zero_codes(zero: Any, framework: str) -> Any:
    """`zero_sharding` of ZeRO stages (numbers or a layout grid's array) as accounts/parallel's sharding codes."""
    three = SHARDING_OF_CODE.index(step_ops.framework(framework).zero3_sharding)
    return np.where(np.asarray(zero) == 3, three, zero)


def sharding_of(w: Workload) -> str:
    """The workload's sharding: training.sharding as written, else its ZeRO stage's in its framework."""
    t = w.training
    return t.sharding or zero_sharding(t.zero, w.parallel.framework)


def recipe_of(w: Workload) -> tuple[ts.Recipe, str]:
    t = w.training
    if t.state_recipe is not None:
        return ts.recipe(t.state_recipe), t.state_recipe
    legacy = state_bytes_per_param(t.precision, t.optimizer)
    name = f"{t.precision} + {t.optimizer}"
    return ts.Recipe(name, legacy.weights, legacy.grads, legacy.master, legacy.optimizer, ts.FP32_GRAD_PARTITION_BYTES,
                     legacy.source), name


def checkpoint_tail(w: Workload, count: Any) -> tuple[float, str]:
    """(tail_params, words): the layers' last-product parameters that full recomputation does not re-run
    under the workload's framework (accounts/compute.flops_per_token's `tail_params`), and how the
    recomputation is counted, in words (catalogue/checkpoint_tail.toml)."""
    fw = step_ops.framework(w.parallel.framework)
    if fw.checkpoint != "non-reentrant":
        return 0.0, f"{fw.key}'s reentrant checkpoint re-runs each layer's whole forward"
    if w.training.dropout:
        return 0.0, "a non-reentrant checkpoint re-runs the whole forward: dropout's masks are drawn again"
    if count is None:
        return 0.0, "the whole forward re-run counted (the layer's last product is not known without its shape)"
    from trainplan.workload.params import checkpoint_tail_params

    tail = checkpoint_tail_params(count)
    family = count.family.split(" (")[0]
    if tail is None:
        from trainplan.measure import trace

        if w.model.hf_config is None or not trace.available():
            return 0.0, (f"the whole forward re-run counted: {family} is not measured under a non-reentrant "
                         "checkpoint (catalogue/checkpoint_tail.toml; with torch installed a config.json's module "
                         "is measured), which may skip its last product")
        from trainplan.measure.model_probe import checkpoint_tail_params as measured_tail
        from trainplan.workload.params import load_hf_config

        skipped = measured_tail(load_hf_config(w.base_dir / w.model.hf_config))
        if skipped == 0:
            return 0.0, (f"a non-reentrant checkpoint re-runs a {family} layer's whole forward (measured on its own "
                         "module, meta device)")
        return skipped, ("a non-reentrant checkpoint re-runs each layer but the products nothing keeps the output of "
                         f"(measured on {family}'s own module, meta device: {skipped:,.0f} parameters a token)")
    if tail == 0:
        return 0.0, f"a non-reentrant checkpoint re-runs a {family} layer's whole forward (its last product's output is kept)"
    return float(tail), "a non-reentrant checkpoint re-runs each layer but its MLP down projection"
