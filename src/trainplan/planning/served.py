"""The model `trainplan serve` and the plan's serving section serve, from the workload's model facts.

Serving throughput and cost need only the parameter count (weights P x bytes, decode FLOPs 2 P per
token); the KV cache needs the shape: layers, KV heads and the width of one head. A model given by
its parameter count alone is served all the same: its KV figures are None and `kv_missing` names,
in words, the keys that would size them (accounts/serving.py carries that into `kv_cache_missing`).
"""

from __future__ import annotations

from typing import Any

from trainplan.accounts import serving as serving_mod

SHAPE_KEYS_HINT = "or model.hf_config"
"""The other way to give a shape: a Hugging Face config.json sizes layers, heads and KV heads."""


def kv_missing(layers: int | None, kv_heads: int | None, head_dim: float | None) -> str:
    """What is missing to size the KV cache, in words; "" when nothing is."""
    missing = []
    if layers is None:
        missing.append("model.layers")
    if kv_heads is None or head_dim is None:
        missing.append("model.width")
    if not missing:
        return ""
    keys = " and ".join(missing)
    verb = "is" if len(missing) == 1 else "are"
    return (f"{keys} ({SHAPE_KEYS_HINT}) {verb} needed to size the KV cache; {WITHOUT_SHAPE}")


WITHOUT_SHAPE = ("without a shape, tokens/s counts the weights' read only (an upper bound) and the largest "
                 "batch is bounded by weights only")
"""What a shapeless serving estimate leaves out, in words (see accounts/serving.py)."""


def served_model(model: Any, name: str = "workload model") -> serving_mod.ServedModel:
    """ServedModel from planning.evaluate.ModelFacts: the parameter count always, the KV shape
    (layers, KV heads, head width) where the facts give it, and a config.json's per-layer KV layout
    (sliding windows, DeepSeek's compressed cache) where the count read one."""
    kv_heads = model.kv_heads or model.heads
    head_dim = model.head_dim
    if head_dim is None and model.width is not None and model.heads:
        head_dim = model.width / model.heads
    layers = None if model.layers is None else int(model.layers)
    kv_heads = None if kv_heads is None else int(kv_heads)
    head_dim = None if head_dim is None else float(head_dim)
    kv_layers = getattr(getattr(model, "count", None), "kv_layers", None)  # a config.json's windows, MLA
    return serving_mod.ServedModel(params=model.params, layers=layers, kv_heads=kv_heads, head_dim=head_dim,
                                   name=name, active_params=model.active_params,
                                   kv_missing=kv_missing(layers, kv_heads, head_dim), kv_layers=kv_layers,
                                   heads=None if model.heads is None else int(model.heads),
                                   width=None if model.width is None else int(model.width))
