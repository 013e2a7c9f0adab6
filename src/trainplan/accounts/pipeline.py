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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from trainplan.units import SECONDS_PER_HOUR
from trainplan.workload.codecs import FRAME_KINDS

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


def decoded_per_used(access: str, gop: Any, random_decodes: Any = None) -> Any:
    """g: frames decoded per frame used. In order: 1. Random access with a keyframe every G
    frames lands, on average, halfway into a group: (G + 1) / 2; with GOPs of varying length the
    measured `random_decodes` (frame-weighted over the GOPs: (sum G^2 / sum G + 1) / 2, data inspect)
    replaces it. Pre-decoded frames: 0."""
    if access == "sequential":
        return np.ones_like(np.asarray(gop, dtype=float))
    if access == "random":
        if random_decodes is not None:
            return np.asarray(random_decodes, dtype=float) + 0.0 * np.asarray(gop, dtype=float)
        return (np.asarray(gop, dtype=float) + 1.0) / 2.0
    if access == "decoded":
        return np.zeros_like(np.asarray(gop, dtype=float))
    raise ValueError(f"unknown access pattern {access!r}")


def demand_fps(mfu: Any, peak_flops: Any, params: Any, tokens_per_frame_: Any,
               flops_per_param_token: float) -> Any:
    """D = μ Φ / (6 P n): frames/s the accelerator trains on if never kept waiting."""
    return mfu * peak_flops / (flops_per_param_token * params * tokens_per_frame_)


def rate_at_size(rate_1080p: Any, width: Any, height: Any = 1.0) -> Any:
    """Decoder cost is proportional to pixels: a rate at 1080p scales by 1920·1080 / (W H) (`width` may be
    the pixels of a frame with `height` 1)."""
    return rate_1080p * REFERENCE_PIXELS / (np.asarray(width, dtype=float) * height)


def _capacity(rate_units_per_s: Any, units_per_token: Any) -> Any:
    """Stage capacity in tokens/s = its rate / its units per token (inf where it costs nothing)."""
    units = np.asarray(units_per_token)
    with np.errstate(divide="ignore", invalid="ignore"):
        if units.ndim == 0:  # one cost for every point: a division, or infinity at every point
            return rate_units_per_s / units if units > 0 else np.full(np.shape(rate_units_per_s), np.inf)
        cap = np.where(units > 0, rate_units_per_s / np.where(units > 0, units, 1.0), np.inf)
    return cap


def _reuse(ufunc: np.ufunc, fresh: Any, other: Any) -> Any:
    """ufunc(fresh, other), written over `fresh` where it is an array the caller has just made (no
    one else holds it) of the result's shape: a sweep's chunk then needs one buffer less, and
    the fresh pages of a new buffer cost about as much as the arithmetic (issue 17)."""
    if (isinstance(fresh, np.ndarray) and fresh.ndim and fresh.dtype == np.float64
            and np.broadcast_shapes(fresh.shape, np.shape(other)) == fresh.shape):
        return ufunc(fresh, other, out=fresh)
    return ufunc(fresh, other)


def _fold_slowest(caps: tuple[Any, ...], index: bool) -> tuple[Any, Any]:
    """The slowest stage's capacity and (with `index`) its number in BOTTLENECKS, the first of equals
    (as argmin over the stages would pick), taken pairwise: a stacked argmin over four arrays costs
    more than the rest of the account. Stage by stage the capacity is `cap if cap < supply else
    supply`: a NaN capacity is passed over, a NaN supply kept.

    Without the index, where one side of a step is a single number that is neither NaN nor zero,
    the step is one ufunc of the same value (a sweep's busy fraction spends most of its time here):
    np.fmin(cap, supply) when the supply is that number (fmin passes over a NaN capacity),
    np.minimum(supply, cap) when the capacity is (minimum keeps a NaN supply), nothing when the
    capacity is +inf (never smaller). Equal values of those numbers are the same float, so which
    side is taken on a tie does not matter; zero is left to the general step, as -0.0 == 0.0."""
    supply, made = caps[0], False  # made: the supply is an array made here, free to write over
    slowest: Any = np.ones(np.shape(supply), dtype=np.int64) if index else None
    for stage, cap in enumerate(caps[1:], start=2):
        if not index:
            if _plain_number(cap):
                if cap == np.inf:
                    continue
                supply = _reuse(np.minimum, supply, cap) if made else np.minimum(supply, cap)
                made = True
                continue
            if _plain_number(supply):
                supply, made = np.fmin(cap, supply), True
                continue
        smaller = cap < supply
        supply, made = np.where(smaller, cap, supply), True
        if index:
            slowest = np.where(smaller, stage, slowest)
    return supply, slowest


def _plain_number(x: Any) -> bool:
    """A single number that is neither NaN nor zero (see _fold_slowest)."""
    return np.ndim(x) == 0 and not np.isnan(x) and x != 0


# The figures of the pipeline account, in the order the report lists them.
FIGURES = (
    "tokens_per_frame", "decoded_per_used", "demand_fps", "demand_tokens_per_second", "supply_fps",
    "supply_tokens_per_second", "busy", "bottleneck_index", "read_tokens_per_second", "decode_tokens_per_second",
    "tokenize_tokens_per_second", "transfer_tokens_per_second", "decoder_fps", "core_fps", "cores_needed",
    "cores_needed_cpu_only", "pixels_per_token", "threshold_params", "read_bytes_per_token",
    "stored_bytes_per_token", "decoded_bytes_per_token", "transfer_bytes_per_token", "frames_per_hour",
    "tokens_per_hour", "stored_bytes_per_hour", "decoded_bytes_per_hour",
)


class PipelineArrays(Mapping[str, Any]):
    """The pipeline account's figures (FIGURES), each a number or an array over the arguments it
    reads. A figure is computed from its one formula when first read, with the figures it needs:
    a sweep of `busy` alone computes the capacities and the demand, not all 26 figures
    (issue 17). Arguments as `pipeline_arrays`."""

    def __init__(self, *, kind: str, access: str, params: Any, mfu: Any, peak_flops: Any, cores: Any,
                 core_fps_1080p: Any, nvdec: Any, video_decoders: Any, nvdec_fps_1080p: Any, link: Any,
                 host_to_device: Any, width: Any, height: Any, fps: Any, cameras: Any, bitrate: Any, gop: Any,
                 side: Any, patch: Any, bytes_per_token: Any, tokenizer_rate: Any, tokenize_online: bool,
                 prefetch: bool, flops_per_param_token: float, loader_cpu_per_frame: Any = 0.0,
                 random_decodes: Any = None, pixels_per_frame: Any = None) -> None:
        f = np.float64
        self.video, self.access, self.prefetch = kind in FRAME_KINDS, access, prefetch
        self.params, self.mfu, self.peak_flops, self.cores = (np.asarray(x, f) for x in (params, mfu, peak_flops,
                                                                                          cores))
        self.width, self.height, self.fps, self.cameras = (np.asarray(x, f) for x in (width, height, fps, cameras))
        self.core_fps_1080p, self.nvdec, self.video_decoders = core_fps_1080p, nvdec, video_decoders
        self.nvdec_fps_1080p, self.link, self.host_to_device = nvdec_fps_1080p, link, host_to_device
        self.bitrate, self.gop, self.side, self.patch = bitrate, gop, side, patch
        self.bytes_per_token, self.tokenizer_rate, self.tokenize_online = bytes_per_token, tokenizer_rate, \
            tokenize_online
        self.flops_per_param_token = flops_per_param_token
        self.loader_cpu_per_frame = loader_cpu_per_frame
        self.random_decodes, self.pixels_per_frame = random_decodes, pixels_per_frame

    # ---- the Mapping: figure name -> value, computed on first read
    def __getitem__(self, name: str) -> Any:
        if name not in _FIGURE_SET:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(FIGURES)

    def __len__(self) -> int:
        return len(FIGURES)

    # ---- the frame: tokens, decodes, pixels and bits per frame (video); one token a "frame" otherwise
    @cached_property
    def tokens_per_frame(self) -> Any:
        if self.video:
            return np.asarray(tokens_per_frame(np.asarray(self.side), np.asarray(self.patch)), np.float64)
        return np.ones_like(self.params)

    @cached_property
    def decoded_per_used(self) -> Any:
        return decoded_per_used(self.access, self.gop, self.random_decodes) if self.video \
            else np.zeros_like(self.params)

    @cached_property
    def _frame_pixels(self) -> Any:
        """Pixels of a frame: W H, or the measured mean of a mixed-size corpus (data.pixels_per_frame)."""
        if self.pixels_per_frame is not None:
            return np.asarray(self.pixels_per_frame, np.float64) + 0.0 * self.width
        return self.width * self.height

    @cached_property
    def _bits_per_pixel(self) -> Any:
        return np.asarray(self.bitrate, np.float64) / (self._frame_pixels * self.fps)

    @cached_property
    def _read_bytes_per_frame(self) -> Any:
        if self.access == "decoded":
            return YUV420_BYTES_PER_PIXEL * self._frame_pixels
        return self.decoded_per_used * self._frame_pixels * self._bits_per_pixel / BITS_PER_BYTE

    # ---- decode: CPU cores and the accelerator's video engines
    @cached_property
    def core_fps(self) -> Any:
        if self.video:
            return rate_at_size(self.core_fps_1080p, self._frame_pixels)
        return np.full_like(self.params, np.nan)

    @cached_property
    def _engines(self) -> Any:
        if self.video:
            return np.where(np.asarray(self.nvdec, bool), np.asarray(self.video_decoders, np.float64), 0.0)
        return np.zeros_like(self.params)

    @cached_property
    def _engine_fps(self) -> Any:
        return rate_at_size(self.nvdec_fps_1080p, self._frame_pixels)

    @property
    def _hand_over(self) -> bool:
        """Whether the loader's CPU per frame used (o) enters: video, and o not a single zero. With o a
        single zero (the default) the figures are today's formulas untouched, to the bit, and a sweep
        pays nothing for the term."""
        o = self.loader_cpu_per_frame
        return self.video and not (np.ndim(o) == 0 and o == 0)

    @cached_property
    def _used_fps_with_hand_over(self) -> Any:
        """Frames used per second that decode and the loader's hand-over sustain together (video).

        A frame decoded on a core costs that core g / core_fps + o seconds; a frame an engine decodes
        still costs o seconds of a core for its hand-over. With E = engines x engine_fps / g used frames
        per second from the engines and C from the cores, the cores' time a second is
        C (g / core_fps + o) + E o <= cores, so the rate is E + (cores - E o) / (g / core_fps + o) while
        cores >= E o, and cores / o when the engines' hand-over alone fills the cores. Pre-decoded
        frames (g = 0) need no decoder: cores / o, without bound when o = 0."""
        o = np.asarray(self.loader_cpu_per_frame, np.float64)
        g = self.decoded_per_used
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            hand_over_only = np.where(o > 0, self.cores / np.where(o > 0, o, 1.0), np.inf)
            engine_used = self._engines * self._engine_fps / g
            spare = self.cores - engine_used * o  # core-seconds a second left after the engines' frames
            shared = engine_used + spare / (g / self.core_fps + o)
            return np.where(g > 0, np.where(spare >= 0, shared, hand_over_only), hand_over_only)

    @cached_property
    def decoder_fps(self) -> Any:
        if self.video:
            # frames decoded per second: cores x their rate + engines x theirs
            return _reuse(np.add, self.cores * self.core_fps, self._engines * self._engine_fps)
        return np.full_like(self.params, np.inf)

    # ---- bytes per token at each hop
    @cached_property
    def read_bytes_per_token(self) -> Any:
        if self.video:
            return self._read_bytes_per_frame / self.tokens_per_frame
        return np.asarray(self.bytes_per_token, np.float64) + 0 * self.params

    @cached_property
    def transfer_bytes_per_token(self) -> Any:
        if self.video:
            return RGB_BYTES_PER_PIXEL * np.asarray(self.side, np.float64) ** 2 / self.tokens_per_frame
        return self.read_bytes_per_token

    @cached_property
    def pixels_per_token(self) -> Any:
        if self.video:
            return self.decoded_per_used * self._frame_pixels / self.tokens_per_frame
        return np.zeros_like(self.params)

    @cached_property
    def decoded_bytes_per_token(self) -> Any:
        if self.video:
            return self.decoded_per_used * YUV420_BYTES_PER_PIXEL * self._frame_pixels / self.tokens_per_frame
        return np.zeros_like(self.params)

    @cached_property
    def stored_bytes_per_token(self) -> Any:
        if self.video:
            return self._frame_pixels * self._bits_per_pixel / BITS_PER_BYTE / self.tokens_per_frame
        return self.read_bytes_per_token

    # ---- each stage's capacity in tokens/s
    @cached_property
    def read_tokens_per_second(self) -> Any:
        if self.video:
            return self.link / (self._read_bytes_per_frame / self.tokens_per_frame)
        return self.link / self.read_bytes_per_token

    @cached_property
    def decode_tokens_per_second(self) -> Any:
        if self._hand_over:
            return self._used_fps_with_hand_over * self.tokens_per_frame
        if self.video:
            return _capacity(self.decoder_fps, self.decoded_per_used / self.tokens_per_frame)
        return np.full_like(self.params, np.inf)

    @cached_property
    def tokenize_tokens_per_second(self) -> Any:
        if self.video:  # resize and patchify are in the decoder rate
            return np.full_like(self.read_tokens_per_second, np.inf)
        if self.tokenize_online:
            return self.cores * self.tokenizer_rate
        return np.full_like(self.params, np.inf)

    @cached_property
    def transfer_tokens_per_second(self) -> Any:
        return self.host_to_device / self.transfer_bytes_per_token

    @property
    def _caps(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f"{s}_tokens_per_second") for s in STAGES)

    # ---- demand, supply, busy
    @cached_property
    def demand_fps(self) -> Any:
        return demand_fps(self.mfu, self.peak_flops, self.params, self.tokens_per_frame, self.flops_per_param_token)

    @cached_property
    def demand_tokens_per_second(self) -> Any:
        return self.demand_fps * self.tokens_per_frame

    @cached_property
    def supply_tokens_per_second(self) -> Any:
        if "_slowest" in self.__dict__:  # found with the bottleneck already
            return self.__dict__["_supply_indexed"]
        return _fold_slowest(self._caps, index=False)[0]

    @cached_property
    def _slowest(self) -> Any:
        supply, slowest = _fold_slowest(self._caps, index=True)
        self.__dict__["_supply_indexed"] = supply
        return slowest

    @cached_property
    def supply_fps(self) -> Any:
        return self.supply_tokens_per_second / self.tokens_per_frame

    @cached_property
    def bottleneck_index(self) -> Any:
        slowest = self._slowest
        bound = self.supply_tokens_per_second < self.demand_tokens_per_second
        return np.where(bound, slowest, 0)

    @cached_property
    def busy(self) -> Any:
        supply, demand = self.supply_tokens_per_second, self.demand_tokens_per_second
        if self.prefetch:  # min(1, S / D)
            return _reuse(np.minimum, supply / demand, 1.0)
        # no overlap: each token costs load time plus compute time
        return np.where(np.isinf(supply), 1.0, supply / (supply + demand))

    # ---- what would change it
    @cached_property
    def cores_needed_cpu_only(self) -> Any:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf is the answer at the extremes
            return self._plus_hand_over(self.demand_fps * self.decoded_per_used / self.core_fps)

    @cached_property
    def cores_needed(self) -> Any:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            engine_frames = self._engines * (self._engine_fps if self.video else 0.0)
            return self._plus_hand_over(
                np.maximum(0.0, self.demand_fps * self.decoded_per_used - engine_frames) / self.core_fps)

    def _plus_hand_over(self, decode_cores: Any) -> Any:
        """Cores for decoding plus D x o for the loader's hand-over of every frame used (Little's law
        again: each of the D frames a second holds a core o seconds, whoever decoded it)."""
        if not self._hand_over:
            return decode_cores
        with np.errstate(invalid="ignore", over="ignore"):
            return decode_cores + self.demand_fps * np.asarray(self.loader_cpu_per_frame, np.float64)

    @cached_property
    def threshold_params(self) -> Any:
        """Model size below which the given supply stalls the accelerator: D(P*) = S."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.mfu * self.peak_flops / (self.flops_per_param_token * self.supply_tokens_per_second)

    # ---- per hour of data
    @cached_property
    def frames_per_hour(self) -> Any:
        if self.video:
            return self.cameras * self.fps * SECONDS_PER_HOUR
        return np.full_like(self.params, np.nan)

    @cached_property
    def tokens_per_hour(self) -> Any:
        return self.frames_per_hour * self.tokens_per_frame

    @cached_property
    def stored_bytes_per_hour(self) -> Any:
        if self.video:
            return self.cameras * np.asarray(self.bitrate, np.float64) / BITS_PER_BYTE * SECONDS_PER_HOUR
        return np.full_like(self.params, np.nan)

    @cached_property
    def decoded_bytes_per_hour(self) -> Any:
        if self.video:
            return self.frames_per_hour * YUV420_BYTES_PER_PIXEL * self._frame_pixels
        return np.full_like(self.params, np.nan)


_FIGURE_SET = frozenset(FIGURES)


def pipeline_arrays(**kwargs: Any) -> PipelineArrays:
    """Every figure of the pipeline account (FIGURES) by name, each computed when first read: a
    number, or an array broadcast over the arguments it reads. Arguments (by keyword): kind,
    access, params, mfu, peak_flops, cores, core_fps_1080p, nvdec, video_decoders, nvdec_fps_1080p,
    link, host_to_device, width, height, fps, cameras, bitrate, gop, side, patch, bytes_per_token,
    tokenizer_rate, tokenize_online, prefetch, flops_per_param_token, loader_cpu_per_frame (seconds
    of a core per frame used besides decoding, default 0), random_decodes (frames decoded per frame used
    at random access, default (gop + 1) / 2) and pixels_per_frame (default width x height);
    planning/inputs.py builds them.

    Capacities are in tokens/s per accelerator; `bottleneck_index` indexes BOTTLENECKS.
    """
    return PipelineArrays(**kwargs)


def wall_seconds(compute_seconds: Any, busy: Any) -> Any:
    """The compute time stretched by the input pipeline's busy fraction (infinite at busy 0, and
    where a busy fraction near the smallest float makes it overflow)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
    loader_cpu_per_frame: float = 0.0  # o, seconds of a core per frame used besides decoding (video)


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
        loader_cpu_per_frame=float(kwargs.get("loader_cpu_per_frame", 0.0)) if kwargs["kind"] in FRAME_KINDS else 0.0,
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


CACHE_ORDERS = ("shuffle", "fixed", "sharded", "uniform")


def lru_hit_ratio(order: str, fraction: Any) -> Any:
    """h: the share of an epoch's reads an LRU cache holding a fraction f of the data serves, in steady state
    (every epoch after the first), by the order the loader reads in:

    - uniform (each read an independent uniform draw, with replacement): h = f (the independent reference
      model: every item is equally likely to be among the f N most recent);
    - shuffle (a fresh permutation each epoch): an item read at position u N of one epoch (u uniform) is
      read again at v N of the next; in between come the (1 - u) N items after it and the v N before its
      next read, which overlap as two independent random sets, so 1 - (1 - (1 - u))(1 - v) = 1 - u (1 - v)
      of the data; it hits when that is below f: h = P(u (1 - v) > 1 - f) = f + (1 - f) ln(1 - f)
      (0.153 at f = 0.5);
    - sharded (shards streamed whole, their order shuffled each epoch): the same at shard granularity;
    - fixed (the same order every epoch): each item's previous read is a whole epoch back, so LRU has
      evicted it whenever the cache is smaller than the data: h = 0 for f < 1.

    Every order gives h = 1 at f = 1 (everything cached after the first epoch)."""
    f = np.clip(np.asarray(fraction, float), 0.0, 1.0)
    if order == "uniform":
        return f
    if order in ("shuffle", "sharded"):
        with np.errstate(divide="ignore", invalid="ignore"):
            rest = 1.0 - f
            return np.where(rest > 0, f + rest * np.log(np.where(rest > 0, rest, 1.0)), 1.0)
    if order == "fixed":
        return np.where(f >= 1.0, 1.0, 0.0)
    raise ValueError(f"unknown access order {order!r}; expected one of {', '.join(CACHE_ORDERS)}")


def cached_read_rate(remote_rate: Any, cache_rate: Any, fraction: Any) -> Any:
    """The read stage's rate with a fraction h of the bytes served from a cache (the hit ratio):
    R = 1 / (h / R_cache + (1 - h) / R_remote) (every byte costs the time of the place it comes
    from: the effective-access-time mix). h = 0 gives R_remote, h = 1 gives R_cache."""
    f = np.asarray(fraction, float)
    return 1.0 / (f / np.asarray(cache_rate, float) + (1.0 - f) / np.asarray(remote_rate, float))


def dataset_bytes(*, kind: str, access: str, hours: Any, cameras: Any, fps: Any, width: Any, height: Any,
                  bitrate: Any, tokens: Any = 0.0, bytes_per_token: Any = 4.0) -> Any:
    """Bytes the loader reads over one epoch: video at its stored bit rate (decoded frames at
    1.5 W H bytes each), token ids at bytes_per_token each."""
    if kind in FRAME_KINDS:
        seconds = np.asarray(hours, float) * SECONDS_PER_HOUR * cameras
        if access == "decoded":
            return seconds * fps * YUV420_BYTES_PER_PIXEL * np.asarray(width, float) * height
        return seconds * np.asarray(bitrate, float) / BITS_PER_BYTE
    return np.asarray(tokens, float) * bytes_per_token


def cache_what_if(inputs: dict[str, Any], *, cache_size: float, dataset_size: float, cache_rate: float,
                  remote_rate: float, fractions: tuple[float, ...] = CACHE_FRACTIONS,
                  order: str = "shuffle") -> dict[str, Any]:
    """Busy fraction and binding stage with 0-100 % of the dataset cached (`inputs`: the keyword
    arguments of `pipeline_arrays`, whose `link` is replaced by the mixed read rate at the hit ratio
    of an LRU cache in the loader's `order`, lru_hit_ratio)."""
    fr = np.asarray(fractions, float)
    hits = lru_hit_ratio(order, fr)
    rates = cached_read_rate(remote_rate, cache_rate, hits)
    a = pipeline_arrays(**{**inputs, "link": rates})
    busy = np.broadcast_to(a["busy"], fr.shape)
    index = np.broadcast_to(a["bottleneck_index"], fr.shape)
    f = float(cached_fraction(cache_size, dataset_size))
    h = float(lru_hit_ratio(order, f))
    return {
        "cache_size": float(cache_size), "dataset_size": float(dataset_size), "cached_fraction": f,
        "order": order, "hit_ratio": h,
        "cache_rate": float(cache_rate), "remote_rate": float(remote_rate),
        "read_rate": float(cached_read_rate(remote_rate, cache_rate, h)),
        "by_cached_fraction": [{"cached_fraction": float(x), "hit_ratio": float(hh), "read_rate": float(r),
                                "busy": float(b), "bottleneck": BOTTLENECKS[int(i)]}
                               for x, hh, r, b, i in zip(fr, hits, rates, busy, index)],
    }
