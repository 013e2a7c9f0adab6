"""The one evaluation: from typed inputs to every figure of the report, for a point or an array of points.

`evaluate(inputs)` calls each account once with numbers or arrays and returns the figures
by their dotted JSON key (planning/figures.py declares each one). `build_report` nests the
figures of one point into the JSON report and adds the sections that are decisions or
point-only accounts (SECTIONS below); `trainplan sweep` and `solve` call `evaluate` with
arrays. Nothing downstream recomputes an account.

Adding a section to the report (parallel layout, activation memory, ...): write one
function `build(ctx: PlanContext) -> dict | None` (None leaves the section out), declare
its figures in planning/figures.py with `declare(...)`, and add one line to SECTIONS.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Collection, Iterator, Literal, Mapping

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
from trainplan.planning import answer as answer_mod
from trainplan.planning import intervals as intervals_mod
from trainplan.planning import execution as execution_mod
from trainplan.planning import model_terms
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.errors import UserError
from trainplan.planning import decisions as decisions_mod
from trainplan.planning.figures import FIGURES
from trainplan.planning.inputs import PlanInputs
from trainplan.planning.model import ModelFacts, resolve_model  # noqa: F401 (callers read them here too)
from trainplan.units import SECONDS_PER_HOUR
from trainplan.quantities import json_safe as clean  # noqa: F401 - callers import it from here
from trainplan.workload.schema import Workload, leaf_value
from trainplan.workload import model_source
from trainplan.workload.codecs import FRAME_KINDS


# The bill over this many epochs (bill.per_epochs).
BILL_EPOCHS = (1, 10)


def pipeline_inputs(w: Workload, model: ModelFacts | None = None, **changes: Any) -> dict[str, Any]:
    """Keyword arguments of pipeline.pipeline_arrays for this workload (`changes` override)."""
    return PlanInputs.of(w, model=model).pipeline_args(**changes)


def cache_section(ctx: PlanContext) -> dict[str, Any]:
    """`pipeline.cache`: busy and the binding stage for cached fractions 0-100 % (docs/measurement.md)."""
    cache = ctx.inputs.cache
    keep = ("cache_size", "dataset_size", "cache_rate", "remote_rate", "order")
    return {"cache": pipeline_mod.cache_what_if(ctx.inputs.pipeline_args(),
                                                 **{k: v for k, v in cache.items() if k in keep})}


# ---------------------------------------------------------------- the one evaluation


def bill_account(inputs: PlanInputs, p: dict[str, Any], cores: Any, kind: str | None = None,
                 access: str | None = None) -> bill_mod.BillAccount:
    """The bill per hour of data (docs/pipeline-and-bill.md) of pipeline figures `p` with `cores` decode cores
    (`kind` and `access` of the source when they differ from the workload's)."""
    kind, access = kind or inputs.workload.data.kind, access or inputs.workload.data.access
    if kind in FRAME_KINDS:
        frames_per_hour = p["frames_per_hour"]
        stored = p["decoded_bytes_per_hour"] if access == "decoded" else p["stored_bytes_per_hour"]
        read = p["read_bytes_per_token"] * p["tokens_per_hour"]
        demand = p["demand_fps"]
    else:
        # a token source: an "hour" of data is an hour of training on it at full speed
        frames_per_hour = p["demand_tokens_per_second"] * SECONDS_PER_HOUR
        stored = read = frames_per_hour * p["read_bytes_per_token"]
        demand = p["demand_tokens_per_second"]
    return bill_mod.bill_per_hour(
        frames_per_hour=frames_per_hour, demand_fps=demand, busy=p["busy"], cores=cores,
        stored_bytes_per_hour=stored, read_bytes_per_hour=read, accelerator_hour=inputs["prices.accelerator_hour"],
        core_hour=inputs["prices.core_hour"], storage_gb_month=inputs["prices.storage_gb_month"],
        transfer_gb=inputs["prices.transfer_gb"], storage_months=inputs["prices.storage_months"])


def epoch_seconds(inputs: PlanInputs, p: dict[str, Any]) -> Any:
    """Wall time of one pass over data.hours of video: frames / (devices x demand), stretched by busy."""
    frames = inputs["data.hours"] * p["frames_per_hour"]
    with np.errstate(divide="ignore", invalid="ignore"):
        return pipeline_mod.wall_seconds(frames / (inputs["cluster.count"] * p["demand_fps"]), p["busy"])


# The accounts each section's figures need computed first (the pipeline is always computed).
NEEDS: dict[str, frozenset[str]] = {
    "workload": frozenset({"workload"}), "pipeline": frozenset(), "bill": frozenset({"bill"}),
    "compute": frozenset({"workload", "compute"}), "memory": frozenset({"memory"}),
    "network": frozenset({"workload", "compute", "network"}),
    "storage": frozenset({"workload", "compute", "storage"}),
}


def evaluate(inputs: PlanInputs, figures: Collection[str] | None = None) -> dict[str, Any]:
    """Every account's figures by dotted JSON key: numbers, or arrays where `inputs` vary keys.

    With `figures` (say ["pipeline.busy"] for a sweep of it alone) only the accounts those
    figures need are computed and only those figures returned; all by default. Figures that do
    not exist at a point are NaN (arrays) or absent (transport_share without a price per hour
    of data, the video-only figures of a token corpus).
    """
    sections = {f.split(".", 1)[0] for f in figures} if figures is not None else set(NEEDS)
    need: set[str] = set().union(*(NEEDS.get(x, {x}) for x in sections))
    # the pipeline first (docs/pipeline-and-bill.md): its figures feed the tokens (video), the wall time and the bill
    p = pipeline_mod.pipeline_arrays(**inputs.pipeline_args())
    out: dict[str, Any] = {}
    if need & {"workload", "compute", "network", "storage"}:
        out.update(_compute_figures(inputs, p))
    if "memory" in need:
        out.update(_memory_figures(inputs))
    out.update(_pipeline_figures(inputs, p, None if figures is None else set(figures)))
    if "bill" in need:
        out.update(_bill_figures(inputs, p))
    if figures is not None:
        return {k: out[k] for k in figures if k in out}
    return {k: out[k] for k in sorted(out, key=lambda k: _ORDER.get(k, len(_ORDER)))}  # the report's order


_ORDER = {k: i for i, k in enumerate(FIGURES)}


def _at_least_one_batch(w: Any, tokens: float, tokens_per_step: Any) -> None:
    """A token budget the user wrote below one global batch is refused (issue 29): a step cannot run a part of
    its batch, and a fraction of a step's time would be a wrong answer, not a small one."""
    per_step = np.asarray(tokens_per_step)
    if w.training.tokens is None or not w.given("training.tokens") or per_step.ndim or not tokens < float(per_step):
        return
    raise UserError("training.tokens", f"expected at least one global batch ({float(per_step):,.0f} tokens: "
                    "micro_batch x seq_len x grad_accum x data-parallel ranks), got "
                    f"{tokens:,.0f}")


def _compute_figures(inputs: PlanInputs, p: dict[str, Any]) -> dict[str, Any]:
    """workload, compute, network and storage figures (docs/accounts.md, §5, §6): they share tokens and time."""
    w, model = inputs.workload, inputs.model
    t, c, d = w.training, w.cluster, w.data
    acc = w.accelerator
    a = inputs.array
    active = inputs.active_params
    state = state_bytes_per_param(t.precision, t.optimizer)
    params = inputs["model.params"]
    if inputs["training.tokens"] is not None:
        tokens = inputs["training.tokens"]
        tokens = a("training.tokens") if "training.tokens" in inputs.varied else float(tokens)
    else:  # data.hours of every camera at n tokens a frame, times epochs
        tokens = (inputs["data.hours"] * SECONDS_PER_HOUR * inputs["data.fps"] * inputs["data.cameras"]
                  * p["tokens_per_frame"] * inputs["training.epochs"])

    # compute, memory and network: the one execution model (planning/execution.py)
    e = inputs.execution
    if not isinstance(tokens, np.ndarray):
        _at_least_one_batch(w, float(tokens), e.tokens_per_step)
    with np.errstate(divide="ignore", invalid="ignore"):
        steps_exact = tokens / e.tokens_per_step
        seconds = steps_exact * e.step_seconds
        sustained = e.model_flops / e.step_seconds
    wall = pipeline_mod.wall_seconds(seconds, p["busy"])

    # storage (docs/accounts.md)
    if d.kind in FRAME_KINDS:
        per_token = p["decoded_bytes_per_token"] if d.access == "decoded" else p["stored_bytes_per_token"]
        data_bytes = inputs["data.hours"] * p["frames_per_hour"] * per_token * p["tokens_per_frame"]
    else:
        data_bytes = tokens / inputs["training.epochs"] * inputs["data.bytes_per_token"]
    with np.errstate(divide="ignore", invalid="ignore"):
        sto = storage_mod.storage_account(
            data_bytes, params, state.restart, inputs["storage.checkpoints_kept"], state.weights,
            inputs["storage.exports"], inputs["storage.copies"], inputs["storage.write_rate"],
            inputs["storage.save_every"], wall, inputs["training.epochs"])

    # blocking checkpoint saves stop training for save_seconds every save_every of it
    wall_total = wall * (1.0 + sto.save_share)
    out: dict[str, Any] = {
        "workload.accelerator": acc.key, "workload.accelerator_name": acc.name, "workload.params": model.params,
        "workload.active_params": model.active_params, "workload.params_source": model.source,
        "workload.tokens": tokens,
        "compute.flops": tokens * e.model_flops_per_token, "compute.steps": np.ceil(steps_exact),
        "compute.seconds": seconds, "compute.seconds_per_step": e.step_seconds,
        "compute.tokens_per_step": e.tokens_per_step, "compute.sustained_flops": sustained,
        "compute.scaling_applied": np.asarray(execution_mod.scaling_factor(w, inputs["cluster.count"])) != 1.0,
        "compute.wall_seconds": wall_total, "compute.train_wall_seconds": wall,
        "compute.step_source": _STEP_SOURCE[e.compute_source],
    }
    out.update({f"compute.{k}": v for k, v in inputs.terms.flops_report.items()})
    out.update({"compute.flops_per_token_model": e.model_flops_per_token,
                "compute.flops_per_token_executed": e.executed_flops_per_token,
                "compute.mfu": e.mfu, "compute.hfu": e.hfu, "compute.time_follows": e.compute_source})
    out.update(network_figures(inputs, e))
    if e.compute_source == "predicted":  # the error of the step model on published runs it was not fitted on
        from trainplan.planning.validation import step_error_band

        band = step_error_band(w.accelerator.key)  # measured on the runs of this accelerator where there are any
        out.update({"compute.step_error_band": band["band"], "compute.step_error_bias": band["bias"],
                    "compute.step_error_runs": band["runs"], "compute.step_error_text": band["text"]})
    for name in ("data_bytes", "checkpoint_bytes", "checkpoints_bytes", "exports_bytes", "retained_bytes",
                 "input_byte_rate", "save_seconds", "save_share"):
        out[f"storage.{name}"] = getattr(sto, name)
    return out


_STEP_SOURCE = {"predicted": "predicted by the layout model (no cluster.mfu or cluster.hfu given)",
                "mfu": "cluster.mfu (model FLOPs), plus exposed communication and the pipeline bubble",
                "hfu": "cluster.hfu (executed FLOPs), plus exposed communication and the pipeline bubble"}


def network_figures(inputs: PlanInputs, e: Any) -> dict[str, Any]:
    """The data-parallel sync of the execution (docs/accounts.md): its bytes, its time before and after
    overlap with the last backward pass, and the floor at the tier's nominal rate."""
    w = inputs.workload
    dp = inputs.execution_data
    crosses = np.asarray(e.data_tier) == "inter"
    nominal = np.where(crosses, execution_mod.nominal_inter(w), inputs.link_rate)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = e.data_parallel_sync_seconds / e.step_seconds
        floor = e.data_bus_bytes / nominal
    verdict = np.select([np.asarray(dp) <= 1, share <= network_mod.NEGLIGIBLE_SHARE_OF_STEP,
                         e.data_parallel_seconds <= 0.0], ["none", "negligible", "overlap"], "bound")
    return {
        "network.gradient_bytes": e.gradient_bytes, "network.ring_bytes_per_step": e.data_bus_bytes,
        "network.link_rate": nominal, "network.floor_seconds_per_step": floor,
        "network.sync_seconds_per_step": e.data_parallel_sync_seconds,
        "network.exposed_seconds_per_step": e.data_parallel_seconds,
        "network.backward_seconds_per_step": e.last_backward_seconds, "network.share_of_step": share,
        "network.verdict": verdict if verdict.ndim else str(verdict), "network.bytes_per_step": e.bytes_per_step,
    }


def _memory_figures(inputs: PlanInputs) -> dict[str, Any]:
    """Memory per device (docs/accounts.md): the fullest stage of the execution."""
    w, acc = inputs.workload, inputs.workload.accelerator
    e = inputs.execution
    params = inputs["model.params"]
    recipe, _ = model_terms.recipe_of(w)
    usable = memory_mod.usable_memory(acc.memory, inputs["cluster.runtime_buffers"], inputs["cluster.headroom"])
    room = usable - e.activation_bytes
    with np.errstate(divide="ignore", invalid="ignore"):
        # to run (inference): the weights alone, split over as many cards as needed
        devices_to_run = np.where(usable > 0, np.maximum(1, np.ceil(params * recipe.weights / usable)), 0)
        # to train: every byte of state sharded over n devices is the fewest any layout needs
        devices_to_train = np.where(room > 0, np.maximum(1, np.ceil(params * recipe.total / room)), np.nan)
    optimizer = e.optimizer_bytes + e.gathered_bytes  # the gathered modules count with the optimizer state
    state = e.weights_bytes + e.grads_bytes + optimizer
    before_headroom = state + e.activation_bytes + inputs["cluster.runtime_buffers"]
    out: dict[str, Any] = {
        "memory.state_bytes": state, "memory.weights_bytes": e.weights_bytes, "memory.grads_bytes": e.grads_bytes,
        "memory.optimizer_bytes": optimizer, "memory.activation_bytes": e.activation_bytes,
        "memory.runtime_buffers": inputs["cluster.runtime_buffers"],
        "memory.headroom_bytes": e.per_device_bytes - before_headroom, "memory.per_device_bytes": e.per_device_bytes,
        "memory.device_memory": acc.memory, "memory.fits": e.fits, "memory.devices_to_run": devices_to_run,
        "memory.devices_to_train": devices_to_train,
    }
    terms = inputs.terms
    out.update({f"memory.{k}": v for k, v in {**terms.activation_report, **terms.state_report}.items()})
    out["memory.activations_source"] = inputs.execution_source
    out["memory.gathered_bytes"] = e.gathered_bytes
    return out


def _pipeline_key(name: str) -> str:
    """The report's key of pipeline account figure `name` (accounts/pipeline.py FIGURES)."""
    if name == "bottleneck_index":
        return "pipeline.bottleneck"
    stage = name.split("_", 1)[0]
    if name.endswith("_tokens_per_second") and stage in pipeline_mod.STAGES:
        return f"pipeline.stages.{stage}.tokens_per_second"
    return f"pipeline.{name}"


# The pipeline account's figures by the report's key.
_PIPELINE_KEYS: dict[str, str] = {_pipeline_key(name): name for name in pipeline_mod.FIGURES}


def _pipeline_figures(inputs: PlanInputs, p: Mapping[str, Any], wanted: set[str] | None = None) -> dict[str, Any]:
    """The pipeline account (docs/pipeline-and-bill.md) by JSON key; with `wanted`, only those keys
    (the account computes a figure when it is first read: the others cost nothing)."""
    d, c, acc = inputs.workload.data, inputs.workload.cluster, inputs.workload.accelerator
    out: dict[str, Any] = {}
    out.update({"pipeline.kind": d.kind, "pipeline.access": d.access, "pipeline.prefetch": bool(c.prefetch)})
    for key, name in _PIPELINE_KEYS.items():
        if wanted is not None and key not in wanted:
            continue
        if name == "bottleneck_index":
            out[key] = np.asarray(pipeline_mod.BOTTLENECKS)[np.asarray(p[name], int)]
        else:
            out[key] = p[name]
    out["pipeline.cores"] = inputs["cluster.cores"]
    out["pipeline.video_decoders"] = float(acc.video_decoders) if c.nvdec else 0.0
    return out


def _bill_figures(inputs: PlanInputs, p: dict[str, Any]) -> dict[str, Any]:
    """The bill per hour of data (docs/pipeline-and-bill.md) and, for video, the epoch time."""
    w = inputs.workload
    bill = bill_account(inputs, p, inputs["cluster.cores"])
    out: dict[str, Any] = {}
    out.update({
        "bill.total": bill.total, "bill.bytes": bill.bytes, "bill.storage": bill.storage,
        "bill.transfer": bill.transfer, "bill.cores": bill.cores, "bill.idle_accelerator": bill.idle_accelerator,
    })
    out.update({f"bill.shares.{term}": share for term, share in bill.shares.items()})
    out["bill.accelerator_seconds_per_hour"] = bill.accelerator_seconds
    out["bill.useful_seconds_per_hour"] = bill.useful_seconds
    for e in BILL_EPOCHS:
        out[f"bill.per_epochs.{e}"] = bill_mod.over_epochs(bill, e)
    if w.prices.data_hour > 0 or "prices.data_hour" in inputs.varied:
        data_hour = inputs["prices.data_hour"]
        if "prices.data_hour" in inputs.varied:
            with np.errstate(divide="ignore", invalid="ignore"):
                # NaN where the plan has no such figure (no price per hour of data)
                out["bill.transport_share"] = np.where(
                    data_hour > 0, bill_mod.transport_share(bill.total, np.where(data_hour > 0, data_hour, 1.0)),
                    np.nan)
        else:
            out["bill.transport_share"] = bill_mod.transport_share(bill.total, data_hour)
    if w.data.kind in FRAME_KINDS:
        out["bill.epoch_seconds"] = epoch_seconds(inputs, p)
    return out


# ---------------------------------------------------------------- the report of one point


@dataclass
class PlanContext:
    """What a section builder reads: the workload, its inputs, the figures of the point, the report so far."""

    workload: Workload
    inputs: PlanInputs
    figures: dict[str, Any]
    report: dict[str, Any]

    @property
    def model(self) -> ModelFacts:
        return self.inputs.model


@dataclass(frozen=True)
class Section:
    """One section of the report: `build` returns its dict (merged into an existing section of the
    same name), or None to leave it out."""

    name: str
    build: Callable[[PlanContext], dict[str, Any] | None]


def _point_value(key: str, value: Any) -> Any:
    """A figure of a single-point evaluation as a plain Python value (whole counts as int)."""
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size else float("nan")
    if isinstance(value, np.generic):
        value = value.item()
    spec = FIGURES.get(key)
    if spec is not None and spec.whole and isinstance(value, float):
        return int(value) if math.isfinite(value) else None  # JSON has no infinite count
    return value


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{"a.b": 1} -> {"a": {"b": 1}}, declared figures first in their declared order."""
    out: dict[str, Any] = {}
    ordered = [k for k in FIGURES if k in flat] + [k for k in flat if k not in FIGURES]
    for key in ordered:
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = flat[key]
    return out


def build_report(w: Workload) -> dict[str, Any]:
    """Every account of the plan as plain numbers in SI base units (the JSON report)."""
    inputs = PlanInputs.of(w)
    figures = {k: _point_value(k, v) for k, v in evaluate(inputs).items()}
    report = nest(figures)
    ctx = PlanContext(inputs.workload, inputs, figures, report)
    for section in SECTIONS:
        part = section.build(ctx)
        if part is None:
            continue
        if isinstance(report.get(section.name), dict) and isinstance(part, dict):
            report[section.name].update(part)
        else:
            report[section.name] = part
    reasons = null_reasons(report, figures)
    if reasons:
        report["null_reasons"] = reasons
    return clean(report)


def null_reasons(report: dict[str, Any], figures: dict[str, Any]) -> dict[str, str]:
    """Why each figure that JSON writes as null has no value: infinite (a rate of zero somewhere
    upstream) or undefined (0/0), by dotted key. JSON has neither inf nor nan, so the reason
    travels beside the null."""
    def walk(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, f"{prefix}{k}.")
        else:
            yield prefix[:-1], node

    raw = dict(walk({k: v for k, v in report.items() if k not in ("assumptions", "verdict")}, ""))
    raw.update({k: v for k, v in figures.items() if v is None})  # whole counts made None from inf
    out: dict[str, str] = {}
    unbounded = "unbounded at these inputs: {what} has no finite value (a rate of zero upstream, or a stage absent)"
    for key, value in raw.items():
        spec = FIGURES.get(key)
        what = spec.label if spec else key
        if value is None and key in figures:
            out[key] = unbounded.format(what=what)
        elif isinstance(value, float) and math.isinf(value):
            out[key] = unbounded.format(what=what)
        elif isinstance(value, float) and math.isnan(value):
            out[key] = f"undefined at these inputs: {what} is 0/0 here"
    return out


# ---------------------------------------------------------------- sections: decisions and point-only accounts


def bill_decisions(ctx: PlanContext) -> dict[str, Any] | None:
    """Decisions the bill exists for (video): pre-decode or not, the epoch at the cores needed, add cores."""
    w, inputs, f = ctx.workload, ctx.inputs, ctx.figures
    pr, c = w.prices, w.cluster
    out: dict[str, Any] = {}
    if f["pipeline.kind"] in FRAME_KINDS:
        if f["pipeline.access"] != "decoded" and f["pipeline.core_fps"] > 0:
            per_epoch = bill_mod.decode_cost_per_epoch(f["pipeline.frames_per_hour"], f["pipeline.decoded_per_used"],
                                                       f["pipeline.core_fps"], pr.core_hour)
            out["decoded_break_even_epochs_per_month"] = bill_mod.decoded_break_even_epochs_per_month(
                f["pipeline.stored_bytes_per_hour"], f["pipeline.decoded_bytes_per_hour"], pr.storage_gb_month,
                per_epoch)
        cores_needed = f["pipeline.cores_needed"]
        if math.isfinite(cores_needed):  # else a decoder rate so small that no number of cores will do
            # whole cores; rounding first so 23.0000000001 (float noise) asks for 23, and at least one
            # core wherever decoding needs any
            needed = math.ceil(round(cores_needed, 6)) if cores_needed > 0 else 0
            full = pipeline_mod.pipeline_arrays(**inputs.pipeline_args(cores=max(needed, c.cores)))
            out["epoch_seconds_at_cores_needed"] = float(epoch_seconds(inputs, full))
            added = max(0, needed - math.ceil(c.cores)) if c.cores < cores_needed else 0
            if added > 0:
                p_now = pipeline_mod.pipeline_arrays(**inputs.pipeline_args())
                bill_now = bill_account(inputs, p_now, c.cores)
                bill_after = bill_account(inputs, full, c.cores + added)
                dec = bill_mod.add_cores_decision(bill_now, bill_after, c.cores, added, f["pipeline.busy"],
                                                  float(full["busy"]),
                                                  pipeline_mod.BOTTLENECKS[int(full["bottleneck_index"])])
                out["add_cores"] = asdict(dec)
        if w.sources:
            out["sources"] = rank_sources(inputs)
    return out or None


def rank_sources(inputs: PlanInputs) -> list[dict[str, Any]]:
    """Each [[sources]] entry's transport t under its own format, ranked by (p + t) / ρ."""
    w = inputs.workload
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
        args = inputs.pipeline_args(**changes)
        p = pipeline_mod.pipeline_arrays(**args)
        b = bill_account(inputs, p, w.cluster.cores, args["kind"], args["access"])
        rows.append(clean({
            "name": s.name, "format": s.format, "price_hour": s.price_hour, "exchange_rate": s.exchange_rate,
            "transport_per_hour": b.total, "busy": p["busy"],
            "bottleneck": pipeline_mod.BOTTLENECKS[int(p["bottleneck_index"])],
            "cost_per_useful_hour": bill_mod.cost_per_useful_hour(s.price_hour, b.total, s.exchange_rate),
        }))
    rows.sort(key=lambda r: r["cost_per_useful_hour"])
    for rank, r in enumerate(rows, 1):
        r["rank"] = rank
    return rows


#: A wall time beyond this is "never" (3e10 years, twice the age of the universe): a bill of it
#: overflows float64 once multiplied by devices, watts and prices.
NEVER_SECONDS = 1e18


def _no_wall_time(ctx: PlanContext) -> str | None:
    # a wall time beyond NEVER_SECONDS (1e-309 cores, say) is "never": its products with devices,
    # watts and prices overflow float64
    if ctx.figures["compute.wall_seconds"] < NEVER_SECONDS:
        return None
    # the input pipeline supplies nothing: the run never ends, so it has no bill to state
    return "the input pipeline supplies nothing (busy 0): no finite wall time to price"


def training_cost_section(ctx: PlanContext) -> dict[str, Any]:
    """Device-hours x price x attempts, and the same FLOPs on each catalogue accelerator (docs/serving-scaling-energy.md)."""
    why = _no_wall_time(ctx)
    if why:
        return {"skipped": why}
    w = ctx.workload
    bill = training_bill_of(w, ctx.report)
    c = w.cluster
    options = cost_mod.catalogue_options(w.training.precision, own_key=w.accelerator.key,
                                         own_price=w.prices.accelerator_hour)
    comparison = cost_mod.compare_accelerators(
        float(ctx.figures["compute.flops"]), options, c.count, c.mfu,
        1.0 if c.mfu_end_to_end or c.count == 1 else c.scaling_efficiency, w.prices.attempts)
    return clean({
        "accelerator_hours": bill.accelerator_hours, "dollars_per_accelerator_hour": bill.dollars_per_accelerator_hour,
        "dollars_per_attempt": bill.dollars_per_attempt, "attempts": bill.attempts, "budget": bill.budget,
        "accelerators": [vars(r) for r in comparison if r.key != "cpu-core"],
        "accelerators_note": "the comparison of accelerators counts compute-bound hours F / (peak x MFU x "
                             "efficiency) on each; the accelerator-hours above are this plan's wall time, its "
                             "input stalls included, which the comparison does not re-plan per accelerator",
    })


def energy_section(ctx: PlanContext) -> dict[str, Any]:
    why = _no_wall_time(ctx)
    if why:
        return {"skipped": why}
    return clean(vars(energy_of(ctx.workload, float(ctx.figures["compute.wall_seconds"]))))


def parallel_section(ctx: PlanContext) -> dict[str, Any]:
    """`parallel`: the layout's memory per device and time per step (planning/layout.py, docs/parallel.md);
    it also adds `network.bytes_per_step`: every collective of the step, per device."""
    from trainplan.planning.layout import parallel_section as layout_section

    section = layout_section(ctx.workload, ctx.model, ctx.inputs)
    if "network" in section and isinstance(ctx.report.get("network"), dict):
        ctx.report["network"]["bytes_per_step"] = section["network"]["bytes_per_step"]
    return section


def fit_section(ctx: PlanContext) -> dict[str, Any] | None:
    """`fit`, when the job does not fit: the cheapest change the layout search finds (planning/layout.py)."""
    if ctx.figures["memory.fits"]:
        return None
    from trainplan.planning.layout import fit_change

    found = fit_change(ctx.workload, ctx.model)
    return found if found is not None else {"change": None, "reason": "no layout of up to "
                                            f"{64 * ctx.workload.cluster.count} devices fits it"}


def sample_range_section(ctx: PlanContext) -> dict[str, Any] | None:
    """Busy, cores, wall time and budget at the corners of a sample's intervals (planning/intervals.py);
    None when no key of the workload came from a sample."""
    arrays = intervals_mod.corners(ctx.workload.intervals)
    if not arrays:
        return None
    # the plan's own workload (its micro-batch already chosen) and resolved model, the corners as arrays
    inputs = PlanInputs.of(ctx.workload, arrays, model=ctx.model, choose=False)
    values = evaluate(inputs, [figure for _, figure in intervals_mod.RANGED])
    walls = np.broadcast_to(np.asarray(values["compute.wall_seconds"], dtype=float), (inputs.length,))
    budgets = ([training_bill_for(ctx.workload, float(s)).budget for s in walls]
               if "budget" in ctx.report.get("training_cost", {}) and np.isfinite(walls).all() else None)
    return intervals_mod.section(arrays, values, budgets)


def serving_section(ctx: PlanContext) -> dict[str, Any]:
    why = _no_wall_time(ctx)
    if why:
        return {"skipped": why}
    w, model = ctx.workload, ctx.model
    training = (w.serving.training_cost if w.serving.training_cost is not None
                else ctx.report["training_cost"]["budget"])
    try:
        return serving_estimate(w, model, training).as_dict()
    except UserError as err:
        return {"skipped": f"{err.where}: {err.expected}"}


# The report's sections after the accounts `evaluate` returns, in order. Add a section here:
# Section("name", builder) with its figures declared in planning/figures.py.
SECTIONS: list[Section] = [
    Section("pipeline", cache_section),
    Section("bill", bill_decisions),
    Section("training_cost", training_cost_section),
    Section("energy", energy_section),
    Section("serving", serving_section),
    Section("parallel", parallel_section),
    Section("fit", fit_section),
    Section("decisions", lambda ctx: decisions_mod.decide(ctx.workload, clean(ctx.report))),
    Section("verdict", lambda ctx: verdict(ctx.report)),
    Section("assumptions", lambda ctx: assumptions(ctx.workload)),
    Section("sample_range", sample_range_section),
    Section("answer", lambda ctx: answer_mod.answer(clean(ctx.report))),
]


def verdict(report: dict[str, Any]) -> str:
    """One plain sentence: which hop binds, how busy the accelerator is, the cheapest change."""
    from trainplan.units import format_figure

    p, b, m = report["pipeline"], report["bill"], report["memory"]
    parts = []
    if p["bottleneck"] == "accelerator":
        parts.append(f"The accelerator binds: the input pipeline keeps it {p['busy'] * 100:.1f} % busy.")
    else:
        parts.append(f"{p['bottleneck'].capitalize()} binds: the accelerator is busy {p['busy'] * 100:.1f} %.")
    if p["bottleneck"] == "decode" and "add_cores" in b:
        a = b["add_cores"]
        text = f"{p['cores_needed']:.1f} cores needed, {p['cores']:g} present: add {a['cores_added']} cores"
        if not all(v is not None and math.isfinite(v) for v in (a["extra_core_cost"], a["idle_removed"])):
            text += " (without them the accelerator never computes)."
        else:
            text += (f": {format_figure(a['extra_core_cost'], 'dollars')} of cores removes "
                     f"{format_figure(a['idle_removed'], 'dollars')} of idle accelerator per "
                     f"{answer_mod.data_unit(p.get('kind', 'video'))}, each epoch.")
        parts.append(text)
    elif p["bottleneck"] == "read":
        need = p["read_bytes_per_token"] * p["demand_tokens_per_second"]
        parts.append(f"The read hop needs {format_figure(need, 'byte_rate')} to keep up.")
    elif p["bottleneck"] == "transfer":
        need = p["transfer_bytes_per_token"] * p["demand_tokens_per_second"]
        parts.append(f"Host-to-device needs {format_figure(need, 'byte_rate')} to keep up.")
    if not m["fits"]:
        parts.append(f"It does not fit: {format_figure(m['per_device_bytes'], 'bytes')} per device "
                     f"against {format_figure(m['device_memory'], 'bytes')}.")
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
    out.update(model_source.planned_model(w, resolve_model(w)))  # the model planned, not the default's
    return out


# ---------------------------------------------------------------- serving, training bill, energy (docs/serving-scaling-energy.md)


def served_model(model: Any, name: str = "workload model") -> serving_mod.ServedModel:
    """ServedModel from plan.ModelFacts; without a shape the KV figures say what is missing
    (planning/served.py)."""
    from trainplan.planning.served import served_model as _served

    return _served(model, name)


def training_bill_of(w: Any, report: dict[str, Any] | None = None) -> cost_mod.TrainingBill:
    """Device-hours of the plan (wall-clock, so pipeline stalls are paid for) x price x attempts."""
    if report is not None:
        seconds = float(report["compute"].get("wall_seconds", report["compute"]["seconds"]))
    else:
        seconds = float(build_report(w)["compute"].get("wall_seconds"))
    return training_bill_for(w, seconds)


def training_bill_for(w: Any, seconds: float) -> cost_mod.TrainingBill:
    """The bill of a run of `seconds` wall-clock on the workload's devices, price and attempts."""
    hours = seconds * w.cluster.count / cost_mod.SECONDS_PER_HOUR
    return cost_mod.training_bill(hours, w.prices.accelerator_hour, w.prices.attempts)


def serving_estimate(w: Any, model: Any | None = None, training_cost: float | None = None,
                     served: serving_mod.ServedModel | None = None,
                     dtype: str | None = None, refuse_unfit: bool = True) -> serving_mod.ServingEstimate:
    """The workload's serving section on its accelerator, priced at prices.accelerator_hour. With
    `refuse_unfit`, a serving.tensor too small to hold the weights and one sequence is refused (the
    ladder passes False: it lists such rungs as not fitting)."""
    model = model if model is not None else resolve_model(w)
    s, acc = w.serving, w.accelerator
    if training_cost is None:
        training_cost = s.training_cost if s.training_cost is not None else training_bill_of(w).budget
    mode = serving_mode(w)
    generated = tokens_per_request(w, mode)
    if mode == "decode" and s.tokens_per_request is not None and generated > s.context:
        # each generated token joins the KV cache: a request longer than the context has no room in it
        raise UserError("serving.tokens_per_request", f"expected at most serving.context ({int(s.context):,}) "
                        f"tokens generated a request (the KV cache holds the context), got {generated:,.0f}")
    estimate = serving_mod.estimate_serving(
        served if served is not None else served_model(model),
        dtype=dtype or s.dtype, context=int(s.context), tokens_per_request=generated, mode=mode,
        peak_flops=acc.peak("bf16") if "bf16" in acc.peak_flops else acc.peak(w.training.precision),
        device_memory=acc.memory, memory_bandwidth=acc.memory_bandwidth,
        dollars_per_device_hour=w.prices.accelerator_hour, mfu=s.mfu, requests_per_day=s.requests_per_day,
        training_cost=training_cost, batch=int(s.batch),
        devices=None if s.tensor is None else int(s.tensor), tier=serving_tier(w),
    )
    if refuse_unfit and s.tensor is not None and not estimate.fits:
        # a replica the user sized too small to hold the weights and one sequence serves nothing: a plan of
        # 0 tokens/s and 0 replicas is no plan
        from trainplan.units import format_figure

        room = f"{int(s.tensor)} x {format_figure(acc.memory, 'bytes')}"
        if estimate.weights_bytes < estimate.usable_memory_bytes and estimate.kv_bytes_per_token:
            # the weights fit: the context is what does not, and the key to name is the one to lower
            longest = int((estimate.usable_memory_bytes - estimate.weights_bytes) / estimate.kv_bytes_per_token)
            raise UserError("serving.context", f"expected at most {longest:,} tokens, the longest sequence whose KV "
                            f"cache fits beside the weights ({format_figure(estimate.weights_bytes, 'bytes')}) on "
                            f"serving.tensor = {room}, or more devices a replica; got {int(s.context):,}")
        raise UserError("serving.tensor", f"expected enough devices a replica to hold the weights "
                        f"({format_figure(estimate.weights_bytes, 'bytes')}) and one {int(s.context):,}-token "
                        f"sequence's KV cache: {room} do not, got {int(s.tensor)}")
    return estimate


#: Tokens a decode request generates when serving.tokens_per_request is not given (assumed: a chat answer
#: of a few paragraphs).
GENERATED_TOKENS_PER_REQUEST = 500


def serving_mode(w: Any) -> Literal["decode", "encode"]:
    """serving.mode, "auto" resolved: a video workload's model without a vocabulary (a vision encoder) is
    served as an encoder; a model with a vocabulary, or a token workload's, as a decoder."""
    if w.serving.mode != "auto":
        return w.serving.mode
    if w.data.kind not in FRAME_KINDS or w.model.vocab is not None:
        return "decode"
    if w.model.hf_config is not None:  # the config's vocabulary, where model.vocab is left to it
        from trainplan.workload.model_source import config_count

        count = config_count(w)
        return "decode" if count is not None and count.vocab else "encode"
    return "encode"


def tokens_per_request(w: Any, mode: str) -> float:
    """serving.tokens_per_request, or its default: a frame's tokens to encode, 500 to generate."""
    if w.serving.tokens_per_request is not None:
        return float(w.serving.tokens_per_request)
    if mode == "encode":
        return float(pipeline_mod.tokens_per_frame(w.data.side, w.data.patch))
    return float(min(GENERATED_TOKENS_PER_REQUEST, w.serving.context))  # the KV cache holds at most the context


def serving_tier(w: Any) -> tuple[float, float, int, float, float]:
    """The layout's network tiers (planning/execution.py hardware) as serving reads them."""
    hw = execution_mod.hardware(w)
    return (hw.intra_bus_bandwidth, hw.intra_latency, hw.devices_per_node, hw.inter_bus_bandwidth, hw.inter_latency)


def energy_of(w: Any, wall_seconds: float) -> energy_mod.EnergyEstimate:
    e = w.energy
    watts = e.watts if e.watts is not None else w.accelerator.tdp
    return energy_mod.training_energy(watts, w.cluster.count, wall_seconds / energy_mod.SECONDS_PER_HOUR, e.pue,
                                      grid_g_per_kwh=e.grid_intensity, region=e.region)
