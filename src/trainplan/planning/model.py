"""The model a plan is for, resolved once: its parameter count (model.params, or counted from a
shape or a config.json) and the shape that sizes activations and the KV cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.errors import UserError
from trainplan.workload.schema import Workload


@dataclass(frozen=True)
class ModelFacts:
    params: float  # the count (all experts)
    active_params: float  # used per token: what FLOPs and the pipeline demand see
    layers: int | None
    width: int | None
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    vocab: int | None
    source: str  # how the count was obtained
    count: Any = None  # the ParamCount when one was made (issue 12: the architecture's terms)


def resolve_model(w: Workload) -> ModelFacts:
    """model.params is the count when given; a shape or a config.json sizes activations and KV."""
    from trainplan.workload import params as params_mod
    from trainplan.workload.model_source import check_params_against_count

    m = w.model
    count = None
    if m.hf_config is not None:
        path = w.base_dir / m.hf_config
        try:
            count = params_mod.count_from_hf_config(params_mod.load_hf_config(path))
        except UserError as err:  # name the workload key and the file, not only the config's key
            where = err.where if str(path) in err.where else f"model.hf_config ({m.hf_config}): {err.where}"
            raise UserError(where, err.expected) from None
        source = f"exact count from {m.hf_config} ({count.family})"
    elif m.layers is not None and m.width is not None and (m.params is None or m.vocab is not None
                                                          or m.family != "standard"):
        try:
            count = params_mod.count_from_shape(
                m.layers, m.width, m.vocab or 0, m.ffn_width, m.heads, m.kv_heads, m.family, m.tied,
                m.experts, m.experts_per_token, head_dim=m.head_dim)
        except UserError as err:  # name the workload key, not the function argument
            where = err.where if err.where.startswith("model.") else f"model.{err.where}"
            raise UserError(where, err.expected) from None
        except (ValueError, TypeError) as err:
            raise UserError("model", f"expected a consistent shape ({err})") from None
        source = f"counted from the shape ({count.family})"
    if m.params is not None:
        if count is not None and m.hf_config is None and count.total > 0 and w.given("model.params"):
            # a count the person wrote (the built-in default's 93 M is the reference workload's, not theirs):
            # memory follows the count given and FLOPs the shape's terms, two models at once unless they agree
            check_params_against_count(float(m.params), count,
                                       "what the shape counts from model.layers, model.width, ...")
        params = active = float(m.params)
        if count is not None and count.total > 0:
            active = params * count.active / count.total
        source = "given as model.params"
    else:
        assert count is not None  # _check_consistency guarantees a count or a shape
        params, active = float(count.total), float(count.active)
    heads = count.heads if count is not None and m.heads is None and m.hf_config else m.heads
    kv_heads = count.kv_heads if count is not None and m.kv_heads is None and m.hf_config else m.kv_heads
    layers = count.layers if count is not None and m.layers is None else m.layers
    width = count.width if count is not None and m.width is None else m.width
    if heads is None and width is not None:
        heads = max(1, width // 64)
    if kv_heads is None:
        kv_heads = heads
    head_dim = (count.head_dim if count is not None and m.hf_config else
                (width // heads if width is not None and heads else None))
    if m.head_dim is not None:
        head_dim = m.head_dim
    vocab = count.vocab if count is not None and m.vocab is None else m.vocab
    tensor = w.parallel.tensor
    if heads is not None and m.heads is None and tensor > 1 and heads % tensor:
        # the schema checks a model.heads the person wrote; heads derived here (width / 64, or the config's)
        # are split over the same ranks, so the same rule holds (issue 29: TP 5 on 12 derived heads was planned)
        basis = f"model.hf_config's {heads}" if m.hf_config is not None else f"{heads}, model.width / 64"
        raise UserError("parallel.tensor", f"expected a divisor of the model's attention heads ({basis}), got {tensor}")
    return ModelFacts(params, active, layers, width, heads, kv_heads, head_dim, vocab, source, count)

