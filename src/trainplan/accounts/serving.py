"""Serving (SPEC §10): what it costs to answer requests with a trained model.

- Weights resident: P x bytes per parameter of the serving dtype (fp32 4, bf16 2, int8 1,
  int4 0.5; SPEC §2, data/dtypes.toml).
- KV cache: 2 (K and V) x L x kv_heads x head_dim x bytes per element, per token per
  sequence; grouped-query attention stores kv_heads < heads. Per sequence: that x context.
- The largest batch that fits: (usable memory - weights) / KV bytes per sequence.
- Decode throughput at batch B, per replica of n devices: one step generates one token per
  sequence and costs 2 P B FLOP (SPEC §3; P the active parameters of a mixture of experts) and reads the weights once plus the KV cache of the
  batch. Its time is the larger of compute, 2 P B / (n Phi mu), and memory,
  (W + B kv_seq) / (n BW): compute-bound at an inference MFU for large batches, on the
  memory-bandwidth roofline for small ones. Tokens/s = B / step time.
- Cost per request = replica dollars per second / requests per second; per million requests.
- Crossover: the day cumulative serving dollars pass the training bill, at a request rate.

Simplifications, written down: every token of a request is costed as a decode token (prompt
tokens, processed in parallel during prefill, are cheaper per token; count only generated
tokens in `tokens_per_request` if prompts are long); the KV cache read per step is that of a
full `context` (the worst case, an upper bound on memory time); tensor-parallel communication
between the n devices of a replica is not costed; weight-only quantisation is assumed (int8/int4
weights, compute at the `peak_flops` given, bf16 in practice).

Pure: plain floats in SI units in (bytes, bytes/s, FLOP/s, dollars, seconds), frozen
dataclasses out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trainplan.catalogue import dtypes
from trainplan.errors import UserError, require_fraction, require_non_negative, require_positive

# ---------------------------------------------------------------- constants

SERVING_DTYPES = ("fp32", "bf16", "fp16", "int8", "int4")
"""Weight formats a model can be served in (bytes per element from data/dtypes.toml, SPEC §2)."""

FLOP_PER_PARAM_PER_TOKEN = 2.0
"""Inference FLOP per parameter per generated token (SPEC §3: inference costs 2P per token)."""

KV_TENSORS = 2
"""Tensors cached per layer per token: one key and one value (SPEC §10)."""

KV_CACHE_DTYPE = "bf16"
"""Format of the KV cache: bf16, what vLLM and TGI keep by default (`kv_cache_dtype="auto"`
follows the model's bf16 activations) whatever the weight format."""

MEMORY_UTILIZATION = 0.9
"""Share of device memory given to weights and KV cache; the rest is activations, CUDA
context and allocator slack. vLLM's default `gpu_memory_utilization=0.9`."""

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


def bytes_per_param(dtype: str, key: str = "serving.dtype") -> float:
    """Bytes one weight takes in `dtype`: fp32 4, bf16/fp16 2, int8 1, int4 0.5."""
    if dtype not in SERVING_DTYPES:
        raise UserError(key, f"expected one of {', '.join(SERVING_DTYPES)}, got {dtype!r}")
    return dtypes.bytes_per_element(dtype)


def weights_bytes(params: float, dtype: str) -> float:
    """Bytes of P weights held in `dtype`."""
    require_positive("model.params", params)
    return params * bytes_per_param(dtype)


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: float, bytes_per_element: float = 2.0) -> float:
    """2 x L x kv_heads x head_dim x bytes: the K and V one token adds to one sequence's cache."""
    require_positive("model.layers", layers)
    require_positive("model.kv_heads", kv_heads)
    require_positive("head_dim", head_dim)
    require_positive("kv bytes per element", bytes_per_element)
    return KV_TENSORS * layers * kv_heads * head_dim * bytes_per_element


# ---------------------------------------------------------------- one serving configuration


@dataclass(frozen=True)
class ServedModel:
    """The shape serving needs: parameter count, layers, KV heads and the width of one head."""

    params: float  # every weight held (all experts)
    layers: int
    kv_heads: int
    head_dim: float
    name: str = ""
    active_params: float | None = None  # used per token (mixture of experts); None: = params

    @property
    def params_per_token(self) -> float:
        return self.params if self.active_params is None else self.active_params


@dataclass(frozen=True)
class ServingEstimate:
    """One model in one dtype on one replica of `devices` accelerators. SI units, dollars."""

    name: str
    dtype: str
    params: float
    devices: int  # accelerators per replica (tensor-parallel degree)
    weights_bytes: float
    kv_bytes_per_token: float  # per token of one sequence
    kv_bytes_per_sequence: float  # at the full context
    context: int
    usable_memory_bytes: float  # devices x memory x MEMORY_UTILIZATION
    fits: bool  # weights and at least one full-context sequence fit
    max_batch: int  # concurrent full-context sequences that fit
    batch: int  # concurrent sequences served (requested batch capped at max_batch)
    flops_per_token: float  # 2 P
    compute_seconds_per_step: float
    memory_seconds_per_step: float
    bound: Literal["compute", "memory", "none"]
    tokens_per_second: float  # per replica, at `batch`
    compute_bound_batch: float  # batch above which decode is compute-bound
    tokens_per_request: float
    requests_per_second: float  # per replica
    dollars_per_hour: float  # per replica
    cost_per_request: float
    cost_per_million_requests: float
    requests_per_day: float
    replicas: int  # replicas needed for requests_per_day
    serving_cost_per_day: float  # whole replicas, all day
    training_cost: float
    crossover_days: float  # training_cost / serving_cost_per_day; inf when nothing is served

    def as_dict(self) -> dict[str, float | int | str | bool | None]:
        """JSON-ready: infinities become None."""
        out: dict[str, float | int | str | bool | None] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            out[name] = None if isinstance(v, float) and not math.isfinite(v) else v
        return out


def devices_to_fit(weights: float, kv_bytes: float, device_memory: float,
                   memory_utilization: float = MEMORY_UTILIZATION) -> int:
    """The fewest devices whose usable memory holds the weights and `kv_bytes` of KV cache."""
    require_positive("cluster.accelerator.memory", device_memory)
    devices = (weights + kv_bytes) / (device_memory * memory_utilization)
    if not math.isfinite(devices) or devices > MAX_REPLICA_DEVICES:
        raise UserError("cluster.accelerator.memory", f"expected room for the model on at most "
                        f"{MAX_REPLICA_DEVICES:,} devices per replica; {device_memory:g} bytes each needs "
                        f"{devices:.3g} devices (issue 16)")
    return max(1, math.ceil(devices))


#: The most devices one serving replica may span (issue 16). Tensor parallelism splits heads and
#: matrix columns; the largest published inference deployments shard one replica over ~10^3
#: devices (NVL72 racks x pipeline stages). Beyond 10^4 the "fit" is arithmetic, not a deployment.
MAX_REPLICA_DEVICES = 10_000


def estimate_serving(
    model: ServedModel,
    *,
    dtype: str,
    context: int,
    tokens_per_request: float,
    peak_flops: float,
    device_memory: float,
    memory_bandwidth: float,
    dollars_per_device_hour: float,
    mfu: float,
    requests_per_day: float,
    training_cost: float = 0.0,
    batch: int | None = None,
    devices: int | None = None,
    kv_dtype: str = KV_CACHE_DTYPE,
    memory_utilization: float = MEMORY_UTILIZATION,
) -> ServingEstimate:
    """Serve `model` in `dtype` on replicas of `devices` accelerators (default: the fewest that hold
    the weights and `batch` full-context sequences) at `batch` concurrent sequences (default and
    cap: the largest batch that fits)."""
    require_positive("serving.context", context)
    require_positive("serving.tokens_per_request", tokens_per_request)
    require_positive("cluster.accelerator.peak_flops", peak_flops)
    require_positive("cluster.accelerator.memory_bandwidth", memory_bandwidth)
    require_fraction("serving.mfu", mfu)
    require_fraction("memory_utilization", memory_utilization)
    require_non_negative("prices.accelerator_hour", dollars_per_device_hour)
    require_non_negative("serving.requests_per_day", requests_per_day)
    require_non_negative("serving.training_cost", training_cost)
    if batch is not None and batch < 1:
        raise UserError("serving.batch", f"expected a positive whole number of sequences, got {batch}")

    w = weights_bytes(model.params, dtype)
    kv_token = kv_bytes_per_token(model.layers, model.kv_heads, model.head_dim, dtypes.bytes_per_element(kv_dtype))
    kv_seq = kv_token * context
    if devices is None:  # the fewest that hold the weights and the requested batch (one sequence if none)
        devices = devices_to_fit(w, kv_seq * (batch or 1), device_memory, memory_utilization)
    elif devices < 1:
        raise UserError("devices", f"expected at least one device per replica, got {devices}")
    usable = devices * device_memory * memory_utilization
    max_batch = max(0, math.floor((usable - w) / kv_seq))
    fits = max_batch >= 1
    flops_token = FLOP_PER_PARAM_PER_TOKEN * model.params_per_token
    rate = devices * peak_flops * mfu
    bandwidth = devices * memory_bandwidth
    # batch at which compute time equals memory time: 2PB/R = (W + B kv)/BW
    denominator = flops_token / rate - kv_seq / bandwidth
    crossover_batch = (w / bandwidth) / denominator if denominator > 0 else math.inf

    if fits:
        b = max_batch if batch is None else min(batch, max_batch)
        t_compute = flops_token * b / rate
        t_memory = (w + b * kv_seq) / bandwidth
        step = max(t_compute, t_memory)
        bound: Literal["compute", "memory", "none"] = "compute" if t_compute >= t_memory else "memory"
        tps = b / step
    else:
        b, t_compute, t_memory, bound, tps = 0, math.inf, math.inf, "none", 0.0

    rps = tps / tokens_per_request
    dollars_hour = devices * dollars_per_device_hour
    cost_request = dollars_hour / SECONDS_PER_HOUR / rps if rps > 0 else math.inf
    demand_rps = requests_per_day / SECONDS_PER_DAY
    if requests_per_day == 0:
        replicas = 0
    elif rps > 0:
        replicas = math.ceil(demand_rps / rps - 1e-12)
    else:
        replicas = 0
    per_day = replicas * dollars_hour * 24.0 if fits else math.inf
    crossover = crossover_days(training_cost, per_day)
    return ServingEstimate(
        name=model.name, dtype=dtype, params=model.params, devices=devices,
        weights_bytes=w, kv_bytes_per_token=kv_token, kv_bytes_per_sequence=kv_seq, context=context,
        usable_memory_bytes=usable, fits=fits, max_batch=max_batch, batch=b,
        flops_per_token=flops_token, compute_seconds_per_step=t_compute, memory_seconds_per_step=t_memory,
        bound=bound, tokens_per_second=tps, compute_bound_batch=crossover_batch,
        tokens_per_request=tokens_per_request, requests_per_second=rps,
        dollars_per_hour=dollars_hour, cost_per_request=cost_request,
        cost_per_million_requests=cost_request * 1e6,
        requests_per_day=requests_per_day, replicas=replicas, serving_cost_per_day=per_day,
        training_cost=training_cost, crossover_days=crossover,
    )


def crossover_days(training_cost: float, serving_cost_per_day: float) -> float:
    """Days until cumulative serving dollars equal the training bill (inf when serving costs nothing
    a day or cannot run)."""
    if not math.isfinite(serving_cost_per_day):
        return math.inf
    if serving_cost_per_day <= 0:
        return math.inf
    return training_cost / serving_cost_per_day


def serving_ladder(models: Sequence[ServedModel], dtypes_: Sequence[str] = SERVING_DTYPES,
                   **common: object) -> tuple[ServingEstimate, ...]:
    """Every model in every dtype, one row each (model-major): the ladder of serving options.
    `common` are the keyword arguments of `estimate_serving` other than `dtype`."""
    if "dtype" in common:
        raise UserError("dtype", "give the dtypes of the ladder as its second argument")
    return tuple(estimate_serving(m, dtype=d, **common) for m in models for d in dtypes_)  # type: ignore[arg-type]


def head_dim_of(width: int, heads: int) -> float:
    """Width of one attention head: d / heads."""
    require_positive("model.heads", heads)
    return width / heads






