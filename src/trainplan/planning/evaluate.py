"""From a validated Workload to the report: calls each account with plain numbers.

This is the only place that knows both the workload schema and the accounts'
signatures; the CLI, the HTML page, the sweep and the UI all go through it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainplan.accounts import bill as bill_mod
from trainplan.accounts import compute as compute_mod
from trainplan.accounts import energy as energy_mod
from trainplan.accounts import memory as memory_mod
from trainplan.accounts import network as network_mod
from trainplan.accounts import pipeline as pipeline_mod
from trainplan.accounts import serving as serving_mod
from trainplan.accounts import storage as storage_mod
from trainplan.accounts import training_cost as cost_mod
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.errors import UserError
from trainplan.workload.schema import Workload, leaf_value


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


def resolve_model(w: Workload) -> ModelFacts:
    """model.params is the count when given; a shape or a config.json sizes activations and KV."""
    from trainplan.workload import params as params_mod

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
                m.experts, m.experts_per_token)
        except UserError as err:  # name the workload key, not the function argument
            where = err.where if err.where.startswith("model.") else f"model.{err.where}"
            raise UserError(where, err.expected) from None
        except (ValueError, TypeError) as err:
            raise UserError("model", f"expected a consistent shape ({err})") from None
        source = f"counted from the shape ({count.family})"
    if m.params is not None:
        params = active = float(m.params)
        if count is not None and count.total > 0:
            active = params * count.active / count.total
        source = "model.params"
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
    vocab = count.vocab if count is not None and m.vocab is None else m.vocab
    return ModelFacts(params, active, layers, width, heads, kv_heads, head_dim, vocab, source)


def training_tokens(w: Workload) -> float:
    """training.tokens if given; for video, data.hours of every camera at n tokens a frame, times epochs."""
    if w.training.tokens is not None:
        return float(w.training.tokens)
    d = w.data
    n = float(pipeline_mod.tokens_per_frame(d.side, d.patch))
    return d.hours * pipeline_mod.SECONDS_PER_HOUR * d.fps * d.cameras * n * w.training.epochs


def pipeline_inputs(w: Workload, model: ModelFacts | None = None, **changes: Any) -> dict[str, Any]:
    """Keyword arguments of pipeline.pipeline_arrays for this workload (`changes` override)."""
    model = model or resolve_model(w)
    c, d = w.cluster, w.data
    acc = w.accelerator
    cache = cache_inputs(w)  # issue 14: the read stage mixes cached and remote rates
    args = dict(
        kind=d.kind, access=d.access, params=model.active_params, mfu=c.mfu,
        peak_flops=acc.peak(w.training.precision), cores=c.cores, core_fps_1080p=c.core_fps_1080p,
        nvdec=c.nvdec, video_decoders=acc.video_decoders, nvdec_fps_1080p=c.nvdec_fps_1080p, link=cache["read_rate"],
        host_to_device=c.host_to_device, width=d.width, height=d.height, fps=d.fps, cameras=d.cameras,
        bitrate=d.bitrate, gop=d.gop, side=d.side, patch=d.patch, bytes_per_token=d.bytes_per_token,
        tokenizer_rate=d.tokenizer_rate, tokenize_online=d.tokenize_online, prefetch=c.prefetch,
        flops_per_param_token=compute_mod.training_flops(1.0, 1.0, w.training.recompute),
    )
    args.update(changes)
    return args


def cache_inputs(w: Workload) -> dict[str, float]:
    """The cache what-if's inputs: cache and dataset sizes, both rates, the cached fraction and mixed rate."""
    d = w.data
    size = d.dataset_size
    if size is None:
        tokens = (w.training.tokens or 0.0) / w.training.epochs
        size = float(pipeline_mod.dataset_bytes(kind=d.kind, access=d.access, hours=d.hours, cameras=d.cameras,
                                                fps=d.fps, width=d.width, height=d.height, bitrate=d.bitrate,
                                                tokens=tokens, bytes_per_token=d.bytes_per_token))
    f = float(pipeline_mod.cached_fraction(w.storage.cache_size, size))
    rate = w.cluster.link if f == 0 else float(pipeline_mod.cached_read_rate(w.cluster.link, w.storage.cache_rate, f))
    return {"cache_size": w.storage.cache_size, "dataset_size": size, "cache_rate": w.storage.cache_rate,
            "remote_rate": w.cluster.link, "cached_fraction": f, "read_rate": rate}


def _bill_for(w: Workload, p: pipeline_mod.PipelineAccount, cores: float) -> bill_mod.BillAccount:
    pr = w.prices
    if p.kind == "video":
        frames_per_hour = p.frames_per_hour
        stored = p.decoded_bytes_per_hour if p.access == "decoded" else p.stored_bytes_per_hour
        read = p.read_bytes_per_token * p.tokens_per_hour
        demand = p.demand_fps
    else:
        # a token source: an "hour" of data is an hour of training on it at full speed
        frames_per_hour = p.demand_tokens_per_second * bill_mod.SECONDS_PER_HOUR
        stored = read = frames_per_hour * p.read_bytes_per_token
        demand = p.demand_tokens_per_second
    return bill_mod.bill_per_hour(
        frames_per_hour=frames_per_hour, demand_fps=demand, busy=p.busy, cores=cores,
        stored_bytes_per_hour=stored, read_bytes_per_hour=read, accelerator_hour=pr.accelerator_hour,
        core_hour=pr.core_hour, storage_gb_month=pr.storage_gb_month, transfer_gb=pr.transfer_gb,
        storage_months=pr.storage_months)


def _whole(x: Any) -> int | None:
    """A count as an int, or None where it is infinite or undefined (JSON has neither)."""
    x = float(x)
    return int(x) if math.isfinite(x) else None


def _num(x: Any) -> Any:
    """JSON-safe number: numpy scalars become Python ones, inf/nan become None (JSON has neither)."""
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return _num(obj)


def build_report(w: Workload) -> dict[str, Any]:
    """Every account of the plan as plain numbers in SI base units."""
    model = resolve_model(w)
    t, c = w.training, w.cluster
    acc = w.accelerator
    tokens = training_tokens(w)
    peak = acc.peak(t.precision)

    comp = compute_mod.compute_account(
        model.active_params, tokens, c.count, t.micro_batch, t.seq_len, t.grad_accum, peak, c.mfu,
        c.scaling_efficiency, t.recompute, c.mfu_end_to_end)

    state = state_bytes_per_param(t.precision, t.optimizer)
    act_bytes_per_value = bytes_per_element(t.precision)
    if model.width is not None and model.layers is not None:
        k = memory_mod.retained_tensors(t.saved_tensors_per_layer, t.recompute, t.selective_keep)
        activations = memory_mod.activation_bytes(t.micro_batch, t.seq_len, model.width, model.layers,
                                                  act_bytes_per_value, k)
    else:
        activations = 0.0  # no shape given: activations cannot be sized (said in the assumptions)
    mem = memory_mod.memory_account(model.params, state, t.zero, c.count, activations, c.runtime_buffers,
                                    c.headroom, acc.memory)

    link_rate = c.interconnect if c.interconnect is not None else acc.interconnect
    net = network_mod.network_account(model.params, state.grads, c.count, link_rate, comp.seconds_per_step,
                                      compute_mod.backward_share(t.recompute))

    pipe = pipeline_mod.pipeline_account(**pipeline_inputs(w, model))
    wall_seconds = float(pipeline_mod.wall_seconds(comp.seconds, pipe.busy))

    if w.data.kind == "video":
        unique_frames = w.data.hours * pipe.frames_per_hour
        data_bytes = unique_frames * (pipe.decoded_bytes_per_token if w.data.access == "decoded"
                                      else pipe.stored_bytes_per_token) * pipe.tokens_per_frame
    else:
        data_bytes = tokens / t.epochs * w.data.bytes_per_token
    sto = storage_mod.storage_account(
        data_bytes, model.params, state.restart, w.storage.checkpoints_kept, state.weights,
        w.storage.exports, w.storage.copies, w.storage.write_rate, w.storage.save_every, wall_seconds,
        t.epochs)

    bill = _bill_for(w, pipe, c.cores)
    report: dict[str, Any] = {
        "workload": {"accelerator": acc.key, "accelerator_name": acc.name, "params": model.params,
                     "active_params": model.active_params, "params_source": model.source, "tokens": tokens},
        "compute": {
            "flops": comp.flops, "steps": _whole(comp.steps), "seconds": comp.seconds,
            "seconds_per_step": comp.seconds_per_step, "tokens_per_step": comp.tokens_per_step,
            "sustained_flops": comp.sustained_flops, "scaling_applied": comp.scaling_applied,
            "wall_seconds": wall_seconds,
        },
        "memory": {
            "state_bytes": mem.state_bytes, "weights_bytes": mem.weights_bytes, "grads_bytes": mem.grads_bytes,
            "optimizer_bytes": mem.optimizer_bytes, "activation_bytes": mem.activation_bytes,
            "runtime_buffers": mem.runtime_buffers, "headroom_bytes": mem.headroom_bytes,
            "per_device_bytes": mem.per_device_bytes, "device_memory": mem.device_memory, "fits": mem.fits,
            "devices_to_run": _whole(mem.devices_to_run), "devices_to_train": _whole(mem.devices_to_train),
        },
        "network": {
            "gradient_bytes": net.gradient_bytes, "ring_bytes_per_step": net.ring_bytes_per_step,
            "link_rate": net.link_rate, "floor_seconds_per_step": net.floor_seconds_per_step,
            "backward_seconds_per_step": net.backward_seconds, "share_of_step": net.share_of_step,
            "verdict": net.verdict,
        },
        "storage": {
            "data_bytes": sto.data_bytes, "checkpoint_bytes": sto.checkpoint_bytes,
            "checkpoints_bytes": sto.checkpoints_bytes, "exports_bytes": sto.exports_bytes,
            "retained_bytes": sto.retained_bytes, "input_byte_rate": sto.input_byte_rate,
            "save_seconds": sto.save_seconds, "save_share": sto.save_share,
        },
        "pipeline": {**pipeline_report(pipe), "cache": pipeline_mod.cache_what_if(
            pipeline_inputs(w, model), **{k: v for k, v in cache_inputs(w).items()
                                          if k in ("cache_size", "dataset_size", "cache_rate", "remote_rate")})},
        "bill": bill_report(w, model, pipe, bill),
    }
    extra_accounts(w, model, report)
    report["verdict"] = verdict(report)
    report["assumptions"] = assumptions(w)
    return clean(report)


def pipeline_report(p: pipeline_mod.PipelineAccount) -> dict[str, Any]:
    out = asdict(p)
    stages = out.pop("stage_tokens_per_second")
    out["stages"] = {name: {"tokens_per_second": v} for name, v in stages.items()}
    return out


def bill_report(w: Workload, model: ModelFacts, p: pipeline_mod.PipelineAccount,
                bill: bill_mod.BillAccount) -> dict[str, Any]:
    pr, c, d = w.prices, w.cluster, w.data
    out: dict[str, Any] = {
        "total": bill.total, "bytes": bill.bytes, "storage": bill.storage, "transfer": bill.transfer,
        "cores": bill.cores, "idle_accelerator": bill.idle_accelerator, "shares": bill.shares,
        "accelerator_seconds_per_hour": bill.accelerator_seconds, "useful_seconds_per_hour": bill.useful_seconds,
        "per_epochs": {str(e): bill_mod.over_epochs(bill, e) for e in (1, 10)},
    }
    if pr.data_hour > 0:
        out["transport_share"] = bill_mod.transport_share(bill.total, pr.data_hour)
    if p.kind != "video":
        return out
    # decisions the bill exists for
    frames = d.hours * p.frames_per_hour
    out["epoch_seconds"] = float(pipeline_mod.wall_seconds(frames / (c.count * p.demand_fps), p.busy))
    if p.access != "decoded" and p.core_fps > 0:
        per_epoch = bill_mod.decode_cost_per_epoch(p.frames_per_hour, p.decoded_per_used, p.core_fps, pr.core_hour)
        out["decoded_break_even_epochs_per_month"] = bill_mod.decoded_break_even_epochs_per_month(
            p.stored_bytes_per_hour, p.decoded_bytes_per_hour, pr.storage_gb_month, per_epoch)
    if math.isfinite(p.cores_needed):  # else a decoder rate so small that no number of cores will do
        # whole cores; rounding first so 23.0000000001 (float noise) asks for 23, and at least one
        # core wherever decoding needs any
        needed = math.ceil(round(p.cores_needed, 6)) if p.cores_needed > 0 else 0
        full = pipeline_mod.pipeline_account(**pipeline_inputs(w, model, cores=max(needed, c.cores)))
        out["epoch_seconds_at_cores_needed"] = float(
            pipeline_mod.wall_seconds(frames / (c.count * full.demand_fps), full.busy))
        added = max(0, needed - math.ceil(c.cores)) if c.cores < p.cores_needed else 0
        if added > 0:
            bill_after = _bill_for(w, full, c.cores + added)
            dec = bill_mod.add_cores_decision(bill, bill_after, c.cores, added, p.busy, full.busy)
            out["add_cores"] = asdict(dec)
    if w.sources:
        out["sources"] = rank_sources(w, model)
    return out


def rank_sources(w: Workload, model: ModelFacts) -> list[dict[str, Any]]:
    """Each [[sources]] entry's transport t under its own format, ranked by (p + t) / ρ."""
    rows = []
    for s in w.sources:
        changes: dict[str, Any] = {}
        for key in ("bitrate", "width", "height", "fps"):
            if getattr(s, key) is not None:
                changes[key] = getattr(s, key)
        if s.format == "decoded":
            changes["access"] = "decoded"
        elif s.format == "tokens":
            changes["kind"] = "tokens"
        p = pipeline_mod.pipeline_account(**pipeline_inputs(w, model, **changes))
        b = _bill_for(w, p, w.cluster.cores)
        rows.append({
            "name": s.name, "format": s.format, "price_hour": s.price_hour, "exchange_rate": s.exchange_rate,
            "transport_per_hour": b.total, "busy": p.busy, "bottleneck": p.bottleneck,
            "cost_per_useful_hour": bill_mod.cost_per_useful_hour(s.price_hour, b.total, s.exchange_rate),
        })
    rows.sort(key=lambda r: r["cost_per_useful_hour"])
    for rank, r in enumerate(rows, 1):
        r["rank"] = rank
    return rows


def verdict(report: dict[str, Any]) -> str:
    """One plain sentence: which hop binds, how busy the accelerator is, the cheapest change."""
    p, b, m = report["pipeline"], report["bill"], report["memory"]
    parts = []
    if p["bottleneck"] == "accelerator":
        parts.append(f"The accelerator binds: the input pipeline keeps it {p['busy'] * 100:.1f} % busy.")
    else:
        parts.append(f"{p['bottleneck'].capitalize()} binds: the accelerator is busy {p['busy'] * 100:.1f} %.")
    if p["bottleneck"] == "decode" and "add_cores" in b:
        a = b["add_cores"]
        parts.append(
            f"{p['cores_needed']:.1f} cores needed, {p['cores']:g} present: add {a['cores_added']} cores, "
            f"+${a['extra_core_cost'] * 10:,.2f} over ten epochs per hour of data, "
            f"removing ${a['idle_removed'] * 10:,.2f} of idle accelerator time.")
    elif p["bottleneck"] == "read":
        need = p["read_bytes_per_token"] * p["demand_tokens_per_second"]
        parts.append(f"The read hop needs {need / 1e9:.2f} GB/s to keep up.")
    elif p["bottleneck"] == "transfer":
        need = p["transfer_bytes_per_token"] * p["demand_tokens_per_second"]
        parts.append(f"Host-to-device needs {need / 1e9:.2f} GB/s to keep up.")
    if not m["fits"]:
        parts.append(f"It does not fit: {m['per_device_bytes'] / 1e9:.1f} GB per device "
                     f"against {m['device_memory'] / 1e9:.1f} GB.")
    return " ".join(parts)


def assumptions(w: Workload) -> dict[str, dict[str, Any]]:
    """Every leaf of the workload with its value, provenance and source."""
    out = {}
    for key, prov in w.provenance.items():
        value = leaf_value(w, key)
        if hasattr(value, "model_dump"):
            value = value.model_dump()
        elif isinstance(value, list):
            value = [v.model_dump() if hasattr(v, "model_dump") else v for v in value]
        out[key] = {"value": value, "provenance": prov.kind, "source": prov.source}
    acc = w.accelerator
    out["cluster.accelerator"]["catalogue"] = {
        "name": acc.name, "peak_flops": acc.peak_flops, "memory": acc.memory,
        "memory_bandwidth": acc.memory_bandwidth, "interconnect": acc.interconnect,
        "video_decoders": acc.video_decoders, "tdp": acc.tdp, "source": acc.source,
        "overridden": list(acc.overridden),
    }
    return out


# ---------------------------------------------------------------- serving, training bill, energy (SPEC §10)


def served_model(model: Any, name: str = "workload model") -> serving_mod.ServedModel:
    """ServedModel from plan.ModelFacts; the KV cache needs layers and the KV width."""
    if model.layers is None:
        raise UserError("model.layers", "a shape (model.layers and model.width, or model.hf_config) "
                        "to size the KV cache for serving")
    kv_heads = model.kv_heads or model.heads
    head_dim = model.head_dim
    if head_dim is None and model.width is not None and model.heads:
        head_dim = model.width / model.heads
    if kv_heads is None or head_dim is None:
        raise UserError("model.width", "a width (or heads and kv_heads) to size the KV cache for serving")
    return serving_mod.ServedModel(params=model.params, layers=int(model.layers), kv_heads=int(kv_heads),
                                   head_dim=float(head_dim), name=name, active_params=model.active_params)


def training_bill_of(w: Any, report: dict[str, Any] | None = None) -> cost_mod.TrainingBill:
    """Device-hours of the plan (wall-clock, so pipeline stalls are paid for) x price x attempts."""
    if report is not None:
        seconds = float(report["compute"].get("wall_seconds", report["compute"]["seconds"]))
    else:
        seconds = float(build_report(w)["compute"].get("wall_seconds"))
    hours = seconds * w.cluster.count / cost_mod.SECONDS_PER_HOUR
    return cost_mod.training_bill(hours, w.prices.accelerator_hour, w.prices.attempts)


def serving_estimate(w: Any, model: Any | None = None, training_cost: float | None = None,
                     served: serving_mod.ServedModel | None = None,
                     dtype: str | None = None) -> serving_mod.ServingEstimate:
    """The workload's serving section on its accelerator, priced at prices.accelerator_hour."""
    model = model if model is not None else resolve_model(w)
    s, acc = w.serving, w.accelerator
    if training_cost is None:
        training_cost = s.training_cost if s.training_cost is not None else training_bill_of(w).budget
    return serving_mod.estimate_serving(
        served if served is not None else served_model(model),
        dtype=dtype or s.dtype, context=int(s.context), tokens_per_request=float(s.tokens_per_request),
        peak_flops=acc.peak("bf16") if "bf16" in acc.peak_flops else acc.peak(w.training.precision),
        device_memory=acc.memory, memory_bandwidth=acc.memory_bandwidth,
        dollars_per_device_hour=w.prices.accelerator_hour, mfu=s.mfu, requests_per_day=s.requests_per_day,
        training_cost=training_cost, batch=int(s.batch),
    )


def energy_of(w: Any, wall_seconds: float) -> energy_mod.EnergyEstimate:
    e = w.energy
    watts = e.watts if e.watts is not None else w.accelerator.tdp
    return energy_mod.training_energy(watts, w.cluster.count, wall_seconds / energy_mod.SECONDS_PER_HOUR, e.pue,
                                      grid_g_per_kwh=e.grid_intensity, region=e.region)


def extra_accounts(w: Workload, model: ModelFacts, report: dict[str, Any]) -> None:
    """Add `training_cost`, `energy` and `serving` (SPEC §10) to a plan report."""
    if not math.isfinite(report["compute"]["wall_seconds"]):
        # the input pipeline supplies nothing: the run never ends, so it has no bill to state
        why = "the input pipeline supplies nothing (busy 0): no finite wall time to price"
        report["training_cost"] = {"skipped": why}
        report["energy"] = {"skipped": why}
        report["serving"] = {"skipped": why}
        return
    bill = training_bill_of(w, report)
    c = w.cluster
    options = cost_mod.catalogue_options(w.training.precision, own_key=w.accelerator.key,
                                         own_price=w.prices.accelerator_hour)
    comparison = cost_mod.compare_accelerators(
        float(report["compute"]["flops"]), options, c.count, c.mfu,
        1.0 if c.mfu_end_to_end or c.count == 1 else c.scaling_efficiency, w.prices.attempts)
    report["training_cost"] = clean({
        "accelerator_hours": bill.accelerator_hours, "dollars_per_accelerator_hour": bill.dollars_per_accelerator_hour,
        "dollars_per_attempt": bill.dollars_per_attempt, "attempts": bill.attempts, "budget": bill.budget,
        "accelerators": [vars(r) for r in comparison if r.key != "cpu-core"],
        "accelerators_note": "compute-bound hours F / (peak x MFU x efficiency) on each accelerator; the input "
                             "pipeline is not re-planned per accelerator, so stalls are in the bill above only",
    })
    wall = float(report["compute"].get("wall_seconds", report["compute"]["seconds"]))
    en = energy_of(w, wall)
    report["energy"] = clean(vars(en))
    if model.layers is not None:
        training = w.serving.training_cost if w.serving.training_cost is not None else bill.budget
        try:
            report["serving"] = serving_estimate(w, model, training).as_dict()
        except UserError as err:
            report["serving"] = {"skipped": f"{err.where}: {err.expected}"}
    else:
        report["serving"] = {"skipped": "model.layers: a shape is needed to size the KV cache"}
