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
from trainplan.catalogue.interconnect import platform
from trainplan.errors import UserError
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
    if model.layers is None or model.width is None:
        return None
    heads = int(model.heads or max(1, model.width // 64))
    vocab = int(model.vocab or 0)
    return parallel.ModelShape(
        layers=int(model.layers), width=int(model.width), heads=heads, kv_heads=int(model.kv_heads or heads),
        vocab=vocab, seq_len=int(w.training.seq_len), params=float(model.params),
        active_params=float(model.active_params), embedding_params=float(vocab * model.width),
        tied=bool(w.model.tied), experts=int(w.model.experts), experts_per_token=int(w.model.experts_per_token))


def hardware(w: Workload) -> parallel.Hardware:
    """Device and network tiers: the workload's figures, else the catalogue's node platform.
    A measured link (calibration file) is already a bus bandwidth; a nominal one is scaled by
    its tier's efficiency."""
    acc, c = w.accelerator, w.cluster
    plat = platform(acc.key)
    measured = {k for k, v in w.provenance.items() if v.kind == "measured"}
    intra = c.interconnect if c.interconnect is not None else acc.interconnect
    if "cluster.interconnect" not in measured:
        intra *= plat.intra.efficiency
    inter = c.node_link if c.node_link is not None else plat.inter.bandwidth * plat.nics_per_device
    if "cluster.node_link" not in measured:
        inter *= plat.inter.efficiency
    efficiency = w.parallel.efficiency if w.parallel.efficiency is not None else plat.matmul_efficiency
    kernels = step_ops.kernel_efficiency(acc.key)
    if w.parallel.efficiency is not None:  # a given matmul efficiency replaces the GEMM curve: flat
        kernels = kernels.with_values(gemm_max=float(w.parallel.efficiency), gemm_half_intensity=0.0)
    kernels = kernels.scaled(step_ops.framework(w.parallel.framework).efficiency)  # what the framework reaches
    return parallel.Hardware(
        peak_flops=acc.peak(w.training.precision), matmul_efficiency=efficiency,
        memory_bandwidth=acc.memory_bandwidth, device_memory=acc.memory, runtime_buffers=c.runtime_buffers,
        headroom=c.headroom, devices_per_node=int(c.devices_per_node or plat.devices_per_node),
        intra_bus_bandwidth=intra, intra_latency=plat.intra.latency, inter_bus_bandwidth=inter,
        inter_latency=plat.inter.latency, kernels=kernels, intra_half_bytes=step_ops.half_bytes(plat.intra.key),
        inter_half_bytes=step_ops.half_bytes(plat.inter.key),
        intra_send_half_bytes=step_ops.half_bytes(plat.intra.key, "send"),
        inter_send_half_bytes=step_ops.half_bytes(plat.inter.key, "send"))


def _state_kwargs(w: Workload) -> dict[str, Any]:
    state = state_bytes_per_param(w.training.precision, w.training.optimizer)
    weights, grads, master, moments = state.weights, state.grads, state.master, state.optimizer
    if w.training.state_recipe is not None:  # a named recipe (Megatron's fp32 main_grad: 18 B/param)
        from trainplan.accounts.training_state import recipe

        r = recipe(w.training.state_recipe)
        weights, grads, master, moments = r.weights, r.grads, r.master, r.moments
    fw = step_ops.framework(w.parallel.framework)
    return dict(activation_bytes_per_value=bytes_per_element(w.training.precision), weight_bytes=weights,
                grad_bytes=grads, master_bytes=master, optimizer_bytes=moments,
                dp_overlap=fw.dp_overlap, zero3_prefetch=fw.zero3_prefetch, overlap_cost=fw.overlap_cost)


def account_of(w: Workload, model: Any) -> tuple[parallel.ParallelAccount, parallel.Hardware] | None:
    shape = model_shape(w, model)
    if shape is None:
        return None
    p, t = w.parallel, w.training
    d = parallel.check_layout(w.cluster.count, p.tensor, p.pipeline, p.interleave, p.context, p.expert, p.data,
                              p.schedule, p.sequence, shape.heads, shape.layers, shape.experts, t.seq_len,
                              t.grad_accum)
    hw = hardware(w)
    acct = parallel.parallel_account(
        shape, hw, tensor=p.tensor, pipeline=p.pipeline, interleave=p.interleave, context=p.context,
        expert=p.expert, data=d, sequence_parallel=p.sequence, micro_batch=t.micro_batch,
        micro_batches=t.grad_accum, recompute=t.recompute, zero=t.zero, schedule=p.schedule,
        flash_attention=p.flash_attention,
        embedding_stages=parallel.embedding_units(shape.layers, p.pipeline, p.interleave) or 0, **_state_kwargs(w))
    return acct, hw


def parallel_section(w: Workload, model: Any) -> dict[str, Any]:
    """The `parallel` section of the plan report: memory per device and time per step of the layout."""
    result = account_of(w, model)
    if result is None:
        return {"skipped": "model.layers and model.width: a shape is needed to plan a parallel layout"}
    a, hw = result
    p = w.parallel
    f = float
    return {
        "layout": {"tensor": p.tensor, "pipeline": p.pipeline, "interleave": p.interleave, "schedule": p.schedule,
                   "sequence": p.sequence, "context": p.context, "expert": p.expert, "data": int(a.data),
                   "micro_batch": w.training.micro_batch, "micro_batches": int(a.micro_batches),
                   "zero": w.training.zero, "recompute": w.training.recompute,
                   "flash_attention": p.flash_attention},
        "memory": {"weights_bytes": f(a.weights_bytes), "grads_bytes": f(a.grads_bytes),
                   "optimizer_bytes": f(a.optimizer_bytes), "activation_bytes": f(a.activation_bytes),
                   "first_stage_bytes": f(a.first_stage_bytes), "last_stage_bytes": f(a.last_stage_bytes),
                   "per_device_bytes": f(a.per_device_bytes), "device_memory": hw.device_memory,
                   "fits": bool(a.fits)},
        "time": {"step_seconds": f(a.step_seconds), "compute_seconds": f(a.compute_seconds),
                 "memory_bound_seconds": f(a.memory_bound_seconds), "tensor_seconds": f(a.tensor_seconds),
                 "context_seconds": f(a.context_seconds), "expert_seconds": f(a.expert_seconds),
                 "pipeline_send_seconds": f(a.pipeline_send_seconds), "bubble_seconds": f(a.bubble_seconds),
                 "bubble_share": f(a.bubble_share), "data_parallel_seconds": f(a.data_parallel_seconds),
                 "optimizer_seconds": f(a.optimizer_seconds)},
        "mfu": f(a.mfu), "model_flops_per_step": f(a.model_flops), "executed_flops_per_device": f(a.flops_per_device),
        "network": {"bytes_per_step": f(a.bytes_per_step), "tensor_tier": str(a.tensor_tier),
                    "pipeline_tier": str(a.pipeline_tier), "data_tier": str(a.data_tier),
                    "intra_bus_bandwidth": hw.intra_bus_bandwidth, "inter_bus_bandwidth": hw.inter_bus_bandwidth,
                    "devices_per_node": hw.devices_per_node},
        "matmul_efficiency": hw.matmul_efficiency,
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
        parts.append(f"PP {row['pipeline']}{v} cuts the bubble to {row['bubble_share']:.1%}{uneven}")
    if row["context"] > 1:
        parts.append(f"CP {row['context']} splits the {row['seq_tokens']}-token sequence "
                     f"({row['seq_tokens'] // row['context']} tokens a rank)")
    if row["zero"]:
        what = {1: "optimizer state", 2: "optimizer state and gradients", 3: "state and weights"}[row["zero"]]
        parts.append(f"ZeRO-{row['zero']} shards the {what}")
    parts.append("no recomputation" if row["recompute"] == "none" else f"{row['recompute']} recomputation to fit")
    if best is not None and row is not best:
        parts.append(f"{row['step_seconds'] / best['step_seconds'] - 1.0:+.1%} on the fastest")
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
    d_now = parallel.check_layout(w.cluster.count, w.parallel.tensor, w.parallel.pipeline, w.parallel.interleave,
                                  w.parallel.context, w.parallel.expert, w.parallel.data, w.parallel.schedule,
                                  w.parallel.sequence, shape.heads, shape.layers, shape.experts)
    global_batch = int(w.training.micro_batch * w.training.grad_accum * d_now)
    grid = candidate_grid(shape, n, global_batch)
    if w.parallel.flash_attention:  # no scores are kept: selective recomputation is the same as none
        grid = grid.take(grid.recompute != RECOMPUTE_CHOICES.index("selective"))
    if len(grid) == 0:
        raise UserError("cluster.count", f"no layout of {n} devices divides the model and a global batch of "
                        f"{global_batch} sequences")
    hw = hardware(w)
    recompute_codes = np.array([parallel.RECOMPUTE_CODES[r] for r in RECOMPUTE_CHOICES])[grid.recompute]
    a = parallel.parallel_account(
        shape, hw, tensor=grid.tensor, pipeline=grid.pipeline, interleave=grid.interleave, context=grid.context,
        expert=grid.expert, data=grid.data, sequence_parallel=grid.sequence, micro_batch=grid.micro_batch,
        micro_batches=grid.micro_batches, recompute=recompute_codes, zero=grid.zero,
        schedule=np.zeros(len(grid), dtype=np.int64), flash_attention=w.parallel.flash_attention,
        embedding_stages=grid.embedding_stages, **_state_kwargs(w))
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
