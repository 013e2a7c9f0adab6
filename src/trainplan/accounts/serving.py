"""Serving (docs/serving-scaling-energy.md): what it costs to answer requests with a trained model.

- Weights resident: P x bytes per parameter of the serving dtype (fp32 4, bf16 2, int8 1,
  int4 0.5; docs/parameter-counts.md, catalogue/dtypes.toml).
- KV cache: 2 (K and V) x L x kv_heads x head_dim x bytes per element, per token per
  sequence; grouped-query attention stores kv_heads < heads. Per sequence: that x context.
  With a config.json the count reads the cache layer by layer (kv_bytes_per_sequence): a
  sliding-window layer keeps at most W - 1 tokens (Mistral-7B v0.1; Gemma-2/3's alternating
  layers), DeepSeek's multi-head latent attention keeps kv_lora_rank + qk_rope_head_dim values a
  token; kv_bytes_per_token is then the mean a token adds at the context served.
- The largest batch that fits: (usable memory - weights) / KV bytes per sequence.
- Decode throughput at batch B, per replica of n devices: one step generates one token per
  sequence and costs 2 P B FLOP (docs/accounts.md; P the active parameters of a mixture of experts) and reads the weights once plus the KV cache of the
  batch. Its time is the larger of compute, 2 P B / (n Phi mu), and memory,
  (W + B kv_seq) / (n BW): compute-bound at an inference MFU for large batches, on the
  memory-bandwidth roofline for small ones. Tokens/s = B / step time.
- Cost per request = replica dollars per second / requests per second; per million requests.
- Without a shape (a model given by its parameter count alone) the KV cache cannot be sized:
  weights, devices, tokens/s and cost still follow from P, with the memory time counting the
  weights' read only, (W / (n BW)), so tokens/s is an upper bound; the KV figures are None with
  the missing keys named in `kv_cache_missing`, and the largest batch is bounded by weights only
  (`max_batch` None, `max_batch_bound` "weights only"): the requested batch is served.
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
from trainplan.units import SECONDS_PER_HOUR

# ---------------------------------------------------------------- constants

SERVING_DTYPES = ("fp32", "bf16", "fp16", "int8", "int4")
"""Weight formats a model can be served in (bytes per element from catalogue/dtypes.toml, docs/parameter-counts.md)."""

FLOP_PER_PARAM_PER_TOKEN = 2.0
"""Inference FLOP per parameter per generated token (docs/accounts.md: inference costs 2P per token)."""

KV_TENSORS = 2
"""Tensors cached per layer per token: one key and one value (docs/serving-scaling-energy.md)."""

KV_CACHE_DTYPE = "bf16"
"""Format of the KV cache: bf16, what vLLM and TGI keep by default (`kv_cache_dtype="auto"`
follows the model's bf16 activations) whatever the weight format."""

MEMORY_UTILIZATION = 0.9
"""Share of device memory given to weights and KV cache; the rest is activations, CUDA
context and allocator slack. vLLM's default `gpu_memory_utilization=0.9`."""

SECONDS_PER_DAY = 86400.0

MAX_BATCH_BY_KV = "weights and KV cache"
"""`max_batch_bound` when the shape is known: the memory left after the weights, in full-context
sequences."""
MAX_BATCH_BY_WEIGHTS = "weights only"
"""`max_batch_bound` without a shape: the weights fit or not; the KV cache, which would set the
largest batch, is unknown, so no largest batch is stated and the requested one is served."""


def bytes_per_param(dtype: str, key: str = "serving.dtype") -> float:
    """Bytes one weight takes in `dtype`: fp32 4, bf16/fp16 2, int8 1, int4 0.5."""
    if dtype not in SERVING_DTYPES:
        raise UserError(key, f"expected one of {', '.join(SERVING_DTYPES)}, got {dtype!r}")
    return dtypes.bytes_per_element(dtype)


def weights_bytes(params: float, dtype: str) -> float:
    """Bytes of P weights held in `dtype`."""
    require_positive("model.params", params)
    return params * bytes_per_param(dtype)


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: float, bytes_per_element: float) -> float:
    """2 x L x kv_heads x head_dim x bytes: the K and V one token adds to one sequence's cache."""
    require_positive("model.layers", layers)
    require_positive("model.kv_heads", kv_heads)
    require_positive("head_dim", head_dim)
    require_positive("kv bytes per element", bytes_per_element)
    return KV_TENSORS * layers * kv_heads * head_dim * bytes_per_element


def kv_bytes_per_sequence(kv_layers: Sequence[tuple[int, int | None]], context: int,
                          bytes_per_element: float) -> float:
    """KV-cache bytes of one sequence of `context` tokens, layer by layer: values a token adds x the
    tokens the layer keeps, min(context, cap) for a sliding-window layer (cap = W - 1 between steps),
    all of them otherwise (workload/params.py kv_layout_of_config: windows, MLA's compressed latent)."""
    require_positive("serving.context", context)
    require_positive("kv bytes per element", bytes_per_element)
    return bytes_per_element * sum(values * (context if cap is None else min(context, cap))
                                   for values, cap in kv_layers)


# ---------------------------------------------------------------- one serving configuration


@dataclass(frozen=True)
class ServedModel:
    """The shape serving needs: parameter count, layers, KV heads and the width of one head.
    Layers, KV heads and head width are None for a model known by its parameter count alone;
    `kv_missing` then says, in words, what would size its KV cache."""

    params: float  # every weight held (all experts)
    layers: int | None
    kv_heads: int | None
    head_dim: float | None
    name: str = ""
    active_params: float | None = None  # used per token (mixture of experts); None: = params
    kv_missing: str = ""  # what is missing to size the KV cache; "" when the shape is known
    heads: int | None = None  # query heads: a replica's tensor degree must divide them
    width: int | None = None  # hidden width: the bytes of a decode step's tensor-parallel all-reduces
    # per layer (values a token adds, tokens kept or None): sliding windows and compressed (MLA) caches;
    # None: every layer keeps 2 kv_heads head_dim values for every token
    kv_layers: tuple[tuple[int, int | None], ...] | None = None

    @property
    def kv_known(self) -> bool:
        return self.layers is not None and self.kv_heads is not None and self.head_dim is not None

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
    kv_bytes_per_token: float | None  # per token of one sequence; None without a shape
    kv_bytes_per_sequence: float | None  # at the full context; None without a shape
    context: int
    usable_memory_bytes: float  # devices x memory x MEMORY_UTILIZATION
    fits: bool  # weights and at least one full-context sequence fit (weights alone without a shape)
    max_batch: int | None  # concurrent full-context sequences that fit; None: bounded by weights only
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
    max_batch_bound: str = MAX_BATCH_BY_KV  # what bounds max_batch
    kv_cache_missing: str | None = None  # why the KV figures are None; None when they are known
    mode: str = "decode"  # decode: token by token from a KV cache; encode: one forward pass a request, no cache

    def as_dict(self) -> dict[str, float | int | str | bool | None]:
        """JSON-ready: infinities become None; `kv_cache_missing` only where there is a reason to give."""
        out: dict[str, float | int | str | bool | None] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if name == "kv_cache_missing" and v is None:
                continue
            out[name] = None if isinstance(v, float) and not math.isfinite(v) else v
        return out


def devices_to_fit(weights: float, kv_bytes: float, device_memory: float,
                   memory_utilization: float = MEMORY_UTILIZATION) -> int:
    """The fewest devices whose usable memory holds the weights and `kv_bytes` of KV cache."""
    require_positive("cluster.accelerator.memory", device_memory)
    devices = (weights + kv_bytes) / (device_memory * memory_utilization)
    if not math.isfinite(devices) or devices > MAX_REPLICA_DEVICES:
        if weights / (device_memory * memory_utilization) <= MAX_REPLICA_DEVICES:  # the weights fit: the cache does not
            raise UserError("serving.context", f"expected a KV cache that fits on at most {MAX_REPLICA_DEVICES:,} "
                            f"devices per replica beside the weights; {kv_bytes:.3g} bytes of it (the context x "
                            f"the batch) needs {devices:.3g} devices of {device_memory:g} bytes")
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
    tier: tuple[float, float, int, float, float] | None = None,
    mode: Literal["decode", "encode"] = "decode",
) -> ServingEstimate:
    """Serve `model` in `dtype` on replicas of `devices` accelerators (default: the fewest that hold
    the weights and `batch` full-context sequences, raised to a tensor degree that divides the
    heads, `tensor_degree`) at `batch` concurrent sequences (default and cap: the largest batch
    that fits). `tier` = (intra-node bus bandwidth B/s, its latency s, devices per node, inter-node
    bus bandwidth, its latency) of the layout's network: each decode step all-reduces b x width
    activations twice a layer (Megatron's pattern) inside the node, or across nodes for a replica
    larger than one.

    `mode` "encode" serves a request as one forward pass over its `tokens_per_request` tokens (a vision
    encoder on a frame's patches): no KV cache, a step is `batch` requests at once, `batch` x tokens
    through the weights read once; "decode" generates the request's tokens one step at a time."""
    _check_serving_inputs(context, tokens_per_request, peak_flops, memory_bandwidth, mfu, memory_utilization,
                          dollars_per_device_hour, requests_per_day, training_cost, batch)
    encode = mode == "encode"
    w = weights_bytes(model.params, dtype)
    kv_token, kv_seq_known = (None, None) if encode else _kv_cache(model, context, kv_dtype, batch)
    kv_seq = kv_seq_known if kv_seq_known is not None else 0.0  # unknown: the weights' read alone
    devices = _replica_devices(model, devices, w, kv_seq * (batch or 1), device_memory, memory_utilization)
    usable = devices * device_memory * memory_utilization
    max_batch, fits = _largest_batch(usable, w, kv_seq_known)
    flops_token = FLOP_PER_PARAM_PER_TOKEN * model.params_per_token
    rate = devices * peak_flops * mfu
    bandwidth = devices * memory_bandwidth
    # batch at which compute time equals memory time: 2PB/R = (W + B kv)/BW
    # an encode step passes every token of its requests at once: a step's tokens = batch x tokens a request
    step_tokens = tokens_per_request if encode else 1.0
    denominator = flops_token * step_tokens / rate - kv_seq / bandwidth
    crossover_batch = (w / bandwidth) / denominator if denominator > 0 else math.inf

    if fits:
        b = max_batch if batch is None else batch if max_batch is None else min(batch, max_batch)
        assert b is not None  # no shape requires a batch (above)
        t_compute, t_memory, bound, tps = _decode_step(model, b * step_tokens, w, kv_seq, flops_token, rate,
                                                       bandwidth, devices, tier)
    else:
        b, t_compute, t_memory, bound, tps = 0, math.inf, math.inf, "none", 0.0

    rps = tps / tokens_per_request
    dollars_hour = devices * dollars_per_device_hour
    cost_request = dollars_hour / SECONDS_PER_HOUR / rps if rps > 0 else math.inf
    replicas = _replicas(requests_per_day, rps)
    per_day = replicas * dollars_hour * 24.0 if fits else math.inf
    crossover = crossover_days(training_cost, per_day)
    return ServingEstimate(
        name=model.name, dtype=dtype, params=model.params, devices=devices,
        weights_bytes=w, kv_bytes_per_token=kv_token, kv_bytes_per_sequence=kv_seq_known, context=context,
        usable_memory_bytes=usable, fits=fits, max_batch=max_batch, batch=b,
        flops_per_token=flops_token, compute_seconds_per_step=t_compute, memory_seconds_per_step=t_memory,
        bound=bound, tokens_per_second=tps, compute_bound_batch=crossover_batch,
        tokens_per_request=tokens_per_request, requests_per_second=rps,
        dollars_per_hour=dollars_hour, cost_per_request=cost_request,
        cost_per_million_requests=cost_request * 1e6,
        requests_per_day=requests_per_day, replicas=replicas, serving_cost_per_day=per_day,
        training_cost=training_cost, crossover_days=crossover,
        max_batch_bound=MAX_BATCH_BY_KV if model.kv_known and not encode else MAX_BATCH_BY_WEIGHTS,
        kv_cache_missing=None if model.kv_known or encode else (model.kv_missing or "the model's shape"),
        mode=mode,
    )


def _largest_batch(usable: float, w: float, kv_seq: float | None) -> tuple[int | None, bool]:
    """(sequences whose KV cache fits beside the weights, whether one does); (None, weights fit) without a cache."""
    if kv_seq is None:
        return None, usable > w
    max_batch = max(0, math.floor((usable - w) / kv_seq))
    return max_batch, max_batch >= 1


def _check_serving_inputs(context: int, tokens_per_request: float, peak_flops: float, memory_bandwidth: float,
                          mfu: float, memory_utilization: float, dollars_per_device_hour: float,
                          requests_per_day: float, training_cost: float, batch: int | None) -> None:
    """Nothing: raises UserError for the first of estimate_serving's numbers out of its range."""
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


def _kv_cache(model: ServedModel, context: int, kv_dtype: str, batch: int | None) -> tuple[float | None, float | None]:
    """(KV bytes per token, per full-context sequence) of the model, None where its shape is unknown."""
    kv_token: float | None = None
    kv_seq_known: float | None = None
    if model.kv_known:
        if model.kv_layers:
            kv_seq_known = kv_bytes_per_sequence(model.kv_layers, context, dtypes.bytes_per_element(kv_dtype))
            kv_token = kv_seq_known / context  # the mean a token adds at this context
        else:
            kv_token = kv_bytes_per_token(model.layers, model.kv_heads, model.head_dim,  # type: ignore[arg-type]
                                          dtypes.bytes_per_element(kv_dtype))
            kv_seq_known = kv_token * context
    elif batch is None:
        raise UserError("serving.batch", "a batch: without a shape the KV cache, which sets the largest "
                        "batch that fits, is unknown")
    return kv_token, kv_seq_known


def _replica_devices(model: ServedModel, devices: int | None, w: float, kv_bytes: float, device_memory: float,
                     memory_utilization: float) -> int:
    """Devices of a replica: the fewest that hold the weights and `kv_bytes` of cache (at a tensor degree
    the heads allow), or the `devices` given, checked."""
    if devices is None:  # the fewest that hold the weights and the requested batch (one sequence if none)
        devices = tensor_degree(devices_to_fit(w, kv_bytes, device_memory, memory_utilization),
                                model.heads, model.kv_heads)
    elif devices < 1:
        raise UserError("serving.tensor", f"expected at least one device per replica, got {devices}")
    elif model.heads is not None and not valid_tensor_degree(devices, model.heads, model.kv_heads):
        raise UserError("serving.tensor", f"expected a tensor degree that divides model.heads ({model.heads})"
                        + (f" and divides or is a multiple of the KV heads ({model.kv_heads})"
                           if model.kv_heads else "") + f", got {devices}")
    return devices


def _decode_step(model: ServedModel, b: float, w: float, kv_seq: float, flops_token: float, rate: float,
                 bandwidth: float, devices: int, tier: tuple[float, float, int, float, float] | None
                 ) -> tuple[float, float, Literal["compute", "memory", "none"], float]:
    """(compute seconds, memory seconds, what bounds it, tokens/s) of a step of b tokens (a decode step: one
    token of each of b sequences, each reading its KV cache; an encode step: every token of its requests)."""
    t_compute = flops_token * b / rate
    t_memory = (w + b * kv_seq) / bandwidth
    step = max(t_compute, t_memory) + tensor_parallel_seconds(model, b, devices, tier)
    bound: Literal["compute", "memory", "none"] = "compute" if t_compute >= t_memory else "memory"
    return t_compute, t_memory, bound, b / step


def _replicas(requests_per_day: float, rps: float) -> int:
    """Replicas that serve `requests_per_day` at `rps` requests/s each (0 for no demand or no throughput)."""
    demand_rps = requests_per_day / SECONDS_PER_DAY
    if requests_per_day == 0:
        replicas = 0
    elif rps > 0:
        replicas = math.ceil(demand_rps / rps - 1e-12)
    else:
        replicas = 0
    return replicas


# A decode step all-reduces the b x d activations twice a layer (after attention, after the MLP),
# in 16-bit activations (Shoeybi et al. 2019's tensor-parallel pattern).
TP_ALL_REDUCES_PER_LAYER = 2
TP_ACTIVATION_BYTES = 2.0


def valid_tensor_degree(n: int, heads: int, kv_heads: int | None) -> bool:
    """n divides the query heads, and divides the KV heads or is a multiple of them (then each KV
    head is held by n / kv_heads devices, as vLLM and TensorRT-LLM replicate it)."""
    if heads % n:
        return False
    return kv_heads is None or kv_heads % n == 0 or n % kv_heads == 0


def tensor_degree(needed: int, heads: int | None, kv_heads: int | None) -> int:
    """The smallest valid tensor degree of at least `needed` devices (`needed` itself without heads)."""
    if heads is None:
        return needed
    for n in range(needed, heads + 1):
        if valid_tensor_degree(n, heads, kv_heads):
            return n
    raise UserError("serving.tensor", f"a replica of at least {needed} devices, but no tensor degree up to "
                    f"model.heads ({heads}) divides the heads")


def tensor_parallel_seconds(model: ServedModel, batch: float, devices: int,
                            tier: tuple[float, float, int, float, float] | None) -> float:
    """The decode step's tensor-parallel all-reduces on the replica's tier (0 on one device or unknown)."""
    if devices <= 1 or tier is None or model.layers is None or model.width is None:
        return 0.0
    from trainplan.accounts import collectives

    intra_bw, intra_lat, per_node, inter_bw, inter_lat = tier
    # a replica over nodes: its consecutive ranks fill each node, so each node's NICs all carry its rings
    from trainplan.accounts.parallel import shared_nic_bandwidth

    bandwidth, latency = (intra_bw, intra_lat) if devices <= per_node else (
        float(shared_nic_bandwidth(per_node, inter_bw, intra_bw)), inter_lat)
    message = batch * model.width * TP_ACTIVATION_BYTES
    return TP_ALL_REDUCES_PER_LAYER * model.layers * float(
        collectives.collective_seconds("all_reduce", message, devices, bandwidth, latency))


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








@dataclass(frozen=True)
class ComputeBoundServing:
    """Serving priced on the compute roofline alone: the batch large enough that weight and KV reads
    hide under compute (the lessons' back-of-envelope). SI units, dollars."""

    params: float
    flops_per_token: float  # 2 P
    speedup: float  # over the peak given (2 for int8 on int8 tensor cores, as the lessons count it)
    tokens_per_second: float  # peak x MFU x speedup / 2P
    tokens_per_request: float
    requests_per_second: float
    dollars_per_hour: float
    cost_per_request: float
    cost_per_thousand_requests: float
    cost_per_million_requests: float


def compute_bound_serving(params: float, peak_flops: float, mfu: float, dollars_per_hour: float,
                          tokens_per_request: float, speedup: float = 1.0) -> ComputeBoundServing:
    """tokens/s = Phi mu x speedup / (2 P); cost per request = dollars per second / requests per second."""
    require_positive("model.params", params)
    require_positive("peak_flops", peak_flops)
    require_fraction("serving.mfu", mfu)
    require_non_negative("prices.accelerator_hour", dollars_per_hour)
    require_positive("serving.tokens_per_request", tokens_per_request)
    require_positive("speedup", speedup)
    flops = FLOP_PER_PARAM_PER_TOKEN * params
    tps = peak_flops * mfu * speedup / flops
    rps = tps / tokens_per_request
    per_request = dollars_per_hour / SECONDS_PER_HOUR / rps
    return ComputeBoundServing(params, flops, speedup, tps, tokens_per_request, rps, dollars_per_hour,
                               per_request, per_request * 1e3, per_request * 1e6)
