"""A workload's parallel layout as a report section, and the search over layouts (issue 13).

`parallel_section(w, model)` plans the workload's own `[parallel]` layout; `search(w)` plans
every layout of the same model on the same devices at the same global batch, as one grid
of numpy arrays, and lists the fastest that fit (Calculon's search, vectorised).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.accounts import parallel, step_ops
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.planning import execution as execution_mod
from trainplan.planning import model_terms
from trainplan.errors import UserError
from trainplan.units import percent
from trainplan.workload.layout_rules import check_layout
from trainplan.workload.schema import Workload

# The candidate grid of the search (each filtered by what it must divide). Interleaving: any
# number of virtual stages that divides a stage's layers (or partition units).
CONTEXT_CHOICES = (1, 2, 4, 8, 16)
# Context parallelism pays only for long sequences: each rank keeps at least this many tokens of a
# sequence (Megatron-core and NeMo advise it from 8K-token sequences up: 8K split in two)
CONTEXT_MIN_TOKENS_PER_RANK = 4096
MICRO_BATCH_CHOICES = (1, 2, 4, 8)
# Two layouts tie when their step times differ by less than this share (the search shows the one
# of least memory and counts the rest)
TWIN_TOLERANCE = 1e-3
RECOMPUTE_CHOICES = ("none", "selective", "full")
ZERO_CHOICES = (0, 1, 2, 3)


def model_shape(w: Workload, model: Any) -> parallel.ModelShape | None:
    """The layout's view of the model, or None when the workload gives no shape."""
    if not execution_mod.has_shape(model):
        return None
    return execution_mod.model_shape(w, model)


def hardware(w: Workload) -> parallel.Hardware:
    return execution_mod.hardware(w)


def parallel_section(w: Workload, model: Any, inputs: Any = None) -> dict[str, Any]:
    """The `parallel` section of the plan report: the layout of the one execution model, its memory
    per device and time per step (the same figures as the memory, compute and network tables)."""
    if inputs is None:
        from trainplan.planning.inputs import PlanInputs

        inputs = PlanInputs.of(w, model=model)
    a = inputs.execution
    hw = execution_mod.hardware(w)
    ex = execution_mod.execution_of(w)
    f = float
    return {
        "layout": {"tensor": ex.tensor, "pipeline": ex.pipeline, "interleave": ex.interleave, "schedule": ex.schedule,
                   "sequence": ex.sequence, "context": ex.context, "expert": ex.expert, "data": int(a.data),
                   "micro_batch": w.training.micro_batch, "micro_batches": int(a.micro_batches),
                   "zero": w.training.zero, "sharding": ex.sharding, "recompute": ex.recompute,
                   "attention": ex.attention, "flash_attention": ex.attention != "eager",
                   "name": ex.name(int(a.data))},
        "memory": {"weights_bytes": f(a.weights_bytes), "grads_bytes": f(a.grads_bytes),
                   "optimizer_bytes": f(a.optimizer_bytes), "gathered_bytes": f(a.gathered_bytes),
                   "activation_bytes": f(a.activation_bytes),
                   "first_stage_bytes": f(a.first_stage_bytes), "last_stage_bytes": f(a.last_stage_bytes),
                   "per_device_bytes": f(a.per_device_bytes), "device_memory": hw.device_memory,
                   "fits": bool(a.fits)},
        "time": {"step_seconds": f(a.step_seconds), "compute_seconds": f(a.compute_seconds),
                 "memory_bound_seconds": f(a.memory_bound_seconds), "tensor_seconds": f(a.tensor_seconds),
                 "context_seconds": f(a.context_seconds), "expert_seconds": f(a.expert_seconds),
                 "pipeline_send_seconds": f(a.pipeline_send_seconds), "bubble_seconds": f(a.bubble_seconds),
                 "bubble_share": f(a.bubble_share), "data_parallel_seconds": f(a.data_parallel_seconds),
                 "optimizer_seconds": f(a.optimizer_seconds), "compute_source": a.compute_source},
        "mfu": f(a.mfu), "hfu": f(a.hfu), "model_flops_per_step": f(a.model_flops),
        "executed_flops_per_device": f(a.flops_per_device), "tokens_per_step": f(a.tokens_per_step),
        "network": {"bytes_per_step": f(a.bytes_per_step), "tensor_tier": str(a.tensor_tier),
                    "pipeline_tier": str(a.pipeline_tier), "data_tier": str(a.data_tier),
                    "intra_bus_bandwidth": hw.intra_bus_bandwidth, "inter_bus_bandwidth": hw.inter_bus_bandwidth,
                    "devices_per_node": hw.devices_per_node},
        # the matmuls' achieved share of peak where the step is predicted (accounts/step_ops.py)
        "matmul_efficiency": (f(a.achieved_matmul_efficiency) if a.compute_source == "predicted"
                              else hw.matmul_efficiency),
    }


# ---------------------------------------------------------------- search


@dataclass(frozen=True)
class Grid:
    """Candidate layouts as parallel arrays (one entry per candidate)."""

    tensor: np.ndarray
    pipeline: np.ndarray
    interleave: np.ndarray
    context: np.ndarray
    expert: np.ndarray
    data: np.ndarray
    sequence: np.ndarray
    micro_batch: np.ndarray
    micro_batches: np.ndarray
    recompute: np.ndarray
    zero: np.ndarray
    embedding_stages: np.ndarray  # 1: the embedding and the head are partition units of the pipeline

    def __len__(self) -> int:
        return int(self.tensor.size)

    def take(self, keep: np.ndarray) -> "Grid":
        return Grid(**{k: v[keep] for k, v in vars(self).items()})


def _divisors(n: int, limit: int) -> list[int]:
    return [k for k in range(1, min(n, limit) + 1) if n % k == 0]


def _stage_splits(layers: int, devices: int) -> list[tuple[int, int, int]]:
    """(pipeline, interleave, embedding_stages): p stages of v chunks over the layers, or over the layers
    and the two embedding units (uneven stages: the first and last hold one layer fewer)."""
    out = []
    for p in range(1, min(devices, layers + 2) + 1):
        for u in (0, 1):
            units = layers + 2 * u
            if (u and p == 1) or units % p:
                continue
            out += [(p, v, u) for v in _divisors(units // p, units) if v == 1 or p > 1]
    return out


def candidate_grid(shape: parallel.ModelShape, devices: int, global_batch: int) -> Grid:
    """Every layout of `devices` that divides what it must and keeps `global_batch` sequences per step."""
    tensors = [t for t in (2**k for k in range(12)) if t <= devices and shape.heads % t == 0]
    splits = _stage_splits(shape.layers, devices)
    experts = _divisors(shape.experts, devices)
    contexts = [c for c in CONTEXT_CHOICES if shape.seq_len % c == 0 and c <= devices
                and (c == 1 or shape.seq_len // c >= CONTEXT_MIN_TOKENS_PER_RANK)]
    rows = [(t, p, v, c, e, sp, b, rc, z, u)
            for t, (p, v, u), c, e, sp, b, rc, z in itertools.product(
                tensors, splits, contexts, experts, (0, 1), MICRO_BATCH_CHOICES, range(len(RECOMPUTE_CHOICES)),
                ZERO_CHOICES)]
    grid = np.array(rows, dtype=np.int64).reshape(-1, 10)
    t, p, v, c, e, sp, b, rc, z, u = grid.T
    split = t * p * c
    ok = devices % split == 0
    d = np.where(ok, devices // np.maximum(split, 1), 0)
    ok &= d > 0
    ok &= global_batch % np.maximum(b * d, 1) == 0
    m = np.where(ok, global_batch // np.maximum(b * d, 1), 0)
    ok &= m > 0
    ok &= (v == 1) | ((p > 1) & (m % p == 0))
    ok &= (sp == 0) | (t > 1)
    ok &= (d * c) % e == 0
    ok &= (z == 0) | (d * c > 1)  # ZeRO needs a data-parallel group to shard over
    ok &= (e == 1) | (shape.experts > 1)  # expert parallelism only for a mixture of experts
    keep = np.flatnonzero(ok)
    return Grid(tensor=t[keep], pipeline=p[keep], interleave=v[keep], context=c[keep], expert=e[keep],
                data=d[keep], sequence=sp[keep].astype(bool), micro_batch=b[keep], micro_batches=m[keep],
                recompute=rc[keep], zero=z[keep], embedding_stages=u[keep])


def collapse_twins(order: np.ndarray, step: np.ndarray, memory: np.ndarray,
                   simpler: np.ndarray | None = None) -> list[tuple[int, int]]:
    """(shown, ties) in order of step time: layouts whose step times lie within TWIN_TOLERANCE of the
    group's fastest are one group; the one of least memory is shown (of those within TWIN_TOLERANCE of
    the least, the one of least `simpler`, e.g. context parallelism), the others counted as ties."""
    groups: list[list[int]] = []
    for i in order:
        if groups and step[i] <= step[groups[-1][0]] * (1.0 + TWIN_TOLERANCE):
            groups[-1].append(int(i))
        else:
            groups.append([int(i)])
    rank = simpler if simpler is not None else np.zeros(len(step))
    out = []
    for g in groups:
        least = min(memory[k] for k in g)
        near = [k for k in g if memory[k] <= least * (1.0 + TWIN_TOLERANCE)]
        out.append((min(near, key=lambda k: (rank[k], memory[k], k)), len(g) - 1))
    return out


def best_per_layout(order: np.ndarray, step: np.ndarray, tensor: np.ndarray, pipeline: np.ndarray,
                    context: np.ndarray, expert: np.ndarray) -> list[tuple[int, int]]:
    """(shown, others) in order of step time: the fastest setting of each parallel layout (TP, PP, CP,
    EP), with the count of its slower settings. A layout with context or expert parallelism that is no
    faster (within TWIN_TOLERANCE) than the same layout without it is left out: it does not pay."""
    first: dict[tuple[int, ...], int] = {}
    count: dict[tuple[int, ...], int] = {}
    for i in order:
        key = (int(tensor[i]), int(pipeline[i]), int(context[i]), int(expert[i]))
        first.setdefault(key, int(i))
        count[key] = count.get(key, 0) + 1
    out = []
    for (t, p, c, e), i in first.items():
        plain = first.get((t, p, 1, 1))
        if (c > 1 or e > 1) and plain is not None and step[plain] <= step[i] * (1.0 + TWIN_TOLERANCE):
            continue
        out.append((i, count[(t, p, c, e)] - 1))
    return out


def reason(row: dict[str, Any], best: dict[str, Any] | None, devices_per_node: int) -> str:
    """A short reason for a layout, in a practitioner's words: what its choices buy against its cost."""
    parts = []
    if row["tensor"] > 1:
        where = "inside a node" if row["tensor"] <= devices_per_node else "across nodes"
        parts.append(f"TP {row['tensor']} {where}" + (" with SP" if row["sequence"] else ""))
    if row["pipeline"] > 1:
        v = f" x {row['interleave']} virtual" if row["interleave"] > 1 else ""
        uneven = ", embedding and head as stages" if row["embedding_stages"] else ""
        if row["bubble_share"] < 1:
            parts.append(f"PP {row['pipeline']}{v} cuts the bubble to {percent(row['bubble_share'])}{uneven}")
        else:  # fewer micro-batches than stages: the bubble outlasts the work; "cuts it to 150 %" reads as nonsense
            parts.append(f"PP {row['pipeline']}{v} with {row['micro_batches']} micro-batch"
                         f"{'es' if row['micro_batches'] != 1 else ''} idles {row['bubble_share']:.3g}x the compute "
                         f"in its bubble{uneven}")
    if row["context"] > 1:
        parts.append(f"CP {row['context']} splits the {row['seq_tokens']}-token sequence "
                     f"({row['seq_tokens'] // row['context']} tokens a rank)")
    if row["zero"]:
        what = {1: "optimizer state", 2: "optimizer state and gradients", 3: "state and weights"}[row["zero"]]
        parts.append(f"ZeRO-{row['zero']} shards the {what}")
    if row["recompute"] == "none":
        parts.append("no recomputation")
    elif row.get("ties"):  # settings as fast exist (the step follows cluster.mfu): this one holds least memory
        parts.append(f"{row['recompute']} recomputation: the least memory at this step")
    else:
        parts.append(f"{row['recompute']} recomputation to fit")
    if best is not None and row is not best:
        parts.append(f"{percent(row['step_seconds'] / best['step_seconds'] - 1.0, signed=True)} on the fastest")
    return "; ".join(parts)


SEARCH_BY = ("setting", "layout")


def search(w: Workload, model: Any, devices: int | None = None, top: int = 10,
           include_unfit: bool = False, by: str = "setting") -> dict[str, Any]:
    """The fastest layouts that fit, with memory and step time for each.

    by = "setting": every distinct setting, twins (step times within TWIN_TOLERANCE) collapsed;
    by = "layout": one row per parallel layout (TP, PP, CP, EP), its fastest setting of the rest
    (interleave, micro-batch, recomputation, ZeRO, SP), `ties` counting its other settings."""
    if by not in SEARCH_BY:
        raise UserError("--by", f"expected one of {', '.join(SEARCH_BY)}, got {by!r}")
    shape = model_shape(w, model)
    if shape is None:
        raise UserError("model.layers", "a shape (model.layers and model.width, or model.hf_config) to search "
                        "parallel layouts")
    n = int(devices or w.cluster.count)
    d_now = check_layout(w.cluster.count, w.parallel.tensor, w.parallel.pipeline, w.parallel.interleave,
                                  w.parallel.context, w.parallel.expert, w.parallel.data, w.parallel.schedule,
                                  w.parallel.sequence, shape.heads, shape.layers, shape.experts)
    global_batch = int(w.training.micro_batch * w.training.grad_accum * d_now)
    grid = candidate_grid(shape, n, global_batch)
    if execution_mod.attention_kind(w) != "eager":  # no scores kept: selective is the same as none
        grid = grid.take(grid.recompute != RECOMPUTE_CHOICES.index("selective"))
    fw = step_ops.framework(w.parallel.framework)  # only the ZeRO stages the framework offers
    grid = grid.take(np.where(grid.pipeline > 1, np.isin(grid.zero, fw.pipeline_zero_stages),
                              np.isin(grid.zero, fw.zero_stages)))
    for degree in set(step_ops.PARALLELISMS) - set(fw.parallelisms):  # and only its model-parallel degrees
        grid = grid.take(getattr(grid, degree) == 1)
    if len(grid) == 0:
        raise UserError("cluster.count", f"no layout of {n} devices divides the model and a global batch of "
                        f"{global_batch} sequences")
    hw = hardware(w)
    recompute_codes = np.array([parallel.RECOMPUTE_CODES[r] for r in RECOMPUTE_CHOICES])[grid.recompute]
    from trainplan.planning.inputs import PlanInputs

    inputs = PlanInputs.of(w, model=model)
    activations, _ = execution_mod.layer_activations(w, model, inputs.terms)
    recipe, _ = model_terms.recipe_of(w)
    state = state_bytes_per_param(w.training.precision, w.training.optimizer)
    kind = execution_mod.compute_source(w, model)
    utilisation = None if kind == "predicted" else (w.cluster.hfu if kind == "hfu" else w.cluster.mfu)
    a = parallel.parallel_account(
        shape, hw, tensor=grid.tensor, pipeline=grid.pipeline, interleave=grid.interleave, context=grid.context,
        expert=grid.expert, data=grid.data, sequence_parallel=grid.sequence, micro_batch=grid.micro_batch,
        micro_batches=grid.micro_batches, recompute=recompute_codes,
        zero=model_terms.zero_codes(grid.zero, w.parallel.framework),
        schedule=np.zeros(len(grid), dtype=np.int64), attention=execution_mod.attention_kind(w),
        activations=activations, activation_bytes_per_value=bytes_per_element(w.training.precision),
        state_of=execution_mod.state_function(w, model, recipe), weight_bytes=state.weights,
        grad_bytes=state.grads, utilisation=utilisation, utilisation_kind=kind,
        scaling_efficiency=execution_mod.scaling_factor(w, n), end_to_end=bool(w.cluster.mfu_end_to_end),
        embedding_stages=grid.embedding_stages, **execution_mod.framework_kwargs(w))
    fits = np.asarray(a.fits, dtype=bool)
    step = np.asarray(a.step_seconds, dtype=np.float64)
    memory = np.asarray(a.per_device_bytes, dtype=np.float64)
    order = np.lexsort((memory, step))
    if not include_unfit:
        order = order[fits[order]]
    # among twins, the simpler: no context or expert parallelism, less ZeRO, fewer virtual stages
    simpler = (grid.context * grid.expert * 1000 + grid.zero * 100 + grid.interleave).astype(np.float64)
    shown = collapse_twins(order, step, memory, simpler) if by == "setting" else \
        best_per_layout(order, step, grid.tensor, grid.pipeline, grid.context, grid.expert)
    rows: list[dict[str, Any]] = []
    tokens = global_batch * shape.seq_len
    for i, ties in shown[:top]:
        rows.append({
            "tensor": int(grid.tensor[i]), "pipeline": int(grid.pipeline[i]), "interleave": int(grid.interleave[i]),
            "schedule": "interleaved" if grid.interleave[i] > 1 else "1f1b", "sequence": bool(grid.sequence[i]),
            "context": int(grid.context[i]), "expert": int(grid.expert[i]), "data": int(grid.data[i]),
            "micro_batch": int(grid.micro_batch[i]), "micro_batches": int(grid.micro_batches[i]),
            "recompute": RECOMPUTE_CHOICES[int(grid.recompute[i])], "zero": int(grid.zero[i]),
            "embedding_stages": int(grid.embedding_stages[i]),
            "step_seconds": float(step[i]), "tokens_per_second": tokens / float(step[i]),
            "per_device_bytes": float(memory[i]), "fits": bool(fits[i]), "mfu": float(a.mfu[i]),
            "bubble_share": float(a.bubble_share[i]), "tensor_tier": str(a.tensor_tier[i]), "ties": int(ties),
            "seq_tokens": int(shape.seq_len),
        })
    for r in rows:
        r["reason"] = reason(r, rows[0], hw.devices_per_node)
    return {"devices": n, "global_batch": global_batch, "seq_len": shape.seq_len, "candidates": len(grid),
            "fitting": int(fits.sum()), "distinct": len(shown), "by": by, "device_memory": hw.device_memory,
            "layouts": rows}


def rank_of(result: dict[str, Any], **layout: Any) -> int | None:
    """1-based place of the first listed layout whose keys equal `layout` (None when not listed)."""
    for place, row in enumerate(result["layouts"], start=1):
        if all(row[k] == v for k, v in layout.items()):
            return place
    return None


# ---------------------------------------------------------------- when it does not fit

#: device counts tried beyond the workload's, as multiples of it, when no layout of its devices fits
MORE_DEVICES = (2, 4, 8, 16, 32, 64)


def fit_change(w: Workload, model: Any) -> dict[str, Any] | None:
    """The cheapest change that makes the job fit: the fastest layout of the same devices that fits
    (micro-batch, recomputation, ZeRO stage and layout searched together), else the fewest devices
    (in multiples of cluster.count) on which one fits. None without a shape or when nothing found."""
    if model_shape(w, model) is None:
        return None
    for factor in (1,) + MORE_DEVICES:
        try:
            found = search(w, model, devices=w.cluster.count * factor, top=1)
        except UserError:
            continue
        if found["layouts"]:
            row = found["layouts"][0]
            return {"devices": found["devices"], "layout": row, "change": describe_change(w, row, found["devices"]),
                    "per_device_bytes": row["per_device_bytes"], "step_seconds": row["step_seconds"],
                    "device_memory": found["device_memory"]}
    return None


def layout_name(row: dict[str, Any]) -> str:
    parts = [f"{n} {row[k]}" for k, n in (("tensor", "TP"), ("pipeline", "PP"), ("context", "CP"),
                                           ("expert", "EP"), ("data", "DP")) if row.get(k, 1) > 1]
    if row.get("interleave", 1) > 1:
        parts.append(f"{row['interleave']} virtual stages")
    return " x ".join(parts) or "one device"


def describe_change(w: Workload, row: dict[str, Any], devices: int) -> str:
    """The changes from the workload to layout `row`, in words."""
    t, p = w.training, w.parallel
    said = []
    if devices != w.cluster.count:
        said.append(f"{devices} devices")
    now = {"tensor": p.tensor, "pipeline": p.pipeline, "context": p.context, "expert": p.expert}
    if any(row[k] != v for k, v in now.items()) or devices != w.cluster.count:
        said.append(layout_name(row))
    if row["sequence"] != p.sequence:
        said.append("sequence parallelism" if row["sequence"] else "no sequence parallelism")
    if row["micro_batch"] != t.micro_batch:
        said.append(f"micro-batch {row['micro_batch']} x {row['micro_batches']}")
    if row["recompute"] != t.recompute:
        said.append(f"{row['recompute']} recomputation" if row["recompute"] != "none" else "no recomputation")
    if row["zero"] != t.zero:
        said.append(f"ZeRO-{row['zero']}" if row["zero"] else "no ZeRO")
    return ", ".join(said) or layout_name(row)
