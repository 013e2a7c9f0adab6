"""Every figure of the report, declared once: JSON key path, dimension, human label, one-line meaning.

The CLI table, Markdown, HTML, the web page, sweep columns and solve targets all
read this table; nothing else says what unit a figure has or what it is called.
The order here is the order of the JSON report and of the rendered tables.

A figure's `dimension` is one of DIMENSIONS below; quantities.py formats
each dimension one way, and solve parses a target in it ("compute.seconds<=4 h").

Adding a section to the report (see planning/evaluate.py, SECTIONS) is one builder
function plus its figures declared here with `declare(...)`; undeclared keys still
appear in JSON and are shown in the tables by their key name.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.units import TIME_UNITS

# dimension -> the units.parse dimension a target in it is written in, and the factor from that
# unit's SI value to the figure's (hours are stored in hours, not seconds).
DIMENSIONS: dict[str, tuple[str | None, float]] = {
    "bytes": ("bytes", 1.0), "seconds": ("time", 1.0), "hours": ("time", 1 / TIME_UNITS["h"]),
    "days": ("time", 1 / TIME_UNITS["d"]), "dollars": ("dollars", 1.0), "dollars_per_hour": ("dollars", 1.0),
    "fraction": ("fraction", 1.0), "count": ("count", 1.0), "ratio": ("count", 1.0),
    "flops": ("flops", 1.0), "flop_rate": ("flop_rate", 1.0), "byte_rate": ("byte_rate", 1.0),
    "frames_per_second": ("frequency", 1.0), "tokens_per_second": ("frequency", 1.0),
    "requests_per_second": ("frequency", 1.0), "bytes_per_token": ("bytes", 1.0),
    "pixels_per_token": ("count", 1.0), "frames_per_hour": ("count", 1.0), "tokens_per_hour": ("count", 1.0),
    "bytes_per_hour": ("bytes", 1.0), "watts": ("power", 1.0), "kwh": ("count", 1.0), "joules": ("count", 1.0),
    "kg": ("count", 1.0), "grams_per_kwh": ("carbon", 1.0), "per_month": ("count", 1.0),
    "parameters": ("count", 1.0), "speedup": ("count", 1.0),
    "flag": (None, 1.0), "text": (None, 1.0),
}


@dataclass(frozen=True)
class FigureSpec:
    """One figure: where it sits in the JSON report, what it measures and how a person reads it."""

    path: str  # dotted JSON key path, e.g. "compute.seconds"
    dimension: str  # a key of DIMENSIONS
    label: str  # the human label of tables
    meaning: str  # one line: what the figure is
    sweep: bool = True  # a column of `trainplan sweep` (constants of the workload are not)
    detail: bool = False  # shown only with --all (a figure for checking, not for deciding)
    whole: bool = False  # a whole count: an int in JSON (null where infinite)
    video: bool = False  # a figure of video data only: left out of a token corpus's tables

    @property
    def section(self) -> str:
        return self.path.split(".", 1)[0]

    @property
    def numeric(self) -> bool:
        return self.dimension not in ("flag", "text")


FIGURES: dict[str, FigureSpec] = {}


def declare(path: str, dimension: str, label: str, meaning: str, *, sweep: bool = True,
            detail: bool = False, whole: bool = False, video: bool = False) -> FigureSpec:
    """Add one figure to the report's declaration (a section builder's figures call this)."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"{path}: unknown dimension {dimension!r}")
    spec = FigureSpec(path, dimension, label, meaning, sweep, detail, whole, video)
    FIGURES[path] = spec
    return spec


# figures of video data only (frames, decoders, hours of footage)
VIDEO_ONLY = {
    "pipeline.tokens_per_frame", "pipeline.decoded_per_used", "pipeline.demand_fps", "pipeline.supply_fps",
    "pipeline.decoder_fps", "pipeline.core_fps", "pipeline.video_decoders", "pipeline.cores_needed",
    "pipeline.cores_needed_cpu_only", "pipeline.pixels_per_token", "pipeline.decoded_bytes_per_token",
    "pipeline.frames_per_hour", "pipeline.tokens_per_hour", "pipeline.stored_bytes_per_hour",
    "pipeline.decoded_bytes_per_hour", "pipeline.stages.decode.tokens_per_second",
}


def spec(path: str) -> FigureSpec | None:
    return FIGURES.get(path)


def section_figures(section: str) -> list[FigureSpec]:
    return [f for f in FIGURES.values() if f.section == section]


D = declare
# ---- workload: what was planned
D("workload.accelerator", "text", "accelerator", "catalogue key of the accelerator", sweep=False)
D("workload.accelerator_name", "text", "accelerator name", "the accelerator's full name", sweep=False)
D("workload.params", "count", "parameters", "parameter count of the model (all experts)", sweep=False)
D("workload.active_params", "count", "active parameters", "parameters used per token", sweep=False)
D("workload.params_source", "text", "parameter count from", "how the count was obtained", sweep=False)
D("workload.tokens", "count", "training tokens", "tokens trained on, all epochs", sweep=False)
# ---- compute (docs/accounts.md)
D("compute.flops", "flops", "training FLOPs", "model FLOPs per token x tokens (the MFU convention: attention "
  "counted, recomputation not)")
D("compute.steps", "count", "optimizer steps", "tokens / tokens per step, rounded up", whole=True)
D("compute.seconds", "seconds", "compute time", "steps x time per step, if the accelerator never waits")
D("compute.seconds_per_step", "seconds", "time per step", "one optimizer step of the execution model: compute, "
  "exposed communication, pipeline bubble")
D("compute.tokens_per_step", "count", "tokens per step", "micro-batch x sequence x micro-batches x data-parallel "
  "degree")
D("compute.sustained_flops", "flop_rate", "sustained rate", "model FLOPs per step / time per step, all devices")
D("compute.scaling_applied", "flag", "scaling efficiency applied", "whether a given cluster.scaling_efficiency "
  "multiplied the given MFU")
D("compute.wall_seconds", "seconds", "wall time", "compute time stretched by the input pipeline's busy share, "
  "plus blocking checkpoint saves")
D("compute.train_wall_seconds", "seconds", "wall time without saves", "compute time stretched by the input "
  "pipeline's busy share", detail=True)
D("compute.step_source", "text", "step from", "what the compute part of the step follows", sweep=False)
D("compute.step_error_band", "fraction", "step error band", "mean error of the predicted step on published runs "
  "it was not fitted on (catalogue/validation_runs.toml, leave one set out)", sweep=False)
D("compute.step_error_bias", "fraction", "step error bias", "signed mean of that error", sweep=False, detail=True)
D("compute.step_error_runs", "count", "runs validated on", "published runs behind the band", sweep=False,
  whole=True, detail=True)
D("compute.step_error_text", "text", "step validated", "the band in words", sweep=False, detail=True)
# ---- memory (docs/accounts.md)
D("memory.state_bytes", "bytes", "model state", "weights, gradients and optimizer state per device, as sharded")
D("memory.weights_bytes", "bytes", "weights", "weights per device")
D("memory.grads_bytes", "bytes", "gradients", "gradients per device")
D("memory.optimizer_bytes", "bytes", "optimizer state", "optimizer state per device")
D("memory.activation_bytes", "bytes", "activations", "activations kept for the backward pass, per device")
D("memory.runtime_buffers", "bytes", "runtime buffers", "framework workspace and communication buffers")
D("memory.headroom_bytes", "bytes", "headroom", "fragmentation allowance on top of the rest")
D("memory.per_device_bytes", "bytes", "per device", "everything the fullest device (pipeline stage) holds")
D("memory.device_memory", "bytes", "device memory", "memory of one accelerator", sweep=True)
D("memory.fits", "flag", "fits", "per-device bytes within the device memory")
D("memory.devices_to_run", "count", "devices to hold the weights",
  "fewest devices whose memory holds the weights alone (to run it); devices to train holds the whole state", whole=True)
D("memory.devices_to_train", "count", "devices to train", "fewest devices that fit state and activations",
  whole=True)
# the architecture's terms (docs/memory-and-flops.md): planning/model_terms.py
D("compute.flops_per_token_model", "flops", "model FLOPs per token", "6 N (matmul parameters, head included, "
  "input embedding excluded) + 12 L d_attn S: the MFU convention", sweep=False)
D("compute.flops_per_token_executed", "flops", "executed FLOPs per token", "causal attention's half and "
  "recomputation's re-run counted as executed", sweep=False, detail=True)
D("compute.matmul_params", "count", "matmul parameters", "parameters that do a matmul per token", sweep=False,
  detail=True)
D("compute.mfu", "fraction", "MFU", "model FLOPs / (step x peak x devices), given or predicted")
D("compute.hfu", "fraction", "HFU", "executed FLOPs / (step x peak x devices)", detail=True)
D("compute.recompute_rerun", "text", "recomputation re-runs", "what full recomputation runs again of each layer: "
  "its whole forward (a reentrant checkpoint), or all but its last product (a non-reentrant one)", sweep=False,
  detail=True)
D("compute.time_follows", "text", "time follows", "predicted, mfu (model FLOPs) or hfu (executed FLOPs)",
  sweep=False, detail=True)
D("memory.activations_layers", "bytes", "activations in the layers", "saved tensors of every layer",
  sweep=False, detail=True)
D("memory.activations_outside_layers", "bytes", "activations outside the layers", "embedding output, final "
  "norm, head input, fp32 log-softmax of the loss", sweep=False, detail=True)
D("memory.activations_logits", "bytes", "logits", "the logits the model returns", sweep=False, detail=True)
D("memory.activations_per_layer_token", "bytes", "saved per layer and token", "from the architecture, "
  "before recomputation", sweep=False, detail=True)
D("memory.activations_kept_per_layer_token", "bytes", "kept per layer and token", "after recomputation",
  sweep=False, detail=True)
D("memory.activations_formula", "bytes", "activations by formula", "the architecture's figure", sweep=False,
  detail=True)
D("memory.activations_measured", "bytes", "activations measured", "from `trainplan probe model`", sweep=False)
D("memory.activations_source", "text", "activations from", "which figure the plan uses and why", sweep=False,
  detail=True)
D("memory.state_recipe", "text", "training state recipe", "bytes per parameter of weights, gradients, "
  "master and optimizer", sweep=False, detail=True)
D("memory.state_recipe_source", "text", "recipe source", "where the recipe's bytes come from", sweep=False,
  detail=True)
D("memory.sharding", "text", "sharding", "none, ZeRO 1-3 or FSDP over the data-parallel group", sweep=False)
D("memory.gathered_bytes", "bytes", "gathered parameter buffers", "ZeRO-3/FSDP: the largest module gathered "
  "in fp32", sweep=False, detail=True)
D("memory.trainable_params", "count", "trainable parameters", "all, or the adapters under LoRA/QLoRA",
  sweep=False)
D("memory.frozen_params", "count", "frozen parameters", "weights LoRA/QLoRA leaves untrained", sweep=False,
  detail=True)
# ---- network (docs/accounts.md)
D("network.gradient_bytes", "bytes", "gradient size", "this device's gradients, exchanged each step")
D("network.ring_bytes_per_step", "bytes", "ring traffic per step", "data-parallel collectives of a step, bytes "
  "each device sends (2 (N-1)/N x gradients for an all-reduce)")
D("network.link_rate", "byte_rate", "link rate", "nominal bandwidth per device of the data-parallel tier")
D("network.floor_seconds_per_step", "seconds", "all-reduce floor per step", "ring traffic / nominal link rate")
D("network.sync_seconds_per_step", "seconds", "gradient sync per step", "the data-parallel collectives at the "
  "tier's achieved bus bandwidth and latency")
D("network.exposed_seconds_per_step", "seconds", "exposed sync per step", "what backward does not hide; in the step")
D("network.backward_seconds_per_step", "seconds", "backward time per step", "the time the all-reduce can hide in")
D("network.share_of_step", "fraction", "sync share of step", "gradient sync / step time")
D("network.verdict", "text", "network", "none, negligible, hidden or exposed")
D("network.bytes_per_step", "bytes", "bytes sent per step", "every collective of a step under the layout, per device")
# ---- storage (docs/accounts.md)
D("storage.data_bytes", "bytes", "training data", "bytes of one copy of the data set")
D("storage.checkpoint_bytes", "bytes", "one checkpoint", "weights and optimizer state of one save")
D("storage.checkpoints_bytes", "bytes", "checkpoints kept", "one checkpoint x checkpoints kept")
D("storage.exports_bytes", "bytes", "exports", "exported weights")
D("storage.retained_bytes", "bytes", "retained", "data, checkpoints and exports, times copies")
D("storage.input_byte_rate", "byte_rate", "input read rate", "bytes per second the training reads")
D("storage.save_seconds", "seconds", "save time", "one checkpoint / write rate")
D("storage.save_share", "fraction", "save share of wall time", "time spent saving / wall time")
# ---- pipeline (docs/pipeline-and-bill.md)
D("pipeline.kind", "text", "data kind", "video, images or tokens", sweep=False)
D("pipeline.access", "text", "access pattern", "sequential, random or decoded", sweep=False)
D("pipeline.prefetch", "flag", "prefetch", "whether loading overlaps compute", sweep=False)
D("pipeline.tokens_per_frame", "count", "tokens per frame", "floor(side / patch)^2 (1 for a token corpus)")
D("pipeline.decoded_per_used", "ratio", "frames decoded per frame used", "1 sequential, (G+1)/2 random, 0 decoded")
D("pipeline.demand_fps", "frames_per_second", "demand (frames)", "frames/s the accelerator trains on if never kept waiting")
D("pipeline.demand_tokens_per_second", "tokens_per_second", "demand (tokens)", "tokens/s the accelerator consumes")
D("pipeline.supply_fps", "frames_per_second", "supply (frames)", "frames/s the slowest hop delivers")
D("pipeline.supply_tokens_per_second", "tokens_per_second", "supply (tokens)", "tokens/s the slowest hop delivers")
D("pipeline.busy", "fraction", "accelerator busy", "share of time the accelerator computes")
D("pipeline.bottleneck", "text", "bottleneck", "the hop that binds (accelerator when none does)")
D("pipeline.decoder_fps", "frames_per_second", "decoder rate", "frames/s all decoders produce")
D("pipeline.core_fps", "frames_per_second", "per-core decode rate", "frames/s one CPU core decodes at this size")
D("pipeline.cores", "count", "CPU cores", "decode cores per accelerator")
D("pipeline.video_decoders", "count", "video decoder engines", "the accelerator's decoder engines in use",
  sweep=False)
D("pipeline.cores_needed", "count", "cores needed", "cores for decode to keep up with demand")
D("pipeline.cores_needed_cpu_only", "count", "cores needed (CPU only)", "cores with no decoder engines", detail=True)
D("pipeline.pixels_per_token", "count", "pixels decoded per token", "decoded pixels behind one token", detail=True)
D("pipeline.threshold_params", "parameters", "stall threshold", "model size below which this supply stalls the accelerator")
D("pipeline.read_bytes_per_token", "bytes_per_token", "read per token", "bytes read per training token")
D("pipeline.stored_bytes_per_token", "bytes_per_token", "stored per token", "encoded bytes per token")
D("pipeline.decoded_bytes_per_token", "bytes_per_token", "decoded per token", "decoded bytes per token")
D("pipeline.transfer_bytes_per_token", "bytes_per_token", "sent to device per token", "host-to-device bytes per token")
D("pipeline.frames_per_hour", "frames_per_hour", "frames per hour of data", "cameras x fps x 3600")
D("pipeline.tokens_per_hour", "tokens_per_hour", "tokens per hour of data", "frames per hour x tokens per frame")
D("pipeline.stored_bytes_per_hour", "bytes_per_hour", "stored per hour of data", "bitrate x 3600 / 8 x cameras")
D("pipeline.decoded_bytes_per_hour", "bytes_per_hour", "decoded per hour of data", "frames x 1.5 bytes per pixel")
for _stage in ("read", "decode", "tokenize", "transfer"):
    D(f"pipeline.stages.{_stage}.tokens_per_second", "tokens_per_second", f"{_stage} capacity",
      f"tokens/s the {_stage} hop can deliver (absent where the hop does not exist)")
# the cache what-if (docs/measurement.md): reads mixed between a local cache and remote storage
D("pipeline.cache.cache_size", "bytes", "cache size", "page cache or local NVMe holding part of the data set",
  sweep=False, detail=True)
D("pipeline.cache.dataset_size", "bytes", "data set size", "bytes read over one epoch", sweep=False, detail=True)
D("pipeline.cache.cached_fraction", "fraction", "cached fraction", "min(1, cache / data set)", sweep=False,
  detail=True)
D("pipeline.cache.cache_rate", "byte_rate", "cache read rate", "reads served by the cache", sweep=False,
  detail=True)
D("pipeline.cache.remote_rate", "byte_rate", "remote read rate", "reads from storage (cluster.link)", sweep=False,
  detail=True)
D("pipeline.cache.read_rate", "byte_rate", "mixed read rate", "1 / (h / cache rate + (1 - h) / remote rate)",
  sweep=False, detail=True)
D("pipeline.cache.hit_ratio", "fraction", "cache hit ratio", "h: reads an LRU cache serves in the access order "
  "(shuffle each epoch: f + (1 - f) ln(1 - f))", sweep=False, detail=True)
D("pipeline.cache.order", "text", "access order", "storage.cache_order: shuffle, fixed, sharded or uniform",
  sweep=False, detail=True)
# ---- bill (docs/pipeline-and-bill.md): per hour of data moved once
D("bill.total", "dollars", "transport per hour of data", "bytes + cores + idle accelerator")
D("bill.bytes", "dollars", "bytes", "storage + transfer")
D("bill.storage", "dollars", "storage", "stored bytes x price per GB-month x months")
D("bill.transfer", "dollars", "transfer", "read bytes x price per GB")
D("bill.cores", "dollars", "decode cores", "cores x core-hour price x hours spent")
D("bill.idle_accelerator", "dollars", "idle accelerator", "accelerator time spent waiting, priced")
for _term in ("bytes", "cores", "idle_accelerator"):
    D(f"bill.shares.{_term}", "fraction", f"{_term.replace('_', ' ')} share",
      f"{_term.replace('_', ' ')} / the transport bill")
D("bill.accelerator_seconds_per_hour", "seconds", "accelerator time per hour of data", "wall seconds paid")
D("bill.useful_seconds_per_hour", "seconds", "useful time per hour of data", "seconds actually computing")
D("bill.per_epochs.1", "dollars", "over 1 epoch", "storage once, the rest per epoch")
D("bill.per_epochs.10", "dollars", "over 10 epochs", "storage once, the rest per epoch")
D("bill.transport_share", "fraction", "transport share of data price", "transport / price per hour of data")
D("bill.epoch_seconds", "seconds", "epoch time", "data hours x frames / (devices x demand x busy)")
D("bill.decoded_break_even_epochs_per_month", "per_month", "pre-decoding pays from",
  "epochs a month above which storing decoded frames is cheaper", sweep=False)
D("bill.epoch_seconds_at_cores_needed", "seconds", "epoch time with cores needed", "epoch time at full decode",
  sweep=False)
D("bill.add_cores.cores_now", "count", "cores now", "decode cores present", sweep=False)
D("bill.add_cores.cores_added", "count", "cores to add", "whole cores that remove the decode stall", sweep=False)
D("bill.add_cores.busy_now", "fraction", "busy now", "accelerator busy share now", sweep=False)
D("bill.add_cores.busy_after", "fraction", "busy after", "accelerator busy share with the cores", sweep=False)
D("bill.add_cores.extra_core_cost", "dollars", "extra core cost", "per hour of data", sweep=False)
D("bill.add_cores.idle_removed", "dollars", "idle time removed", "per hour of data", sweep=False)
D("bill.add_cores.net_saving", "dollars", "net saving", "idle removed - extra cores, per hour of data", sweep=False)
D("bill.add_cores.bottleneck_after", "text", "binds after", "what binds with the cores added", sweep=False)
# ---- training cost, energy, serving (docs/serving-scaling-energy.md): section builders in planning/evaluate.py
D("training_cost.accelerator_hours", "hours", "accelerator-hours", "wall time x devices", sweep=False)
D("training_cost.dollars_per_accelerator_hour", "dollars_per_hour", "price", "per accelerator-hour", sweep=False)
D("training_cost.dollars_per_attempt", "dollars", "cost per attempt", "accelerator-hours x price", sweep=False)
D("training_cost.attempts", "ratio", "attempts", "runs paid for, failures and restarts included", sweep=False)
D("training_cost.budget", "dollars", "budget", "cost per attempt x attempts", sweep=False)
D("training_cost.accelerators_note", "text", "comparison of accelerators", "how it was made", sweep=False,
  detail=True)
D("energy.it_watts", "watts", "IT power", "watts per device x devices", sweep=False)
D("energy.hours", "hours", "hours", "wall time", sweep=False)
D("energy.pue", "ratio", "PUE", "facility power / IT power", sweep=False)
D("energy.facility_watts", "watts", "facility power", "IT power x PUE", sweep=False)
D("energy.kwh", "kwh", "energy", "facility power x hours", sweep=False)
D("energy.joules", "joules", "energy (joules)", "the same energy in joules", sweep=False, detail=True)
D("energy.grid_g_per_kwh", "grams_per_kwh", "grid intensity", "grams CO2e per kWh", sweep=False)
D("energy.kg_co2", "kg", "emissions", "kWh x grid intensity", sweep=False)
D("energy.grid_source", "text", "grid source", "where the intensity comes from", sweep=False, detail=True)
D("serving.name", "text", "model", "the served model", sweep=False, detail=True)
D("serving.dtype", "text", "weights dtype", "precision of served weights", sweep=False)
D("serving.params", "count", "parameters", "served parameter count", sweep=False, detail=True)
D("serving.devices", "count", "devices per replica", "devices holding one copy", sweep=False)
D("serving.weights_bytes", "bytes", "weights", "params x bytes per element", sweep=False)
D("serving.kv_bytes_per_token", "bytes", "KV cache per token", "2 x layers x KV heads x head dim x bytes",
  sweep=False)
D("serving.kv_bytes_per_sequence", "bytes", "KV cache per sequence", "per token x context", sweep=False)
D("serving.context", "count", "context", "tokens per sequence", sweep=False)
D("serving.usable_memory_bytes", "bytes", "usable memory", "device memory less headroom", sweep=False, detail=True)
D("serving.fits", "flag", "fits", "weights and one sequence fit", sweep=False)
D("serving.max_batch", "count", "largest batch", "sequences whose KV cache fits", sweep=False)
D("serving.max_batch_bound", "text", "largest batch bounded by", "weights and KV cache, or weights only "
  "where the shape is unknown", sweep=False, detail=True)
D("serving.kv_cache_missing", "text", "KV cache unknown", "the shape keys that would size the KV cache",
  sweep=False)
D("serving.batch", "count", "batch", "sequences decoded together", sweep=False)
D("serving.flops_per_token", "flops", "FLOPs per token", "2 x active parameters", sweep=False, detail=True)
D("serving.compute_seconds_per_step", "seconds", "compute per step", "batch x FLOPs / (peak x MFU)",
  sweep=False, detail=True)
D("serving.memory_seconds_per_step", "seconds", "memory per step", "bytes read / bandwidth", sweep=False,
  detail=True)
D("serving.bound", "text", "bound by", "compute or memory", sweep=False)
D("serving.tokens_per_second", "tokens_per_second", "throughput", "tokens/s per replica", sweep=False)
D("serving.compute_bound_batch", "count", "compute-bound from batch", "batch above which compute binds",
  sweep=False, detail=True)
D("serving.tokens_per_request", "count", "tokens per request", "generated (decode) or passed in (encode)", sweep=False)
D("serving.mode", "text", "served as", "decode: token by token from a KV cache; encode: one forward pass a "
  "request, no KV cache", sweep=False)
D("serving.requests_per_second", "requests_per_second", "requests per second", "per replica", sweep=False)
D("serving.dollars_per_hour", "dollars_per_hour", "replica price", "per hour", sweep=False)
D("serving.cost_per_request", "dollars", "cost per request", "price / requests per hour", sweep=False)
D("serving.cost_per_million_requests", "dollars", "per million requests", "cost per request x a million", sweep=False)
D("serving.requests_per_day", "count", "requests per day", "the load served", sweep=False)
D("serving.replicas", "count", "replicas", "copies to serve the load", sweep=False)
D("serving.serving_cost_per_day", "dollars", "serving per day", "replicas x devices x price x 24", sweep=False)
D("serving.training_cost", "dollars", "training cost", "the budget serving is compared with", sweep=False)
D("serving.crossover_days", "days", "serving passes training after", "training cost / serving per day",
  sweep=False)
# ---- parallel layout (docs/parallel.md): section builder in planning/evaluate.py, account in accounts/parallel.py
for _key, _label, _meaning in (
        ("tensor", "tensor parallel", "devices splitting each layer's matrices (TP)"),
        ("pipeline", "pipeline stages", "devices splitting the layers into stages (PP)"),
        ("interleave", "virtual stages", "model chunks per pipeline device (interleaved schedule)"),
        ("context", "context parallel", "devices splitting each sequence (CP)"),
        ("expert", "expert parallel", "devices splitting the experts (EP)"),
        ("data", "data parallel", "replicas: devices / (TP x PP x CP)"),
        ("micro_batch", "micro-batch", "sequences per micro-batch"),
        ("micro_batches", "micro-batches per step", "micro-batches in one optimizer step per replica"),
        ("zero", "ZeRO stage", "optimizer-state sharding over the data-parallel group")):
    D(f"parallel.layout.{_key}", "count", _label, _meaning, sweep=False, whole=True)
D("parallel.layout.schedule", "text", "pipeline schedule", "1F1B, interleaved or GPipe", sweep=False)
D("parallel.layout.sequence", "flag", "sequence parallel", "norms and dropout split along the sequence with TP",
  sweep=False)
D("parallel.layout.recompute", "text", "recomputation", "none, selective or full", sweep=False)
D("parallel.layout.flash_attention", "flag", "flash attention", "no S x S scores kept", sweep=False)
D("parallel.layout.sharding", "text", "sharding", "none, ZeRO 1-3 or FSDP over the data-parallel group", sweep=False)
D("parallel.layout.attention", "text", "attention kernel", "flash, sdpa or eager", sweep=False)
D("parallel.layout.name", "text", "layout", "the degrees of the layout in words", sweep=False)
D("parallel.memory.gathered_bytes", "bytes", "gathered parameters", "ZeRO-3/FSDP: the largest module gathered",
  sweep=False)
D("parallel.time.compute_source", "text", "compute part from", "predicted, mfu or hfu", sweep=False)
D("parallel.hfu", "fraction", "hardware FLOPs utilisation", "executed FLOPs per step / (step time x peak x "
  "devices)", sweep=False, detail=True)
D("parallel.tokens_per_step", "count", "tokens per step", "micro-batch x sequence x micro-batches x data degree",
  sweep=False)
# ---- fit (planning/layout.py fit_change): when the job does not fit, the cheapest change that does
D("fit.change", "text", "to make it fit", "the cheapest change the layout search finds", sweep=False)
D("fit.reason", "text", "no fit", "why no change was found", sweep=False)
D("fit.devices", "count", "devices", "devices of the layout that fits", sweep=False, whole=True)
D("fit.per_device_bytes", "bytes", "per device", "memory per device of the layout that fits", sweep=False)
D("fit.step_seconds", "seconds", "time per step", "step of the layout that fits", sweep=False)
D("fit.device_memory", "bytes", "device memory", "the card's memory", sweep=False)
for _key, _dim in (("tensor", "count"), ("pipeline", "count"), ("interleave", "count"), ("context", "count"),
                   ("expert", "count"), ("data", "count"), ("micro_batch", "count"), ("micro_batches", "count"),
                   ("zero", "count"), ("schedule", "text"), ("sequence", "flag"), ("recompute", "text"),
                   ("step_seconds", "seconds"), ("tokens_per_second", "tokens_per_second"),
                   ("per_device_bytes", "bytes"), ("fits", "flag"), ("mfu", "fraction"),
                   ("bubble_share", "fraction"), ("tensor_tier", "text")):
    D(f"fit.layout.{_key}", _dim, _key.replace("_", " "), f"{_key.replace('_', ' ')} of the layout that fits",
      sweep=False, detail=True, whole=_dim == "count")
# ---- answer (planning/answer.py): the first screen's lines, in words
for _key, _label in (("fits", "Fits?"), ("time", "Time"), ("cost", "Cost"), ("waits_on", "Waits on"),
                     ("measure", "Measure"), ("layout", "Layout"), ("network", "Network"), ("decide", "Decide")):
    D(f"answer.{_key}", "text", _label, "the first screen's line, in words", sweep=False)
for _key, _label, _meaning in (
        ("weights_bytes", "weights per device", "weights after TP x PP (x DP under ZeRO-3) sharding"),
        ("grads_bytes", "gradients per device", "gradients after sharding"),
        ("optimizer_bytes", "optimizer state per device", "optimizer state after sharding"),
        ("activation_bytes", "activations per device", "the activation account's per-layer bytes, divided by the "
         "layout, x micro-batches in flight"),
        ("first_stage_bytes", "first stage", "memory of the first pipeline stage (embedding, most in flight)"),
        ("last_stage_bytes", "last stage", "memory of the last pipeline stage (head and loss)"),
        ("per_device_bytes", "per device", "the larger stage, with buffers and headroom"),
        ("device_memory", "device memory", "the card's memory")):
    D(f"parallel.memory.{_key}", "bytes", _label, _meaning, sweep=False)
D("parallel.memory.fits", "flag", "fits", "per device <= device memory", sweep=False)
for _key, _label, _meaning in (
        ("step_seconds", "step time", "one optimizer step under the layout"),
        ("compute_seconds", "matmul time", "FLOPs at the matmul efficiency"),
        ("memory_bound_seconds", "element-wise time", "passes over stored activations at memory bandwidth"),
        ("tensor_seconds", "tensor-parallel collectives", "TP all-reduce / reduce-scatter + all-gather per layer"),
        ("context_seconds", "context-parallel exchange", "key/value exchange between CP ranks"),
        ("expert_seconds", "expert all-to-all", "token dispatch and combine between EP ranks"),
        ("pipeline_send_seconds", "pipeline sends", "activations sent between stages"),
        ("bubble_seconds", "pipeline bubble", "(p - 1) / (m x v) of the step"),
        ("data_parallel_seconds", "data-parallel sync not hidden", "gradient sync and ZeRO-3 gathers left exposed"),
        ("optimizer_seconds", "optimizer step", "the update, at memory bandwidth")):
    D(f"parallel.time.{_key}", "seconds", _label, _meaning, sweep=False)
D("parallel.time.bubble_share", "fraction", "bubble share", "pipeline bubble / step time", sweep=False)
D("parallel.mfu", "fraction", "model FLOPs utilisation", "model FLOPs per step / (step time x peak x devices)",
  sweep=False)
D("parallel.model_flops_per_step", "flops", "model FLOPs per step", "the field's convention, attention in full",
  sweep=False, detail=True)
D("parallel.executed_flops_per_device", "flops", "executed FLOPs per device", "recomputation included",
  sweep=False, detail=True)
D("parallel.network.bytes_per_step", "bytes", "bytes sent per step", "every collective of a step, per device",
  sweep=False)
for _key in ("tensor", "pipeline", "data"):
    D(f"parallel.network.{_key}_tier", "text", f"{_key}-parallel tier", f"the link the {_key}-parallel group "
      "crosses: intra (inside a node) or inter (between nodes)", sweep=False, detail=True)
D("parallel.network.intra_bus_bandwidth", "byte_rate", "intra-node bus bandwidth", "per device, inside a node",
  sweep=False, detail=True)
D("parallel.network.inter_bus_bandwidth", "byte_rate", "inter-node bus bandwidth", "per device, between nodes",
  sweep=False, detail=True)
D("parallel.network.devices_per_node", "count", "devices per node", "accelerators sharing the intra-node link",
  sweep=False, detail=True, whole=True)
D("parallel.matmul_efficiency", "fraction", "matmul efficiency", "achieved / peak FLOP rate of the matmuls",
  sweep=False, detail=True)
# ---- decisions (docs/worked-examples.md): planning/decisions.py; its sentences join the verdict
D("decisions.attempts.attempts", "ratio", "attempts budgeted", "prices.attempts", sweep=False)
D("decisions.attempts.dollars_per_attempt", "dollars", "one clean run", "accelerator-hours x price", sweep=False)
D("decisions.attempts.budget", "dollars", "budget", "one run x attempts", sweep=False)
D("decisions.cost_per_request_paid", "dollars", "cost per request paid", "serving cost a day / requests a day",
  sweep=False)
D("decisions.recurring.retrain_every_seconds", "seconds", "retrained every", "training.retrain_every", sweep=False)
D("decisions.recurring.trainings_per_year", "ratio", "trainings a year", "a year / retrain_every", sweep=False)
D("decisions.recurring.training_per_year", "dollars", "training a year", "budget x trainings a year", sweep=False)
D("decisions.recurring.serving_per_year", "dollars", "serving a year", "serving cost a day x 365", sweep=False)
D("decisions.recurring.total_per_year", "dollars", "total a year", "training + serving a year", sweep=False)
D("decisions.loading.load_seconds", "seconds", "load per step", "a step's tokens / the pipeline's supply",
  sweep=False)
D("decisions.loading.compute_seconds", "seconds", "compute per step", "the compute account's step time",
  sweep=False)
D("decisions.loading.serial_step_seconds", "seconds", "step without overlap", "load + compute", sweep=False)
D("decisions.loading.overlapped_step_seconds", "seconds", "step with overlap", "max(load, compute)", sweep=False)
D("decisions.loading.serial_utilisation", "fraction", "busy without overlap", "compute / (load + compute)",
  sweep=False)
D("decisions.loading.overlapped_utilisation", "fraction", "busy with overlap", "compute / max(load, compute)",
  sweep=False)
D("decisions.loading.speedup", "speedup", "overlap speed-up", "step without / with overlap", sweep=False)
D("decisions.loading.ceiling", "text", "ceiling", "loader or compute: which one bounds the overlapped step",
  sweep=False)
# ---- queue simulation (plan --simulate)
D("simulation.busy", "fraction", "simulated busy", "busy share in the queue simulation", sweep=False)
D("simulation.formula_busy", "fraction", "formula busy", "the pipeline account's busy share", sweep=False)
D("simulation.pipeline_busy", "fraction", "pipeline busy", "busy share of the plan", sweep=False)
D("simulation.difference", "fraction", "difference", "simulated - formula", sweep=False)
D("simulation.throughput_fps", "frames_per_second", "simulated throughput", "frames/s", sweep=False)
D("simulation.demand_fps", "frames_per_second", "demand", "frames/s", sweep=False)
D("simulation.bottleneck", "text", "bottleneck", "the hop the simulated queue waits on", sweep=False)
D("simulation.mean_buffer_frames", "count", "mean buffer fill", "frames waiting in the buffer, on average",
  sweep=False)
D("simulation.buffer_frames", "count", "buffer size", "frames the buffer holds", sweep=False)
D("simulation.frames", "count", "frames simulated", "length of the simulation", sweep=False)
D("simulation.seed", "count", "seed", "random seed of the service times", sweep=False, detail=True)
D("simulation.variability", "text", "variability", "how service times vary", sweep=False)
# ---- the plan at the ends of a sample's intervals (planning/intervals.py, issue 26)
D("sample_range.confidence", "fraction", "confidence", "of each corpus key's interval", sweep=False)
D("sample_range.joint_confidence", "fraction", "joint confidence", "of all the intervals at once (Bonferroni)",
  sweep=False, detail=True)
D("sample_range.keys", "text", "sampled keys", "the corpus keys measured on a sample", sweep=False)
D("sample_range.corners", "count", "corners", "plans evaluated: every end of every interval", sweep=False,
  detail=True, whole=True)
for _name, _dim, _what in (("busy", "fraction", "accelerator busy"), ("cores_needed", "count", "cores needed"),
                           ("wall_seconds", "seconds", "wall time"), ("budget", "dollars", "budget")):
    D(f"sample_range.{_name}_low", _dim, f"{_what}, low", f"least {_what} over the intervals", sweep=False)
    D(f"sample_range.{_name}_high", _dim, f"{_what}, high", f"greatest {_what} over the intervals", sweep=False)
for _path in VIDEO_ONLY:
    FIGURES[_path] = FigureSpec(**{**FIGURES[_path].__dict__, "video": True})
del D, _stage, _term, _path, _name, _dim, _what

# Sections of the report in the order tables show them (each a key of the JSON report).
SECTION_ORDER: tuple[str, ...] = ("compute", "memory", "network", "storage", "pipeline", "bill", "energy",
                                  "training_cost", "sample_range", "serving", "parallel", "decisions", "simulation")


def units_dimension(path: str) -> tuple[str | None, float]:
    """How solve parses a target value for this figure: (units.parse dimension, factor to the figure)."""
    f = FIGURES.get(path)
    if f is None:
        return (None, 1.0)
    return DIMENSIONS[f.dimension]
