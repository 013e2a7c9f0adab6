"""The decode probe: frames a core decodes a second, on a synthetic clip in the workload's format or
on the user's own files and images (PyAV, torchcodec, PIL), and decoders side by side (contention)."""

from __future__ import annotations

import io
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from trainplan.errors import UserError
from trainplan.measure.host import ProbeSkipped, require_torch, _torch_or_none


PIXELS_1080P = 1920 * 1080  # docs/pipeline-and-bill.md: decoder cost is proportional to pixels

Access = Literal["sequential", "random"]
# What a decoded frame goes through before the model sees it. The plan's default of
# 120 frames/s per core includes colour conversion and resize, so "rgb_resize" is the
# default and the figure a calibration records; the others isolate the decoder.
Postprocess = Literal["none", "rgb", "rgb_resize"]
# How a frame leaves the decoding process. A DataLoader worker collates each batch into shared
# memory for the trainer; on some machines (VMs whose first touch of fresh memory is dear) that
# costs as much as a sixth of the decode, so a probe of a loader core can include it.
Handoff = Literal["none", "shared_memory"]
HANDOFF_TEXT = {
    "none": "frames stay in the decoding process",
    "shared_memory": "each batch stacked into a fresh shared-memory torch tensor, as a DataLoader worker's collate does",
}
POSTPROCESS_TEXT = {
    "none": "decode only (frames left in YUV 4:2:0)",
    "rgb": "decode + colour conversion to RGB24 at full size (frame.to_ndarray(format='rgb24')), one thread",
    "rgb_resize": "decode + colour conversion to RGB24 and resize to the model side in one swscale pass "
                  "(frame.to_ndarray(format='rgb24', width=side, height=side)), one thread",
}




@dataclass(frozen=True)
class ClipFormat:
    """The stored format of the video a workload reads (docs/workload.md `data.*`)."""

    width: int = 1920
    height: int = 1080
    fps: float = 30.0
    bitrate: float = 8e6  # bits/s
    gop: int = 30  # frames between keyframes
    codec: str = "h264"

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if value < 16 or value % 2:
                raise UserError(f"data.{name}", f"expected an even number of pixels of at least 16, got {value}")
        if self.fps <= 0:
            raise UserError("data.fps", f"expected a positive frame rate, got {self.fps}")
        if self.bitrate <= 0:
            raise UserError("data.bitrate", f"expected a positive bit rate, got {self.bitrate}")
        if self.gop < 1:
            raise UserError("data.gop", f"expected a keyframe interval of at least 1 frame, got {self.gop}")
        if self.codec != "h264":
            raise UserError("codec", f"expected 'h264' (the probe encodes with libx264), got {self.codec!r}")

    @property
    def pixels(self) -> int:
        return self.width * self.height


@dataclass(frozen=True)
class Clip:
    """An encoded clip in memory, and what the encoder actually produced."""

    data: bytes
    format: ClipFormat
    frames: int
    preset: str
    seconds_to_encode: float

    @property
    def achieved_bitrate(self) -> float:
        """Bits per second of the encoded stream (container overhead included)."""
        return len(self.data) * 8 / (self.frames / self.format.fps)


def synthetic_frames(width: int, height: int, frames: int, seed: int = 0):  # noqa: ANN201 - a generator
    """Moving synthetic content as planar YUV 4:2:0 arrays (shape (3H/2, W), uint8).

    Not constant frames: x264 would code those as skips and make them nearly free to
    decode. A textured background pans by a few pixels a frame (motion compensation
    must work, as in camera footage), a gradient sweeps across it, and a bright block
    moves across the picture, so every frame carries residual and motion vectors and
    the encoder spends the bit budget it is given.
    """
    rng = np.random.default_rng(seed)
    texture = rng.integers(0, 256, size=(2 * height, 2 * width), dtype=np.uint8)
    # smooth the noise a little so it looks like detail, not snow
    texture = ((texture.astype(np.uint16) + np.roll(texture, 1, 0) + np.roll(texture, 1, 1)
                + np.roll(texture, (1, 1), (0, 1))) // 4).astype(np.uint8)
    yy, xx = np.mgrid[0:height, 0:width]
    cy, cx = np.mgrid[0 : height // 2, 0 : width // 2]
    block = max(8, min(width, height) // 6)
    for i in range(frames):
        dx, dy = (3 * i) % width, (2 * i) % height
        luma = (texture[dy : dy + height, dx : dx + width] // 2 + ((xx + yy + 4 * i) % 256) // 2).astype(np.uint8)
        bx, by = (7 * i) % max(1, width - block), (5 * i) % max(1, height - block)
        luma[by : by + block, bx : bx + block] = 235
        u = ((cx + 2 * i) % 256).astype(np.uint8)
        v = ((2 * cy + i) % 256).astype(np.uint8)
        yield np.concatenate([luma.ravel(), u.ravel(), v.ravel()]).reshape(height * 3 // 2, width)


def synthesize_clip(fmt: ClipFormat, frames: int, *, preset: str = "veryfast", seed: int = 0) -> Clip:
    """Encode `frames` frames of moving synthetic content as H.264 in an MP4, in memory.

    libx264 with `bit_rate` (a VBV cap at the same rate keeps a short clip near it),
    a fixed keyframe interval (`gop_size` = keyint = min-keyint, scene-cut detection
    off, so keyframes fall exactly every G frames) and yuv420p. The preset only sets
    how hard the encoder works; the default, veryfast, keeps CABAC and B-frames, as
    camera and archive streams have.
    """
    import av

    if frames < 1:
        raise UserError("frames", f"expected at least one frame, got {frames}")
    buf = io.BytesIO()
    started = time.perf_counter()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=_fps_rational(fmt.fps))
        stream.width = fmt.width
        stream.height = fmt.height
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = int(fmt.bitrate)
        stream.codec_context.gop_size = fmt.gop
        kbit = max(1, int(fmt.bitrate // 1000))
        stream.options = {
            "preset": preset,
            "x264-params": f"keyint={fmt.gop}:min-keyint={fmt.gop}:scenecut=0:"
                           f"vbv-maxrate={kbit}:vbv-bufsize={kbit}",
        }
        for planes in synthetic_frames(fmt.width, fmt.height, frames, seed):
            frame = av.VideoFrame.from_ndarray(planes, format="yuv420p")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return Clip(buf.getvalue(), fmt, frames, preset, time.perf_counter() - started)


def _fps_rational(fps: float):  # noqa: ANN202
    from fractions import Fraction

    return Fraction(fps).limit_denominator(1001)


def open_single_threaded(source: Any):  # noqa: ANN201 - (container, stream)
    """Open a clip (bytes, a path or a file object) for decoding on one thread."""
    import av

    if isinstance(source, (bytes, bytearray)):
        source = io.BytesIO(source)
    container = av.open(source, "r")
    stream = container.streams.video[0]
    stream.thread_type = "NONE"
    stream.thread_count = 1
    return container, stream


def postprocess_frame(frame: Any, postprocess: Postprocess, side: int, interpolation: str = "BILINEAR") -> Any:
    """What a data loader does to a decoded frame before the model sees it (see POSTPROCESS_TEXT)."""
    # threads=1: swscale would otherwise pick a thread per CPU (PyAV's default, 0 = auto), and a
    # "one core" figure would quietly use all of them
    if postprocess == "none":
        return frame
    if postprocess == "rgb":
        return frame.to_ndarray(format="rgb24", threads=1)
    return frame.to_ndarray(format="rgb24", width=side, height=side, interpolation=interpolation, threads=1)


@dataclass(frozen=True)
class DecodeResult:
    """One decode measurement. Rates are per CPU-second of the decoding process unless named wall."""

    access: Access
    width: int
    height: int
    fps: float
    bitrate: float
    achieved_bitrate: float
    gop: int
    codec: str
    preset: str
    postprocess: Postprocess
    side: int
    interpolation: str
    threads: int
    handoff: Handoff
    batch: int  # frames per handed-off batch (when handoff is not "none")
    clip_frames: int
    frames_decoded: int
    frames_used: int
    cpu_seconds: float
    wall_seconds: float
    frames_per_cpu_second: float  # frames decoded per CPU-second at this size
    frames_per_wall_second: float
    frames_per_cpu_second_1080p: float  # the same decoder rate at 1080p-equivalent (pixel scaling)
    frames_used_per_cpu_second: float
    frames_decoded_per_frame_used: float
    expected_frames_decoded_per_frame_used: float  # docs/pipeline-and-bill.md: 1 in order, (G+1)/2 random
    core_fps_1080p: float  # the figure for cluster.core_fps_1080p that reproduces this rate in the plan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def to_1080p(fps_at_size: float, width: int, height: int) -> float:
    """docs/pipeline-and-bill.md: decoder cost is proportional to pixels, so fps_1080p = fps × (W·H)/(1920·1080)."""
    return fps_at_size * (width * height) / PIXELS_1080P


def from_1080p(fps_1080p: float, width: int, height: int) -> float:
    """Inverse of `to_1080p`: frames/s at W×H of a decoder that does fps_1080p at 1080p."""
    return fps_1080p * PIXELS_1080P / (width * height)


class _Handoff:
    """Collects post-processed frames and hands each full batch off as a DataLoader worker does."""

    def __init__(self, handoff: Handoff, batch: int) -> None:
        if handoff not in HANDOFF_TEXT:
            raise UserError("handoff", f"expected one of {', '.join(HANDOFF_TEXT)}, got {handoff!r}")
        if batch < 1:
            raise UserError("batch", f"expected at least one frame per batch, got {batch}")
        self.handoff, self.batch, self.pending = handoff, batch, []  # type: ignore[var-annotated]
        self.torch = None
        if handoff == "shared_memory":
            try:
                import torch
            except ImportError:
                raise UserError("handoff", "shared_memory needs torch (pip install torch)") from None
            self.torch = torch

    def add(self, item: Any) -> None:
        if self.torch is None:
            return
        self.pending.append(self.torch.from_numpy(item))
        if len(self.pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self.torch is None or not self.pending:
            return
        first = self.pending[0]
        out = self.torch.empty((len(self.pending), *first.shape), dtype=first.dtype).share_memory_()
        self.torch.stack(self.pending, out=out)
        self.pending = []


def decode_sequential(clip: Clip, *, postprocess: Postprocess = "rgb_resize", side: int = 224,
                      interpolation: str = "BILINEAR", min_seconds: float = 0.0, handoff: Handoff = "none",
                      batch: int = 16) -> tuple[DecodeResult, list[int]]:
    """Decode every frame in order on one thread; return the result and the frames' pts in order.

    Opening the clip is timed too: a loader opens file after file, and PyAV's open probes
    the stream, so a short clip's frames carry a visible share of it (make the probe's clip
    as long as your files). With `min_seconds`, the clip is opened and decoded again until
    that many CPU-seconds are spent, averaging out the noise of a shared machine; rates are
    totals over all passes. `handoff` adds the hand-over to a trainer (see HANDOFF_TEXT)."""
    if handoff != "none" and postprocess == "none":
        raise UserError("handoff", "a hand-off needs decoded arrays: use postprocess rgb or rgb_resize")
    hand = _Handoff(handoff, batch)
    pts: list[int] = []
    decoded, cpu, wall = 0, 0.0, 0.0
    while True:
        pass_pts: list[int] = []
        cpu0, wall0 = time.process_time(), time.perf_counter()
        container, stream = open_single_threaded(clip.data)
        with container:
            for frame in container.decode(stream):
                hand.add(postprocess_frame(frame, postprocess, side, interpolation))
                pass_pts.append(frame.pts)
        hand.flush()
        cpu += time.process_time() - cpu0
        wall += time.perf_counter() - wall0
        pts = pts or pass_pts
        decoded += len(pass_pts)
        if cpu >= min_seconds or not pass_pts:
            break
    return _result(clip, "sequential", postprocess, side, interpolation, decoded, decoded, cpu, wall, 1.0,
                   handoff, batch), pts


def decode_random(clip: Clip, pts: list[int], *, samples: int = 16, seed: int = 0,
                  postprocess: Postprocess = "rgb_resize", side: int = 224,
                  interpolation: str = "BILINEAR", handoff: Handoff = "none", batch: int = 16) -> DecodeResult:
    """Random access: for each of `samples` random targets, seek to the keyframe at or before
    it and decode forward to it; only the target frame is post-processed (it is the one used).

    `pts` are the presentation timestamps of the clip's frames in order (from a sequential
    pass). Frames decoded per frame used is counted from the frames the decoder delivers
    from the keyframe to the target; for targets uniform over whole GOPs its expectation
    is (G+1)/2 (docs/pipeline-and-bill.md).
    """
    if samples < 1:
        raise UserError("samples", f"expected at least one random-access sample, got {samples}")
    order = sorted(pts)
    targets = [order[i] for i in random_targets(len(order), clip.format.gop, samples, seed)]
    if handoff != "none" and postprocess == "none":
        raise UserError("handoff", "a hand-off needs decoded arrays: use postprocess rgb or rgb_resize")
    hand = _Handoff(handoff, batch)
    decoded = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    container, stream = open_single_threaded(clip.data)
    with container:
        for target in targets:
            container.seek(target, stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                decoded += 1
                if frame.pts >= target:
                    hand.add(postprocess_frame(frame, postprocess, side, interpolation))
                    break
    hand.flush()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    g = (clip.format.gop + 1) / 2
    return _result(clip, "random", postprocess, side, interpolation, decoded, samples, cpu, wall, g, handoff, batch)


def random_targets(frames: int, gop: int, samples: int, seed: int = 0) -> list[int]:
    """Random frame indices in [0, frames): a random GOP each, the offset within the GOP
    stratified (each of `samples` equal slices of the GOP gets one uniform draw), so a
    short probe's mean distance from the keyframe is close to its expectation (G-1)/2
    instead of carrying the full sampling noise of a few uniform draws."""
    rng = np.random.default_rng(seed)
    gops = max(1, frames // gop)
    slices = (rng.permutation(samples) + rng.random(samples)) / samples  # stratified in [0, 1)
    offsets = np.minimum((slices * gop).astype(int), gop - 1)
    starts = rng.integers(0, gops, size=samples) * gop
    return [int(min(frames - 1, s + o)) for s, o in zip(starts, offsets)]


def _result(clip: Clip, access: Access, postprocess: Postprocess, side: int, interpolation: str,
            decoded: int, used: int, cpu: float, wall: float, expected_g: float, handoff: Handoff = "none",
            batch: int = 16) -> DecodeResult:
    f = clip.format
    cpu = max(cpu, 1e-9)
    wall = max(wall, 1e-9)
    fps_cpu = decoded / cpu
    used_fps = used / cpu
    # The plan charges g decoded frames per frame used at 1/core_fps each, so the core rate
    # that reproduces the measured delivery is frames used/s × g(formula), at 1080p-equivalent.
    core_fps_1080p = to_1080p(used_fps * expected_g, f.width, f.height)
    return DecodeResult(
        access=access, width=f.width, height=f.height, fps=f.fps, bitrate=f.bitrate,
        achieved_bitrate=clip.achieved_bitrate, gop=f.gop, codec=f.codec, preset=clip.preset,
        postprocess=postprocess, side=side, interpolation=interpolation, threads=1, handoff=handoff, batch=batch,
        clip_frames=clip.frames, frames_decoded=decoded, frames_used=used,
        cpu_seconds=cpu, wall_seconds=wall,
        frames_per_cpu_second=fps_cpu, frames_per_wall_second=decoded / wall,
        frames_per_cpu_second_1080p=to_1080p(fps_cpu, f.width, f.height),
        frames_used_per_cpu_second=used_fps,
        frames_decoded_per_frame_used=decoded / max(used, 1),
        expected_frames_decoded_per_frame_used=expected_g,
        core_fps_1080p=core_fps_1080p,
    )


@dataclass(frozen=True)
class DecodeProbe:
    """The decode probe: sequential and (optionally) random access on one synthetic clip."""

    sequential: DecodeResult
    random: DecodeResult | None
    access: Access  # the pattern the workload uses; its figures are the headline ones
    seconds_to_encode: float

    @property
    def headline(self) -> DecodeResult:
        return self.random if self.access == "random" and self.random is not None else self.sequential

    @property
    def frames_per_cpu_second(self) -> float:
        return self.headline.frames_per_cpu_second

    @property
    def frames_per_cpu_second_1080p(self) -> float:
        return self.headline.frames_per_cpu_second_1080p

    @property
    def core_fps_1080p(self) -> float:
        return self.headline.core_fps_1080p

    def to_dict(self) -> dict[str, Any]:
        h = self.headline
        return {
            "frames_per_cpu_second": h.frames_per_cpu_second,
            "frames_per_cpu_second_1080p": h.frames_per_cpu_second_1080p,
            "frames_used_per_cpu_second": h.frames_used_per_cpu_second,
            "core_fps_1080p": h.core_fps_1080p,
            "access": self.access,
            "width": h.width, "height": h.height, "fps": h.fps, "bitrate": h.bitrate,
            "achieved_bitrate": h.achieved_bitrate, "gop": h.gop, "codec": h.codec,
            "postprocess": h.postprocess, "postprocess_text": POSTPROCESS_TEXT[h.postprocess],
            "handoff": h.handoff, "handoff_text": HANDOFF_TEXT[h.handoff], "batch": h.batch,
            "side": h.side, "threads": h.threads, "preset": h.preset,
            "seconds_to_encode": self.seconds_to_encode,
            "sequential": self.sequential.to_dict(),
            "random": self.random.to_dict() if self.random is not None else None,
        }


def decode(fmt: ClipFormat = ClipFormat(), *, frames: int | None = None, access: Access = "sequential",
           random_samples: int = 16, postprocess: Postprocess = "rgb_resize", side: int = 224,
           interpolation: str = "BILINEAR", preset: str = "veryfast", seed: int = 0,
           include_random: bool = True, handoff: Handoff = "none", batch: int = 16,
           min_seconds: float = 0.0) -> DecodeProbe:
    """Synthesise a clip in `fmt`, decode it single-threaded, report frames per CPU-second.

    `frames` defaults to two keyframe intervals (at least 60 frames), rounded up to whole
    GOPs so random targets fall uniformly over complete GOPs.
    """
    if postprocess not in POSTPROCESS_TEXT:
        raise UserError("postprocess", f"expected one of {', '.join(POSTPROCESS_TEXT)}, got {postprocess!r}")
    if access not in ("sequential", "random"):
        raise UserError("data.access", f"expected sequential or random for a decode probe, got {access!r}")
    if side < 1:
        raise UserError("data.side", f"expected a positive side in pixels, got {side}")
    n = frames if frames is not None else max(60, 2 * fmt.gop)
    n = int(math.ceil(n / fmt.gop) * fmt.gop)
    clip = synthesize_clip(fmt, n, preset=preset, seed=seed)
    seq, pts = decode_sequential(clip, postprocess=postprocess, side=side, interpolation=interpolation,
                                 min_seconds=min_seconds, handoff=handoff, batch=batch)
    rnd = None
    if include_random or access == "random":
        rnd = decode_random(clip, pts, samples=random_samples, seed=seed, postprocess=postprocess,
                            side=side, interpolation=interpolation, handoff=handoff, batch=batch)
    return DecodeProbe(seq, rnd, access, clip.seconds_to_encode)


# ---------------------------------------------------------------- decode: the user's own files (issue 14)


@dataclass(frozen=True)
class FileDecode:
    """One decoder on a sample of the user's files, one access pattern. Rates per CPU-second unless named wall."""

    decoder: str  # pyav | torchcodec
    device: str  # cpu | cuda
    access: Access
    files: int
    width: int  # the sample's dominant frame size (by frames)
    height: int
    gop: float  # measured keyframe interval (median of the packets' intervals)
    frames_decoded: int
    frames_used: int
    cpu_seconds: float
    wall_seconds: float
    setup_seconds: float  # opening the files (and, on a GPU, creating the decoder's context)
    frames_per_cpu_second: float  # frames decoded per CPU-second at the files' size
    frames_per_wall_second: float
    frames_used_per_cpu_second: float
    frames_decoded_per_frame_used: float | None  # counted (None where the decoder does not say)
    expected_frames_decoded_per_frame_used: float  # 1 in order, (G + 1) / 2 random, G measured
    frames_per_cpu_second_1080p: float  # decoded frames/CPU-s scaled by pixels to 1080p-equivalent
    core_fps_1080p: float  # what cluster.core_fps_1080p must be for the plan to reproduce the delivery

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _file_facts(path: Path) -> tuple[int, int, list[int], float]:
    """(width, height, sorted pts of the video packets, median keyframe interval) from a demux pass."""
    from trainplan.measure import inspect as insp

    info = insp.inspect_video(path)
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        pts = sorted(int(p.pts) for p in c.demux(s) if p.pts is not None)
    return info.width, info.height, pts, float(info.gop_median or max(1, info.frames))


def _pixels_weighted(parts: list[tuple[int, int, int]]) -> tuple[float, int, int]:
    """(mean pixels a frame over the decoded frames, dominant width, dominant height)."""
    frames = sum(n for n, _, _ in parts) or 1
    pixels = sum(n * w * h for n, w, h in parts) / frames
    counts: dict[tuple[int, int], int] = {}
    for n, w, h in parts:
        counts[(w, h)] = counts.get((w, h), 0) + n
    (w, h), _ = max(counts.items(), key=lambda kv: kv[1])
    return pixels, w, h


def _file_result(decoder: str, device: str, access: Access, files: int, parts: list[tuple[int, int, int]],
                 gops: list[float], decoded: int, used: int, cpu: float, wall: float, setup: float,
                 counted: bool = True) -> FileDecode:
    """`gops`: each file's measured keyframe interval; with the same number of targets in each file the
    expected frames decoded per frame used is the mean of their (G + 1) / 2."""
    pixels, w, h = _pixels_weighted(parts)
    cpu, wall = max(cpu, 1e-9), max(wall, 1e-9)
    gop = float(np.median(gops))
    g = 1.0 if access == "sequential" else float(np.mean([(x + 1) / 2 for x in gops]))
    used_fps = used / cpu
    return FileDecode(
        decoder=decoder, device=device, access=access, files=files, width=w, height=h, gop=gop,
        frames_decoded=decoded, frames_used=used, cpu_seconds=cpu, wall_seconds=wall, setup_seconds=setup,
        frames_per_cpu_second=decoded / cpu, frames_per_wall_second=decoded / wall,
        frames_used_per_cpu_second=used_fps,
        frames_decoded_per_frame_used=decoded / max(used, 1) if counted else None,
        expected_frames_decoded_per_frame_used=g,
        frames_per_cpu_second_1080p=decoded / cpu * pixels / PIXELS_1080P,
        # the plan charges g decoded frames per frame used at 1/core_fps each (docs/pipeline-and-bill.md). Where the
        # decoder counts what it decoded, that is the rate per decoded frame (seeks included), which the plan divides
        # by its own g (data.random_decodes: the corpus's frame-weighted cost, issue 25); else the frames used times
        # the probe's expected g
        core_fps_1080p=(decoded / cpu if counted else used_fps * g) * pixels / PIXELS_1080P)


def decode_files_pyav(paths: list[Path], *, access: Access = "sequential", side: int = 224,
                      postprocess: Postprocess = "rgb_resize", samples: int = 16, seed: int = 0,
                      max_frames: int | None = None) -> FileDecode:
    """PyAV on one thread over the files: in order (every frame post-processed), or at random
    access (`samples` targets a file, stratified within GOPs as `random_targets` does: seek to the
    keyframe before each, decode forward to it, post-process only the target)."""
    parts: list[tuple[int, int, int]] = []
    gops: list[float] = []
    decoded = used = 0
    cpu = wall = setup = 0.0
    for path in paths:
        w, h, pts, gop = _file_facts(path)
        gops.append(gop)
        c0, w0 = time.process_time(), time.perf_counter()
        container, stream = open_single_threaded(str(path))
        setup += time.perf_counter() - w0
        n = 0
        with container:
            if access == "sequential":
                for frame in container.decode(stream):
                    postprocess_frame(frame, postprocess, side)
                    n += 1
                    if max_frames is not None and n >= max_frames:
                        break
                decoded += n
                used += n
            else:
                targets = [pts[i] for i in random_targets(len(pts), max(1, int(round(gop))), samples, seed)]
                for target in targets:
                    container.seek(target, stream=stream, backward=True, any_frame=False)
                    for frame in container.decode(stream):
                        if frame.pts is None:
                            continue
                        n += 1
                        if frame.pts >= target:
                            postprocess_frame(frame, postprocess, side)
                            break
                decoded += n
                used += len(targets)
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        parts.append((n, w, h))
    return _file_result("pyav", "cpu", access, len(paths), parts, gops, decoded, used, cpu, wall,
                        setup)


# torchcodec's libraries that only a CUDA build of torch (and the CUDA runtime) provide: a torchcodec
# wheel built for CUDA names them, and on a CPU build of torch fails to load for want of them.
CUDA_ONLY_LIBRARIES = ("libnvrtc", "libcudart", "libc10_cuda", "libtorch_cuda")
# Frames a torchcodec call returns at once in order (get_frames_in_range): bounds the RGB frames held
# in memory; the decoder's work per frame does not depend on it.
TORCHCODEC_BATCH = 16


def torchcodec_or_reason() -> tuple[Any, str | None]:
    """(the torchcodec module, None), or (None, why it cannot run here) in one line."""
    try:
        import torchcodec as tc
        import torchcodec.decoders  # noqa: F401
    except ImportError as err:
        if err.name in (None, "torchcodec"):
            return None, ("torchcodec: not installed (pip install 'trainplan[decode]'; it needs FFmpeg's shared "
                          "libraries, Debian's ffmpeg package)")
        return None, f"torchcodec: installed but does not import ({_first_line(err)})"
    except (OSError, RuntimeError) as err:  # FFmpeg's libraries absent, or a wheel built for another torch
        return None, _torchcodec_load_failure(err)
    try:
        import torchcodec.transforms  # noqa: F401
    except ImportError:
        return None, (f"torchcodec {getattr(tc, '__version__', '?')}: too old, it lacks the decoder's own resize "
                      "(torchcodec.transforms) the probe uses; pip install 'trainplan[decode]'")
    return tc, None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else err.__class__.__name__)[:160]


def _torchcodec_load_failure(err: BaseException) -> str:
    """One line for a torchcodec that is installed but does not load, naming the shared libraries the
    loader could not find (torchcodec tries FFmpeg 8 down to 4 and lists each attempt's error)."""
    causes = [err]
    while causes[-1].__cause__ is not None and len(causes) < 8:
        causes.append(causes[-1].__cause__)  # type: ignore[arg-type]
    text = "\n".join(str(c) for c in causes)
    missing = list(dict.fromkeys(re.findall(r"(lib[\w.+-]+?\.so[\w.]*): cannot open shared object file", text)))
    named = ", ".join(missing[:6]) + (", ..." if len(missing) > 6 else "") if missing else _first_line(causes[-1])
    if any(lib in text for lib in CUDA_ONLY_LIBRARIES):
        return (f"torchcodec: this torchcodec is built for CUDA and the CUDA libraries it needs are not here "
                f"(missing {named}); with a CPU torch install the CPU build, pip install 'trainplan[decode]'")
    if missing:
        return (f"torchcodec: installed but FFmpeg's shared libraries are missing ({named}); "
                "install Debian's ffmpeg package (apt-get install ffmpeg)")
    return f"torchcodec: installed but does not load ({named})"


def open_torchcodec(path: str | Path, *, device: str = "cpu", side: int = 224,
                    postprocess: Postprocess = "rgb_resize") -> Any:
    """A torchcodec VideoDecoder as the probe uses it: exact seeking (the file's frames indexed when it
    opens), one FFmpeg thread, frames out as N x C x H x W uint8 RGB; with "rgb_resize" on the CPU,
    resized to `side` x `side` by the decoder itself (bilinear). On CUDA no resize is asked of the
    decoder (decode_files_torchcodec resizes with torch on the device)."""
    tc, why = torchcodec_or_reason()
    if tc is None:
        raise ProbeSkipped(why or "torchcodec unavailable")
    from torchcodec.decoders import VideoDecoder
    from torchcodec.transforms import Resize

    resize = postprocess == "rgb_resize" and not device.startswith("cuda")
    return VideoDecoder(str(path), device=device, seek_mode="exact", num_ffmpeg_threads=1,
                        transforms=[Resize((side, side))] if resize else None)


def decode_files_torchcodec(paths: list[Path], *, device: str = "cpu", access: Access = "sequential",
                            side: int = 224, postprocess: Postprocess = "rgb_resize", samples: int = 16,
                            seed: int = 0) -> FileDecode:
    """torchcodec's VideoDecoder over the files, on one FFmpeg thread, RGB out, in the same access
    patterns and on the same targets as `decode_files_pyav`.

    On the CPU the resize to `side` is the decoder's own (torchcodec.transforms.Resize, bilinear:
    swscale converts to RGB at full size, then resizes the RGB frame, two passes where PyAV's
    to_ndarray(width=, height=) makes one); torchcodec always converts to RGB, so postprocess "none"
    is done as "rgb". In order the frames are fetched TORCHCODEC_BATCH at a time; at random access
    one target at a time, in the order PyAV visits them (torchcodec seeks to the target's keyframe
    unless the target lies ahead in the GOP it is decoding, where it decodes on). torchcodec does not
    say how many frames it decoded (its count is kept in C++ and not exposed to Python), so at
    random access frames decoded are set to frames used and the ratio is None; in order every frame
    decoded is used, so the ratio is 1.

    On "cuda" (NVDEC) the decoder's creation is timed as set-up (the CUDA context and the
    decoder's), frames are resized with torch on the device and copied back to the host, as a
    CPU-side loader would need them; CPU-seconds are then only the host's share, so the wall rate
    is the figure to read."""
    tc, why = torchcodec_or_reason()
    if tc is None:
        raise ProbeSkipped(why or "torchcodec unavailable")
    torch = require_torch("decode (torchcodec)")
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise ProbeSkipped("torchcodec CUDA (NVDEC): no GPU visible to torch here")
    if postprocess not in POSTPROCESS_TEXT:
        raise UserError("postprocess", f"expected one of {', '.join(POSTPROCESS_TEXT)}, got {postprocess!r}")
    resize = postprocess == "rgb_resize"

    def finish(frames: Any) -> None:  # N x C x H x W uint8, on `device`
        if cuda:
            if resize:
                frames = torch.nn.functional.interpolate(frames.float(), size=(side, side), mode="bilinear",
                                                         align_corners=False)
            frames.to("cpu")

    parts: list[tuple[int, int, int]] = []
    gops: list[float] = []
    decoded = used = 0
    cpu = wall = setup = 0.0
    for path in paths:
        w, h, pts, gop = _file_facts(path)
        gops.append(gop)
        c0, w0 = time.process_time(), time.perf_counter()
        dec = open_torchcodec(path, device=device, side=side, postprocess=postprocess)
        if cuda:
            torch.cuda.synchronize()
        setup += time.perf_counter() - w0
        n = 0
        if access == "sequential":
            total = len(dec)
            for start in range(0, total, TORCHCODEC_BATCH):
                batch = dec.get_frames_in_range(start, min(total, start + TORCHCODEC_BATCH)).data
                finish(batch)
                n += int(batch.shape[0])
        else:
            for target in random_targets(len(pts), max(1, int(round(gop))), samples, seed):
                finish(dec.get_frame_at(target).data.unsqueeze(0))
                n += 1
        if cuda:
            torch.cuda.synchronize()
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        used += n
        decoded += n  # in order: each frame decoded once and used; at random: not counted (see above)
        parts.append((n, w, h))
    return _file_result("torchcodec", device, access, len(paths), parts, gops, decoded, used,
                        cpu, wall, setup, counted=access == "sequential")


def _contention_worker(paths: list[str], side: int, postprocess: str, seconds: float, barrier: Any,
                       queue: Any) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    barrier.wait()
    frames, c0, w0 = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - w0 < seconds:
        for path in paths:
            container, stream = open_single_threaded(path)
            with container:
                for frame in container.decode(stream):
                    postprocess_frame(frame, postprocess, side)  # type: ignore[arg-type]
                    frames += 1
            if time.perf_counter() - w0 >= seconds:
                break
    queue.put((frames, time.process_time() - c0, time.perf_counter() - w0))


@dataclass(frozen=True)
class ContentionRow:
    decoders: int  # PyAV decoders running at once, one process each
    frames_per_cpu_second: float  # per process, mean over the processes
    frames_per_wall_second: float  # per process
    cpu_share: float  # CPU-seconds / wall seconds per process: below 1 when a decoder waited for a core
    relative_to_one: float  # frames per CPU-second against one decoder alone

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decode_contention(paths: list[Path], *, max_decoders: int, side: int = 224,
                      postprocess: Postprocess = "rgb_resize", seconds: float = 2.0,
                      timeout: float = 300.0) -> list[ContentionRow]:
    """The per-process rate with 1, 2, ..., k PyAV decoders at once (each a process decoding the files
    in order for `seconds`): shared caches, memory bandwidth and, with more decoders than free cores,
    time-slicing lower it. Per CPU-second, a decoder that waits for a core is not charged for it."""
    import multiprocessing as mp

    if max_decoders < 1:
        raise UserError("--decoders", f"expected at least 1 decoder, got {max_decoders}")
    ctx = mp.get_context("fork")
    rows: list[ContentionRow] = []
    base = None
    for k in range(1, max_decoders + 1):
        barrier, queue = ctx.Barrier(k), ctx.SimpleQueue()
        procs = [ctx.Process(target=_contention_worker, args=([str(p) for p in paths], side, postprocess, seconds,
                                                              barrier, queue), daemon=True) for _ in range(k)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
        got = []
        while not queue.empty():
            got.append(queue.get())
        if len(got) < k:
            raise ProbeSkipped(f"decode contention: {k - len(got)} of {k} decoder processes did not finish")
        per_cpu = float(np.mean([f / max(c, 1e-9) for f, c, _ in got]))
        per_wall = float(np.mean([f / max(w, 1e-9) for f, _, w in got]))
        share = float(np.mean([c / max(w, 1e-9) for _, c, w in got]))
        base = base or per_cpu
        rows.append(ContentionRow(k, per_cpu, per_wall, share, per_cpu / base))
    return rows


def cores_present() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def decode_user_files(paths: list[Path], *, access: Access = "sequential", side: int = 224,
                      postprocess: Postprocess = "rgb_resize", samples: int = 16, seed: int = 0,
                      max_decoders: int | None = None, contention_seconds: float = 2.0,
                      torchcodec: bool = True) -> dict[str, Any]:
    """The decode probe on the user's files: PyAV in order and at random access, torchcodec (CPU, and
    CUDA when a GPU is visible) when installed, and the contention curve up to the cores present.

    The headline `core_fps_1080p` (what the calibration records for the plan) is PyAV's figure for
    the workload's access pattern, times the contention ratio at the most decoders measured: the
    plan gives each of `cluster.cores` a decoder, all running at once, so the contended rate is
    the one its cores-needed must use."""
    if not paths:
        raise UserError("PATH", "expected at least one video file to decode")
    seq = decode_files_pyav(paths, access="sequential", side=side, postprocess=postprocess)
    rnd = decode_files_pyav(paths, access="random", side=side, postprocess=postprocess, samples=samples, seed=seed)
    results = [seq, rnd]
    skipped: list[str] = []
    if torchcodec:
        tc, why = torchcodec_or_reason()
        torch = _torch_or_none()
        gpu = torch is not None and torch.cuda.is_available()
        devices = ["cpu", "cuda"] if gpu else ["cpu"]
        if tc is None:
            skipped.append(why or "torchcodec: unavailable")
            devices = []
        if not gpu:
            skipped.append("torchcodec CUDA (NVDEC): no GPU visible to torch here")
        for device in devices:
            try:
                for acc in ("sequential", "random"):
                    results.append(decode_files_torchcodec(paths, device=device, access=acc,  # type: ignore[arg-type]
                                                           side=side, postprocess=postprocess, samples=samples,
                                                           seed=seed))
            except ProbeSkipped as reason:
                skipped.append(str(reason))
            except Exception as err:  # noqa: BLE001 - a decoder failing on a file must not end the probe
                skipped.append(f"torchcodec {device}: failed on these files ({err.__class__.__name__}: "
                               f"{str(err).splitlines()[0][:160] if str(err) else ''})")
    k = max_decoders if max_decoders is not None else cores_present()
    contention: list[ContentionRow] = []
    if k >= 1 and contention_seconds > 0:
        try:
            contention = decode_contention(paths, max_decoders=k, side=side, postprocess=postprocess,
                                           seconds=contention_seconds)
        except ProbeSkipped as why:
            skipped.append(str(why))
    ratio = contention[-1].relative_to_one if contention else 1.0
    head = rnd if access == "random" else seq
    return {
        "source": "files",
        "files": [str(p) for p in paths],
        "access": access,
        "width": head.width, "height": head.height, "gop": head.gop, "codec": _dominant_codec(paths),
        "decoder": f"PyAV {_av_version()}",
        "side": side, "postprocess": postprocess, "postprocess_text": POSTPROCESS_TEXT[postprocess], "threads": 1,
        "frames_per_cpu_second": head.frames_per_cpu_second,
        "frames_per_cpu_second_1080p": head.frames_per_cpu_second_1080p,
        "frames_used_per_cpu_second": head.frames_used_per_cpu_second,
        "uncontended_core_fps_1080p": head.core_fps_1080p,
        "contention_decoders": contention[-1].decoders if contention else 1,
        "contention_ratio": ratio,
        "core_fps_1080p": head.core_fps_1080p * ratio,
        "results": [r.to_dict() for r in results],
        "contention": [r.to_dict() for r in contention],
        "skipped": skipped,
    }


def _av_version() -> str:
    import av

    return str(av.__version__)


def image_decoder() -> str:
    """The image decoder PIL is: Pillow, or pillow-simd where installed (its version carries `.post`)."""
    import PIL

    version = PIL.__version__
    return f"{'pillow-simd' if '.post' in version else 'Pillow'} {version}"


def decode_images(paths: list[Path], *, side: int = 224, postprocess: Postprocess = "rgb_resize",
                  seconds: float = 1.0) -> dict[str, Any]:
    """The decode probe on image files with PIL, one thread: each image opened, decoded, converted to RGB and
    (rgb_resize) resized to side x side bilinearly, as a PIL + resize loader does; over the images again until
    `seconds` of CPU are spent. Images per CPU-second at their mean size, and that scaled by pixels to 1080p:
    an image is an intra-coded frame, decoded once whichever order it is read in (g = 1)."""
    import io

    from PIL import Image

    from trainplan.measure import inspect as insp

    if not paths:
        raise UserError("PATH", "expected at least one image file to decode")
    infos = [insp.inspect_image(p) for p in paths]  # a file PIL cannot open is refused here, in one line
    blobs = [Path(p).read_bytes() for p in paths]  # decode from memory: the read is the read probe's
    resample = Image.Resampling.BILINEAR
    decoded = 0
    pixels = 0.0
    cpu = wall = 0.0
    while decoded == 0 or cpu < seconds:
        for info, blob in zip(infos, blobs):
            c0, w0 = time.thread_time(), time.perf_counter()
            with Image.open(io.BytesIO(blob)) as img:
                rgb = img.convert("RGB") if postprocess != "none" else img
                rgb.load()
                if postprocess == "rgb_resize":
                    rgb = rgb.resize((side, side), resample)
                np.asarray(rgb)
            cpu += time.thread_time() - c0
            wall += time.perf_counter() - w0
            decoded += 1
            pixels += info.width * info.height
    cpu, wall = max(cpu, 1e-9), max(wall, 1e-9)
    mean_pixels = pixels / decoded
    fps_cpu = decoded / cpu
    agg = insp.aggregate_images(infos)
    row = {"decoder": "PIL", "device": "cpu", "access": "sequential", "files": len(paths), "width": agg["width"],
           "height": agg["height"], "gop": 1.0, "frames_decoded": decoded, "frames_used": decoded, "cpu_seconds": cpu,
           "wall_seconds": wall, "setup_seconds": 0.0, "frames_per_cpu_second": fps_cpu,
           "frames_per_wall_second": decoded / wall, "frames_used_per_cpu_second": fps_cpu,
           "frames_decoded_per_frame_used": 1.0, "expected_frames_decoded_per_frame_used": 1.0,
           "frames_per_cpu_second_1080p": fps_cpu * mean_pixels / PIXELS_1080P,
           "core_fps_1080p": fps_cpu * mean_pixels / PIXELS_1080P}
    text = {"none": "decode only", "rgb": "decode + conversion to RGB",
            "rgb_resize": f"decode + conversion to RGB + bilinear resize to {side} px"}[postprocess]
    return {
        "source": "images", "files": [str(p) for p in paths], "access": "sequential", "width": agg["width"],
        "height": agg["height"], "gop": 1, "codec": agg["codec"], "decoder": image_decoder(), "side": side,
        "postprocess": postprocess, "postprocess_text": f"{text} (PIL, one thread)", "threads": 1,
        "pixels_per_frame": mean_pixels, "frames_per_cpu_second": fps_cpu,
        "frames_per_cpu_second_1080p": row["frames_per_cpu_second_1080p"], "frames_used_per_cpu_second": fps_cpu,
        "uncontended_core_fps_1080p": row["core_fps_1080p"], "contention_decoders": 1, "contention_ratio": 1.0,
        "core_fps_1080p": row["core_fps_1080p"], "results": [row], "contention": [], "skipped": [],
    }


def _dominant_codec(paths: list[Path]) -> str:
    """The codec most of the files are in (the first of equals in file order)."""
    names = [_codec_of(p) for p in paths]
    return max(dict.fromkeys(names), key=names.count)


def _codec_of(path: Path) -> str:
    import av

    from trainplan.measure.inspect import codec_name

    with av.open(str(path)) as c:
        return codec_name(c.streams.video[0].codec_context)
