"""Activation memory of a decoder-only transformer from its architecture (issue 12).

What one layer keeps for the backward pass, per token, as the Hugging Face
implementation keeps it; every factor is a named entry of
catalogue/activation_traits.toml with its source. With ``a`` the activation dtype's
bytes, ``d`` the width, ``f`` the FFN width, ``h``/``g`` the query/KV heads, ``k`` the
head width, ``S`` the sequence length::

    norm (each)   RMSNorm that upcasts: 4 d (fp32 input) + 4 (rstd) + a d (cast copy)
                  LayerNorm:            a d (input) + 2 a (mean, rstd)
    linear inputs a d before attention, a d before the MLP
    attention     sdpa/flash: a h k (q) + 2 a g k (k, v) + a h k (output) + 4 h (fp32 lse)
                  eager: 3 a h k (q, repeated k and v) + softmax h S (4 bytes when the
                  family upcasts, then a cast copy a h S) + a h k (o_proj input)
    MLP           n_f a f  (SwiGLU 4, exact GELU 2, GPT-2's gelu_new 5), x top-k experts
    dropout       a mask per dropout site (2 per layer, and h S per token in eager attention)

Outside the layers: token ids, the final norm, the head's input, the loss's fp32
log-softmax (4 V bytes a token), the int64 labels, rotary tables and position ids;
the bf16 logits the model returns are held too (a V) and are reported beside them.

A family without traits here (Falcon, Gemma, Phi-3, Qwen2-MoE, Qwen3, StableLM, DeepSeek, ...) is
counted from its own code instead: measure/trace.py traces the real module on the meta device and
``ActivationShape.traced`` carries the result (planning/model_terms._shape); without torch and
transformers such a family is refused with the command that installs them.

Recomputation: ``none``; ``selective`` re-runs the attention core (the S^2 tensors
and the log-sum-exp are not kept), consistently with compute.recompute_flops;
``full`` keeps one hidden state per layer plus one layer's tensors while that layer
runs its backward; the head and loss are never recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainplan import catalogue
from trainplan.errors import UserError

FP32_BYTES = 4.0  # IEEE 754 single precision
INT64_BYTES = 8.0  # torch.int64 indices
ATTENTION_KINDS = ("sdpa", "flash", "eager")
RECOMPUTE_KINDS = ("none", "selective", "full")


def traits_table() -> dict[str, Any]:
    return catalogue.table("activation_traits")


def families() -> tuple[str, ...]:
    return tuple(traits_table()["family"])


@dataclass(frozen=True)
class ActivationShape:
    """The architecture facts activation memory depends on."""

    family: str
    layers: int
    width: int
    ffn_width: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    experts_per_token: int = 1
    rotary_dim: int | None = None  # rotary width per head; None: the whole head (when the family is rotary)
    mlp: str | None = None  # an MLP kind of the catalogue; None: the family's
    norm: str | None = None  # a norm kind of the catalogue; None: the family's
    kernels: str = "module"  # "module": the family's own code; "fused": a framework's fused kernels ([fused])
    experts: int = 1  # routed experts per layer (the router keeps a logit for each)
    traced: Any = None  # a measure/trace.ActivationTrace of the real module: used instead of the formulas


@dataclass(frozen=True)
class LayerBytes:
    """Bytes per token of one layer, by part."""

    norms: float
    linear_inputs: float
    attention: float  # q, k, v, output, lse (the parts that do not grow with S)
    attention_scores: float  # the S^2 part (eager only), per token
    mlp: float
    hidden_dropout: float  # masks of the two residual-branch dropouts
    attention_dropout: float  # eager only: the S^2 mask and dropped probabilities, per token

    @property
    def total(self) -> float:
        return (self.norms + self.linear_inputs + self.attention + self.attention_scores + self.mlp
                + self.hidden_dropout + self.attention_dropout)


@dataclass(frozen=True)
class ActivationAccount:
    per_layer_bytes_per_token: float  # without recomputation
    kept_per_layer_bytes_per_token: float  # under the recomputation chosen
    layers_bytes: float  # all layers, b S tokens, under recomputation (peak: one layer re-run included)
    outside_saved_bytes: float  # saved tensors outside the layers, b S tokens
    logits_bytes: float  # the logits the model returns, held through backward
    total_bytes: float
    parts: dict[str, float] = field(default_factory=dict)  # per-token per-layer parts, no recomputation


def kinds(shape: ActivationShape) -> tuple[str, str, bool]:
    """(norm kind, MLP kind, softmax kept in fp32) the layer runs: given kinds first, else the family's,
    replaced by the catalogue's [fused] kernels where a framework runs those (Megatron, Transformer Engine)."""
    t = traits_table()
    fam = t["family"][shape.family]
    fused = t["fused"] if shape.kernels == "fused" else {"norm": {}, "mlp": {}}
    norm = shape.norm or fused["norm"].get(fam["norm"], fam["norm"])
    mlp = shape.mlp or fused["mlp"].get(fam["mlp"], fam["mlp"])
    return norm, mlp, bool(fam["eager_softmax_fp32"]) and shape.kernels != "fused"


def _norm_bytes(kind: str, d: int, a: float) -> tuple[float, float]:
    """(bytes per token of one norm, bytes of its input among them)."""
    n = traits_table()["norm"][kind]
    input_bytes = n.get("fp32_input_widths", 0) * FP32_BYTES * d if n.get("fp32_input_widths", 0) else a * d
    total = (n.get("fp32_input_widths", 0) * FP32_BYTES * d + n.get("fp32_stats", 0) * FP32_BYTES
             + n.get("act_stats", 0) * a + n.get("act_widths", 0) * a * d)
    return total, input_bytes


def layer_bytes_per_token(shape: ActivationShape, seq_len: int, attention: str = "sdpa",
                          bytes_per_value: float = 2.0, attention_dropout: bool = False,
                          hidden_dropout: bool = False, mask_bytes: float | None = None) -> LayerBytes:
    """Bytes one layer keeps per token, without recomputation (see the module docstring); for a traced
    shape, the mean traced layer's parts (the trace's own dropout settings)."""
    if shape.traced is not None:
        parts = shape.traced.parts_per_token(seq_len)
        return LayerBytes(*(parts[p] for p in ("norms", "linear_inputs", "attention", "attention_scores", "mlp",
                                               "hidden_dropout", "attention_dropout")))
    t = traits_table()
    if shape.family not in t["family"]:
        raise UserError("model.family", f"one of {', '.join(t['family'])} for the activation account, "
                        f"got {shape.family!r}")
    if attention not in ATTENTION_KINDS:
        raise UserError("training.attention", f"one of {', '.join(ATTENTION_KINDS)}, got {attention!r}")
    fam = t["family"][shape.family]
    att = t["attention"][attention]
    a, d, f = bytes_per_value, shape.width, shape.ffn_width
    hk, gk, h, s = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim, shape.heads, seq_len
    mask = t["dropout"]["mask_bytes_per_value"] if mask_bytes is None else mask_bytes

    norm_kind, mlp_kind, softmax_fp32 = kinds(shape)
    if norm_kind not in t["norm"]:
        raise UserError("model.norm", f"one of {', '.join(t['norm'])}, got {norm_kind!r}")
    one_norm, norm_input = _norm_bytes(norm_kind, d, a)
    norms = 2 * one_norm - (norm_input if fam["parallel_residual"] else 0.0)
    linear_inputs = 2 * a * d

    core = (att["q_widths"] * a * hk + att["kv_widths"] * 2 * a * gk
            + att.get("kv_repeated_widths", 0) * 2 * a * hk
            + att["output_widths"] * a * hk + att["fp32_lse_per_head"] * FP32_BYTES * h)
    separate_o = att["separate_o_input"] or (attention != "eager" and fam.get("sdpa_separate_o_input", False))
    core += a * hk if separate_o else 0.0
    if attention != "eager" and fam["fused_qkv_kept"]:
        # one of q/k/v is a view of the fused projection output, which stays alive whole
        core += a * (hk + 2 * gk) - a * gk
    scores = 0.0
    if attention == "eager":
        upcast = softmax_fp32 and a < FP32_BYTES  # in fp32 there is no cast back, no copy
        softmax = FP32_BYTES if softmax_fp32 else a
        scores = att["scores_per_head"] * h * s * (softmax + (a if upcast else 0.0))
    if mlp_kind not in t["mlp"]:
        raise UserError("model.mlp", f"one of {', '.join(t['mlp'])}, got {mlp_kind!r}")
    kind = t["mlp"][mlp_kind]
    k = shape.experts_per_token
    mlp = kind["ffn_widths"] * a * f * k
    if kind.get("routed", False):
        # transformers >= 5 runs a layer's experts as grouped matmuls over the k routed copies of each
        # token: per copy, the gathered input and the weighted output (a d each), an fp32 routing weight
        # and int64 sort indices; the router keeps fp32 logits over the E experts and its top-k picks
        mlp += k * (kind["width_copies_per_route"] * a * d + kind["fp32_per_route"] * FP32_BYTES
                    + kind["int64_per_route"] * INT64_BYTES)
        mlp += (kind["router_fp32_per_expert"] * FP32_BYTES * shape.experts + kind["router_fp32_per_token"]
                * FP32_BYTES + k * (kind["router_fp32_per_pick"] * FP32_BYTES + kind["router_int64_per_pick"]
                                    * INT64_BYTES))
    hidden = 2 * d * mask if hidden_dropout else 0.0
    # sdpa/flash drop inside the kernel and keep only the RNG state
    in_core = h * s * (mask + a) if attention_dropout and attention == "eager" else 0.0
    return LayerBytes(norms, linear_inputs, core, scores, mlp, hidden, in_core)


def selective_kept_per_token(layer: LayerBytes, shape: ActivationShape, attention: str,
                             bytes_per_value: float = 2.0) -> float:
    """Selective recomputation re-runs the attention core (Korthikanti et al. 2022): the core's
    inputs q, k, v are kept (k, v at the KV heads: repeat_kv is re-run; a fused projection kept
    alive by a view stays whole) and its output (the o_proj input); its S^2 tensors, dropout and
    log-sum-exp are not. Measured with the core under torch.utils.checkpoint (tests)."""
    fam = traits_table()["family"][shape.family]
    a = bytes_per_value
    hk, gk = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    core = a * hk + 2 * a * gk + a * hk
    if fam["fused_qkv_kept"]:
        core += a * (hk + 2 * gk) - a * gk
    return layer.total - layer.attention - layer.attention_scores - layer.attention_dropout + core


def outside_bytes_per_token(shape: ActivationShape, micro_batch: int, bytes_per_value: float = 2.0,
                            embedding_dropout: bool = False, mask_bytes: float | None = None) -> float:
    """Saved bytes per token outside the layers: ids, final norm, head input, fp32 log-softmax,
    labels, and per-sequence tables (rotary cos/sin, position ids) shared by the micro-batch."""
    t = traits_table()
    fam, out = t["family"][shape.family], t["outside"]
    a, d = bytes_per_value, shape.width
    mask = t["dropout"]["mask_bytes_per_value"] if mask_bytes is None else mask_bytes
    final_norm, _ = _norm_bytes(kinds(shape)[0], d, a)
    per_token = (out["token_id_bytes"] + final_norm + a * d + out["log_softmax_bytes"] * shape.vocab
                 + out["label_bytes"])
    if fam["learned_positions"]:
        per_token += out["position_id_bytes"] / micro_batch
    if fam["rotary"]:
        rotary = shape.rotary_dim if shape.rotary_dim is not None else shape.head_dim
        per_token += 2 * a * rotary / micro_batch  # cos and sin, one row per position
    if embedding_dropout:
        per_token += d * mask
    return per_token


def activation_account(shape: ActivationShape, micro_batch: int, seq_len: int, attention: str = "sdpa",
                       bytes_per_value: float = 2.0, recompute: str = "none", dropout: bool = False,
                       mask_bytes: float | None = None, logits_bytes_per_value: float | None = None
                       ) -> ActivationAccount:
    """Activation bytes of one micro-batch of b sequences of S tokens on one device (no model parallelism)."""
    if recompute not in RECOMPUTE_KINDS:
        raise UserError("training.recompute", f"one of {', '.join(RECOMPUTE_KINDS)}, got {recompute!r}")
    if shape.traced is not None:
        return traced_account(shape, micro_batch, seq_len, bytes_per_value, recompute, logits_bytes_per_value)
    layer = layer_bytes_per_token(shape, seq_len, attention, bytes_per_value, attention_dropout=dropout,
                                  hidden_dropout=dropout, mask_bytes=mask_bytes)
    tokens = micro_batch * seq_len
    if recompute == "none":
        kept = layer.total
        layers_bytes = tokens * shape.layers * kept
    elif recompute == "selective":
        kept = selective_kept_per_token(layer, shape, attention, bytes_per_value)
        # the core of one layer is re-materialised during that layer's backward
        layers_bytes = tokens * (shape.layers * kept + (layer.total - kept))
    else:
        kept = bytes_per_value * shape.width  # the layer's input hidden state
        layers_bytes = tokens * (shape.layers * kept + layer.total)
    outside = tokens * outside_bytes_per_token(shape, micro_batch, bytes_per_value, dropout, mask_bytes)
    if recompute == "full" and attention == "eager" and traits_table()["family"][shape.family].get(
            "full_recompute_keeps_mask", False):
        # each checkpointed layer keeps its positional inputs, the (b, 1, S, S) causal mask among them
        outside += tokens * bytes_per_value * seq_len
    logits = tokens * shape.vocab * (bytes_per_value if logits_bytes_per_value is None else logits_bytes_per_value)
    parts = {"norms": layer.norms, "linear_inputs": layer.linear_inputs, "attention": layer.attention,
             "attention_scores": layer.attention_scores, "mlp": layer.mlp, "hidden_dropout": layer.hidden_dropout,
             "attention_dropout": layer.attention_dropout}
    return ActivationAccount(layer.total, kept, layers_bytes, outside, logits, layers_bytes + outside + logits, parts)


def traced_account(shape: ActivationShape, micro_batch: int, seq_len: int, bytes_per_value: float,
                   recompute: str, logits_bytes_per_value: float | None = None) -> ActivationAccount:
    """The account of a family the formulas do not cover, from the trace of its real module
    (measure/trace.py: bytes per token alpha + beta S of every layer, heterogeneous layers each as
    built, and outside the layers). Recomputation as for the formulas: selective drops each layer's
    S-growing attention tensors and its attention dropout; full keeps one hidden state (a d) per
    layer plus the largest layer while it re-runs. The trace was taken at its own micro-batch and
    precision, which the caller matches to the plan's."""
    tr = shape.traced
    per_layer = tr.layer_bytes_per_token(seq_len)
    parts = tr.parts_per_token(seq_len)
    layer = LayerBytes(*(parts[p] for p in ("norms", "linear_inputs", "attention", "attention_scores", "mlp",
                                             "hidden_dropout", "attention_dropout")))
    tokens = micro_batch * seq_len
    mean = sum(per_layer) / max(len(per_layer), 1)
    if recompute == "none":
        kept = mean
        layers_bytes = tokens * sum(per_layer)
    elif recompute == "selective" and tr.selective_layers:
        # traced with every attention core checkpointed; the layer running its backward holds its core again
        kept_layers = tr.selective_bytes_per_token(seq_len)
        kept = sum(kept_layers) / max(len(kept_layers), 1)
        layers_bytes = tokens * (sum(kept_layers) + max((n - k for n, k in zip(per_layer, kept_layers)), default=0.0))
    elif recompute == "selective":
        dropped = layer.attention_scores + layer.attention_dropout
        kept = mean - dropped
        layers_bytes = tokens * (sum(per_layer) - len(per_layer) * dropped + dropped)
    else:
        # the hidden state each checkpoint keeps: fp32 under autocast (the residual stream stays fp32)
        hidden = FP32_BYTES if tr.precision in ("fp32", "autocast") else bytes_per_value
        kept = hidden * shape.width
        layers_bytes = tokens * (len(per_layer) * kept + max(per_layer, default=0.0))
    outside = tokens * tr.outside_bytes_per_token(seq_len) + tr.constant_bytes
    logits = tokens * shape.vocab * (tr.logits_bytes_per_value if logits_bytes_per_value is None
                                     else logits_bytes_per_value)
    return ActivationAccount(mean, kept, layers_bytes, outside, logits, layers_bytes + outside + logits,
                             {p: getattr(layer, p) for p in ("norms", "linear_inputs", "attention", "attention_scores",
                                                             "mlp", "hidden_dropout", "attention_dropout")})


# GPT-2 and GPT-NeoX name their activation; these are the catalogue's MLP kinds for them
# (transformers activations.py: "gelu" is torch's exact GELU, "gelu_new" the tanh form in Python ops).
HF_ACTIVATION_TO_MLP = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu"}
NEOX_DEFAULT_ROTARY_PCT = 0.25  # GPTNeoXConfig default rotary_pct


def shape_from_hf_config(config: dict[str, Any]) -> ActivationShape:
    """The activation shape of a config.json (families of activation_traits.toml)."""
    from trainplan.workload.params import count_from_hf_config

    count = count_from_hf_config(config)
    mlp = None
    rotary_dim = None
    if count.family == "gpt2":
        mlp = HF_ACTIVATION_TO_MLP.get(config.get("activation_function", "gelu_new"))
    elif count.family == "gpt_neox":
        mlp = HF_ACTIVATION_TO_MLP.get(config.get("hidden_act", "gelu"))
        pct = config.get("rotary_pct", config.get("partial_rotary_factor", NEOX_DEFAULT_ROTARY_PCT))
        rotary_dim = int(count.head_dim * pct)
    return ActivationShape(count.family, count.layers, count.width, count.ffn_width, count.heads, count.kv_heads,
                           count.head_dim, count.vocab, count.experts_per_token, rotary_dim, mlp,
                           experts=count.experts)
