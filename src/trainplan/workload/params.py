"""Exact parameter counts of decoder-only transformers, from a shape or a Hugging Face config.json.

Two ways in (docs/parameter-counts.md):

* ``count_from_shape(layers, width, vocab, ...)``. With ``family="standard"`` and
  no FFN width this is the textbook *approximation* of docs/parameter-counts.md: ``12 d^2`` per
  block (attention ``4 d^2`` = q, k, v, o, each d×d; FFN ``8 d^2`` = two d×4d
  matrices), no biases, no norms, plus the token embedding ``V d`` (and a
  second ``V d`` when the output head is untied). It is within a few per cent
  of real models, not exact for any of them. Naming a family (``"llama"``,
  ``"gpt2"``, ...) or giving an FFN width or KV heads makes the count exact for
  that family's implementation: gated MLPs, grouped-query attention, biases and
  norms included.
* ``count_from_hf_config(config)`` reads a ``config.json`` dict and counts what
  ``transformers.AutoModelForCausalLM.from_config`` builds, to the parameter.
  Keys the file leaves out take the defaults of the family's transformers
  configuration class (listed below with their source), because that is what
  the real implementation does with them.

Everything here is pure integer arithmetic, except ``load_hf_config``, which
reads the file. Bad input raises ``trainplan.errors.UserError``.

How one block is counted (``d`` width, ``f`` FFN width, ``h`` heads, ``g`` KV
heads, ``k`` head width, ``E`` experts; a linear ``a -> b`` holds ``a b``
weights plus ``b`` biases when it has them)::

    attention   q: d -> h k    k, v: d -> g k (each)    o: h k -> d
    MLP         gated (SwiGLU):  gate, up: d -> f, down: f -> d   (3 d f)
                plain (GELU):    up: d -> f, down: f -> d          (2 d f)
    MoE         router d -> E (no bias) and E copies of the gated MLP
    norms       2 per block; RMSNorm: d weights, LayerNorm: d weights + d biases

The model adds the token embedding ``V d`` (GPT-2 also a learned position
embedding ``P d``), one final norm, and an output head ``V d`` unless it is
tied to the embedding (then the same tensor is stored once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Final

from trainplan.errors import UserError

# --------------------------------------------------------------------------- #
# Named constants (sources in the comments).
# --------------------------------------------------------------------------- #

#: Families ``count_from_shape`` knows. "standard" is the docs/parameter-counts.md textbook block.
FAMILIES: Final[tuple[str, ...]] = (
    "standard",
    "llama",
    "mistral",
    "qwen2",
    "gpt2",
    "gpt_neox",
    "mixtral",
)

#: ``model_type`` values of config.json that ``count_from_hf_config`` supports.
SUPPORTED_MODEL_TYPES: Final[tuple[str, ...]] = (
    "llama",
    "mistral",
    "qwen2",
    "gpt2",
    "gpt_neox",
    "mixtral",
)

#: FFN width as a multiple of the model width when none is given: the original
#: Transformer (Vaswani et al. 2017, d_ff = 4 d_model), GPT-2 (``n_inner=None``
#: means ``4 * n_embd`` in transformers' modeling_gpt2.py) and GPT-NeoX/Pythia.
#: With it the standard block is 4 d^2 + 2·d·4d = 12 d^2 (docs/parameter-counts.md).
CLASSIC_FFN_MULTIPLE: Final[int] = 4

#: Weight matrices of a gated (SwiGLU) MLP: gate, up, down (Shazeer 2020; Llama).
GATED_MLP_MATRICES: Final[int] = 3
#: Weight matrices of a plain MLP: up, down.
PLAIN_MLP_MATRICES: Final[int] = 2

#: Normalisation layers in one pre-norm block: before attention and before the MLP.
NORMS_PER_BLOCK: Final[int] = 2
#: Parameters per channel of an RMSNorm (a weight) and of a LayerNorm (weight and bias).
RMSNORM_PARAMS_PER_CHANNEL: Final[int] = 1
LAYERNORM_PARAMS_PER_CHANNEL: Final[int] = 2
#: The docs/parameter-counts.md approximation counts no norm parameters.
NO_NORM_PARAMS: Final[int] = 0

#: GPT-2's cross-attention (``add_cross_attention``) projects keys and values of
#: the encoder states together: ``c_attn`` is d -> 2d (modeling_gpt2.py).
GPT2_CROSS_KV_PROJECTIONS: Final[int] = 2

#: Learned positions of GPT-2 when a shape gives none: ``n_positions`` = 1024 of
#: the released GPT-2 models (Radford et al. 2019; GPT2Config default).
GPT2_DEFAULT_POSITIONS: Final[int] = 1024

# Defaults of the transformers configuration classes, used for keys a
# config.json leaves out (transformers 5.x, models/<family>/configuration_<family>.py;
# unchanged since 4.40 for these keys). ``None`` for num_key_value_heads means
# "as many as the attention heads"; for head_dim, "width / heads".
LLAMA_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
}
MISTRAL_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": None,
    "tie_word_embeddings": False,
}
QWEN2_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 22016,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "head_dim": None,
    "tie_word_embeddings": False,
}
MIXTRAL_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": None,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
}
GPT_NEOX_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 50432,
    "hidden_size": 6144,
    "intermediate_size": 24576,
    "num_hidden_layers": 44,
    "num_attention_heads": 64,
    "attention_bias": True,
    "tie_word_embeddings": False,
}
GPT2_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "n_inner": None,
    "add_cross_attention": False,
    "tie_word_embeddings": True,
}
#: GPT2Config.attribute_map: the generic names a GPT-2 config.json may use instead.
GPT2_KEY_ALIASES: Final[dict[str, str]] = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
}
#: MixtralConfig.attribute_map.
MIXTRAL_KEY_ALIASES: Final[dict[str, str]] = {"num_local_experts": "num_experts"}

#: The config.json names of each shape workload key, the generic (Llama-style) name first, the names
#: other families write after it: the one table the count's readers and the range check derive from.
CONFIG_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "model.layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "model.width": ("hidden_size", "n_embd", "d_model"),
    "model.vocab": ("vocab_size",),
    "model.ffn_width": ("intermediate_size", "ffn_hidden_size"),
    "model.heads": ("num_attention_heads", "n_head"),
    "model.kv_heads": ("num_key_value_heads",),
    "model.experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "model.experts_per_token": ("num_experts_per_tok",),
}
#: Each config field and the workload key it stands for: the config is held to the same plausible range
#: as the key (workload.schema.PLAUSIBLE_RANGES), so that a config saying 10^13 layers is refused at the
#: boundary instead of building a per-layer list of 10^13 entries.
CONFIG_SHAPE_KEYS: Final[dict[str, str]] = {name: key for key, names in CONFIG_NAMES.items() for name in names}


# --------------------------------------------------------------------------- #
# Public result.
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class ParamCount:
    """Parameters of a model, split the way memory and compute accounts need them.

    ``total = embedding + layers * per_layer + final_norm + lm_head``.
    ``heads``/``kv_heads``/``head_dim`` describe attention; a shape given without
    heads is recorded as one head of the full width, which leaves every count
    here and the KV-cache width ``kv_heads * head_dim`` (= width) unchanged.
    """

    total: int  # every parameter stored (all experts)
    active: int  # parameters used per token (MoE: shared + top-k experts); == total for dense
    embedding: int  # input token embedding (+ learned position embedding if any)
    lm_head: int  # output projection, 0 when tied to the embedding
    per_layer: int  # parameters of one transformer block (all experts)
    family: str  # "standard", "llama", "mistral", "qwen2", "gpt2", "gpt_neox", "mixtral"
    layers: int
    width: int
    vocab: int
    ffn_width: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    final_norm: int = 0  # the norm after the last block (0 for "standard")
    experts: int = 1  # MLP experts per block (1 for dense)
    experts_per_token: int = 1  # experts each token is routed to (1 for dense)
    matmul_active: int | None = None  # N of 6 N (set where the generic rule does not fit); see matmul_params
    head_params: int | None = None  # the output head's matmul parameters when matmul_active is set
    # issue 24: read off the real module where transformers builds it (count_with_transformers)
    groups: dict[str, int] | None = None  # parameters by group (PARAMETER_GROUPS), shared tensors once
    attention_width_value: int | None = None  # d_attn of the attention FLOPs; see attention_width
    largest_module: int | None = None  # the module with most parameters of its own (DeepSpeed ZeRO-3)
    # per layer: KV values a token adds, cached-token cap (None: all); from a config.json, not part of the count
    kv_layers: tuple[tuple[int, int | None], ...] | None = field(default=None, compare=False)
    fused_projections: tuple[str, ...] = field(default=(), compare=False)  # accounts/training_state.FUSED_GROUPS


# --------------------------------------------------------------------------- #
# The one counting engine: a resolved architecture in, a ParamCount out.
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _Architecture:
    """Every choice that changes the count, resolved (no defaults left)."""

    family: str
    layers: int
    width: int
    vocab: int
    ffn_width: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    q_bias: bool
    k_bias: bool
    v_bias: bool
    o_bias: bool
    mlp_bias: bool
    mlp_matrices: int  # GATED_MLP_MATRICES or PLAIN_MLP_MATRICES
    norm_params_per_channel: int  # RMSNorm, LayerNorm or none
    learned_positions: int  # rows of a learned position embedding (0: none)
    experts: int
    experts_per_token: int
    router: bool  # a d -> experts routing matrix per block
    cross_attention: bool  # GPT-2 add_cross_attention


def _linear(inputs: int, outputs: int, bias: bool) -> int:
    """Parameters of a linear map inputs -> outputs (weights, then biases if any)."""
    return inputs * outputs + (outputs if bias else 0)


def _count(arch: _Architecture) -> ParamCount:
    d = arch.width
    query_width = arch.heads * arch.head_dim
    kv_width = arch.kv_heads * arch.head_dim

    attention = (
        _linear(d, query_width, arch.q_bias)
        + _linear(d, kv_width, arch.k_bias)
        + _linear(d, kv_width, arch.v_bias)
        + _linear(query_width, d, arch.o_bias)
    )
    gated = arch.mlp_matrices == GATED_MLP_MATRICES
    one_mlp = _linear(d, arch.ffn_width, arch.mlp_bias) * (2 if gated else 1) + _linear(
        arch.ffn_width, d, arch.mlp_bias
    )
    router = d * arch.experts if arch.router else 0
    norm = d * arch.norm_params_per_channel
    block_norms = NORMS_PER_BLOCK * norm
    cross = 0
    if arch.cross_attention:
        cross = (
            _linear(d, GPT2_CROSS_KV_PROJECTIONS * d, True)  # c_attn (keys, values)
            + _linear(d, d, True)  # q_attn
            + _linear(d, d, True)  # c_proj
            + norm  # ln_cross_attn
        )

    shared_per_layer = attention + router + block_norms + cross
    per_layer = shared_per_layer + arch.experts * one_mlp
    active_per_layer = shared_per_layer + arch.experts_per_token * one_mlp

    embedding = arch.vocab * d + arch.learned_positions * d
    lm_head = 0 if arch.tied else arch.vocab * d
    final_norm = norm
    outside_blocks = embedding + final_norm + lm_head
    return ParamCount(
        total=outside_blocks + arch.layers * per_layer,
        active=outside_blocks + arch.layers * active_per_layer,
        embedding=embedding,
        lm_head=lm_head,
        per_layer=per_layer,
        family=arch.family,
        layers=arch.layers,
        width=d,
        vocab=arch.vocab,
        ffn_width=arch.ffn_width,
        heads=arch.heads,
        kv_heads=arch.kv_heads,
        head_dim=arch.head_dim,
        tied=arch.tied,
        final_norm=final_norm,
        experts=arch.experts,
        experts_per_token=arch.experts_per_token,
    )


# --------------------------------------------------------------------------- #
# What each family builds (transformers' modeling_<family>.py).
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _FamilyTraits:
    mlp_matrices: int
    norm_params_per_channel: int
    qkv_bias: bool  # default bias of q, k, v
    o_bias: bool  # default bias of the attention output
    mlp_bias: bool  # default bias of the MLP
    attention_bias_settable: bool  # honours an ``attention_bias`` flag
    mlp_bias_settable: bool  # honours an ``mlp_bias`` flag
    mixture_of_experts: bool  # takes experts > 1
    always_routed: bool  # has a router even over a single expert
    learned_positions: bool
    grouped_query: bool  # k/v may have fewer heads than q
    separate_head_dim: bool  # head_dim may differ from width / heads


_TRAITS: Final[dict[str, _FamilyTraits]] = {
    # docs/parameter-counts.md: four d×d attention matrices, two-matrix FFN, no biases, no norms.
    "standard": _FamilyTraits(
        mlp_matrices=PLAIN_MLP_MATRICES,
        norm_params_per_channel=NO_NORM_PARAMS,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        attention_bias_settable=False,
        mlp_bias_settable=False,
        mixture_of_experts=True,
        always_routed=False,
        learned_positions=False,
        grouped_query=True,
        separate_head_dim=False,
    ),
    # LlamaAttention/LlamaMLP: bias=config.attention_bias / config.mlp_bias; RMSNorm.
    "llama": _FamilyTraits(
        mlp_matrices=GATED_MLP_MATRICES,
        norm_params_per_channel=RMSNORM_PARAMS_PER_CHANNEL,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        attention_bias_settable=True,
        mlp_bias_settable=True,
        mixture_of_experts=False,
        always_routed=False,
        learned_positions=False,
        grouped_query=True,
        separate_head_dim=True,
    ),
    # MistralAttention/MistralMLP: bias=False hard-coded (no bias flag is read).
    "mistral": _FamilyTraits(
        mlp_matrices=GATED_MLP_MATRICES,
        norm_params_per_channel=RMSNORM_PARAMS_PER_CHANNEL,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        attention_bias_settable=False,
        mlp_bias_settable=False,
        mixture_of_experts=False,
        always_routed=False,
        learned_positions=False,
        grouped_query=True,
        separate_head_dim=True,
    ),
    # Qwen2Attention: q/k/v bias=True, o_proj bias=False; MLP without biases.
    "qwen2": _FamilyTraits(
        mlp_matrices=GATED_MLP_MATRICES,
        norm_params_per_channel=RMSNORM_PARAMS_PER_CHANNEL,
        qkv_bias=True,
        o_bias=False,
        mlp_bias=False,
        attention_bias_settable=False,
        mlp_bias_settable=False,
        mixture_of_experts=False,
        always_routed=False,
        learned_positions=False,
        grouped_query=True,
        separate_head_dim=True,
    ),
    # GPT-2: Conv1D layers all with biases, LayerNorm, learned positions.
    "gpt2": _FamilyTraits(
        mlp_matrices=PLAIN_MLP_MATRICES,
        norm_params_per_channel=LAYERNORM_PARAMS_PER_CHANNEL,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        attention_bias_settable=False,
        mlp_bias_settable=False,
        mixture_of_experts=False,
        always_routed=False,
        learned_positions=True,
        grouped_query=False,
        separate_head_dim=False,
    ),
    # GPT-NeoX: fused query_key_value and dense with bias=config.attention_bias,
    # MLP nn.Linear with biases, LayerNorm; rotary embeddings hold no parameters.
    "gpt_neox": _FamilyTraits(
        mlp_matrices=PLAIN_MLP_MATRICES,
        norm_params_per_channel=LAYERNORM_PARAMS_PER_CHANNEL,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        attention_bias_settable=True,
        mlp_bias_settable=False,
        mixture_of_experts=False,
        always_routed=False,
        learned_positions=False,
        grouped_query=False,
        separate_head_dim=False,
    ),
    # Mixtral: Mistral attention (no biases), router without bias (present even
    # over one expert), SwiGLU experts.
    "mixtral": _FamilyTraits(
        mlp_matrices=GATED_MLP_MATRICES,
        norm_params_per_channel=RMSNORM_PARAMS_PER_CHANNEL,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        attention_bias_settable=False,
        mlp_bias_settable=False,
        mixture_of_experts=True,
        always_routed=True,
        learned_positions=False,
        grouped_query=True,
        separate_head_dim=True,
    ),
}


# --------------------------------------------------------------------------- #
# Input checks.
# --------------------------------------------------------------------------- #


def _layer_list(value: object, key: str, layers: int) -> set[int]:
    """A config's list of layer indices (Qwen2-MoE's mlp_only_layers): each a whole number from 0 to
    layers - 1; an int, a string or nested lists are refused at the key (issue 29)."""
    if value is None:
        return set()
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise UserError(key, f"expected a list of layer indices such as [0, 1], got {value!r}"[:200])
    bad = next((i for i in value if not 0 <= i < layers), None)
    if bad is not None:
        raise UserError(key, f"expected layer indices from 0 to {layers - 1}, got {bad}")
    return set(value)


def _positive_int(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(key, f"a positive whole number, got {value!r}")
    return value


def _non_negative_int(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(key, f"a whole number, 0 or more, got {value!r}")
    return value


def _flag(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(key, f"true or false, got {value!r}")
    return value


def _ffn_width(ffn_width: int | None, traits: _FamilyTraits, family: str, width: int,
               key: Callable[[str], str]) -> int:
    """The FFN width given, or the classic multiple of the width where the family's MLP is not gated."""
    if ffn_width is None:
        if traits.mlp_matrices == GATED_MLP_MATRICES:
            raise UserError(
                key("ffn_width"),
                f"an FFN (intermediate) width for family {family}: gated MLPs have no conventional default",
            )
        ffn_width = CLASSIC_FFN_MULTIPLE * width
    return _positive_int(ffn_width, key("ffn_width"))


def _attention_heads(heads: int | None, kv_heads: int | None, head_dim: int | None, traits: _FamilyTraits,
                     family: str, width: int, key: Callable[[str], str]) -> tuple[int, int, int]:
    """(heads, KV heads, head width) checked against the width and the family's attention."""
    if heads is None:
        if kv_heads is not None:
            raise UserError(key("heads"), "the number of attention heads, needed with kv_heads")
        if head_dim is not None:
            raise UserError(key("heads"), "the number of attention heads, needed with head_dim")
        heads = 1  # one head of the full width: the count does not depend on the split
    heads = _positive_int(heads, key("heads"))
    kv_heads = heads if kv_heads is None else _positive_int(kv_heads, key("kv_heads"))
    if kv_heads != heads:
        if not traits.grouped_query:
            raise UserError(key("kv_heads"), f"equal to heads ({heads}): family {family} has no grouped-query attention")
        if kv_heads > heads or heads % kv_heads:
            raise UserError(key("kv_heads"), f"a divisor of heads ({heads}), got {kv_heads}")

    if head_dim is None:
        if width % heads:
            raise UserError(key("heads"), f"a divisor of the width ({width}), got {heads}")
        head_dim = width // heads
    else:
        head_dim = _positive_int(head_dim, key("head_dim"))
        if not traits.separate_head_dim and head_dim * heads != width:
            raise UserError(key("head_dim"), f"width / heads = {width // heads} for family {family}")
    return heads, kv_heads, head_dim


def _biases(attention_bias: bool | None, mlp_bias: bool | None, traits: _FamilyTraits, family: str,
            key: Callable[[str], str]) -> tuple[bool, bool, bool]:
    """(QKV bias, output bias, MLP bias): the family's, or the ones given where the family lets them be set."""
    qkv_bias, o_bias, mlp_has_bias = traits.qkv_bias, traits.o_bias, traits.mlp_bias
    if attention_bias is not None:
        if not traits.attention_bias_settable:
            raise UserError(key("attention_bias"), f"left out: family {family} fixes its attention biases")
        qkv_bias = o_bias = _flag(attention_bias, key("attention_bias"))
    if mlp_bias is not None:
        if not traits.mlp_bias_settable:
            raise UserError(key("mlp_bias"), f"left out: family {family} fixes its MLP biases")
        mlp_has_bias = _flag(mlp_bias, key("mlp_bias"))
    return qkv_bias, o_bias, mlp_has_bias


def _learned_positions(positions: int | None, traits: _FamilyTraits, family: str,
                       key: Callable[[str], str]) -> int:
    """Positions of the learned position embedding (0 for a family without one)."""
    learned_positions = 0
    if traits.learned_positions:
        learned_positions = _positive_int(
            GPT2_DEFAULT_POSITIONS if positions is None else positions, key("positions")
        )
    elif positions is not None:
        raise UserError(key("positions"), f"left out: family {family} has no learned position embedding")
    return learned_positions


def _resolve(
    *,
    family: str,
    layers: int,
    width: int,
    vocab: int,
    ffn_width: int | None,
    heads: int | None,
    kv_heads: int | None,
    head_dim: int | None,
    tied: bool,
    attention_bias: bool | None,
    mlp_bias: bool | None,
    positions: int | None,
    experts: int,
    experts_per_token: int,
    cross_attention: bool = False,
    keys: dict[str, str] | None = None,
) -> _Architecture:
    """Check a shape and fill in the family's choices. ``keys`` maps argument
    names to the names the user wrote (config.json keys), for error messages."""
    name = dict(keys or {})

    def key(argument: str) -> str:
        return name.get(argument, argument)

    if family not in _TRAITS:
        raise UserError(key("family"), f"one of {', '.join(FAMILIES)}, got {family!r}")
    traits = _TRAITS[family]
    layers = _positive_int(layers, key("layers"))
    width = _positive_int(width, key("width"))
    vocab = _non_negative_int(vocab, key("vocab"))  # 0: a shape without a vocabulary, no embedding counted
    tied = _flag(tied, key("tied"))
    experts = _positive_int(experts, key("experts"))
    experts_per_token = _positive_int(experts_per_token, key("experts_per_token"))

    ffn_width = _ffn_width(ffn_width, traits, family, width, key)
    heads, kv_heads, head_dim = _attention_heads(heads, kv_heads, head_dim, traits, family, width, key)
    qkv_bias, o_bias, mlp_has_bias = _biases(attention_bias, mlp_bias, traits, family, key)
    learned_positions = _learned_positions(positions, traits, family, key)
    if experts > 1 and not traits.mixture_of_experts:
        raise UserError(key("experts"), f"1: family {family} is dense (mixtral and standard take experts)")
    if experts_per_token > experts:
        raise UserError(key("experts_per_token"), f"at most experts ({experts}), got {experts_per_token}")

    return _Architecture(
        family=family,
        layers=layers,
        width=width,
        vocab=vocab,
        ffn_width=ffn_width,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        tied=tied,
        q_bias=qkv_bias,
        k_bias=qkv_bias,
        v_bias=qkv_bias,
        o_bias=o_bias,
        mlp_bias=mlp_has_bias,
        mlp_matrices=traits.mlp_matrices,
        norm_params_per_channel=traits.norm_params_per_channel,
        learned_positions=learned_positions,
        experts=experts,
        experts_per_token=experts_per_token,
        router=traits.always_routed or experts > 1,
        cross_attention=cross_attention,
    )


# --------------------------------------------------------------------------- #
# Public API.
# --------------------------------------------------------------------------- #


def count_from_shape(
    layers: int,
    width: int,
    vocab: int,
    ffn_width: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    family: str = "standard",
    tied: bool = True,
    experts: int = 1,
    experts_per_token: int = 1,
    *,
    head_dim: int | None = None,
    attention_bias: bool | None = None,
    mlp_bias: bool | None = None,
    positions: int | None = None,
) -> ParamCount:
    """Parameters of a decoder-only transformer of the given shape.

    ``family="standard"`` without ``ffn_width`` is the approximation of docs/parameter-counts.md,
    ``12 d^2`` per layer plus ``V d`` (``2 V d`` untied); with ``ffn_width`` or
    ``kv_heads`` it generalises to ``2 d·h k + 2 d·g k + 2 d f`` per layer, still
    without biases or norms. Any other family is counted exactly as its
    transformers implementation builds it. Gated families (llama, mistral,
    qwen2, mixtral) need ``ffn_width``; gpt2 and gpt_neox default it to ``4 d``.

    ``vocab=0`` counts the blocks alone (a shape given without a vocabulary:
    no embedding, no head). ``heads`` matters only with ``kv_heads`` (grouped-query attention) or
    ``head_dim``. ``experts``/``experts_per_token`` make a mixture of experts
    (families mixtral and standard): a router of ``d × experts`` per layer and
    ``experts`` copies of the MLP, of which ``experts_per_token`` count as active.

    Keyword-only refinements: ``head_dim`` (llama, mistral, qwen2, mixtral),
    ``attention_bias`` (llama, gpt_neox), ``mlp_bias`` (llama), ``positions``
    (gpt2's learned position embedding, 1024 when not given).
    """
    arch = _resolve(
        family=family,
        layers=layers,
        width=width,
        vocab=vocab,
        ffn_width=ffn_width,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        tied=tied,
        attention_bias=attention_bias,
        mlp_bias=mlp_bias,
        positions=positions,
        experts=experts,
        experts_per_token=experts_per_token,
    )
    return _count(arch)


def _value(config: dict[str, Any], key: str, defaults: dict[str, Any], aliases: dict[str, str] | None = None) -> Any:
    """``config[key]``, else its alias, else the configuration class's default."""
    if key in config:
        return config[key]
    alias = (aliases or {}).get(key)
    if alias is not None and alias in config:
        return config[alias]
    return defaults[key]


def _written_name(config: dict[str, Any], key: str, aliases: dict[str, str] | None = None) -> str:
    """The name the file used for ``key`` (for error messages)."""
    alias = (aliases or {}).get(key)
    if key not in config and alias is not None and alias in config:
        return alias
    return key


def count_from_hf_config(config: dict[str, Any]) -> ParamCount:
    """Parameters of ``AutoModelForCausalLM.from_config(config)``, exactly.

    ``config`` is the parsed ``config.json`` of a Hugging Face model whose
    ``model_type`` is one of ``SUPPORTED_MODEL_TYPES``. Keys it leaves out take
    the defaults of the transformers configuration class; keys that hold no
    parameters (rope, dropout, sliding window, ``use_parallel_residual``...) are
    ignored. ``tie_word_embeddings`` is honoured for every family.
    """
    if not isinstance(config, dict):
        raise UserError("config", f"a JSON object (the contents of config.json), got {type(config).__name__}")
    import dataclasses

    count = _count_hf_config(config)
    fused = count.fused_projections or FUSED_PROJECTIONS.get(str(config.get("model_type")), ())
    return dataclasses.replace(count, kv_layers=kv_layout_of_config(config, count), fused_projections=fused)


#: The fused projections of the families counted by hand, as their modules are built (modeling_<family>.py):
#: Phi-3 qkv_proj and gate_up_proj, Falcon and GPT-NeoX query_key_value, GPT-2 c_attn.
FUSED_PROJECTIONS: Final[dict[str, tuple[str, ...]]] = {"phi3": ("qkv", "gate_up"), "falcon": ("qkv",),
                                                       "gpt_neox": ("qkv",), "gpt2": ("qkv",)}
#: Families whose MLP is plain (up, down; no gate), as their modules are built.
PLAIN_MLP_FAMILIES: Final[tuple[str, ...]] = ("standard", "gpt2", "gpt_neox", "falcon", "gptj")
#: Module names that are a fused projection, in any family transformers builds (read_module).
FUSED_MODULE_NAMES: Final[dict[str, str]] = {"qkv_proj": "qkv", "query_key_value": "qkv", "c_attn": "qkv",
                                             "Wqkv": "qkv", "W_pack": "qkv", "gate_up_proj": "gate_up"}


def _count_hf_config(config: dict[str, Any]) -> ParamCount:
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):  # a list is not a family (issue 29)
        raise UserError("model_type", f"the name of a model family (text), got {type(model_type).__name__}")
    _check_activation(config)
    _check_routing(config)
    _check_window(config)
    count = _count_by_family(config, model_type)  # the hand count first: it names a bad shape field itself
    if _hand_counted(config) and _has_transformers():
        # a config its class refuses is refused, so `params` and `plan` count the same models (any other
        # family was just built through transformers_config by count_with_transformers)
        transformers_config(config)
    _check_token_ids(config, count.vocab)
    return count


def _hand_counted(config: dict[str, Any]) -> bool:
    """Whether the config's family is counted by hand (the formulas here), not built by transformers."""
    return config.get("model_type") in SUPPORTED_MODEL_TYPES + tuple(MORE_FAMILIES)


def _has_transformers() -> bool:
    import importlib.util

    return importlib.util.find_spec("transformers") is not None


def _check_window(config: dict[str, Any]) -> None:
    """A sliding window is null (none) or a whole number of tokens of 2 or more: -5 or 1 left a KV cache of
    one token, and text was read as no window (issue 29)."""
    window = config.get("sliding_window")
    if window is None:
        return
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise UserError("sliding_window", f"expected null or a whole number of tokens of 2 or more, got {window!r}")


#: The config attributes that count a MoE layer's routed experts (Mixtral, Qwen2-MoE, DeepSeek).
EXPERT_COUNT_ATTRIBUTES: Final[tuple[str, ...]] = ("num_local_experts", "num_experts", "n_routed_experts")


def _check_routing(config: dict[str, Any]) -> None:
    """A token routed to more experts than a layer has (top-k 8 of 4) builds a router whose top-k fails in
    the forward pass; refused at the key, as the workload's model.experts_per_token is (issue 29)."""
    given = {k: config[k] for k in EXPERT_COUNT_ATTRIBUTES if isinstance(config.get(k), int)
             and not isinstance(config.get(k), bool)}
    if len(set(given.values())) > 1:  # Mixtral's num_local_experts beside its alias num_experts: which is meant?
        (first, a), (second, b) = list(given.items())[:2]
        raise UserError(second, f"expected the same expert count as {first} ({a}) or only one of the two, got {b}")
    experts = next(iter(given.values()), None)
    for key in TOP_K_ATTRIBUTES:
        k = config.get(key)
        if isinstance(k, int) and not isinstance(k, bool) and experts is not None and 0 < experts < k:
            raise UserError(key, f"at most experts ({experts}), the experts a layer has, got {k}")


def _check_activation(config: dict[str, Any]) -> None:
    """The config's activation is one transformers builds (catalogue/activation_traits.toml
    [hf_activations]): a name outside ACT2CLS, or a list, builds no model (issue 29)."""
    from trainplan import catalogue

    table = catalogue.table("activation_traits")["hf_activations"]
    for key in table["keys"]:
        if key not in config or config[key] is None:
            continue
        value = config[key]
        if not isinstance(value, str) or value not in table["names"]:
            raise UserError(key, f"an activation transformers builds ({', '.join(table['names'][:6])}, ...), "
                                 f"got {value!r}")


def _check_token_ids(config: dict[str, Any], vocab: int) -> None:
    """A padding id must index the embedding: transformers' nn.Embedding asserts
    -vocab <= padding_idx < vocab, so a config past it builds no model (issue 29)."""
    pad = config.get("pad_token_id")
    if pad is None or vocab <= 0:
        return
    if isinstance(pad, bool) or not isinstance(pad, int):
        raise UserError("pad_token_id", f"a whole number (a token id) or null, got {pad!r}")
    if not -vocab <= pad < vocab:
        raise UserError("pad_token_id", f"a token id below vocab_size ({vocab:,}), got {pad:,}")


def _count_by_family(config: dict[str, Any], model_type: str | None) -> ParamCount:
    if model_type in MORE_FAMILIES:
        return MORE_FAMILIES[model_type](config)
    if model_type not in SUPPORTED_MODEL_TYPES:
        shown = "missing" if model_type is None else repr(model_type)
        if isinstance(model_type, str):
            return count_with_transformers(config)
        raise UserError("model_type", f"one of {', '.join(SUPPORTED_MODEL_TYPES + tuple(MORE_FAMILIES))}; got {shown}")

    if model_type == "gpt2":
        return _count_gpt2(config)
    if model_type == "gpt_neox":
        return _count_gpt_neox(config)
    return _count_llama_like(config, model_type)


_LLAMA_LIKE_DEFAULTS: Final[dict[str, dict[str, Any]]] = {
    "llama": LLAMA_CONFIG_DEFAULTS,
    "mistral": MISTRAL_CONFIG_DEFAULTS,
    "qwen2": QWEN2_CONFIG_DEFAULTS,
    "mixtral": MIXTRAL_CONFIG_DEFAULTS,
}

_LLAMA_LIKE_KEYS: Final[dict[str, str]] = {
    **{key.split(".", 1)[1]: names[0] for key, names in CONFIG_NAMES.items()},  # layers -> num_hidden_layers ...
    "head_dim": "head_dim",
    "tied": "tie_word_embeddings",
    "attention_bias": "attention_bias",
    "mlp_bias": "mlp_bias",
}


def _count_llama_like(config: dict[str, Any], model_type: str) -> ParamCount:
    """Llama, Mistral, Qwen2 and Mixtral: pre-norm RMSNorm blocks with SwiGLU MLPs."""
    defaults = _LLAMA_LIKE_DEFAULTS[model_type]
    aliases = MIXTRAL_KEY_ALIASES if model_type == "mixtral" else None

    def get(key: str) -> Any:
        return _value(config, key, defaults, aliases)

    heads = get("num_attention_heads")
    kv_heads = get("num_key_value_heads")
    head_dim = get("head_dim")  # null in a file means "width / heads", as in transformers
    attention_bias = mlp_bias = None
    if model_type == "llama":
        attention_bias = get("attention_bias")
        mlp_bias = get("mlp_bias")
    experts, experts_per_token = 1, 1
    if model_type == "mixtral":
        experts = get("num_local_experts")
        experts_per_token = get("num_experts_per_tok")

    keys = dict(_LLAMA_LIKE_KEYS)
    keys["experts"] = _written_name(config, "num_local_experts", aliases)
    arch = _resolve(
        family=model_type,
        layers=get("num_hidden_layers"),
        width=get("hidden_size"),
        vocab=get("vocab_size"),
        ffn_width=_positive_int(get("intermediate_size"), "intermediate_size"),
        heads=_positive_int(heads, "num_attention_heads"),
        kv_heads=kv_heads,
        head_dim=head_dim,
        tied=get("tie_word_embeddings"),
        attention_bias=attention_bias,
        mlp_bias=mlp_bias,
        positions=None,
        experts=experts,
        experts_per_token=experts_per_token,
        keys=keys,
    )
    return _count(arch)


def _count_gpt_neox(config: dict[str, Any]) -> ParamCount:
    """GPT-NeoX / Pythia: fused qkv, LayerNorm, untied ``embed_out`` by default."""

    def get(key: str) -> Any:
        return _value(config, key, GPT_NEOX_CONFIG_DEFAULTS)
    arch = _resolve(
        family="gpt_neox",
        layers=get("num_hidden_layers"),
        width=get("hidden_size"),
        vocab=get("vocab_size"),
        ffn_width=_positive_int(get("intermediate_size"), "intermediate_size"),
        heads=_positive_int(get("num_attention_heads"), "num_attention_heads"),
        kv_heads=None,
        head_dim=None,
        tied=get("tie_word_embeddings"),
        attention_bias=get("attention_bias"),
        mlp_bias=None,
        positions=None,
        experts=1,
        experts_per_token=1,
        keys=_LLAMA_LIKE_KEYS,
    )
    return _count(arch)


def _count_gpt2(config: dict[str, Any]) -> ParamCount:
    """GPT-2: learned positions, Conv1D with biases, LayerNorm, tied head by default."""

    def get(key: str) -> Any:
        return _value(config, key, GPT2_CONFIG_DEFAULTS, GPT2_KEY_ALIASES)

    def name(key: str) -> str:
        return _written_name(config, key, GPT2_KEY_ALIASES)
    width = _positive_int(get("n_embd"), name("n_embd"))
    n_inner = get("n_inner")
    ffn_width = CLASSIC_FFN_MULTIPLE * width if n_inner is None else _positive_int(n_inner, "n_inner")
    arch = _resolve(
        family="gpt2",
        layers=get("n_layer"),
        width=width,
        vocab=get("vocab_size"),
        ffn_width=ffn_width,
        heads=_positive_int(get("n_head"), name("n_head")),
        kv_heads=None,
        head_dim=None,
        tied=get("tie_word_embeddings"),
        attention_bias=None,
        mlp_bias=None,
        positions=get("n_positions"),
        experts=1,
        experts_per_token=1,
        cross_attention=_flag(get("add_cross_attention"), "add_cross_attention"),
        keys={
            "layers": name("n_layer"),
            "width": name("n_embd"),
            "vocab": "vocab_size",
            "ffn_width": "n_inner",
            "heads": name("n_head"),
            "tied": "tie_word_embeddings",
            "positions": name("n_positions"),
        },
    )
    return _count(arch)


#: The file a Hugging Face model directory keeps its configuration in.
HF_CONFIG_FILENAME: Final[str] = "config.json"


def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face ``config.json`` (or a model directory holding one).

    Raises ``UserError(path, ...)`` when the file is missing or unreadable, is
    not valid JSON, or does not hold a JSON object.
    """
    file = Path(path)
    if file.is_dir():
        file = file / HF_CONFIG_FILENAME
    where = str(file)
    from trainplan import limits  # regular files only, size and nesting caps (issue 16)

    config = limits.loads_json(limits.read_text(file, "hf_config"), where)
    if not isinstance(config, dict):
        raise UserError(where, f"a JSON object of model settings, got a JSON {type(config).__name__}")
    from trainplan import units

    limits.check_numbers(config, where, units.LARGEST_WHOLE)  # every count exact in float64 (issue 29)
    _check_shape_ranges(config, where)
    if "model_type" in config and not isinstance(config["model_type"], str):
        raise UserError(f"{where}: model_type", f"expected the name of a model family (text), got "
                        f"{units.shown(config['model_type'])}")
    return config


def _check_shape_ranges(config: dict[str, Any], where: str, prefix: str = "") -> None:
    """UserError naming the first shape field of a config.json (or of a sub-config: text_config,
    vision_config) outside the range its workload key takes; checked before the model is counted."""
    from trainplan.workload.schema import PLAUSIBLE_RANGES

    for name, value in config.items():
        if isinstance(value, dict) and name.endswith("_config"):
            _check_shape_ranges(value, where, f"{prefix}{name}.")
        key = CONFIG_SHAPE_KEYS.get(name)
        if key is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value == 0 and key in ("model.experts", "model.experts_per_token"):
            continue  # some dense configs write num_experts = 0
        low, high = PLAUSIBLE_RANGES[key]
        low = 0 if low is None else low
        if not low < value < (high or float("inf")):
            raise UserError(f"{where}: {prefix}{name}", f"expected a value above {low:g} and below {high:g} "
                            f"(the range of {key}), got {value:,}")


def checkpoint_tail_params(count: ParamCount) -> int | None:
    """Matrix-product parameters a token meets in the layers' last products that a non-reentrant
    activation checkpoint does not re-run under full recomputation: L d f where the family's layer
    ends in the MLP's down projection with its output only added to the residual, 0 where something
    keeps that output (catalogue/checkpoint_tail.toml, measured per family); None for a family not
    measured."""
    from trainplan import catalogue

    skips = catalogue.table("checkpoint_tail")["families"].get(count.family.split(" (")[0])
    if skips is None:
        return None
    return count.layers * count.width * count.ffn_width if skips and count.experts <= 1 else 0


def matmul_params(count: ParamCount) -> tuple[int, int]:
    """(N, head): parameters that take part in a matrix product per token, and the head's share.

    N counts q, k, v, o, the MLP's matrices (top-k experts for a mixture) and the router of
    every layer, and the output head (V d, tied or not: the head's product runs either way);
    it leaves out the input embedding (a lookup, no product), position embeddings, norms and
    biases (elementwise). This is the N of the 6 N FLOPs per token.
    """
    if count.matmul_active is not None:
        return count.matmul_active, count.head_params or 0
    traits = _TRAITS.get(count.family)
    mlp_matrices = traits.mlp_matrices if traits is not None else GATED_MLP_MATRICES
    d = count.width
    attention = 2 * d * count.heads * count.head_dim + 2 * d * count.kv_heads * count.head_dim
    mlp = mlp_matrices * d * count.ffn_width * count.experts_per_token
    router = d * count.experts if count.experts > 1 or count.family == "mixtral" else 0
    head = count.vocab * d
    return count.layers * (attention + mlp + router) + head, head



# --------------------------------------------------------------------------- #
# More families, counted exactly (issue 12). Each counter writes out what the
# family's modeling_<family>.py builds (transformers 5.x); the defaults are the
# family's configuration class defaults. Verified against the model built on the
# meta device in tests/test_params.py.
# --------------------------------------------------------------------------- #

GEMMA_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "attention_bias": False,
    "tie_word_embeddings": True}
GEMMA2_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "attention_bias": False,
    "tie_word_embeddings": True}
PHI3_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "head_dim": None, "tie_word_embeddings": False}
QWEN2_MOE_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "decoder_sparse_step": 1, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60, "mlp_only_layers": [],
    "qkv_bias": True, "head_dim": None, "tie_word_embeddings": False}
FALCON_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
    "num_kv_heads": None, "num_ln_in_parallel_attn": None, "new_decoder_architecture": False, "multi_query": True,
    "parallel_attn": True, "bias": False, "ffn_hidden_size": None, "tie_word_embeddings": True}
OLMO_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "head_dim": None, "attention_bias": False,
    "tie_word_embeddings": False}
STABLELM_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 50304, "hidden_size": 2560, "intermediate_size": 6912, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "use_qkv_bias": False, "qk_layernorm": False,
    "use_parallel_residual": False, "tie_word_embeddings": False}
GPTJ_CONFIG_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 50400, "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_inner": None, "tie_word_embeddings": False}
GPTJ_KEY_ALIASES: Final[dict[str, str]] = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers",
                                           "n_head": "num_attention_heads"}


def _block_count(family: str, *, layers: int, width: int, vocab: int, heads: int, kv_heads: int, head_dim: int,
                 ffn_width: int, qkv_bias: bool, o_bias: bool, mlp_matrices: int, mlp_bias: bool,
                 norm_params_per_layer: int, final_norm: int, tied: bool, head_bias: bool = False,
                 extra_per_layer: int = 0) -> ParamCount:
    """A dense decoder with every term given: no defaults, no family rules."""
    d, hk, gk = width, heads * head_dim, kv_heads * head_dim
    attention = _linear(d, hk, qkv_bias) + 2 * _linear(d, gk, qkv_bias) + _linear(hk, d, o_bias)
    mlp = (mlp_matrices - 1) * _linear(d, ffn_width, mlp_bias) + _linear(ffn_width, d, mlp_bias)
    per_layer = attention + mlp + norm_params_per_layer + extra_per_layer
    embedding = vocab * d
    lm_head = 0 if tied else vocab * d + (vocab if head_bias else 0)
    if tied and head_bias:
        lm_head = vocab  # the bias is the head's own even when the weight is shared
    total = embedding + layers * per_layer + final_norm + lm_head
    matmul = layers * (2 * d * hk + 2 * d * gk + mlp_matrices * d * ffn_width) + vocab * d
    return ParamCount(total=total, active=total, embedding=embedding, lm_head=lm_head, per_layer=per_layer,
                      family=family, layers=layers, width=d, vocab=vocab, ffn_width=ffn_width, heads=heads,
                      kv_heads=kv_heads, head_dim=head_dim, tied=tied, final_norm=final_norm,
                      matmul_active=matmul, head_params=vocab * d)


def _getter(config: dict[str, Any], defaults: dict[str, Any], aliases: dict[str, str] | None = None):  # noqa: ANN202
    def get(key: str) -> Any:
        return _value(config, key, defaults, aliases)
    return get


def _heads(get: Any, width: int, kv_key: str = "num_key_value_heads", head_dim_key: str | None = "head_dim"
           ) -> tuple[int, int, int]:
    heads = _positive_int(get("num_attention_heads"), "num_attention_heads")
    kv = get(kv_key)
    kv_heads = heads if kv is None else _positive_int(kv, kv_key)
    if heads % kv_heads:
        raise UserError(kv_key, f"a divisor of num_attention_heads ({heads}), got {kv_heads}")
    hd = get(head_dim_key) if head_dim_key else None
    if hd is None:
        if width % heads:
            raise UserError("num_attention_heads", f"a divisor of hidden_size ({width}), got {heads}")
        hd = width // heads
    return heads, kv_heads, _positive_int(hd, head_dim_key or "head_dim")


def _count_gemma(config: dict[str, Any], family: str = "gemma") -> ParamCount:
    """Gemma: Llama blocks, RMSNorm weights, head_dim 256 by default, tied head. Gemma 2 adds a
    norm before and after the MLP (four per layer)."""
    get = _getter(config, GEMMA2_CONFIG_DEFAULTS if family == "gemma2" else GEMMA_CONFIG_DEFAULTS)
    d = _positive_int(get("hidden_size"), "hidden_size")
    heads, kv, hd = _heads(get, d)
    norms = 4 if family == "gemma2" else 2
    bias = _flag(get("attention_bias"), "attention_bias")
    return _block_count(family, layers=_positive_int(get("num_hidden_layers"), "num_hidden_layers"), width=d,
                        vocab=_positive_int(get("vocab_size"), "vocab_size"), heads=heads, kv_heads=kv,
                        head_dim=hd, ffn_width=_positive_int(get("intermediate_size"), "intermediate_size"),
                        qkv_bias=bias, o_bias=bias, mlp_matrices=GATED_MLP_MATRICES, mlp_bias=False,
                        norm_params_per_layer=norms * d, final_norm=d,
                        tied=_flag(get("tie_word_embeddings"), "tie_word_embeddings"))


def _count_phi3(config: dict[str, Any]) -> ParamCount:
    """Phi-3: fused qkv_proj and gate_up_proj (same counts as separate matrices), no biases, RMSNorm."""
    get = _getter(config, PHI3_CONFIG_DEFAULTS)
    d = _positive_int(get("hidden_size"), "hidden_size")
    heads, kv, hd = _heads(get, d)  # head_dim honoured, as the attention module reads it
    return _block_count("phi3", layers=_positive_int(get("num_hidden_layers"), "num_hidden_layers"), width=d,
                        vocab=_positive_int(get("vocab_size"), "vocab_size"), heads=heads, kv_heads=kv,
                        head_dim=hd, ffn_width=_positive_int(get("intermediate_size"), "intermediate_size"),
                        qkv_bias=False, o_bias=False, mlp_matrices=GATED_MLP_MATRICES, mlp_bias=False,
                        norm_params_per_layer=2 * d, final_norm=d,
                        tied=_flag(get("tie_word_embeddings"), "tie_word_embeddings"))


def _count_olmo(config: dict[str, Any]) -> ParamCount:
    """OLMo: Llama blocks whose LayerNorms hold no parameters (OlmoLayerNorm)."""
    get = _getter(config, OLMO_CONFIG_DEFAULTS)
    d = _positive_int(get("hidden_size"), "hidden_size")
    heads, kv, hd = _heads(get, d)  # head_dim honoured, as the attention module reads it
    bias = _flag(get("attention_bias"), "attention_bias")
    return _block_count("olmo", layers=_positive_int(get("num_hidden_layers"), "num_hidden_layers"), width=d,
                        vocab=_positive_int(get("vocab_size"), "vocab_size"), heads=heads, kv_heads=kv,
                        head_dim=hd, ffn_width=_positive_int(get("intermediate_size"), "intermediate_size"),
                        qkv_bias=bias, o_bias=bias, mlp_matrices=GATED_MLP_MATRICES, mlp_bias=False,
                        norm_params_per_layer=0, final_norm=0,
                        tied=_flag(get("tie_word_embeddings"), "tie_word_embeddings"))


def _count_stablelm(config: dict[str, Any]) -> ParamCount:
    """StableLM: LayerNorm with biases (one per layer with a parallel residual), q/k/v bias by
    use_qkv_bias, optional per-head q/k LayerNorms (weights only), gated MLP."""
    get = _getter(config, STABLELM_CONFIG_DEFAULTS)
    d = _positive_int(get("hidden_size"), "hidden_size")
    heads, kv, hd = _heads(get, d, head_dim_key=None)
    norms = 1 if _flag(get("use_parallel_residual"), "use_parallel_residual") else 2
    qk_norm = (heads + kv) * hd if _flag(get("qk_layernorm"), "qk_layernorm") else 0
    return _block_count("stablelm", layers=_positive_int(get("num_hidden_layers"), "num_hidden_layers"), width=d,
                        vocab=_positive_int(get("vocab_size"), "vocab_size"), heads=heads, kv_heads=kv,
                        head_dim=hd, ffn_width=_positive_int(get("intermediate_size"), "intermediate_size"),
                        qkv_bias=_flag(get("use_qkv_bias"), "use_qkv_bias"), o_bias=False,
                        mlp_matrices=GATED_MLP_MATRICES, mlp_bias=False,
                        norm_params_per_layer=norms * 2 * d, final_norm=2 * d, extra_per_layer=qk_norm,
                        tied=_flag(get("tie_word_embeddings"), "tie_word_embeddings"))


def _count_gptj(config: dict[str, Any]) -> ParamCount:
    """GPT-J: parallel attention and MLP after one LayerNorm, q/k/v/out without bias, MLP with
    biases (4 d by default), an output head with a bias."""
    get = _getter(config, GPTJ_CONFIG_DEFAULTS, GPTJ_KEY_ALIASES)
    d = _positive_int(get("n_embd"), "n_embd")
    heads = _positive_int(get("n_head"), "n_head")
    if d % heads:
        raise UserError("n_head", f"a divisor of n_embd ({d}), got {heads}")
    inner = get("n_inner")
    f = CLASSIC_FFN_MULTIPLE * d if inner is None else _positive_int(inner, "n_inner")
    return _block_count("gptj", layers=_positive_int(get("n_layer"), "n_layer"), width=d,
                        vocab=_positive_int(get("vocab_size"), "vocab_size"), heads=heads, kv_heads=heads,
                        head_dim=d // heads, ffn_width=f, qkv_bias=False, o_bias=False,
                        mlp_matrices=PLAIN_MLP_MATRICES, mlp_bias=True, norm_params_per_layer=2 * d,
                        final_norm=2 * d, head_bias=True,
                        tied=_flag(get("tie_word_embeddings"), "tie_word_embeddings"))


def _count_falcon(config: dict[str, Any]) -> ParamCount:
    """Falcon: fused query_key_value, d -> (h + 2 g) k with the new decoder architecture, d + 2 k with
    multi-query, 3 d otherwise; LayerNorm with biases: two per layer with the new architecture (or
    num_ln_in_parallel_attn), one with parallel attention, two otherwise; linears biased by `bias`."""
    get = _getter(config, FALCON_CONFIG_DEFAULTS)
    d = _positive_int(get("hidden_size"), "hidden_size")
    heads = _positive_int(get("num_attention_heads"), "num_attention_heads")
    if d % heads:
        raise UserError("num_attention_heads", f"a divisor of hidden_size ({d}), got {heads}")
    hd = d // heads
    new = _flag(get("new_decoder_architecture"), "new_decoder_architecture")
    if new:
        kv_value = get("num_kv_heads")
        kv = heads if kv_value is None else _positive_int(kv_value, "num_kv_heads")
    else:
        kv = 1 if _flag(get("multi_query"), "multi_query") else heads
    bias = _flag(get("bias"), "bias")
    ffn = get("ffn_hidden_size")
    f = CLASSIC_FFN_MULTIPLE * d if ffn is None else _positive_int(ffn, "ffn_hidden_size")
    parallel = _flag(get("parallel_attn"), "parallel_attn")
    if new:
        n_ln = get("num_ln_in_parallel_attn")
        norms = 2 if n_ln is None else _positive_int(n_ln, "num_ln_in_parallel_attn")
    else:
        norms = 1 if parallel else 2
    return _block_count("falcon", layers=_positive_int(get("num_hidden_layers"), "num_hidden_layers"), width=d,
                        vocab=_positive_int(get("vocab_size"), "vocab_size"), heads=heads, kv_heads=kv,
                        head_dim=hd, ffn_width=f, qkv_bias=bias, o_bias=bias, mlp_matrices=PLAIN_MLP_MATRICES,
                        mlp_bias=bias, norm_params_per_layer=norms * 2 * d, final_norm=2 * d,
                        tied=_flag(get("tie_word_embeddings"), "tie_word_embeddings"))


def _count_qwen2_moe(config: dict[str, Any]) -> ParamCount:
    """Qwen2-MoE: Qwen2 attention (q/k/v bias by qkv_bias), per sparse layer a router d -> E, E gated
    experts of moe_intermediate_size, a gated shared expert and its d -> 1 gate; layers in
    mlp_only_layers (or off the decoder_sparse_step) have a dense gated MLP of intermediate_size."""
    get = _getter(config, QWEN2_MOE_CONFIG_DEFAULTS)
    d = _positive_int(get("hidden_size"), "hidden_size")
    heads, kv, hd = _heads(get, d)  # head_dim honoured, as the attention module reads it
    layers = _positive_int(get("num_hidden_layers"), "num_hidden_layers")
    vocab = _positive_int(get("vocab_size"), "vocab_size")
    experts = _non_negative_int(get("num_experts"), "num_experts")
    top_k = _positive_int(get("num_experts_per_tok"), "num_experts_per_tok")
    step = _positive_int(get("decoder_sparse_step"), "decoder_sparse_step")
    dense_only = _layer_list(get("mlp_only_layers"), "mlp_only_layers", layers)
    f, moe_f = _positive_int(get("intermediate_size"), "intermediate_size"), _positive_int(
        get("moe_intermediate_size"), "moe_intermediate_size")
    shared_f = _positive_int(get("shared_expert_intermediate_size"), "shared_expert_intermediate_size")
    qkv_bias = _flag(get("qkv_bias"), "qkv_bias")
    tied = _flag(get("tie_word_embeddings"), "tie_word_embeddings")
    hk, gk = heads * hd, kv * hd
    attention = _linear(d, hk, qkv_bias) + 2 * _linear(d, gk, qkv_bias) + _linear(hk, d, False)
    attention_mm = 2 * d * hk + 2 * d * gk
    total = active = matmul = 0
    per_layer = 0
    for i in range(layers):
        sparse = i not in dense_only and experts > 0 and (i + 1) % step == 0
        if sparse:
            shared = 3 * d * shared_f + d
            mlp_all = d * experts + experts * 3 * d * moe_f + shared
            mlp_active = d * experts + min(top_k, experts) * 3 * d * moe_f + shared
        else:
            mlp_all = mlp_active = 3 * d * f
        layer = attention + mlp_all + 2 * d
        per_layer = max(per_layer, layer)
        total += layer
        active += attention + mlp_active + 2 * d
        matmul += attention_mm + mlp_active
    outside = vocab * d + d + (0 if tied else vocab * d)
    return ParamCount(total=total + outside, active=active + outside, embedding=vocab * d,
                      lm_head=0 if tied else vocab * d, per_layer=per_layer, family="qwen2_moe", layers=layers,
                      width=d, vocab=vocab, ffn_width=moe_f, heads=heads, kv_heads=kv, head_dim=hd, tied=tied,
                      final_norm=d, experts=max(experts, 1), experts_per_token=min(top_k, max(experts, 1)),
                      matmul_active=matmul + vocab * d, head_params=vocab * d)


MORE_FAMILIES: Final[dict[str, Any]] = {
    "gemma": _count_gemma,
    "gemma2": lambda c: _count_gemma(c, "gemma2"),
    "phi3": _count_phi3,
    "qwen2_moe": _count_qwen2_moe,
    "falcon": _count_falcon,
    "olmo": _count_olmo,
    "stablelm": _count_stablelm,
    "gptj": _count_gptj,
}

MODEL_EXTRA_HINT: Final[str] = "pip install 'trainplan[model]' (torch and transformers) to count it on the meta device"


#: Layer types whose KV cache keeps a window of tokens (transformers cache_utils.get_layer_types_and_kwargs).
SLIDING_LAYER_TYPES: Final[tuple[str, ...]] = ("sliding_attention", "hybrid_sliding", "reference_sliding_attention")
#: Layer types that keep a fixed-size recurrent or convolution state, not a cache per token
#: (transformers cache_utils: linear attention, Mamba-style and convolution layers of hybrid models).
RECURRENT_LAYER_TYPES: Final[tuple[str, ...]] = ("linear_attention", "conv", "mamba", "hybrid", "recurrent")
#: The families counted by hand: their configuration class's sliding-window default (transformers 5.x,
#: configuration_<family>.py) and which layers slide (sliding_layer). Mistral defaults to a 4096-token
#: window (Mistral-7B v0.1; later releases write null); Qwen2 and Qwen2-MoE slide only with
#: use_sliding_window; families not named here have no sliding window.
SLIDING_WINDOW_DEFAULTS: Final[dict[str, int | None]] = {"mistral": 4096, "mixtral": None, "phi3": None,
                                                       "qwen2": 4096, "qwen2_moe": 4096, "gemma2": 4096}


def _sliding_layer(model_type: str, config: dict[str, Any], i: int) -> bool:
    """Whether layer i of a hand-counted family slides, as its configuration class sets layer_types."""
    if model_type == "gemma2":
        return bool((i + 1) % 2)  # Gemma2Config: sliding, full, sliding, ...
    if model_type == "qwen2":  # Qwen2Config: from max_window_layers on, with use_sliding_window
        return bool(config.get("use_sliding_window", False)) and i >= config.get("max_window_layers", 28)
    if model_type == "qwen2_moe":  # Qwen2MoeConfig: every other layer below max_window_layers
        return (bool((i + 1) % 2) and i < config.get("max_window_layers", 28)
                and bool(config.get("use_sliding_window", False)))
    return True  # Mistral, Mixtral, Phi-3: every layer once a window is set


def transformers_config(config: dict[str, Any]) -> Any:
    """transformers' configuration object for a config.json dict: the one place a config is built (the
    count, the meta-device trace, `probe model`). A config its class refuses is the config's fault, named
    at its key in one line: transformers 5 checks each field's type (StrictDataclassFieldValidationError:
    `head_dim = null` for Gemma 2) and the class's own rules (heads dividing the width, layer_types)."""
    import transformers

    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise UserError("model_type", "a config with a model_type (llama, gpt2, ...)")
    kwargs = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "transformers_version")}
    try:
        from huggingface_hub.errors import StrictDataclassClassValidationError as ClassError
        from huggingface_hub.errors import StrictDataclassFieldValidationError as FieldError
    except ImportError:  # pragma: no cover - an older huggingface_hub: no strict config fields
        FieldError = ClassError = ValueError  # noqa: N806
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        return transformers.AutoConfig.for_model(model_type, **kwargs)
    except ClassError as err:
        cause = str(err).splitlines()[-1].strip() if str(err).strip() else type(err).__name__
        cause = cause.split(":", 1)[1].strip() if cause.startswith(("ValueError:", "TypeError:")) else cause
        raise UserError("config", f"expected a config transformers' {model_type} class accepts ({cause})") from None
    except FieldError as err:
        field_name, _, cause = str(err).partition(":")
        key = field_name.rsplit(" ", 1)[-1].strip("'\"") or "config"
        raise UserError(key, f"expected a value transformers' {model_type} config accepts "
                        f"({' '.join(cause.split())})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserError("model_type", f"a model type transformers knows, with values its config class takes "
                        f"({err})") from None
    finally:
        transformers.logging.set_verbosity(verbosity)


def _text_config(config: dict[str, Any]) -> Any:
    """transformers' configuration object for config.json (its class's defaults filled in), or None
    without transformers or for a type it does not know."""
    try:
        import transformers
    except ImportError:
        return None
    # a config transformers' class refuses is refused here too, so `params` and `plan` count the same models
    # (the hand count of a family would take what transformers would not build: issue 29)
    cfg = transformers_config(config)
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def _layer_types(config: dict[str, Any], text: Any, layers: int) -> tuple[list[str], int | None]:
    """Each layer's attention type and the sliding window, as transformers' configuration class resolves
    them (with transformers installed), else from config.json by the family's rule (SLIDING_EVERY)."""
    if text is not None:
        window = getattr(text, "sliding_window", None)
        types = getattr(text, "layer_types", None)
        if types is None:  # the cache's own inference: a window makes every layer slide
            types = ["sliding_attention" if window is not None else "full_attention"] * layers
        return list(types), window
    model_type = str(config.get("model_type"))
    window = config.get("sliding_window", SLIDING_WINDOW_DEFAULTS.get(model_type))
    if isinstance(config.get("layer_types"), list):
        return list(config["layer_types"]), window
    if model_type not in SLIDING_WINDOW_DEFAULTS or not window:
        return ["full_attention"] * layers, None
    return ["sliding_attention" if _sliding_layer(model_type, config, i) else "full_attention"
            for i in range(layers)], window


def kv_layout_of_config(config: dict[str, Any], count: ParamCount) -> tuple[tuple[int, int | None], ...]:
    """Per layer: the KV-cache values one token adds, and the most tokens the layer keeps (None: all).

    * attention: K and V at the KV heads, 2 g k values a token;
    * multi-head latent attention (DeepSeek-V2/V3: kv_lora_rank in the config): the compressed latent
      and the shared rope key, kv_lora_rank + qk_rope_head_dim values a token (what the module caches);
    * a sliding-window layer keeps the last W - 1 tokens between steps (transformers'
      DynamicSlidingWindowLayer; the running step attends W); full-attention layers keep every token;
    * a recurrent or convolution layer of a hybrid model keeps a state of fixed size, not counted here."""
    layers = count.layers
    hand_counted = _hand_counted(config)
    # the families counted by hand follow their configuration class's rules written out here (no
    # transformers import on the plan's path); any other was just built by transformers: ask its config
    text = None if hand_counted else _text_config(config)
    rank, rope = (config.get(k, getattr(text, k, None)) for k in ("kv_lora_rank", "qk_rope_head_dim"))
    if isinstance(rank, int) and isinstance(rope, int):
        values = rank + rope
    else:
        values = 2 * count.kv_heads * count.head_dim
    types, window = _layer_types(config, text, layers)
    out = []
    for i in range(layers):
        kind = types[i] if i < len(types) else "full_attention"
        if kind in ("moe", "mlp", "dummy") or kind in RECURRENT_LAYER_TYPES:
            out.append((0, None))  # no per-token cache (a recurrent layer's fixed state is not counted)
        elif kind in SLIDING_LAYER_TYPES and isinstance(window, int):
            out.append((values, max(window - 1, 1)))
        elif kind == "chunked_attention" and isinstance(config.get("attention_chunk_size"), int):
            out.append((values, max(int(config["attention_chunk_size"]) - 1, 1)))
        else:
            out.append((values, None))
    return tuple(out)


#: Parameter groups of a model read off its modules (count_with_transformers), in report order.
PARAMETER_GROUPS: Final[tuple[str, ...]] = ("embedding", "head", "attention", "dense_mlp", "routed_experts",
                                            "shared_experts", "router", "norms", "other")
#: Config attributes naming the experts a token is routed to (transformers' MoE configuration classes:
#: num_experts_per_tok in Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3, OLMoE, ...; moe_topk in Hunyuan; top_k in some).
TOP_K_ATTRIBUTES: Final[tuple[str, ...]] = ("num_experts_per_tok", "moe_topk", "num_selected_experts", "top_k",
                                            "experts_per_token")


def _group_of(path: str, module: Any, param: Any, torch: Any, experts: int) -> str:
    """The parameter group of one parameter, by where it sits (module path and class) and its shape."""
    lower = path.lower()
    kind = type(module).__name__.lower()
    if isinstance(module, torch.nn.Embedding):
        return "embedding"
    if "shared_expert" in lower:
        return "shared_experts"  # Qwen2-MoE shared_expert (+ its gate), DeepSeek shared_experts
    if param.dim() == 3 or ".experts." in f"{lower}." and "shared" not in lower:
        return "routed_experts"  # fused (E, out, in) expert tensors, or a ModuleList of experts
    if "router" in kind or "router" in lower or (lower.endswith(".gate") and param.dim() == 2
                                                 and experts > 1 and param.shape[0] == experts):
        return "router"
    if "norm" in kind or "norm" in (lower.rsplit(".", 2) + [""])[-2]:
        return "norms"
    if "attn" in lower or "attention" in lower:
        return "attention"
    if any(n in lower for n in ("mlp", "feed_forward", "ffn", "fc1", "fc2", "dense_h_to_4h", "dense_4h_to_h")):
        return "dense_mlp"
    return "other"


def read_module(model: Any, cfg: Any, torch: Any) -> dict[str, Any]:
    """Parameter groups, active parameters, matmul parameters per token and the largest module of a
    transformers model (built on the meta device: shapes only).

    * groups: each parameter once (a tied head is the embedding's tensor: counted as embedding);
    * routed experts: 3-D (E, out, in) tensors of the fused experts modules (or ModuleList experts);
      a token runs k of E, so active = total - (1 - k / E) routed;
    * matmul: every 2-D weight of a module that is not an embedding (linear, Conv1D, router), once per
      module that multiplies with it (a tied head's product counted once, by the head), 3-D expert
      tensors at k / E; the N of 6 N;
    * largest module: the most parameters any module holds of its own (recurse=False), DeepSpeed's
      largest_layer_params (estimate_zero3_model_states_mem_needs_all_live)."""
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    experts = 0
    for p in model.parameters():
        if p.dim() == 3:
            experts = max(experts, int(p.shape[0]))
    top_k = next((int(getattr(text, a)) for a in TOP_K_ATTRIBUTES if isinstance(getattr(text, a, None), int)
                  and not isinstance(getattr(text, a), bool)), 0)
    if experts == 0:  # a ModuleList of experts: count its entries
        for name, m in model.named_modules():
            if name.endswith(".experts") and isinstance(m, torch.nn.ModuleList):
                experts = max(experts, len(m))
    share = min(top_k, experts) / experts if experts and top_k else 1.0
    groups = dict.fromkeys(PARAMETER_GROUPS, 0)
    seen: set[int] = set()
    matmul = 0.0
    largest = 0
    out = model.get_output_embeddings()
    for path, module in model.named_modules():
        own = list(module.named_parameters(recurse=False))
        largest = max(largest, sum(p.numel() for _, p in own))
        for name, p in own:
            group = "head" if module is out else _group_of(f"{path}.{name}", module, p, torch, experts)
            if id(p) not in seen:
                seen.add(id(p))
                groups["embedding" if (module is out and p is getattr(model.get_input_embeddings(), "weight", None))
                       else group] += p.numel()
            if isinstance(module, torch.nn.Embedding) or p.dim() < 2:
                continue
            matmul += p.numel() * (share if group == "routed_experts" else 1.0)
    total = sum(groups.values())
    active = total - round((1.0 - share) * groups["routed_experts"])
    fused = sorted({FUSED_MODULE_NAMES[n.rsplit(".", 1)[-1]] for n, m in model.named_modules()
                    if n.rsplit(".", 1)[-1] in FUSED_MODULE_NAMES and ".experts" not in n})
    return {"groups": groups, "total": total, "active": active, "matmul": round(matmul), "experts": experts,
            "top_k": min(top_k, experts) if experts else 1, "largest": largest, "fused": tuple(fused)}


def attention_width_of_config(text: Any, heads: int, head_dim: int) -> int:
    """d_attn of the attention FLOPs, 4 d_attn S forward per token and layer: 2 S (h k_qk) for the scores
    and 2 S (h k_v) for the weighted values, so d_attn = h (k_qk + k_v) / 2. Multi-head latent attention
    (DeepSeek-V2/V3) has k_qk = qk_nope_head_dim + qk_rope_head_dim and k_v = v_head_dim; config.head_dim
    is the rope part alone there."""
    nope, rope, v = (getattr(text, a, None) for a in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    if all(isinstance(x, int) for x in (nope, rope, v)):
        return heads * (nope + rope + v) // 2
    return heads * head_dim


def attention_width(count: ParamCount) -> int:
    """d_attn of compute.flops_per_token for this count (h k unless the module says otherwise)."""
    if count.attention_width_value is not None:
        return count.attention_width_value
    return count.heads * count.head_dim


def largest_module_params(count: ParamCount) -> int:
    """DeepSpeed's largest_layer_params: the most parameters one module holds of its own. Read off the
    module where it was built; else the token embedding (V d), the head, or the experts module
    (transformers >= 5 fuses a layer's E experts into one module: E x 3 d f for gated experts), or
    one MLP matrix (d f) of a dense model."""
    if count.largest_module is not None:
        return count.largest_module
    traits = _TRAITS.get(count.family)
    matrices = traits.mlp_matrices if traits is not None else GATED_MLP_MATRICES
    mlp = count.width * count.ffn_width * (matrices * count.experts if count.experts > 1 else 1)
    return max(count.vocab * count.width, count.lm_head, mlp)


def count_with_transformers(config: dict[str, Any]) -> ParamCount:
    """Any other family: build AutoModelForCausalLM on the meta device (no memory, no download) and
    count its parameters, shared tensors once, by group (read_module). Without transformers:
    UserError naming the extra."""
    model_type = config.get("model_type")
    try:
        import torch
        import transformers
    except ImportError:
        raise UserError("model_type", f"one of {', '.join(SUPPORTED_MODEL_TYPES + tuple(MORE_FAMILIES))}, "
                        f"or {MODEL_EXTRA_HINT}; got {model_type!r}") from None
    causal = getattr(transformers, "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", None)
    if causal is None:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as causal
    class_name = causal.get(model_type, "")
    if not class_name.endswith("ForCausalLM"):
        # e.g. BERT's BertLMHeadModel: an encoder with a head, not a decoder-only language model
        raise UserError("model_type", f"one of {', '.join(SUPPORTED_MODEL_TYPES + tuple(MORE_FAMILIES))}, or a "
                        f"decoder-only model (a transformers ...ForCausalLM class); got {model_type!r}")
    cfg = transformers_config(config)  # a field its class refuses: named at its key
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # building on meta logs advice nobody asked for
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    except (ValueError, KeyError, TypeError, AttributeError, AssertionError, IndexError, OverflowError,
            RuntimeError) as err:  # a config transformers itself rejects is the config's fault, not ours
        raise UserError("model_type", f"one of {', '.join(SUPPORTED_MODEL_TYPES + tuple(MORE_FAMILIES))}, or a "
                        f"causal language model transformers can build; got {model_type!r} ({err})") from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    read = read_module(model, cfg, torch)
    groups = read["groups"]
    total = read["total"]
    emb = model.get_input_embeddings()
    out = model.get_output_embeddings()
    embedding = groups["embedding"]
    tied = out is not None and emb is not None and out.weight is emb.weight
    lm_head = groups["head"]
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    width = int(getattr(text, "hidden_size", 0) or 0)
    heads = int(getattr(text, "num_attention_heads", 0) or 0)
    kv = int(getattr(text, "num_key_value_heads", heads) or heads)
    head_dim = int(getattr(text, "head_dim", 0) or (width // heads if heads else 0))
    layers = int(getattr(text, "num_hidden_layers", 0) or 0)
    vocab = int(getattr(text, "vocab_size", 0) or 0)
    experts = max(read["experts"], 1)
    moe_ffn = getattr(text, "moe_intermediate_size", None) if experts > 1 else None
    ffn = int(moe_ffn or getattr(text, "intermediate_size", 0) or 4 * width)
    per_layer = (total - embedding - lm_head) // layers if layers else 0
    head_params = out.weight.numel() if out is not None else 0
    return ParamCount(total=total, active=read["active"], embedding=embedding, lm_head=lm_head, per_layer=per_layer,
                      family=f"{model_type} (transformers, meta device)", layers=layers, width=width, vocab=vocab,
                      ffn_width=ffn, heads=heads, kv_heads=kv, head_dim=head_dim, tied=tied,
                      experts=experts, experts_per_token=read["top_k"] if experts > 1 else 1,
                      matmul_active=read["matmul"], head_params=head_params, groups=groups,
                      attention_width_value=attention_width_of_config(text, heads, head_dim),
                      largest_module=read["largest"], fused_projections=read["fused"])
