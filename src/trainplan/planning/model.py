"""The model a plan is for, resolved once: its parameter count (model.params, or counted from a
shape or a config.json) and the shape that sizes activations and the KV cache."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
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
    experts: int = 1  # routed experts a MoE layer holds (model.experts, or the config.json's count)
    experts_per_token: int = 1


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
    from_config = count is not None and m.hf_config is not None
    experts = int(count.experts) if from_config and not w.given("model.experts") else int(m.experts)
    per_token = int(count.experts_per_token) if from_config and not w.given("model.experts_per_token") \
        else int(m.experts_per_token)
    p = w.parallel
    if heads is not None and m.heads is None and p.tensor > 1 and heads % p.tensor:
        # the schema checks a model.heads the person wrote; heads derived here (width / 64, or the config's)
        # are split over the same ranks, so the same rule holds (issue 29: TP 5 on 12 derived heads was planned)
        basis = f"model.hf_config's {heads}" if m.hf_config is not None else f"{heads}, model.width / 64"
        raise UserError("parallel.tensor", f"expected a divisor of the model's attention heads ({basis}), got {p.tensor}")
    if from_config:  # the config's position table, and the layout's rules against its layers and experts
        from trainplan.workload.layout_rules import check_layout

        _within_learned_positions(w)
        check_layout(w.cluster.count, p.tensor, p.pipeline, p.interleave, p.context, p.expert, p.data, p.schedule,
                     p.sequence, heads, layers, experts, w.training.seq_len, w.training.grad_accum)
    return ModelFacts(params, active, layers, width, heads, kv_heads, head_dim, vocab, source, count, experts,
                      per_token)


def _within_learned_positions(w: Workload) -> None:
    """A model with a learned position table (GPT-2's n_positions, OPT's) runs on no device past its rows:
    training.seq_len and serving.context longer than the table are refused (issue 29). Found on the built
    module (one layer on the meta device: measure/model_probe.learned_position_rows), where torch and
    transformers are installed; without them the count is made by hand and this is not checked."""
    from trainplan.measure import trace

    asked = [(k, n) for k, n in (("training.seq_len", w.training.seq_len), ("serving.context", w.serving.context))
             if w.given(k)]
    if not asked or not trace.available():
        return
    import json

    from trainplan.workload.params import load_hf_config

    rows = _position_rows(json.dumps(load_hf_config(w.base_dir / str(w.model.hf_config)), sort_keys=True))
    if rows is None:
        return
    for key, tokens in asked:
        if tokens > rows:
            raise UserError(key, f"expected at most {rows:,} tokens, the rows of the model's learned position "
                            f"embedding (model.hf_config's max_position_embeddings / n_positions), got {tokens:,}")


@lru_cache(maxsize=32)
def _position_rows(config_json: str) -> int | None:
    """measure/model_probe.learned_position_rows of a config (as JSON text): one meta build per config, not
    one per plan of a sweep."""
    import json

    from trainplan.measure.model_probe import learned_position_rows

    return learned_position_rows(json.loads(config_json))
