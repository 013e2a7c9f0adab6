"""Activation bytes from the architecture against the saved tensors of the real Hugging Face code.

Reference: every tensor one forward pass saves for backward, counted with
torch.autograd.graph.saved_tensors_hooks, deduplicated by storage, parameters excluded,
bf16 on CPU, random weights from a config (no download). Targets (issue 12): within 5 %
with SDPA, within 10 % with eager attention, over a range of (b, S, d, L).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainplan.accounts import activations as act  # noqa: E402
from trainplan.measure import model_probe as mp  # noqa: E402


def llama(d, L, f, h, g, V=1000):
    return dict(model_type="llama", hidden_size=d, intermediate_size=f, num_hidden_layers=L,
                num_attention_heads=h, num_key_value_heads=g, vocab_size=V)


def mistral(d, L, f, h, g, V=1000):
    return {**llama(d, L, f, h, g, V), "model_type": "mistral"}


def qwen2(d, L, f, h, g, V=1000):
    return {**llama(d, L, f, h, g, V), "model_type": "qwen2"}


def gpt2(d, L, h, V=1000, **kw):
    return dict(model_type="gpt2", n_embd=d, n_layer=L, n_head=h, vocab_size=V,
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **kw)


def neox(d, L, h, V=1000):
    return dict(model_type="gpt_neox", hidden_size=d, intermediate_size=4 * d, num_hidden_layers=L,
                num_attention_heads=h, vocab_size=V, attention_dropout=0.0, hidden_dropout=0.0)


# (config, b, S): widths 64-256, 2-4 layers, 1-4 sequences, 32-256 tokens
SDPA_CASES = [
    (llama(128, 3, 352, 4, 2), 2, 64),
    (llama(256, 2, 688, 8, 8, V=4000), 1, 256),
    (mistral(128, 4, 448, 4, 1), 4, 32),
    (qwen2(192, 2, 512, 6, 2, V=3000), 2, 128),
    (gpt2(128, 3, 4), 2, 64),
    (gpt2(256, 2, 8, activation_function="gelu"), 1, 192),
    (neox(128, 3, 4), 2, 64),
    (neox(64, 2, 2, V=500), 4, 128),
]
EAGER_CASES = [
    (llama(128, 3, 352, 4, 2), 2, 64),
    (mistral(256, 2, 688, 8, 2, V=2000), 1, 256),
    (qwen2(128, 2, 352, 4, 4), 2, 128),
    (gpt2(128, 3, 4), 2, 64),
    # GPT-2 as released: gelu_new and dropout 0.1 everywhere (masks kept at the bf16 dtype on CPU)
    ({**gpt2(128, 2, 4), "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}, 2, 96),
    (neox(128, 2, 4), 1, 256),
]


def _formula_and_measured(config, b, s, attention):
    model = mp.build_model(config, attention=attention)
    measured = mp.saved_bytes(model, b, s)
    shape = act.shape_from_hf_config(config)
    built = model.config  # the configuration class's defaults included (GPT-2: dropout 0.1)
    dropout = (getattr(built, "resid_pdrop", 0.0) or getattr(built, "hidden_dropout", 0.0) or 0.0) > 0
    layer = act.layer_bytes_per_token(shape, s, attention, 2.0, attention_dropout=dropout, hidden_dropout=dropout)
    outside = act.outside_bytes_per_token(shape, b, 2.0, embedding_dropout=dropout)
    return layer.total, outside, measured


@pytest.mark.parametrize("config,b,s", SDPA_CASES, ids=lambda x: x["model_type"] if isinstance(x, dict) else str(x))
def test_sdpa_within_5_percent_of_saved_tensors(config, b, s):
    layer, outside, measured = _formula_and_measured(config, b, s, "sdpa")
    assert layer == pytest.approx(measured.per_layer_per_token, rel=0.05)
    assert outside == pytest.approx(measured.outside_per_token, rel=0.05)
    total = b * s * (shape_layers(config) * layer + outside)
    assert total == pytest.approx(measured.total, rel=0.05)


@pytest.mark.parametrize("config,b,s", EAGER_CASES, ids=lambda x: x["model_type"] if isinstance(x, dict) else str(x))
def test_eager_within_10_percent_of_saved_tensors(config, b, s):
    layer, outside, measured = _formula_and_measured(config, b, s, "eager")
    assert layer == pytest.approx(measured.per_layer_per_token, rel=0.10)
    total = b * s * (shape_layers(config) * layer + outside)
    assert total == pytest.approx(measured.total, rel=0.10)


def shape_layers(config):
    return act.shape_from_hf_config(config).layers


def test_llama_layer_by_hand():
    """Llama, SDPA, bf16 (a = 2), per token per layer, written out from the module docstring:
    two fp32-upcasting RMSNorms 2 (4d + 4 + 2d), two linear inputs 2 (2d),
    q 2hk + k, v 2 (2gk) + output 2hk + lse 4h, SwiGLU 4 (2f)."""
    d, f, h, g, k = 4096, 14336, 32, 8, 128
    shape = act.ActivationShape("llama", 32, d, f, h, g, k, 128256)
    by_hand = 2 * (4 * d + 4 + 2 * d) + 2 * 2 * d + (2 * h * k + 2 * 2 * g * k + 2 * h * k + 4 * h) + 4 * 2 * f
    assert act.layer_bytes_per_token(shape, 8192).total == by_hand
    # equivalent width-sized tensors: about 24.5 at Llama-3-8B's shape, not Megatron's 17
    assert 23 < by_hand / (2 * d) < 25


def test_outside_the_layers_dominated_by_the_fp32_log_softmax():
    """Llama-3-8B vocabulary: 4 V bytes a token of fp32 log-softmax, plus ids, labels, final norm,
    head input and the rotary tables (2 a k per position, shared by the b sequences)."""
    d, V, k, b = 4096, 128256, 128, 1
    shape = act.ActivationShape("llama", 32, d, 14336, 32, 8, k, V)
    by_hand = 8 + (4 * d + 4 + 2 * d) + 2 * d + 4 * V + 8 + 2 * 2 * k / b
    assert act.outside_bytes_per_token(shape, b) == pytest.approx(by_hand)


def test_recomputation_kinds_by_hand():
    d, f, h, g, k, L, b, s = 1024, 2816, 8, 8, 128, 4, 1, 512
    shape = act.ActivationShape("llama", L, d, f, h, g, k, 1000)
    layer = act.layer_bytes_per_token(shape, s, "eager")
    none = act.activation_account(shape, b, s, "eager", recompute="none")
    sel = act.activation_account(shape, b, s, "eager", recompute="selective")
    full = act.activation_account(shape, b, s, "eager", recompute="full")
    assert none.layers_bytes == b * s * L * layer.total
    # selective drops the S^2 softmax (fp32 4 h S) and its bf16 copy (2 h S) from every layer but the
    # running one (h = g here, so k and v are the same size repeated or not)
    assert sel.kept_per_layer_bytes_per_token == layer.total - h * s * (4 + 2)
    assert sel.layers_bytes == b * s * (L * (layer.total - 6 * h * s) + 6 * h * s)
    # full keeps one hidden state (2 d) per layer plus the layer being recomputed
    assert full.layers_bytes == b * s * (L * 2 * d + layer.total)
    # the head and the loss are never recomputed
    assert none.outside_saved_bytes == sel.outside_saved_bytes == full.outside_saved_bytes


WIDE_CASES = [
    (dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=2,
          num_attention_heads=32, num_key_value_heads=8, vocab_size=2000), 1, 256, "sdpa"),
    (dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=2,
          num_attention_heads=14, num_key_value_heads=2, vocab_size=2000), 2, 512, "sdpa"),
    (dict(model_type="gpt2", n_embd=768, n_layer=2, n_head=12, vocab_size=2000), 2, 256, "eager"),
    (dict(model_type="gpt_neox", hidden_size=768, intermediate_size=3072, num_hidden_layers=2,
          num_attention_heads=12, vocab_size=2000), 2, 256, "sdpa"),
]


@pytest.mark.slow
@pytest.mark.parametrize("config,b,s,attention", WIDE_CASES, ids=lambda x: x["model_type"] if isinstance(x, dict) else str(x))
def test_released_widths(config, b, s, attention):
    """The released models' widths (Llama-3-8B, Qwen2-0.5B, GPT-2 124M with its default gelu_new and
    dropout 0.1, Pythia-160M), two layers and a small vocabulary so a CPU holds them."""
    layer, outside, measured = _formula_and_measured(config, b, s, attention)
    total = b * s * (shape_layers(config) * layer + outside)
    assert total == pytest.approx(measured.total, rel=0.05 if attention == "sdpa" else 0.10)


SELECTIVE_CASES = [
    (llama(128, 3, 352, 4, 2), 2, 64, "eager"),
    (llama(128, 3, 352, 4, 2), 2, 64, "sdpa"),
    (mistral(128, 2, 352, 8, 2), 1, 128, "eager"),
    (gpt2(128, 3, 4), 2, 64, "eager"),
    (neox(128, 3, 4), 2, 64, "eager"),
]


@pytest.mark.parametrize("config,b,s,attention", SELECTIVE_CASES,
                         ids=lambda x: x["model_type"] if isinstance(x, dict) else str(x))
def test_selective_recomputation_against_checkpointed_core(config, b, s, attention):
    """Selective recomputation measured: every attention core run under torch.utils.checkpoint
    (reentrant, which saves the core's inputs), the rest of the layer as it is."""
    model = mp.build_model(config, attention=attention)
    measured = mp.saved_bytes(model, b, s, selective=True)
    shape = act.shape_from_hf_config(config)
    layer = act.layer_bytes_per_token(shape, s, attention)
    kept = act.selective_kept_per_token(layer, shape, attention)
    assert kept == pytest.approx(measured.per_layer_per_token, rel=0.05 if attention == "sdpa" else 0.10)


@pytest.mark.parametrize("config,attention", [(llama(128, 3, 352, 4, 2), "sdpa"), (llama(128, 3, 352, 4, 2), "eager"),
                                              (gpt2(128, 3, 4), "eager"), (neox(128, 3, 4), "sdpa")],
                         ids=lambda x: x["model_type"] if isinstance(x, dict) else str(x))
def test_full_recomputation_against_hf_gradient_checkpointing(config, attention):
    """Full recomputation measured: transformers' gradient checkpointing (reentrant, which saves each
    layer's inputs). Each layer keeps one hidden state (a d); outside the layers nothing changes,
    except eager attention's (b, 1, S, S) mask, kept as a layer input. The one layer re-run during
    its backward is a peak no saved-tensor hook sees; the formula adds it on top."""
    b, s = 2, 64
    model = mp.build_model(config, attention=attention)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    measured = mp.saved_bytes(model, b, s)
    shape = act.shape_from_hf_config(config)
    acc = act.activation_account(shape, b, s, attention, recompute="full")
    assert acc.kept_per_layer_bytes_per_token == pytest.approx(measured.per_layer_per_token, rel=0.05)
    layers_without_the_rerun = acc.layers_bytes - b * s * act.layer_bytes_per_token(shape, s, attention).total
    assert layers_without_the_rerun + acc.outside_saved_bytes == pytest.approx(measured.total, rel=0.05)


def test_bad_names_are_user_errors():
    from trainplan.errors import UserError

    shape = act.ActivationShape("llama", 2, 64, 128, 2, 2, 32, 100)
    with pytest.raises(UserError, match="training.attention"):
        act.layer_bytes_per_token(shape, 16, "flashy")
    with pytest.raises(UserError, match="training.recompute"):
        act.activation_account(shape, 1, 16, recompute="some")


def test_a_named_megatron_framework_counts_its_fused_kernels():
    # Llama-shaped layer, d 4096, f 11008, bf16. The family's own code keeps, per norm, its fp32 input,
    # the fp32 rstd and a bf16 cast-back (4d + 4 + 2d bytes) and four f-wide MLP tensors; Megatron-core's
    # fused RMSNorm keeps its bf16 input and the rstd (2d + 4) and its fused SwiGLU three f-wide tensors.
    # Two norms: 2 x 4d = 32,768 bytes less; the MLP: 2 x 11,008 = 22,016 less a token a layer.
    from trainplan.planning import model_terms
    from trainplan.planning.evaluate import resolve_model
    from trainplan.workload.load import load_workload

    base = ["model.family=llama", "model.layers=32", "model.width=4096", "model.heads=32", "model.kv_heads=8",
            "model.ffn_width=11008", "model.vocab=32000", "training.seq_len=4096", "data.kind=tokens",
            "training.tokens=1e11", "training.precision=bf16"]

    def per_token(extra: list[str]) -> float:
        w = load_workload(None, base + extra)
        return model_terms.evaluate(w, resolve_model(w)).activation_report["activations_per_layer_token"]
    own = per_token([])  # the framework left to its default: the model's own code is counted
    assert own - per_token(["parallel.framework=megatron-core"]) == 2 * 4 * 4096 + 2 * 11008
    assert per_token(["parallel.framework=fsdp"]) == own  # FSDP runs the model's own modules
    # a given norm kind wins over the framework's: only the MLP is fused
    assert own - per_token(["parallel.framework=megatron-core", "model.norm=rmsnorm_fp32"]) == 2 * 11008
