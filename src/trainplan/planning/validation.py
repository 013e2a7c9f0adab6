"""`trainplan validate-against SET`: published training runs planned as a user would write them.

Each set (catalogue/megatron_runs.toml is `korthikanti`, alias `megatron`; the others are in
catalogue/validation_runs.toml) holds runs with their source and what was assumed. A run is
planned with the same account as any workload (accounts/parallel.py), on the catalogue's
accelerator, its node platform and its kernel efficiencies (catalogue/kernel_efficiency.toml):
nothing is set per run.

Constants are fitted in turn: the GEMM curve's two (gemm_max, gemm_half_intensity) on the reference
framework's runs (`fit`: least squares of the log ratio predicted / measured over a grid of the two,
evaluated at once), then each measured framework's efficiency and overlap cost on its own sets
(`fit_framework`), then the overlap cost of a framework no set measures (`fit_overlap`).
`leave_one_set_out()` fits them all without the set it predicts and reports the error on it, so every
figure it prints is out of sample (`held_out_constants`). `step_error_band(accelerator)` is the figure
a plan shows beside its step time.

A run is planned with the activation account `trainplan plan` uses for the same run written as
workload keys (`plan_keys`), so both give one step and one memory figure; `search_place(run)`
runs `trainplan layout --by layout` on it and finds where the published TP x PP stands.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from trainplan import catalogue
from trainplan.accounts import parallel, step_ops
from trainplan.catalogue.accelerators import resolve_accelerator
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.catalogue.interconnect import platform
from trainplan.errors import UserError
from trainplan.planning import execution, model_terms
from trainplan.planning.layout import layout_name, rank_of, search
from trainplan.planning.model import resolve_model
from trainplan.workload.load import load_workload
from trainplan.workload.schema import ClusterSection

# The standard GPT block (Narayanan et al. 2021): 12 h^2 weights and 13 h biases and layer-norm
# gains per layer; learned position embeddings s x h beside the vocabulary's V x h.
BLOCK_WEIGHTS_PER_WIDTH_SQUARED = 12.0
BLOCK_VECTORS_PER_WIDTH = 13.0
# A block with grouped-query attention and a (gated) MLP of width f: q, o of h x h, k, v of
# h x h kv/a each, the MLP's 3 (gated) or 2 matrices of h x f, two norms of h.
NORMS_PER_LAYER = 2.0
MLP_PER_WIDTH = 4.0  # the GPT block's MLP width (h -> 4h): its largest matrix, 4 h^2

REFERENCE_FRAMEWORK = "megatron-2021"  # the GEMM curve is fitted on its runs; the others' efficiency after
FIT_FRAMEWORK_EFFICIENCY = (0.5, 1.2)
FIT_OVERLAP_COST = (0.0, 1.0)  # a hidden exchange costs at most its own time (else it would run alone)
#: the efficiency of a framework that no more than one validation set measures: assumed as fast as the
#: reference framework
ASSUMED_FRAMEWORK_EFFICIENCY = 1.0
ALIASES = {"megatron": "korthikanti"}
# the fit's grid of the GEMM curve's two constants, refined once around the best point
FIT_GEMM_MAX = (0.55, 0.95)  # no GEMM reaches the dense peak
FIT_HALF_INTENSITY = (0.0, 600.0)
FIT_POINTS = 46


def megatron_runs() -> dict[str, Any]:
    return catalogue.table("megatron_runs")


def published_sets() -> dict[str, Any]:
    return catalogue.table("validation_runs")["sets"]


def set_names() -> tuple[str, ...]:
    """Every validation set, the eight of Korthikanti et al. first."""
    return ("korthikanti", *published_sets())


SUITES = (*ALIASES, *set_names(), "all")


@dataclass(frozen=True)
class Run:
    """One published run, as a user would write it."""

    set: str
    name: str
    accelerator: str
    precision: str
    framework: str
    seq_len: int
    vocab: int
    width: int
    heads: int
    kv_heads: int
    layers: int
    ffn: int  # MLP width (4 h for the standard block)
    gated: bool
    tied: bool
    flash_attention: bool
    flash_kernel: str  # the fused attention kernel's generation (catalogue/kernel_efficiency.toml [flash_kernels])
    tensor: int
    pipeline: int
    interleave: int
    devices: int
    global_batch: int
    micro_batch: int
    recompute: str
    sequence_parallel: bool
    zero: int
    embedding_stages: int
    measured: dict[str, Any] = field(default_factory=dict)  # measured_seconds, or tflops_per_gpu and flops

    @property
    def data(self) -> int:
        return self.devices // (self.tensor * self.pipeline)

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.data)


def _run(set_name: str, common: dict[str, Any], row: dict[str, Any]) -> Run:
    def get(key: str, default: Any = None) -> Any:
        return row.get(key, common.get(key, default))

    width = int(get("width"))
    heads = int(get("heads"))
    measured = {k: row[k] for k in ("measured_seconds", "tflops_per_gpu", "flops") if k in row}
    return Run(set=set_name, name=str(row["name"]), accelerator=str(get("accelerator")),
               precision=str(get("precision")), framework=str(get("framework", "megatron-2021")),
               seq_len=int(get("seq_len")), vocab=int(get("vocab")), width=width, heads=heads,
               kv_heads=int(get("kv_heads", heads)), layers=int(get("layers")), ffn=int(get("ffn", 4 * width)),
               gated=bool(get("gated", False)), tied=bool(get("tied", True)),
               flash_attention=bool(get("flash_attention", False)),
               flash_kernel=str(get("flash_kernel", "flash2")), tensor=int(get("tensor")),
               pipeline=int(get("pipeline")), interleave=int(get("interleave", 1)), devices=int(get("devices")),
               global_batch=int(get("global_batch")), micro_batch=int(get("micro_batch")),
               recompute=str(get("recompute", "full")), sequence_parallel=bool(get("sequence_parallel", False)),
               zero=int(get("zero", 0)), embedding_stages=int(get("embedding_stages", 0)), measured=measured)


@lru_cache(maxsize=None)
def runs_of(set_name: str) -> tuple[Run, ...]:
    """The runs of one set (an alias resolved)."""
    name = ALIASES.get(set_name, set_name)
    if name == "korthikanti":
        doc = megatron_runs()
        common = dict(doc["common"], framework="megatron-2021")
        return tuple(_run(name, common, r) for r in doc["runs"])
    sets = published_sets()
    if name not in sets:
        raise UserError("set", f"expected one of {', '.join(SUITES)}, got {set_name!r}")
    common = {k: v for k, v in sets[name].items() if k != "runs"}
    return tuple(_run(name, common, r) for r in sets[name]["runs"])


def set_source(set_name: str) -> tuple[str, str]:
    """(source, what was assumed) of a set, in words."""
    name = ALIASES.get(set_name, set_name)
    if name == "korthikanti":
        return str(megatron_runs()["common"]["source"]), "micro-batch, recomputation and SP as the paper's Table 2"
    entry = published_sets()[name]
    return str(entry["source"]), str(entry.get("assumed", ""))


# ---------------------------------------------------------------- planning one run


def gpt_shape(width: int, heads: int, layers: int, vocab: int, seq_len: int) -> parallel.ModelShape:
    """A Megatron GPT model: tied embeddings, learned positions."""
    layer = BLOCK_WEIGHTS_PER_WIDTH_SQUARED * width**2 + BLOCK_VECTORS_PER_WIDTH * width
    embedding = vocab * width
    params = layers * layer + embedding + seq_len * width
    return parallel.ModelShape(layers=layers, width=width, heads=heads, kv_heads=heads, vocab=vocab,
                               seq_len=seq_len, params=params, active_params=params - seq_len * width,
                               embedding_params=embedding, tied=True,
                               largest_layer_params=float(max(MLP_PER_WIDTH * width * width, embedding)))


def run_shape(run: Run) -> parallel.ModelShape:
    """The run's model: the GPT block, or a grouped-query, gated block where the run says so."""
    if run.kv_heads == run.heads and not run.gated and run.ffn == 4 * run.width:
        return gpt_shape(run.width, run.heads, run.layers, run.vocab, run.seq_len)
    h = run.width
    attention = 2.0 * h * h + 2.0 * h * h * run.kv_heads / run.heads
    mlp = (3.0 if run.gated else 2.0) * h * run.ffn
    layer = attention + mlp + NORMS_PER_LAYER * h
    embedding = float(run.vocab * h)
    params = run.layers * layer + embedding * (1 if run.tied else 2)
    return parallel.ModelShape(layers=run.layers, width=h, heads=run.heads, kv_heads=run.kv_heads, vocab=run.vocab,
                               seq_len=run.seq_len, params=params, active_params=params, embedding_params=embedding,
                               tied=run.tied, largest_layer_params=float(max(h * run.ffn, embedding)))


def hardware_of(accelerator_key: str, precision: str, kernels: step_ops.KernelEfficiency | None = None
                ) -> parallel.Hardware:
    acc = resolve_accelerator(accelerator_key)
    plat = platform(acc.key)
    defaults = ClusterSection()
    return parallel.Hardware(
        peak_flops=acc.peak(precision), matmul_efficiency=plat.matmul_efficiency,
        memory_bandwidth=acc.memory_bandwidth, device_memory=acc.memory,
        runtime_buffers=defaults.runtime_buffers, headroom=defaults.headroom,
        devices_per_node=plat.devices_per_node,
        intra_bus_bandwidth=acc.interconnect * plat.intra.efficiency, intra_latency=plat.intra.latency,
        inter_bus_bandwidth=plat.inter.bus_bandwidth * plat.nics_per_device, inter_latency=plat.inter.latency,
        kernels=kernels if kernels is not None else step_ops.kernel_efficiency(acc.key),
        intra_half_bytes=step_ops.half_bytes(plat.intra.key), inter_half_bytes=step_ops.half_bytes(plat.inter.key),
        intra_send_half_bytes=step_ops.half_bytes(plat.intra.key, "send"),
        inter_send_half_bytes=step_ops.half_bytes(plat.inter.key, "send"))


def _flag(value: bool) -> str:
    return "true" if value else "false"


def workload_keys(run: Run) -> list[str]:
    """The run as a user would write it for `trainplan layout`: its model, devices, precision,
    framework and its published TP and PP (which, with micro-batch and accumulation, give the batch)."""
    keys = [f"model.layers={run.layers}", f"model.width={run.width}", f"model.heads={run.heads}",
            f"model.kv_heads={run.kv_heads}", f"model.ffn_width={run.ffn}", f"model.vocab={run.vocab}",
            f"model.tied={_flag(run.tied)}", f"training.seq_len={run.seq_len}",
            f"training.micro_batch={run.micro_batch}", f"training.grad_accum={run.micro_batches}",
            f"training.precision={run.precision}", f"training.zero={run.zero}", f"parallel.tensor={run.tensor}",
            f"parallel.pipeline={run.pipeline}", f"parallel.flash_attention={_flag(run.flash_attention)}",
            f"parallel.framework={run.framework}", f"cluster.count={run.devices}",
            f"cluster.accelerator={run.accelerator}", "data.kind=tokens",
            # the step does not depend on the run's length: one step's tokens
            f"training.tokens={run.global_batch * run.seq_len}"]
    if run.flash_attention:  # a kernel generation is written only for a flash kernel (workload/neighbours.py)
        keys.append(f"parallel.flash_kernel={run.flash_kernel}")
    if run.gated:  # a gated, grouped-query block: the Llama family's layer
        keys.append("model.family=llama")
    return keys


def plan_keys(run: Run) -> list[str]:
    """The run's whole layout as workload keys: `workload_keys` and its recomputation, SP and interleave."""
    keys = workload_keys(run) + [f"training.recompute={run.recompute}", f"parallel.interleave={run.interleave}",
                                 f"parallel.sequence={_flag(run.sequence_parallel)}"]
    return keys + (["parallel.schedule=interleaved"] if run.interleave > 1 else [])


@lru_cache(maxsize=None)
def run_activations(set_name: str, name: str) -> parallel.LayerActivations:
    """The per-layer activation bytes `trainplan plan` counts for the run (Korthikanti's GPT block for
    a model given by its shape, the family's account for a gated block), so that validate-against and a
    plan of the same run give one step and one memory figure."""
    run = next(r for r in runs_of(set_name) if r.name == name)
    w = load_workload(None, plan_keys(run))
    model = resolve_model(w)
    activations, _ = execution.layer_activations(w, model, model_terms.evaluate(w, model))
    return activations


@lru_cache(maxsize=None)
def run_model_shape(set_name: str, name: str) -> parallel.ModelShape:
    """The model `trainplan plan` counts for the run written as workload keys (its parameters with the
    learned position table of a GPT block, which a long sequence makes worth counting): one job, one count."""
    run = next(r for r in runs_of(set_name) if r.name == name)
    w = load_workload(None, plan_keys(run))
    return execution.model_shape(w, resolve_model(w))


def plan_run(run: Run, kernels: step_ops.KernelEfficiency | None = None,
             framework_efficiency: Any = None, overlap_cost: Any = None,
             node_links: bool | None = None) -> parallel.ParallelAccount:
    """The run's parallel account (its fields arrays where `kernels`, `framework_efficiency` or
    `overlap_cost` hold arrays); `overlap_cost` replaces the catalogue's where the framework overlaps,
    `node_links` the framework's data-parallel links (shared NICs of a node, or one device's)."""
    shape = run_model_shape(run.set, run.name)
    fw = step_ops.framework(run.framework)
    base = kernels if kernels is not None else step_ops.kernel_efficiency(run.accelerator)
    share = fw.efficiency if framework_efficiency is None else framework_efficiency
    hw = hardware_of(run.accelerator, run.precision, base.with_flash_kernel(run.flash_kernel).scaled(share))
    state = state_bytes_per_param(run.precision, "adam")
    value = bytes_per_element(run.precision)
    return parallel.parallel_account(
        shape, hw, tensor=run.tensor, pipeline=run.pipeline, interleave=run.interleave, data=run.data,
        sequence_parallel=run.sequence_parallel, micro_batch=run.micro_batch, micro_batches=run.micro_batches,
        recompute=run.recompute, zero=model_terms.zero_codes(run.zero, run.framework),
        schedule="interleaved" if run.interleave > 1 else "1f1b",
        attention="flash" if run.flash_attention else "eager",
        # the one activation account, as a plan of the run written as a workload counts it
        activations=run_activations(run.set, run.name),
        activation_bytes_per_value=value, state_of=parallel.default_state(), weight_bytes=state.weights,
        grad_bytes=state.grads, dp_overlap=fw.dp_overlap, zero3_prefetch=fw.zero3_prefetch,
        overlap_cost=fw.overlap_cost if overlap_cost is None or not fw.dp_overlap else overlap_cost,
        embedding_stages=run.embedding_stages, dp_node_links=fw.dp_node_links if node_links is None else node_links)


# Narayanan et al. 2021, eq. 3: the FLOPs the papers count per step of B sequences with full
# recomputation, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)); how their achieved FLOP/s become seconds
EQ3_FLOPS_PER_BSLH2 = 96.0
EQ3_ATTENTION_DIVISOR = 6.0
EQ3_LOGIT_DIVISOR = 16.0


def narayanan_eq3_flops(batch: int, s: int, layers: int, h: int, vocab: int) -> float:
    """The papers' count of a step's FLOPs (eq. 3), used only to turn a published FLOP/s into seconds."""
    return EQ3_FLOPS_PER_BSLH2 * batch * s * layers * h**2 * (
        1.0 + s / (EQ3_ATTENTION_DIVISOR * h) + vocab / (EQ3_LOGIT_DIVISOR * layers * h))


def measured_seconds(run: Run) -> float:
    """The published step time, or the one the published FLOP/s imply with the paper's FLOPs count."""
    if "measured_seconds" in run.measured:
        return float(run.measured["measured_seconds"])
    rate = float(run.measured["tflops_per_gpu"]) * 1e12 * run.devices
    if run.measured.get("flops") == "narayanan":
        flops = narayanan_eq3_flops(run.global_batch, run.seq_len, run.layers, run.width, run.vocab)
    else:  # model FLOPs: 6 x non-embedding parameters x tokens + attention 12 l h s per token
        shape = run_shape(run)
        tokens = run.global_batch * run.seq_len
        dense = shape.active_layer_params * run.layers
        flops = 6.0 * dense * tokens + 12.0 * run.layers * run.width * run.seq_len * tokens
    return float(flops) / rate


# ---------------------------------------------------------------- a set planned


@dataclass(frozen=True)
class ValidationRow:
    set: str
    name: str
    devices: int
    tensor: int
    pipeline: int
    interleave: int
    data: int
    zero: int
    recompute: str
    sequence_parallel: bool
    predicted_seconds: float
    measured_seconds: float
    error: float  # (predicted - measured) / measured
    predicted_mfu: float
    bubble_share: float
    compute_seconds: float
    memory_bound_seconds: float
    tensor_seconds: float
    pipeline_send_seconds: float
    bubble_seconds: float
    data_parallel_seconds: float
    optimizer_seconds: float
    per_device_bytes: float
    fits: bool
    # where the published (TP, PP) stands in `trainplan layout --by layout` on the run's devices and batch
    search_rank: int | None = None  # 1-based; None: not among the first SEARCH_DEPTH (or it does not fit)
    search_first: str = ""  # the search's first layout, in words
    baseline: bool = False  # the set's layouts were run as a baseline to beat, not chosen (catalogue)


@dataclass(frozen=True)
class Validation:
    suite: str
    rows: list[ValidationRow]
    mean_abs_error: float
    max_abs_error: float
    bias: float  # signed mean error: > 0 predicts too slow
    in_top_five: int  # runs whose published layout the search places in its first five (baselines aside)
    chosen_runs: int  # runs whose layout was a practitioner's choice (not a baseline)
    gemm_max: float
    gemm_half_intensity: float
    fitted_on: list[str]
    source: str
    assumed: str

    def as_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "rows": [asdict(r) for r in self.rows], "mean_abs_error": self.mean_abs_error,
                "max_abs_error": self.max_abs_error, "bias": self.bias,
                "in_top_five": self.in_top_five, "chosen_runs": self.chosen_runs, "gemm_max": self.gemm_max,
                "gemm_half_intensity": self.gemm_half_intensity, "fitted_on": self.fitted_on,
                "source": self.source, "assumed": self.assumed}


def _row(run: Run, acct: parallel.ParallelAccount) -> ValidationRow:
    predicted = float(acct.step_seconds)
    measured = measured_seconds(run)
    return ValidationRow(
        set=run.set, name=run.name, devices=run.devices, tensor=run.tensor, pipeline=run.pipeline,
        interleave=run.interleave, data=run.data, zero=run.zero, recompute=run.recompute,
        sequence_parallel=run.sequence_parallel, predicted_seconds=predicted, measured_seconds=measured,
        error=(predicted - measured) / measured, predicted_mfu=float(acct.mfu),
        bubble_share=float(acct.bubble_share), compute_seconds=float(acct.compute_seconds),
        memory_bound_seconds=float(acct.memory_bound_seconds), tensor_seconds=float(acct.tensor_seconds),
        pipeline_send_seconds=float(acct.pipeline_send_seconds), bubble_seconds=float(acct.bubble_seconds),
        data_parallel_seconds=float(acct.data_parallel_seconds), optimizer_seconds=float(acct.optimizer_seconds),
        per_device_bytes=float(acct.per_device_bytes), fits=bool(acct.fits))


def _summary(errors: list[float]) -> tuple[float, float, float]:
    e = np.asarray(errors, dtype=np.float64)
    return float(np.abs(e).mean()), float(np.abs(e).max()), float(e.mean())


def _suite_runs(suite: str) -> tuple[Run, ...]:
    if suite == "all":
        return tuple(r for name in set_names() for r in runs_of(name))
    return runs_of(suite)


# ---------------------------------------------------------------- the search on a published run

#: layouts the search lists when finding where a published one stands
SEARCH_DEPTH = 100
TOP_FIVE = 5


def search_place(run: Run) -> tuple[int | None, str]:
    """(place of the run's published TP x PP in the layout search by layout, the search's first layout)."""
    w = load_workload(None, workload_keys(run))
    out = search(w, resolve_model(w), top=SEARCH_DEPTH, by="layout")
    first = layout_name(out["layouts"][0]) if out["layouts"] else ""
    return rank_of(out, tensor=run.tensor, pipeline=run.pipeline, context=1, expert=1), first


def is_baseline(set_name: str) -> bool:
    """Whether a set's layouts were run as a baseline to beat (catalogue: `baseline = true`)."""
    name = ALIASES.get(set_name, set_name)
    return name != "korthikanti" and bool(published_sets()[name].get("baseline", False))


def validate(suite: str = "megatron", kernels: dict[str, step_ops.KernelEfficiency] | None = None) -> Validation:
    """Plan every run of `suite` with the catalogue's kernel constants (or `kernels` by accelerator), and
    find where each published layout stands in the layout search."""
    if suite not in SUITES:  # SUITE, the argument's name on the command line
        raise UserError("SUITE", f"expected one of {', '.join(SUITES)}, got {suite!r}")
    rows = []
    for run in _suite_runs(suite):
        kern = (kernels or {}).get(run.accelerator)
        place, first = search_place(run)
        rows.append(replace(_row(run, plan_run(run, kern)), search_rank=place, search_first=first,
                            baseline=is_baseline(run.set)))
    chosen = [r for r in rows if not r.baseline]
    in_top = sum(1 for r in chosen if r.search_rank is not None and r.search_rank <= TOP_FIVE)
    mean, worst, bias = _summary([r.error for r in rows])
    a100 = (kernels or {}).get("a100-sxm-80gb") or step_ops.kernel_efficiency("a100-sxm-80gb")
    source, assumed = ("the sets " + ", ".join(set_names()), "as each set states") if suite == "all" \
        else set_source(suite)
    return Validation(suite=suite, rows=rows, mean_abs_error=mean, max_abs_error=worst, bias=bias,
                      in_top_five=in_top, chosen_runs=len(chosen),
                      gemm_max=float(a100.gemm_max), gemm_half_intensity=float(a100.gemm_half_intensity),
                      fitted_on=list(step_ops.fit_sets()) if kernels is None else [],
                      source=source, assumed=assumed)


# ---------------------------------------------------------------- fitting


def _squared_log_errors(runs: tuple[Run, ...], plan: Any) -> np.ndarray:
    """The sum over `runs` of log(predicted / measured)^2 of `plan(run)`'s step (arrays: at each grid point)."""
    loss: Any = 0.0
    for run in runs:
        loss = loss + np.log(np.asarray(plan(run).step_seconds, dtype=np.float64) / measured_seconds(run)) ** 2
    return np.asarray(loss)


def _fit_two(runs: tuple[Run, ...], plan: Any, first: tuple[float, float], second: tuple[float, float]
             ) -> tuple[float, float]:
    """The (a, b) of least squared log error of `plan(run, a, b)` (a, b arrays of a grid): a grid over the
    bounds `first` x `second`, then a finer grid around its best point."""
    (lo_a, hi_a), (lo_b, hi_b) = first, second
    best = (lo_a, lo_b)
    for _ in range(2):
        ga, gb = (x.ravel() for x in np.meshgrid(np.linspace(lo_a, hi_a, FIT_POINTS),
                                                 np.linspace(lo_b, hi_b, FIT_POINTS), indexing="ij"))
        i = int(np.argmin(_squared_log_errors(runs, lambda run: plan(run, ga, gb))))
        best = (float(ga[i]), float(gb[i]))
        da, db = (hi_a - lo_a) / (FIT_POINTS - 1), (hi_b - lo_b) / (FIT_POINTS - 1)
        lo_a, hi_a = max(best[0] - 2 * da, first[0]), min(best[0] + 2 * da, first[1])
        lo_b, hi_b = max(best[1] - 2 * db, second[0]), min(best[1] + 2 * db, second[1])
    return best


def fit(sets: tuple[str, ...] | list[str], accelerator: str = "a100-sxm-80gb") -> step_ops.KernelEfficiency:
    """The accelerator's GEMM curve fitted on the runs of `sets` on that accelerator: the grid point
    of least mean squared log error, then a finer grid around it."""
    runs = tuple(r for s in sets for r in runs_of(s)
                 if r.accelerator == accelerator and r.framework == REFERENCE_FRAMEWORK)
    base = step_ops.kernel_efficiency(accelerator)
    if not runs:
        return base

    def plan(run: Run, gemm_max: Any, half: Any) -> parallel.ParallelAccount:
        return plan_run(run, base.with_values(gemm_max=gemm_max, gemm_half_intensity=half), 1.0)
    gemm_max, half = _fit_two(runs, plan, FIT_GEMM_MAX, FIT_HALF_INTENSITY)
    return base.with_values(gemm_max=gemm_max, gemm_half_intensity=half)


def fit_framework(sets: tuple[str, ...] | list[str], framework: str,
                  kernels: dict[str, step_ops.KernelEfficiency]) -> tuple[float, float | None] | None:
    """(efficiency, overlap cost) of `framework` fitted on its runs in `sets`, with the accelerators' curves
    `kernels` held: jointly, least mean squared log error on a grid refined once, where it overlaps its
    data-parallel exchange (how fast its kernels run and how much of a hidden exchange still lands on the
    step are both its own), or with its runs all in one set its overlap cost alone, its efficiency assumed
    (ASSUMED_FRAMEWORK_EFFICIENCY); the efficiency alone, overlap None, where it does not overlap. None: no
    run of it."""
    runs = tuple(r for s in sets for r in runs_of(s) if r.framework == framework)
    if not runs:
        return None
    if not step_ops.framework(framework).dp_overlap:
        return _fit_one(runs, kernels, FIT_FRAMEWORK_EFFICIENCY,
                        lambda run, kern, axis: plan_run(run, kern, axis)), None
    if len({r.set for r in runs}) < 2:  # one table cannot tell slow kernels from a costly overlap: only the cost
        return ASSUMED_FRAMEWORK_EFFICIENCY, _fit_one(
            runs, kernels, FIT_OVERLAP_COST,
            lambda run, kern, axis: plan_run(run, kern, ASSUMED_FRAMEWORK_EFFICIENCY, axis))

    def plan(run: Run, share: Any, overlap: Any) -> parallel.ParallelAccount:
        return plan_run(run, _kernels_of(run, kernels), share, overlap)
    return _fit_two(runs, plan, FIT_FRAMEWORK_EFFICIENCY, FIT_OVERLAP_COST)


def fit_overlap(sets: tuple[str, ...] | list[str], kernels: dict[str, step_ops.KernelEfficiency],
                efficiencies: dict[str, float] | None = None) -> float | None:
    """One overlap cost fitted on the runs of `sets` whose framework overlaps, whatever the framework (None
    when none does): the cost charged for a framework no validation set measures. Each run's framework at
    `efficiencies` (its catalogue efficiency where not given), the accelerators' curves `kernels` held."""
    runs = tuple(r for s in sets for r in runs_of(s) if step_ops.framework(r.framework).dp_overlap)
    if not runs:
        return None
    shares = efficiencies or {}

    def plan(run: Run, kern: step_ops.KernelEfficiency, axis: Any) -> parallel.ParallelAccount:
        return plan_run(run, kern, shares.get(run.framework), axis)
    return _fit_one(runs, kernels, FIT_OVERLAP_COST, plan)


def _fit_one(runs: tuple[Any, ...], kernels: dict[str, step_ops.KernelEfficiency], bounds: tuple[float, float],
             plan: Any) -> float:
    """The value on a grid over `bounds` of least mean squared log error of `plan(run, kernels, axis)`'s
    step against each run's measured step."""
    axis = np.linspace(bounds[0], bounds[1], 8 * FIT_POINTS)
    loss = _squared_log_errors(runs, lambda run: plan(run, _kernels_of(run, kernels), axis))
    return float(axis[int(np.argmin(loss))])


def _kernels_of(run: Run, kernels: dict[str, step_ops.KernelEfficiency]) -> step_ops.KernelEfficiency:
    """The run's accelerator's curve in `kernels` (a fit's), else the catalogue's."""
    return kernels.get(run.accelerator) or step_ops.kernel_efficiency(run.accelerator)


@dataclass(frozen=True)
class HeldOut:
    set: str
    fitted_on: list[str]
    gemm_max: float
    gemm_half_intensity: float
    overlap_cost: float
    framework_efficiency: float
    rows: list[ValidationRow]
    mean_abs_error: float
    max_abs_error: float
    bias: float


@dataclass(frozen=True)
class LeaveOneSetOut:
    held_out: list[HeldOut]
    mean_abs_error: float  # over every run, each predicted by constants fitted without its set
    max_abs_error: float
    bias: float
    runs: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_ops_accelerators(sets: list[str]) -> list[str]:
    """The accelerators the runs of `sets` ran on."""
    return sorted({r.accelerator for s in sets for r in runs_of(s)})


def held_out_constants(others: list[str], frameworks: set[str], kernels: dict[str, step_ops.KernelEfficiency]
                       ) -> dict[str, tuple[float, float, bool]]:
    """(efficiency, overlap cost, node links) of each of `frameworks` from the sets `others` alone: its own
    runs there fit the first two (`fit_framework`); a framework with no run there is assumed as fast as the
    reference, and charged the overlap cost fitted on every overlapping framework's runs there together
    (`fit_overlap`). Its data-parallel links are the catalogue's unless they were read from a set not in
    `others`; then a node's shared NICs, the default."""
    fitted = {fw: fit_framework(others, fw, kernels)
              for fw in {r.framework for s in others for r in runs_of(s)} if fw != REFERENCE_FRAMEWORK}
    measured = {fw: f for fw, f in fitted.items() if f is not None}
    pooled: float | None = None  # fitted only where a framework of the held-out set needs it
    out = {}
    for fw in frameworks:
        row = step_ops.framework(fw)
        links = row.dp_node_links if set(row.dp_links_chosen_on) <= set(others) else True
        if fw == REFERENCE_FRAMEWORK:
            out[fw] = (row.efficiency, 0.0, links)
        elif fw in measured:
            share, overlap = measured[fw]
            out[fw] = (share, 0.0 if overlap is None else overlap, links)
        elif not row.dp_overlap:
            out[fw] = (ASSUMED_FRAMEWORK_EFFICIENCY, 0.0, links)
        else:
            if pooled is None:
                fitted_pooled = fit_overlap(others, kernels, {key: f[0] for key, f in measured.items()})
                pooled = step_ops.overlap_cost() if fitted_pooled is None else fitted_pooled
            out[fw] = (ASSUMED_FRAMEWORK_EFFICIENCY, pooled, links)
    return out


@lru_cache(maxsize=1)
def leave_one_set_out() -> LeaveOneSetOut:
    """Each set predicted with constants fitted on the other sets only: each accelerator's GEMM curve on
    the other sets' Megatron-LM runs on it, then each framework's efficiency and overlap cost on the other
    sets' runs of that framework (`held_out_constants`)."""
    held = []
    errors: list[float] = []
    for name in set_names():
        runs = runs_of(name)
        others = [s for s in set_names() if s != name]
        kernels = {acc: fit(others, acc) for acc in set(step_ops_accelerators(others)) | {r.accelerator for r in runs}}
        constants = held_out_constants(others, {r.framework for r in runs}, kernels)
        rows = [_row(r, plan_run(r, kernels[r.accelerator], *constants[r.framework])) for r in runs]
        mean, worst, bias = _summary([r.error for r in rows])
        k0 = kernels[runs[0].accelerator]
        share, overlap, _ = constants[runs[0].framework]
        held.append(HeldOut(set=name, fitted_on=others, gemm_max=float(k0.gemm_max),
                            gemm_half_intensity=float(k0.gemm_half_intensity), overlap_cost=float(overlap),
                            framework_efficiency=float(share), rows=rows, mean_abs_error=mean,
                            max_abs_error=worst, bias=bias))
        errors += [r.error for r in rows]
    mean, worst, bias = _summary(errors)
    return LeaveOneSetOut(held_out=held, mean_abs_error=mean, max_abs_error=worst, bias=bias, runs=len(errors))


#: a bias of the step model on an accelerator's runs worth saying beside its band (a share of the step)
BIAS_WORTH_SAYING = 0.05


def _band_text(band: float, runs: int, bias: float, on_accelerator: bool | None) -> str:
    """The band in words: overall, on the plan's accelerator (with its bias where large), or overall where
    no published run ran on it (on_accelerator False)."""
    where = " on this accelerator" if on_accelerator else ""
    text = f"± {band * 100:.0f} %, validated on {runs} published runs{where} (out of sample)"
    if on_accelerator and abs(bias) > BIAS_WORTH_SAYING:
        text += f", which it predicts {abs(bias) * 100:.0f} % {'fast' if bias < 0 else 'slow'} on average"
    if on_accelerator is False:
        text += ", none of them on this accelerator"
    return text


def measured_error_band(accelerator: str | None = None) -> dict[str, Any]:
    """The step time's error band, recomputed: the mean absolute out-of-sample error of the
    leave-one-set-out validation (over the runs on `accelerator` where given) rounded up to a whole
    percent, its bias, max and the number of runs."""
    loso = leave_one_set_out()
    rows = [r for h in loso.held_out for r in h.rows]
    if accelerator is not None:
        on = {(r.set, r.name) for name in set_names() for r in runs_of(name) if r.accelerator == accelerator}
        rows = [r for r in rows if (r.set, r.name) in on]
    mean, worst, bias = _summary([r.error for r in rows])
    band = math.ceil(mean * 100.0) / 100.0
    return {"band": band, "bias": round(bias, 4), "max": round(worst, 4), "runs": len(rows),
            "sets": sorted({r.set for r in rows}, key=list(set_names()).index),
            "text": _band_text(band, len(rows), bias, None if accelerator is None else True)}


def step_error_band(accelerator: str | None = None) -> dict[str, Any]:
    """The band a plan shows beside its step time: the one measured on the runs of the plan's
    accelerator, else the one over all runs (cheap: catalogue/validation_runs.toml [band] and
    [band.accelerators.KEY], which tests/test_validation.py holds equal to `measured_error_band()`)."""
    table = catalogue.table("validation_runs")["band"]
    own = table.get("accelerators", {}).get(accelerator) if accelerator is not None else None
    entry = own if own is not None else table
    band, runs, bias = float(entry["band"]), int(entry["runs"]), float(entry["bias"])
    on = None if accelerator is None else own is not None
    return {"band": band, "bias": bias, "max": float(entry["max"]), "runs": runs, "sets": list(entry["sets"]),
            "text": _band_text(band, runs, bias, on)}
