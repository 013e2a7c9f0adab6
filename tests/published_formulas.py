"""Published formulas, written out as the papers state them, for the tests to compare with.

Korthikanti et al. 2022 (§4, activation bytes of one GPT layer with 16-bit activations) and
Narayanan et al. 2021 (§5.1, FLOPs of a training step). trainplan itself does not use them:
its one activation account is accounts/activations.py and its one FLOPs account
accounts/compute.py; these are the outside values those accounts are checked against.
"""

from typing import Any

import numpy as np

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}


def _recompute_code(recompute):  # noqa: ANN001, ANN202
    return np.asarray(RECOMPUTE_CODES[recompute]) if isinstance(recompute, str) else np.asarray(recompute)


def korthikanti_activation_bytes_per_layer(s: Any, b: Any, h: Any, a: Any, t: Any = 1, sequence_parallel: Any = False,
                                           recompute: Any = "none", attention_scores: bool = True) -> Any:
    """Korthikanti et al. 2022's activation bytes of one layer on one device (16-bit activations).

    `attention_scores=False`: a fused (flash) attention kernel never stores the a s x s scores,
    softmax and dropout mask, so the 5 a s / h term is gone whatever the recomputation."""
    sp = np.asarray(sequence_parallel, dtype=bool)
    code = _recompute_code(recompute)
    sbh = np.asarray(s, dtype=np.float64) * b * h
    replicated = np.where(sp, 10.0 / t, 10.0)
    scores = 5.0 * a * s / (np.asarray(h, dtype=np.float64) * t) * float(attention_scores)
    kept = np.where(code == 0, replicated + 24.0 / t + scores,
                    replicated + 24.0 / t)
    full = np.where(sp, 2.0 / t, 2.0)
    return sbh * np.where(code == 2, full, kept)


def narayanan_flops_per_step(batch: Any, s: Any, layers: Any, h: Any, vocab: Any, recompute: Any = "none") -> Any:
    """Narayanan et al. 2021's FLOPs of one training step of `batch` sequences (standard block)."""
    code = _recompute_code(recompute)
    l = np.asarray(layers, dtype=np.float64)
    base = batch * np.asarray(s, dtype=np.float64) * l * np.asarray(h, dtype=np.float64) ** 2
    no_recompute = 72.0 * base * (1 + s / (6.0 * h) + vocab / (12.0 * h * l))
    full = 96.0 * base * (1 + s / (6.0 * h) + vocab / (16.0 * h * l))
    selective = 72.0 * base * (1 + 2.0 * s / (9.0 * h) + vocab / (12.0 * h * l))
    return np.select([code == 2, code == 1], [full, selective], no_recompute)


