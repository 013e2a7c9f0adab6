"""FLOPs account (docs/accounts.md): FLOPs per token of training and inference.

The step and its time are the execution model's (accounts/parallel.py through
planning/execution.py); this module counts the FLOPs it runs on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# FLOPs per parameter per token of each pass (Kaplan et al. 2020, §2.1): the forward
# pass is 2 (one multiply-add per weight), the backward pass twice the forward.
FORWARD_FLOPS_PER_PARAM_TOKEN = 2.0
BACKWARD_FLOPS_PER_PARAM_TOKEN = 4.0


def training_flops(params: float, tokens: float, recompute: str) -> float:
    """F = 6 P D; full recomputation runs the forward pass twice: 8 P D.

    Selective recomputation re-runs only the attention core, whose FLOPs are not
    counted in 6PD (they scale with sequence length, not parameters), so it stays 6PD.
    """
    passes = FORWARD_FLOPS_PER_PARAM_TOKEN + BACKWARD_FLOPS_PER_PARAM_TOKEN
    if recompute == "full":
        passes += FORWARD_FLOPS_PER_PARAM_TOKEN
    return passes * params * tokens


def inference_flops_per_token(params: float) -> float:
    """2 P per generated token."""
    return FORWARD_FLOPS_PER_PARAM_TOKEN * params


# ---------------------------------------------------------------- FLOPs from the architecture (issue 12)

# Forward attention per token per layer: Q K^T and (softmax) V, each 2 S d_attn FLOPs
# (one multiply-add per product) over all S keys: 4 S d_attn. Forward + backward (x3): 12 S d_attn,
# the convention of PaLM (Chowdhery et al. 2022, app. B), Megatron-LM (Narayanan et al. 2021)
# and MosaicML's MFU, which count attention in full even when causal.
ATTENTION_FORWARD_MATMULS = 2
FLOPS_PER_MULTIPLY_ADD = 2
# Causal attention with flash/SDPA kernels skips the blocks above the diagonal: about half the
# score and value products are executed (FlashAttention-2, Dao 2023, §3.1 causal masking).
CAUSAL_EXECUTED_SHARE = {"sdpa": 0.5, "flash": 0.5, "eager": 1.0}


@dataclass(frozen=True)
class FlopsPerToken:
    model: float  # the MFU convention: 6 N + 12 L d_attn S
    executed: float  # what the kernels run: causal half of attention, plus recomputation
    matmul_params: float  # N: parameters in matrix products per token (input embedding excluded, head included)
    attention_model: float  # 12 L d_attn S
    recompute_extra: float  # executed FLOPs that recomputation adds


def attention_forward_flops_per_token(layers: int, attention_width: int, seq_len: int) -> float:
    """4 S d_attn per layer: Q K^T and probabilities x V over every key."""
    return layers * ATTENTION_FORWARD_MATMULS * FLOPS_PER_MULTIPLY_ADD * seq_len * attention_width


def flops_per_token(matmul_params: float, layers: int, attention_width: int, seq_len: int,
                    recompute: str = "none", attention: str = "sdpa", causal: bool = True,
                    head_params: float = 0.0, tail_params: float = 0.0) -> FlopsPerToken:
    """Training FLOPs per token of forward + backward.

    model    = 6 N + 3 * 4 L d_attn S  (the field's MFU convention: attention in full)
    executed = 6 N + 3 * 4 L d_attn S * c  + recomputation, where c is the share of
               attention a causal kernel runs; selective recomputation re-runs the
               attention core forward (4 L d_attn S c), full recomputation the whole
               forward of the layers (2 (N - head - tail) + 4 L d_attn S c); the head is not
               recomputed (consistent with activations.activation_account); `tail_params` are
               the layers' last products a non-reentrant checkpoint never re-runs
               (workload/params.checkpoint_tail_params; 0 for a reentrant one).
    """
    passes = FORWARD_FLOPS_PER_PARAM_TOKEN + BACKWARD_FLOPS_PER_PARAM_TOKEN
    attention_fwd = attention_forward_flops_per_token(layers, attention_width, seq_len)
    share = CAUSAL_EXECUTED_SHARE[attention] if causal else 1.0
    attention_model = passes / FORWARD_FLOPS_PER_PARAM_TOKEN * attention_fwd
    model = passes * matmul_params + attention_model
    if recompute == "full":
        extra = FORWARD_FLOPS_PER_PARAM_TOKEN * (matmul_params - head_params - tail_params) + attention_fwd * share
    elif recompute == "selective":
        extra = attention_fwd * share
    else:
        extra = 0.0
    executed = passes * matmul_params + attention_model * share + extra
    return FlopsPerToken(model, executed, matmul_params, attention_model, extra)


def utilisation(model_per_token: float, executed_per_token: float, mfu: float | None = None,
                hfu: float | None = None) -> tuple[float, float]:
    """(MFU, HFU) from whichever was given: the same tokens/s, so MFU / HFU = model / executed."""
    if mfu is not None:
        return mfu, mfu * executed_per_token / model_per_token
    if hfu is None:
        raise ValueError("give mfu or hfu")
    return hfu * model_per_token / executed_per_token, hfu


def tokens_per_second(peak_flops: float, mfu: float, model_per_token: float) -> float:
    """Tokens/s per device at a given MFU: peak x MFU / model FLOPs per token."""
    return peak_flops * mfu / model_per_token
