"""The input pipeline (docs/pipeline-and-bill.md): can the hops before the accelerator feed it?

Hops: read (storage or link) -> decode (CPU cores, and the accelerator's own
video decoders where enabled) -> tokenize/preprocess -> host-to-device transfer
-> the step. Every capacity is put in the accelerator's unit, training tokens
per second, per accelerator.

The formulas are written with numpy ufuncs so that every argument may be an
array: `trainplan sweep` evaluates a million configurations in one call.
A stage a workload does not have (no decode for pre-decoded frames, no
tokenizer for packed token ids) has infinite capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from trainplan.units import SECONDS_PER_HOUR

# The frame size that decoder rates are quoted at (docs/pipeline-and-bill.md: "frames/s at 1080p").
REFERENCE_PIXELS = 1920 * 1080
# Bytes per pixel of a decoded YUV 4:2:0 frame (8-bit luma plus two quarter-size chroma planes).
YUV420_BYTES_PER_PIXEL = 1.5
# Bytes per pixel of the resized RGB uint8 image sent to the device.
RGB_BYTES_PER_PIXEL = 3.0
BITS_PER_BYTE = 8.0

STAGES = ("read", "decode", "tokenize", "transfer")
BOTTLENECKS = ("accelerator",) + STAGES


def tokens_per_frame(side: Any, patch: Any) -> Any:
    """n = floor(side / patch)^2; 224/14 -> 256, 384/14 -> 729 (floored, not rounded)."""
    # in float64: exact for any side below 2^53, and no silent int64 overflow when squared
    return np.floor(np.asarray(side, dtype=np.float64) / np.asarray(patch, dtype=np.float64)) ** 2


def decoded_per_used(access: str, gop: Any) -> Any:
    """g: frames decoded per frame used. In order: 1. Random access with a keyframe every G
    frames lands, on average, halfway into a group: (G + 1) / 2. Pre-decoded frames: 0."""
    if access == "sequential":
        return np.ones_like(np.asarray(gop, dtype=float))
    if access == "random":
        return (np.asarray(gop, dtype=float) + 1.0) / 2.0
    if access == "decoded":
        return np.zeros_like(np.asarray(gop, dtype=float))
    raise ValueError(f"unknown access pattern {access!r}")


def demand_fps(mfu: Any, peak_flops: Any, params: Any, tokens_per_frame_: Any,
               flops_per_param_token: float) -> Any:
    """D = μ Φ / (6 P n): frames/s the accelerator trains on if never kept waiting."""
    return mfu * peak_flops / (flops_per_param_token * params * tokens_per_frame_)


def rate_at_size(rate_1080p: Any, width: Any, height: Any) -> Any:
    """Decoder cost is proportional to pixels: a rate at 1080p scales by 1920·1080 / (W H)."""
    return rate_1080p * REFERENCE_PIXELS / (np.asarray(width, dtype=float) * height)


def _capacity(rate_units_per_s: Any, units_per_token: Any) -> Any:
    """Stage capacity in tokens/s = its rate / its units per token (inf where it costs nothing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = np.where(np.asarray(units_per_token) > 0, rate_units_per_s / np.where(
            np.asarray(units_per_token) > 0, units_per_token, 1.0), np.inf)
    return cap


def pipeline_arrays(
    *,
    kind: str,
    access: str,
    params: Any,
    mfu: Any,
    peak_flops: Any,
    cores: Any,
    core_fps_1080p: Any,
    nvdec: Any,
    video_decoders: Any,
    nvdec_fps_1080p: Any,
    link: Any,
    host_to_device: Any,
    width: Any,
    height: Any,
    fps: Any,
    cameras: Any,
    bitrate: Any,
    gop: Any,
    side: Any,
    patch: Any,
    bytes_per_token: Any,
    tokenizer_rate: Any,
    tokenize_online: bool,
    prefetch: bool,
    flops_per_param_token: float,
) -> dict[str, Any]:
    """Every figure of the pipeline account, each an array broadcast over the arguments.

    Capacities are in tokens/s per accelerator; `bottleneck_index` indexes BOTTLENECKS.
    """
    f = np.float64
    params, mfu, peak_flops, cores = (np.asarray(x, f) for x in (params, mfu, peak_flops, cores))
    width, height, fps, cameras = (np.asarray(x, f) for x in (width, height, fps, cameras))
    if kind == "video":
        n = np.asarray(tokens_per_frame(np.asarray(side), np.asarray(patch)), f)
        g = decoded_per_used(access, gop)
        frame_pixels = width * height
        bits_per_pixel = np.asarray(bitrate, f) / (frame_pixels * fps)
        if access == "decoded":
            read_bytes_per_frame = YUV420_BYTES_PER_PIXEL * frame_pixels
        else:
            read_bytes_per_frame = g * frame_pixels * bits_per_pixel / BITS_PER_BYTE
        core_fps = rate_at_size(core_fps_1080p, width, height)
        engines = np.where(np.asarray(nvdec, bool), np.asarray(video_decoders, f), 0.0)
        engine_fps = rate_at_size(nvdec_fps_1080p, width, height)
        decoder_fps = cores * core_fps + engines * engine_fps  # frames decoded per second
        decode_cap = _capacity(decoder_fps, g / n)
        read_cap = link / (read_bytes_per_frame / n)
        transfer_bytes_per_token = RGB_BYTES_PER_PIXEL * np.asarray(side, f) ** 2 / n
        tokenize_cap = np.full_like(read_cap, np.inf)  # resize and patchify are in the decoder rate
        pixels_per_token = g * frame_pixels / n
        decoded_bytes_per_token = g * YUV420_BYTES_PER_PIXEL * frame_pixels / n
        stored_bytes_per_token = frame_pixels * bits_per_pixel / BITS_PER_BYTE / n
        read_bytes_per_token = read_bytes_per_frame / n
        frames_per_hour = cameras * fps * SECONDS_PER_HOUR
        stored_bytes_per_hour = cameras * np.asarray(bitrate, f) / BITS_PER_BYTE * SECONDS_PER_HOUR
        decoded_bytes_per_hour = frames_per_hour * YUV420_BYTES_PER_PIXEL * frame_pixels
    else:
        n = np.ones_like(params)
        g = np.zeros_like(params)
        core_fps = np.full_like(params, np.nan)
        engines = np.zeros_like(params)
        decoder_fps = np.full_like(params, np.inf)
        decode_cap = np.full_like(params, np.inf)
        read_bytes_per_token = np.asarray(bytes_per_token, f) + 0 * params
        read_cap = link / read_bytes_per_token
        transfer_bytes_per_token = read_bytes_per_token
        tokenize_cap = cores * tokenizer_rate if tokenize_online else np.full_like(params, np.inf)
        pixels_per_token = np.zeros_like(params)
        decoded_bytes_per_token = np.zeros_like(params)
        stored_bytes_per_token = read_bytes_per_token
        frames_per_hour = np.full_like(params, np.nan)
        stored_bytes_per_hour = np.full_like(params, np.nan)
        decoded_bytes_per_hour = np.full_like(params, np.nan)
    transfer_cap = host_to_device / transfer_bytes_per_token
    demand_frames = demand_fps(mfu, peak_flops, params, n, flops_per_param_token)
    demand_tokens = demand_frames * n
    caps = np.broadcast_arrays(read_cap, decode_cap, tokenize_cap, transfer_cap)
    # the slowest stage, the first of equals (as argmin over the stages would pick), pairwise: a stacked
    # argmin over four arrays costs more than the rest of the account
    supply_tokens, slowest = caps[0], np.ones(caps[0].shape, dtype=np.int64)
    for stage, cap in enumerate(caps[1:], start=2):
        smaller = cap < supply_tokens
        supply_tokens = np.where(smaller, cap, supply_tokens)
        slowest = np.where(smaller, stage, slowest)
    bound = supply_tokens < demand_tokens
    bottleneck_index = np.where(bound, slowest, 0)
    if prefetch:
        busy = np.minimum(1.0, supply_tokens / demand_tokens)
    else:
        # no overlap: each token costs load time plus compute time
        busy = np.where(np.isinf(supply_tokens), 1.0, supply_tokens / (supply_tokens + demand_tokens))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf is the answer at the extremes
        cores_needed_cpu_only = demand_frames * g / core_fps
        engine_frames = engines * (engine_fps if kind == "video" else 0.0)
        cores_needed = np.maximum(0.0, demand_frames * g - engine_frames) / core_fps
        # model size below which the given supply stalls the accelerator: D(P*) = S
        threshold_params = mfu * peak_flops / (flops_per_param_token * supply_tokens)
    return {
        "tokens_per_frame": n,
        "decoded_per_used": g,
        "demand_fps": demand_frames,
        "demand_tokens_per_second": demand_tokens,
        "supply_fps": supply_tokens / n,
        "supply_tokens_per_second": supply_tokens,
        "busy": busy,
        "bottleneck_index": bottleneck_index,
        "read_tokens_per_second": caps[0],
        "decode_tokens_per_second": caps[1],
        "tokenize_tokens_per_second": caps[2],
        "transfer_tokens_per_second": caps[3],
        "decoder_fps": decoder_fps,
        "core_fps": core_fps,
        "cores_needed": cores_needed,
        "cores_needed_cpu_only": cores_needed_cpu_only,
        "pixels_per_token": pixels_per_token,
        "threshold_params": threshold_params,
        "read_bytes_per_token": read_bytes_per_token,
        "stored_bytes_per_token": stored_bytes_per_token,
        "decoded_bytes_per_token": decoded_bytes_per_token,
        "transfer_bytes_per_token": transfer_bytes_per_token,
        "frames_per_hour": frames_per_hour,
        "tokens_per_hour": frames_per_hour * n,
        "stored_bytes_per_hour": stored_bytes_per_hour,
        "decoded_bytes_per_hour": decoded_bytes_per_hour,
    }


def wall_seconds(compute_seconds: Any, busy: Any) -> Any:
    """The compute time stretched by the input pipeline's busy fraction (infinite at busy 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(busy > 0, compute_seconds / np.where(busy > 0, busy, 1.0), np.inf)


@dataclass(frozen=True)
class PipelineAccount:
    kind: str
    access: str
    prefetch: bool
    tokens_per_frame: float
    decoded_per_used: float
    demand_fps: float
    demand_tokens_per_second: float
    supply_fps: float
    supply_tokens_per_second: float
    busy: float
    bottleneck: str
    stage_tokens_per_second: dict[str, float]
    decoder_fps: float
    core_fps: float
    cores: float
    video_decoders: float
    cores_needed: float
    cores_needed_cpu_only: float
    pixels_per_token: float
    threshold_params: float
    read_bytes_per_token: float
    stored_bytes_per_token: float
    decoded_bytes_per_token: float
    transfer_bytes_per_token: float
    frames_per_hour: float
    tokens_per_hour: float
    stored_bytes_per_hour: float
    decoded_bytes_per_hour: float


def pipeline_account(**kwargs: Any) -> PipelineAccount:
    """The scalar account: same arguments as `pipeline_arrays`, each a number."""
    a = {k: float(np.asarray(v)) for k, v in pipeline_arrays(**kwargs).items()}
    engines = float(kwargs["video_decoders"]) if kwargs["nvdec"] else 0.0
    return PipelineAccount(
        kind=kwargs["kind"],
        access=kwargs["access"],
        prefetch=bool(kwargs["prefetch"]),
        tokens_per_frame=a["tokens_per_frame"],
        decoded_per_used=a["decoded_per_used"],
        demand_fps=a["demand_fps"],
        demand_tokens_per_second=a["demand_tokens_per_second"],
        supply_fps=a["supply_fps"],
        supply_tokens_per_second=a["supply_tokens_per_second"],
        busy=a["busy"],
        bottleneck=BOTTLENECKS[int(a["bottleneck_index"])],
        stage_tokens_per_second={s: a[f"{s}_tokens_per_second"] for s in STAGES},
        decoder_fps=a["decoder_fps"],
        core_fps=a["core_fps"],
        cores=float(kwargs["cores"]),
        video_decoders=engines,
        cores_needed=a["cores_needed"],
        cores_needed_cpu_only=a["cores_needed_cpu_only"],
        pixels_per_token=a["pixels_per_token"],
        threshold_params=a["threshold_params"],
        read_bytes_per_token=a["read_bytes_per_token"],
        stored_bytes_per_token=a["stored_bytes_per_token"],
        decoded_bytes_per_token=a["decoded_bytes_per_token"],
        transfer_bytes_per_token=a["transfer_bytes_per_token"],
        frames_per_hour=a["frames_per_hour"],
        tokens_per_hour=a["tokens_per_hour"],
        stored_bytes_per_hour=a["stored_bytes_per_hour"],
        decoded_bytes_per_hour=a["decoded_bytes_per_hour"],
    )


# ---------------------------------------------------------------- cache what-if (issue 14)

# The cached fractions the what-if reports busy at: 0, 10, ..., 100 % of the dataset.
CACHE_FRACTIONS = tuple(i / 10 for i in range(11))


def cached_fraction(cache_size: Any, dataset_size: Any) -> Any:
    """f = min(1, cache / dataset): the share of the dataset's bytes a cache of that size holds
    (an epoch reads every byte once, so a cache smaller than the dataset holds that share of an
    epoch's reads however it is filled; with LRU and a dataset larger than the cache, a shuffled
    epoch can hit less — this is the ceiling DS-Analyzer's what-if also uses)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(np.asarray(dataset_size, float) > 0,
                     np.asarray(cache_size, float) / np.where(np.asarray(dataset_size, float) > 0, dataset_size, 1.0),
                     1.0)
    return np.clip(f, 0.0, 1.0)


def cached_read_rate(remote_rate: Any, cache_rate: Any, fraction: Any) -> Any:
    """The read stage's rate with a fraction f of the bytes served from a cache:
    R = 1 / (f / R_cache + (1 - f) / R_remote) (every byte costs the time of the place it comes
    from: the effective-access-time mix). f = 0 gives R_remote, f = 1 gives R_cache."""
    f = np.asarray(fraction, float)
    return 1.0 / (f / np.asarray(cache_rate, float) + (1.0 - f) / np.asarray(remote_rate, float))


def dataset_bytes(*, kind: str, access: str, hours: Any, cameras: Any, fps: Any, width: Any, height: Any,
                  bitrate: Any, tokens: Any = 0.0, bytes_per_token: Any = 4.0) -> Any:
    """Bytes the loader reads over one epoch: video at its stored bit rate (decoded frames at
    1.5 W H bytes each), token ids at bytes_per_token each."""
    if kind == "video":
        seconds = np.asarray(hours, float) * SECONDS_PER_HOUR * cameras
        if access == "decoded":
            return seconds * fps * YUV420_BYTES_PER_PIXEL * np.asarray(width, float) * height
        return seconds * np.asarray(bitrate, float) / BITS_PER_BYTE
    return np.asarray(tokens, float) * bytes_per_token


def cache_what_if(inputs: dict[str, Any], *, cache_size: float, dataset_size: float, cache_rate: float,
                  remote_rate: float, fractions: tuple[float, ...] = CACHE_FRACTIONS) -> dict[str, Any]:
    """Busy fraction and binding stage with 0-100 % of the dataset cached (`inputs`: the keyword
    arguments of `pipeline_arrays`, whose `link` is replaced by the mixed read rate)."""
    fr = np.asarray(fractions, float)
    rates = cached_read_rate(remote_rate, cache_rate, fr)
    a = pipeline_arrays(**{**inputs, "link": rates})
    busy = np.broadcast_to(a["busy"], fr.shape)
    index = np.broadcast_to(a["bottleneck_index"], fr.shape)
    f = float(cached_fraction(cache_size, dataset_size))
    return {
        "cache_size": float(cache_size), "dataset_size": float(dataset_size), "cached_fraction": f,
        "cache_rate": float(cache_rate), "remote_rate": float(remote_rate),
        "read_rate": float(cached_read_rate(remote_rate, cache_rate, f)),
        "by_cached_fraction": [{"cached_fraction": float(x), "read_rate": float(r), "busy": float(b),
                                "bottleneck": BOTTLENECKS[int(i)]}
                               for x, r, b, i in zip(fr, rates, busy, index)],
    }
