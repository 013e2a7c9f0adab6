"""`trainplan data inspect`: measure the user's own data instead of assuming it (issue 14).

Video (any container PyAV opens: MP4, MKV, MOV, ...), per file and in aggregate:
container, codec, width, height, frames per second, frames, hours, bit rate, bits per
pixel, and the keyframe interval G measured from the packets (a demux pass: no frame is
decoded, so it runs at storage speed). G is the distance in packets between successive
keyframes; its median is what the plan's `data.gop` takes (docs/pipeline-and-bill.md: random access
decodes (G + 1) / 2 frames per frame used), its spread (min, max, interquartile range)
says whether one figure describes the file.

Token corpora: packed token ids (`.bin`: raw little-endian integers, uint16 unless told;
`.npy`: the dtype in its header) or text (`.jsonl` with a "text" field, `.txt` with
documents separated by blank lines). Tokens, bytes per token, and the share of exact and
near-duplicate documents: exact by a hash of the document, near by MinHash signatures of
its 5-shingles with locality-sensitive hashing (the `datasketch` package), Jaccard
threshold 0.8. A document counts as a duplicate when an earlier document is its exact or
near copy; the effective unique tokens are the tokens of the documents that are not.

`to_workload(...)` writes a workload `[data]` section from the aggregate, and marks each
key it writes as `measured` in a `[measured]` table (key -> where it was measured), which
`load_workload` reads as provenance.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import statistics
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from trainplan.errors import UserError
from trainplan.units import SECONDS_PER_HOUR
from trainplan.workload.schema import IMAGE_FRAME_KEYS

VIDEO_SUFFIXES = frozenset({".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v", ".ts", ".h264", ".hevc", ".mjpeg"})
TOKEN_ID_SUFFIXES = frozenset({".bin", ".npy"})
TEXT_SUFFIXES = frozenset({".jsonl", ".txt"})
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp"})
TABLE_SUFFIXES = frozenset({".parquet", ".arrow"})  # token tables: a token-id list column or a text column
# every suffix a folder inspection reads (kind_of reads the rest as video)
# Columns a token table's ids or text are looked for in, in this order (Hugging Face and Megatron names).
ID_COLUMNS = ("input_ids", "tokens", "token_ids", "ids")
TEXT_COLUMNS = ("text", "content", "document")
READ_SUFFIXES = VIDEO_SUFFIXES | TOKEN_ID_SUFFIXES | TEXT_SUFFIXES | IMAGE_SUFFIXES | TABLE_SUFFIXES
BITS_PER_BYTE = 8.0

# Near-duplicate detection (MinHash + LSH). 128 permutations put the standard error of a
# Jaccard estimate at 1/sqrt(128) ~ 0.09; 0.8 is the threshold the deduplication of large
# web corpora commonly uses (near copies, not merely related pages); 5-word shingles.
MINHASH_PERMUTATIONS = 128
NEAR_DUPLICATE_JACCARD = 0.8
SHINGLE = 5
# Without an end-of-document id, packed token ids are cut into documents of this many tokens.
DEFAULT_CHUNK_TOKENS = 2048
# GPT-2's pre-tokenizer: the word pieces a byte-level BPE starts from. Without a tokenizer file,
# text tokens are counted as these pieces: a lower bound on the BPE tokens (a piece is >= 1 token).
GPT2_PRETOKEN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


# ---------------------------------------------------------------- files


def once(items: list[Any], key: Callable[[Any], Any], name: Callable[[Any], str] = str) -> tuple[list[Any], list[str]]:
    """Each item once, by `key` (a file's resolved path: `a.mp4 a.mp4`, or a folder and a file in it, name one
    file), in order; and the names of those named more than once (for the one line saying so)."""
    seen: set[Any] = set()
    kept, repeated = [], []
    for item in items:
        k = key(item)
        if k in seen:
            if name(item) not in repeated:
                repeated.append(name(item))
            continue
        seen.add(k)
        kept.append(item)
    return kept, repeated


def collect(paths: Iterable[str | Path], suffixes: frozenset[str] | None = None) -> list[Path]:
    """The files named, and the files under the folders named (sorted, recursive), each once (see `once`)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and (suffixes is None or f.suffix.lower() in suffixes))
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise UserError(str(raw), "expected an existing file or folder")
    return once(out, lambda f: f.resolve())[0]


def sample(files: list[Path], n: int | None, seed: int = 0) -> list[Path]:
    """A uniform random sample of `n` files (all of them when n is None or >= their number), in order."""
    if n is None or n >= len(files):
        return files
    if n < 1:
        raise UserError("--sample", f"expected at least 1 file, got {n}")
    keep = set(random.Random(seed).sample(range(len(files)), n))
    return [f for i, f in enumerate(files) if i in keep]


def kind_of(path: Path) -> str:
    s = path.suffix.lower()
    if s in TOKEN_ID_SUFFIXES:
        return "token_ids"
    if s in TEXT_SUFFIXES:
        return "text"
    if s in IMAGE_SUFFIXES:
        return "image"
    if s in TABLE_SUFFIXES:
        return "table"
    return "video"


def record_fields(record: Any, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A per-file record's fields as a dict, its lists copied one level. The records hold only numbers,
    strings and flat lists of numbers, so this is `dataclasses.asdict` without its recursive deep copy,
    which cost 0.12 ms a file: 1.2 s of a 10,000-clip pass (issue 26)."""
    return {f.name: list(v) if isinstance(v := getattr(record, f.name), list) else v
            for f in fields(record) if f.name not in leave_out}


# ---------------------------------------------------------------- images


@dataclass(frozen=True)
class ImageFile:
    path: str
    codec: str  # jpeg, png, webp (PIL's format, lower case)
    width: int
    height: int
    mode: str  # PIL's mode: RGB, L, RGBA, P, ...
    bytes: int
    bits_per_pixel: float  # stored bits / (W H)

    def to_dict(self) -> dict[str, Any]:
        return record_fields(self)


def inspect_image(path: str | Path) -> ImageFile:
    """An image's format and size from its header (PIL opens lazily: nothing is decoded)."""
    from PIL import Image, UnidentifiedImageError

    p = Path(path)
    try:
        with Image.open(p) as img:
            fmt, (w, h), mode = str(img.format or p.suffix.lstrip(".")).lower(), img.size, img.mode
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:
        raise UserError(str(path), f"expected an image PIL can open ({err.__class__.__name__}: {err})") from None
    size = p.stat().st_size
    return ImageFile(str(p), "jpeg" if fmt == "mpo" else fmt, int(w), int(h), mode, size, size * BITS_PER_BYTE / (w * h))


def aggregate_images(files: list[ImageFile]) -> dict[str, Any]:
    """An image corpus: counts, the dominant format and size (by images), the mean pixels an image
    (sum W H / images), the bytes, and the groups by format and size."""
    n = len(files)
    pixels = sum(f.width * f.height for f in files)
    groups: dict[tuple[str, int, int], list[ImageFile]] = {}
    for f in files:
        groups.setdefault((f.codec, f.width, f.height), []).append(f)
    return {
        "files": n, "images": n, "codec": _mode([f.codec for f in files], [1.0] * n),
        "codecs": sorted({f.codec for f in files}),
        "width": _mode([f.width for f in files], [1.0] * n), "height": _mode([f.height for f in files], [1.0] * n),
        "pixels_per_frame": pixels / n, "bytes": sum(f.bytes for f in files),
        "bytes_per_image": sum(f.bytes for f in files) / n,
        "bits_per_pixel": sum(f.bytes for f in files) * BITS_PER_BYTE / pixels,
        "groups": sorted(({"format": f"{c} {w}x{h}", "codec": c, "width": w, "height": h, "files": len(m),
                           "frame_share": len(m) / n, "decode_share_sequential": len(m) * w * h / pixels}
                          for (c, w, h), m in groups.items()), key=lambda g: -g["decode_share_sequential"]),
    }


# ---------------------------------------------------------------- video


@dataclass(frozen=True)
class VideoFile:
    path: str
    container: str
    codec: str
    width: int
    height: int
    fps: float
    frames: int
    seconds: float
    hours: float
    bytes: int
    bitrate: float  # bits/s of the video stream's packets over its duration
    bits_per_pixel: float  # bitrate / (W H fps)
    keyframes: int
    gop_median: float | None  # packets between successive keyframes (None with fewer than 2 keyframes)
    gop_min: int | None
    gop_max: int | None
    gop_iqr: float | None
    gop_stdev: float | None
    gop_intervals: list[int] = field(repr=False, default_factory=list)
    # every group of pictures, the tail after the last keyframe included: the frames a loader sees
    gop_segments: list[int] = field(repr=False, default_factory=list)
    gop_frame_weighted: float | None = None  # sum G^2 / sum G: the mean GOP a uniformly drawn frame is in
    random_decodes: float | None = None  # frames decoded per frame used at uniform random access
    truncated: str | None = None  # why the file holds fewer frames than it says, or None

    def to_dict(self) -> dict[str, Any]:
        return record_fields(self, leave_out=("gop_intervals", "gop_segments"))


def gop_segments(keyframe_at: list[int], packets: int) -> list[int]:
    """Lengths of the groups of pictures: from each keyframe to the next, the last to the end of the
    stream (frames before the first keyframe, if any, form a group of their own: a seek lands on the
    stream's start for them)."""
    starts = sorted(set(keyframe_at) | {0})
    return [b - a for a, b in zip(starts, [*starts[1:], packets]) if b > a]


def random_access_cost(segments: list[int], pixels: list[float] | None = None) -> tuple[float, float]:
    """(frame-weighted GOP, frames decoded per frame used) of groups of `segments` frames.

    A frame at position k (0 at the keyframe) of its group costs k + 1 decoded frames at random access (seek
    to the keyframe, decode forward to it), so a group of G frames costs G (G + 1) / 2 for its G frames, and
    over frames drawn uniformly: E = sum G (G + 1) / 2 / sum G = (G_w + 1) / 2, with G_w = sum G^2 / sum G
    the frame-weighted GOP (the mean GOP a random frame lands in; it is the median only when every GOP is
    the same). With `pixels` (one figure a segment), E is weighted by pixels as decode time is: sum P G (G + 1) / 2
    / sum P G, the decode cost of a mixed-size corpus per frame used, in frames of its mean size."""
    w = [1.0] * len(segments) if pixels is None else pixels
    frames = sum(p * g for p, g in zip(w, segments))
    if frames <= 0:
        return 1.0, 1.0
    squares = sum(p * g * g for p, g in zip(w, segments))
    g_w = squares / frames
    return g_w, (g_w + 1.0) / 2.0


def codec_name(codec_context: Any) -> str:
    """The codec as users write it (h264, hevc, av1, vp9): the codec's own name, not the decoder
    library's (PyAV opens AV1 with libdav1d, whose name is not the codec's)."""
    codec = getattr(codec_context, "codec", None)
    return str(getattr(codec, "canonical_name", None) or codec_context.name)


def stated_frames(container: Any, stream: Any, fps: float) -> int:
    """The frames the container says the stream holds (0 where it says nothing): MP4's own count, else for
    Matroska / WebM (which keep no count) its stated duration x fps: the stream's duration, or the
    segment's when the video is its only stream (an audio track may outlast the video)."""
    if stream.frames:
        return int(stream.frames)
    if "matroska" not in container.format.name or fps <= 0:
        return 0
    if stream.duration and stream.time_base:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration and len(container.streams) == 1:
        seconds = container.duration / 1e6  # AV_TIME_BASE: microseconds
    else:
        return 0
    return int(seconds * fps + 0.5)


def inspect_video(path: str | Path) -> VideoFile:
    """Demux one file's video stream (no decoding): format, keyframe intervals, bit rate. A file that ends
    early (the demuxer fails part-way, or the header states more frames than it holds) is measured as far as
    it goes, with `truncated` saying so."""
    import av

    p = Path(path)
    try:
        container = av.open(str(p), "r")
    except (av.error.FFmpegError, OSError, UnicodeDecodeError) as err:  # type: ignore[attr-defined]
        raise UserError(str(path), f"expected a video file PyAV can open ({err.__class__.__name__}: {err})") from None
    truncated = None
    with container:
        if not container.streams.video:
            raise UserError(str(path), "expected a file with a video stream")
        stream = container.streams.video[0]
        ctx = stream.codec_context
        width, height = int(ctx.width), int(ctx.height)
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 0.0
        stated = stated_frames(container, stream, fps)
        keyframe_at: list[int] = []
        sizes = 0
        packets = 0
        pts: list[int] = []
        try:
            for packet in container.demux(stream):
                if packet.size == 0 and packet.pts is None:
                    continue  # the demuxer's flush packet
                if packet.is_keyframe:
                    keyframe_at.append(packets)
                sizes += packet.size
                packets += 1
                if packet.pts is not None:
                    pts.append(int(packet.pts))
        except (av.error.FFmpegError, OSError) as err:  # type: ignore[attr-defined]
            truncated = f"the stream breaks off after {packets} frames ({err.__class__.__name__})"
        if truncated is None and stated > packets + (0 if stream.frames else 1):  # a duration's rounding: a frame
            truncated = f"the container states {stated} frames, {packets} are in the file"
        tb = float(stream.time_base) if stream.time_base else 0.0
        container_name = container.format.name
        codec = codec_name(ctx)
    if packets == 0:
        raise UserError(str(path), "expected a video stream with at least one packet")
    if fps <= 0:
        raise UserError(str(path), "the stream states no frame rate")
    seconds = packets / fps
    if len(pts) >= 2 and tb > 0 and truncated is None:  # the timestamps' span when they cover every frame
        seconds = max(seconds, (max(pts) - min(pts)) * tb + 1 / fps)
    bitrate = sizes * BITS_PER_BYTE / seconds
    intervals = [b - a for a, b in zip(keyframe_at, keyframe_at[1:])]
    if intervals:
        q = np.percentile(intervals, [25, 75])
        gop = (float(statistics.median(intervals)), int(min(intervals)), int(max(intervals)),
               float(q[1] - q[0]), float(statistics.pstdev(intervals)))
    else:
        gop = (None, None, None, None, None)
    segments = gop_segments(keyframe_at, packets)
    g_w, decodes = random_access_cost(segments)
    return VideoFile(
        path=str(p), container=container_name, codec=codec, width=width, height=height, fps=fps,
        frames=packets, seconds=seconds, hours=seconds / SECONDS_PER_HOUR, bytes=p.stat().st_size,
        bitrate=bitrate, bits_per_pixel=bitrate / (width * height * fps), keyframes=len(keyframe_at),
        gop_median=gop[0], gop_min=gop[1], gop_max=gop[2], gop_iqr=gop[3], gop_stdev=gop[4],
        gop_intervals=intervals, gop_segments=segments, gop_frame_weighted=g_w, random_decodes=decodes,
        truncated=truncated)


def _mode(values: list[Any], weights: list[float]) -> Any:
    acc: dict[Any, float] = {}
    for v, w in zip(values, weights):
        acc[v] = acc.get(v, 0.0) + w
    return max(acc.items(), key=lambda kv: kv[1])[0]


def format_name(codec: str, width: int, height: int, fps: float) -> str:
    return f"{codec} {width}x{height} {fps:g} fps"


def _gop_figures(files: list[VideoFile]) -> dict[str, Any]:
    """The keyframe figures of a set of files: the interval spread (median, min, max, IQR, stdev: what one
    file looks like), the frame-weighted GOP and random-access decodes (what a loader drawing frames
    uniformly pays), and the random decodes weighted by pixels as well (a mixed-size set)."""
    intervals = [i for f in files for i in f.gop_intervals]
    segments = [g for f in files for g in f.gop_segments]
    pixels = [float(f.width * f.height) for f in files for _ in f.gop_segments]
    g_w, decodes = random_access_cost(segments)
    out: dict[str, Any] = {"gop_frame_weighted": g_w, "random_decodes": decodes,
                           "random_decodes_pixel_weighted": random_access_cost(segments, pixels)[1]}
    if intervals:
        q = np.percentile(intervals, [25, 75])
        out.update(gop_median=float(statistics.median(intervals)), gop_min=int(min(intervals)),
                   gop_max=int(max(intervals)), gop_iqr=float(q[1] - q[0]), gop_stdev=float(statistics.pstdev(intervals)))
    else:
        out.update(gop_median=None, gop_min=None, gop_max=None, gop_iqr=None, gop_stdev=None)
    return out


def format_groups(files: list[VideoFile]) -> list[dict[str, Any]]:
    """The files grouped by format (codec, width, height, fps), largest decode cost first. Each group's share
    of the corpus's frames and of its decode work (decode time is proportional to the pixels decoded:
    frames x W H in order, frames x random decodes x W H at random access), its own bit rate and GOP
    figures, and the workload [data] keys that plan it alone."""
    groups: dict[tuple[str, int, int, float], list[VideoFile]] = {}
    for f in files:
        groups.setdefault((f.codec, f.width, f.height, round(f.fps, 6)), []).append(f)
    frames_all = sum(f.frames for f in files)
    seq_all = sum(f.frames * f.width * f.height for f in files)
    rnd_all = sum(f.width * f.height * g * (g + 1) / 2 for f in files for g in f.gop_segments)
    out = []
    for (codec, w, h, fps), members in groups.items():
        frames = sum(f.frames for f in members)
        seconds = sum(f.seconds for f in members)
        bits = sum(f.bitrate * f.seconds for f in members)
        gops = _gop_figures(members)
        seq = frames * w * h
        rnd = w * h * sum(g * (g + 1) / 2 for f in members for g in f.gop_segments)
        out.append({
            "format": format_name(codec, w, h, fps), "codec": codec, "width": w, "height": h, "fps": fps,
            "files": len(members), "frames": frames, "frame_share": frames / frames_all,
            "hours": seconds / SECONDS_PER_HOUR, "bitrate": bits / seconds,
            "decode_share_sequential": seq / seq_all, "decode_share_random": rnd / rnd_all if rnd_all else 0.0,
            **{k: gops[k] for k in ("gop_median", "gop_frame_weighted", "random_decodes")},
            "workload": {"codec": codec, "width": w, "height": h, "fps": fps, "bitrate": bits / seconds,
                         "random_decodes": gops["random_decodes"],
                         **({"gop": max(1, int(round(gops["gop_median"])))} if gops["gop_median"] else {})},
        })
    return sorted(out, key=lambda g: (-g["decode_share_random"], -g["decode_share_sequential"], g["format"]))


def aggregate_video(files: list[VideoFile]) -> dict[str, Any]:
    """The corpus in one record, weighted as a loader drawing frames uniformly sees it: totals; the
    dominant format (by frames) for the codec and the frame size a decode rate is quoted at; the mean
    pixels a frame (frame-weighted: sum frames W H / sum frames); the frame-weighted GOP and the random
    access decodes per frame used (weighted by pixels too, so random_decodes x pixels_per_frame is the
    corpus's pixels decoded per frame used); bit rate and bits per pixel as totals (stored bits /
    seconds); and the format groups, the binding one (most decode work) named for each access order."""
    if not files:
        raise UserError("PATH", "expected at least one video file")
    frames = [float(f.frames) for f in files]
    total_frames = sum(frames)
    secs = [f.seconds for f in files]
    total_s = sum(secs)
    bits = sum(f.bitrate * f.seconds for f in files)
    pixel_rate = sum(f.width * f.height * f.fps * f.seconds for f in files) / total_s
    formats = sorted({(f.codec, f.width, f.height, round(f.fps, 3)) for f in files})
    groups = format_groups(files)
    gops = _gop_figures(files)
    agg: dict[str, Any] = {
        "files": len(files),
        "containers": sorted({f.container for f in files}),
        "codec": _mode([f.codec for f in files], frames),
        "codecs": sorted({f.codec for f in files}),
        "width": _mode([f.width for f in files], frames),
        "height": _mode([f.height for f in files], frames),
        "fps": _mode([round(f.fps, 6) for f in files], frames),
        "pixels_per_frame": sum(f.frames * f.width * f.height for f in files) / total_frames,
        "formats": [{"codec": c, "width": w, "height": h, "fps": r} for c, w, h, r in formats],
        "groups": groups,
        "binding_group_sequential": max(groups, key=lambda g: g["decode_share_sequential"])["format"],
        "binding_group_random": max(groups, key=lambda g: g["decode_share_random"])["format"],
        "frames": sum(f.frames for f in files),
        "seconds": total_s,
        "hours": total_s / SECONDS_PER_HOUR,
        "bytes": sum(f.bytes for f in files),
        "bitrate": bits / total_s,
        "bits_per_pixel": bits / total_s / pixel_rate,
        "keyframes": sum(f.keyframes for f in files),
        **gops,
    }
    return agg


# ---------------------------------------------------------------- token corpora


@dataclass
class Document:
    tokens: int
    bytes: int
    key: bytes  # what the exact hash is taken over
    shingles: set[bytes]


def _shingles(items: list[Any]) -> set[bytes]:
    """Contiguous SHINGLE-grams of words or token ids, as bytes (a shorter document is one shingle)."""
    if len(items) < SHINGLE:
        return {" ".join(map(str, items)).encode()} if items else set()
    return {" ".join(map(str, items[i : i + SHINGLE])).encode() for i in range(len(items) - SHINGLE + 1)}


TOKEN_DTYPES = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")


def check_dtype(dtype: str | None) -> np.dtype:
    """The --dtype of .bin token ids (default uint16), one of TOKEN_DTYPES; anything else refused naming it."""
    if dtype is None:
        return np.dtype("<u2")
    if dtype not in TOKEN_DTYPES:
        raise UserError("--dtype", f"expected an integer token id type, one of {', '.join(TOKEN_DTYPES)}; got {dtype!r}")
    return np.dtype(dtype).newbyteorder("<")


def check_eos(eos: int | None, dt: np.dtype, what: str) -> None:
    """An --eos id a token id of type `dt` can hold (0 to its largest value), else refused naming --eos."""
    if eos is not None and not 0 <= eos <= np.iinfo(dt).max:
        raise UserError("--eos", f"expected an end-of-document id from 0 to {np.iinfo(dt).max} ({what} ids are "
                        f"{dt.name}), got {eos}")


def read_token_ids(path: Path, dtype: str | None = None) -> np.ndarray:
    """Token ids of a `.npy` (its own dtype) or `.bin` (raw little-endian `dtype`, default uint16)."""
    if path.suffix.lower() == ".npy":
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as err:
            raise UserError(str(path), f"expected a .npy array of token ids ({err})") from None
        if arr.dtype.kind not in "iu":
            raise UserError(str(path), f"expected integer token ids, got dtype {arr.dtype}")
        return arr.reshape(-1)
    dt = check_dtype(dtype)
    size = path.stat().st_size
    if size % dt.itemsize:
        raise UserError(str(path), f"expected a whole number of {dt.itemsize}-byte token ids, got {size} bytes")
    if size == 0:  # an empty file cannot be mapped (issue 29)
        raise UserError(str(path), "expected token ids, got an empty file")
    return np.memmap(path, dtype=dt, mode="r")


def token_id_documents(ids: np.ndarray, eos: int | None, chunk: int = DEFAULT_CHUNK_TOKENS) -> Iterator[Document]:
    """Documents of packed ids: split after each `eos` id, or cut into `chunk`-token pieces."""
    itemsize = ids.dtype.itemsize
    if eos is not None:
        ends = np.flatnonzero(np.asarray(ids) == eos) + 1
        bounds = [0, *ends.tolist()]
        if bounds[-1] != len(ids):
            bounds.append(len(ids))
    else:
        bounds = list(range(0, len(ids), chunk)) + [len(ids)]
    for a, b in zip(bounds, bounds[1:]):
        if b <= a:
            continue
        piece = np.asarray(ids[a:b])
        body = piece[:-1] if eos is not None and piece[-1] == eos else piece
        yield Document(int(b - a), int(b - a) * itemsize, body.astype("<i8").tobytes(), _shingles(body.tolist()))


def text_documents(path: Path) -> Iterator[str]:
    """Documents of a text file: each JSONL line's "text" (or its first string value); in .txt, blank-line-separated.
    A file that is not UTF-8 is refused naming it (issue 29)."""
    try:
        yield from _text_documents(path)
    except UnicodeDecodeError as err:
        raise UserError(str(path), f"expected UTF-8 text, got byte {err.object[err.start]:#04x} at offset "
                        f"{err.start:,} of a chunk that is not UTF-8") from None


def _text_documents(path: Path) -> Iterator[str]:
    if path.suffix.lower() == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as err:
                    raise UserError(f"{path}:{lineno}", f"expected one JSON object a line ({err.msg})") from None
                if isinstance(obj, str):
                    yield obj
                    continue
                if not isinstance(obj, dict):
                    raise UserError(f"{path}:{lineno}", "expected a JSON object with a \"text\" field")
                text = obj.get("text")
                if not isinstance(text, str):
                    text = next((v for v in obj.values() if isinstance(v, str)), None)
                if text is None:
                    raise UserError(f"{path}:{lineno}", "expected a \"text\" field holding a string")
                yield text
    else:
        with open(path, encoding="utf-8") as f:
            buf: list[str] = []
            for line in f:
                if line.strip():
                    buf.append(line)
                elif buf:
                    yield "".join(buf)
                    buf = []
            if buf:
                yield "".join(buf)


def make_counter(tokenizer: str | None) -> tuple[Callable[[str], int], str]:
    """A token counter for text and what it counts: a tokenizers JSON file when given, else GPT-2 pre-tokens."""
    if tokenizer is not None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise UserError("--tokenizer", "the tokenizers package is not installed (pip install tokenizers)") from None
        from trainplan import limits  # a regular file of bounded size: never a FIFO (issue 29)

        text = limits.read_text(tokenizer, "tokenizer")
        try:
            tok = Tokenizer.from_str(text)
        except Exception as err:  # noqa: BLE001 - the library raises its own exception types
            raise UserError("--tokenizer", f"expected a tokenizer.json file ({err})") from None
        return (lambda text: len(tok.encode(text, add_special_tokens=False).ids)), f"tokens of {tokenizer}"
    import regex

    pattern = regex.compile(GPT2_PRETOKEN)
    return (lambda text: sum(1 for _ in pattern.finditer(text))), \
        "GPT-2 pre-tokenizer pieces (no tokenizer given: a lower bound on byte-level BPE tokens)"


def text_document(text: str, count: Callable[[str], int]) -> Document:
    raw = text.encode("utf-8")
    words = re.findall(r"\w+", text.lower())
    normal = " ".join(text.split()).encode("utf-8")  # whitespace-insensitive exact duplicates
    return Document(count(text), len(raw), normal, _shingles(words))


@dataclass
class Dedup:
    """Exact and near-duplicate bookkeeping over documents in order (the first of a group is kept)."""

    near: bool = True
    seed: int = 1
    documents: int = 0
    tokens: int = 0
    bytes: int = 0
    exact_documents: int = 0
    exact_tokens: int = 0
    near_documents: int = 0  # near copies of an earlier document that are not exact copies
    near_tokens: int = 0
    _seen: set[bytes] = field(default_factory=set)
    _lsh: Any = None
    _skip_reason: str | None = None

    def __post_init__(self) -> None:
        if self.near:
            try:
                from datasketch import MinHashLSH
            except ImportError:
                self._skip_reason = "near duplicates: datasketch is not installed (pip install datasketch)"
                self.near = False
                return
            self._lsh = MinHashLSH(threshold=NEAR_DUPLICATE_JACCARD, num_perm=MINHASH_PERMUTATIONS)

    def add(self, doc: Document, signature: Any = None) -> None:
        """Count one document; `signature`, its MinHash when already computed (a worker of the distributed
        pass, measure/distributed.py), else it is computed here from the document's shingles."""
        self.documents += 1
        self.tokens += doc.tokens
        self.bytes += doc.bytes
        digest = hashlib.blake2b(doc.key, digest_size=16).digest()
        if digest in self._seen:
            self.exact_documents += 1
            self.exact_tokens += doc.tokens
            return
        self._seen.add(digest)
        if not self.near or not (doc.shingles or signature is not None):
            return
        from datasketch import MinHash

        m = signature
        if m is None:
            m = MinHash(num_perm=MINHASH_PERMUTATIONS, seed=self.seed)
            m.update_batch(list(doc.shingles))
        if self._lsh.query(m):
            self.near_documents += 1
            self.near_tokens += doc.tokens
            return
        self._lsh.insert(str(self.documents), m)

    def result(self) -> dict[str, Any]:
        n = max(self.documents, 1)
        unique = self.tokens - self.exact_tokens - self.near_tokens
        return {
            "documents": self.documents, "tokens": self.tokens, "bytes": self.bytes,
            "exact_duplicate_documents": self.exact_documents,
            "exact_duplicate_share": self.exact_documents / n,
            "near_duplicate_documents": self.near_documents if self.near else None,
            "near_duplicate_share": self.near_documents / n if self.near else None,
            "duplicate_token_share": (self.exact_tokens + self.near_tokens) / max(self.tokens, 1),
            "effective_unique_tokens": unique,
            "near_duplicate_method": (f"MinHash ({MINHASH_PERMUTATIONS} permutations) of {SHINGLE}-shingles with "
                                      f"LSH at Jaccard >= {NEAR_DUPLICATE_JACCARD} (datasketch)") if self.near
            else self._skip_reason,
        }


def inspect_tokens(files: list[Path], *, dtype: str | None = None, eos: int | None = None,
                   tokenizer: str | None = None, near: bool = True,
                   progress: Callable[[Path], None] | None = None, dedup: Dedup | None = None,
                   on_skip: Callable[[Path, str], None] | None = None,
                   names: list[str] | None = None) -> dict[str, Any]:
    """Tokens, bytes per token and duplicate shares of a token corpus (ids or text), per file and in total.
    A file that cannot be read (empty, cut mid-id, not UTF-8) is skipped through read_each; `names`, what
    each file is called in the report (a shard member's URL for its staged copy)."""
    dedup = dedup if dedup is not None else Dedup(near=near)
    state: dict[str, Any] = {"counter": None, "counted": "token ids"}
    named = dict(zip(files, names)) if names is not None else {}

    def read(f: Path) -> dict[str, Any]:
        name = named.get(f, str(f))
        try:
            record = _token_file(f, dedup, state, dtype=dtype, eos=eos, tokenizer=tokenizer)
        except UserError as err:  # named as the user knows the file
            raise UserError(err.where.replace(str(f), name, 1), err.expected) from None
        finally:
            if progress is not None:
                progress(f)
        return dict(record, path=name)

    per_file, skipped = read_each(files, read, on_skip=on_skip)
    stored_bytes = sum(r["bytes"] for r in per_file)
    return {"kind": "tokens", "files": per_file, "aggregate": token_aggregate(dedup, stored_bytes, state["counted"]),
            "skipped": skipped, "files_skipped": len(skipped)}


def _token_file(f: Path, dedup: Dedup, state: dict[str, Any], *, dtype: str | None, eos: int | None,
                tokenizer: str | None) -> dict[str, Any]:
    """One token file's documents added to `dedup`, and its record. A text file is read through once before
    (its UTF-8 and JSON checked) so that a bad one adds no document before it is skipped."""
    before = (dedup.documents, dedup.tokens, dedup.exact_documents + dedup.near_documents,
              dedup.exact_tokens + dedup.near_tokens)
    size = f.stat().st_size
    width = None
    if kind_of(f) == "token_ids":
        ids = read_token_ids(f, dtype)
        check_eos(eos, ids.dtype, f"{f.name}'s" if f.suffix.lower() == ".npy" else "the .bin files'")
        for doc in token_id_documents(ids, eos):
            dedup.add(doc)
        width = ids.dtype.itemsize
    else:
        state["counter"] = state["counter"] or make_counter(tokenizer)
        count, counted = state["counter"]
        if kind_of(f) == "table":
            for doc, width in table_documents(f, count):
                state["counted"] = state["counted"] if width else counted
                dedup.add(doc)
        else:
            for _ in text_documents(f):
                pass
            state["counted"] = counted
            for text in text_documents(f):
                dedup.add(text_document(text, count))
    tokens = dedup.tokens - before[1]
    return {"path": str(f), "kind": kind_of(f), "bytes": size, "documents": dedup.documents - before[0],
            "tokens": tokens, "bytes_per_token": size / tokens if tokens else None, "token_id_bytes": width,
            "duplicate_documents": dedup.exact_documents + dedup.near_documents - before[2],
            "duplicate_tokens": dedup.exact_tokens + dedup.near_tokens - before[3]}


def token_aggregate(dedup: Dedup, stored_bytes: int, counted: str) -> dict[str, Any]:
    """The corpus figures of a token corpus from its deduplication and its stored bytes."""
    out = dedup.result()
    out["stored_bytes"] = stored_bytes
    out["bytes_per_token"] = stored_bytes / out["tokens"] if out["tokens"] else None
    out["tokens_counted_as"] = counted
    return out


# ---------------------------------------------------------------- the whole command


def read_each(items: list[Any], read_one: Callable[[Any], Any], *, on_skip: Callable[[Path, str], None] | None = None,
              progress: Callable[[Any], None] | None = None) -> tuple[list[Any], list[dict[str, str]]]:
    """The one skip rule of every inspection (docs/measurement.md): each item read by `read_one`; one that
    raises UserError (a bad or cut-short file, shard or member) is skipped, recorded as {"path", "reason"}
    and named by `on_skip(path, reason)`, and the rest are read. The skips before the first readable item
    are named once one is read; when none is, the one refusal (the file's own, or "all N were skipped")."""
    records: list[Any] = []
    skipped: list[dict[str, str]] = []
    for item in items:
        try:
            records.append(read_one(item))
        except UserError as err:  # a bad file is reported and passed over; the rest are still measured
            if err.where.startswith("-"):
                raise  # an option's value, not the file's: refused outright
            skipped.append({"path": err.where, "reason": err.expected})
            if on_skip is not None and records:
                on_skip(Path(err.where), err.expected)
        else:
            if on_skip is not None and len(records) == 1:  # the skips before the first readable file
                for s in skipped:
                    on_skip(Path(s["path"]), s["reason"])
        if progress is not None:
            progress(item)
    if not records:
        if len(skipped) == 1:
            raise UserError(skipped[0]["path"], skipped[0]["reason"])
        raise UserError("PATH", f"expected at least one readable file; all {len(skipped)} were skipped "
                        f"(first: {skipped[0]['path']}: {skipped[0]['reason']})")
    return records, skipped


def skip_report(records: list[Any], skipped: list[dict[str, str]]) -> dict[str, Any]:
    """The report's keys of read_each's skips, the same on every route: the files skipped, how many, and the
    video files measured only as far as they go."""
    return {"skipped": skipped, "files_skipped": len(skipped),
            "truncated": [{"path": r.path, "reason": r.truncated} for r in records if getattr(r, "truncated", None)]}


def inspect_paths(paths: Iterable[str | Path], *, sample_files: int | None = None, seed: int = 0,
                  dtype: str | None = None, eos: int | None = None, tokenizer: str | None = None,
                  near: bool = True, progress: Callable[[int, Path | None], None] | None = None,
                  on_skip: Callable[[Path, str], None] | None = None, cameras: int | None = None) -> dict[str, Any]:
    """Inspect video or token files (not both in one call): per-file records and the aggregate.

    `progress(total, path)` is called once with path None and the number of files, then after each file.
    A video file that cannot be read is skipped (listed in `skipped`, and `on_skip(path, reason)` is called)
    and the others are inspected; `cameras` states the number of streams (default: from the folders)."""
    if cameras is not None and cameras < 1:
        raise UserError("--cameras", f"expected at least 1 camera, got {cameras}")
    suffixes = VIDEO_SUFFIXES | TOKEN_ID_SUFFIXES | TEXT_SUFFIXES | IMAGE_SUFFIXES
    files = collect(paths, suffixes)
    repeated = once([f for raw in paths for f in collect([raw], suffixes)], lambda f: f.resolve())[1]
    where = ", ".join(str(p) for p in paths) or "PATH"  # the locations the person named, not the word PATH
    if not files:
        raise UserError(where, "expected video files (.mp4, .mkv, ...), images (.jpg, .png, .webp) or token files "
                        "(.bin, .npy, .jsonl, .txt)")
    kinds = {"tokens" if kind_of(f) in ("token_ids", "text") else kind_of(f) for f in files}
    if len(kinds) > 1:
        raise UserError(where, f"expected one kind of file in one inspection (video, images or tokens), got "
                        f"{' and '.join(sorted(kinds))}")
    total = len(files)
    chosen = sample(files, sample_files, seed)
    if progress is not None:
        progress(len(chosen), None)
    if kind_of(chosen[0]) in ("video", "image"):
        read_one: Callable[[Path], Any] = inspect_video if kind_of(chosen[0]) == "video" else inspect_image
        records, skipped = read_each(chosen, read_one, on_skip=on_skip,
                                     progress=(lambda f: progress(len(chosen), f)) if progress else None)
        video = read_one is inspect_video
        out: dict[str, Any] = {"kind": "video" if video else "image", "files": [r.to_dict() for r in records],
                               "aggregate": aggregate_video(records) if video else aggregate_images(records),
                               **skip_report(records, skipped)}
        agg = out["aggregate"]
        agg["streams"], agg["streams_basis"] = streams(folder_keys(paths, [Path(r.path) for r in records]), cameras)
    else:
        out = inspect_tokens(chosen, dtype=dtype, eos=eos, tokenizer=tokenizer, near=near, on_skip=on_skip,
                             progress=(lambda f: progress(len(chosen), f)) if progress else None)
    out["files_found"] = total
    out["files_inspected"] = len(chosen)
    out["named_more_than_once"] = repeated
    if len(chosen) < total:  # a drawn file skipped is not replaced: the totals are scaled from the files read
        scale = total / (len(chosen) - out.get("files_skipped", 0))
        agg = out["aggregate"]
        # a uniform sample of files: corpus totals are the sample's times files found / files inspected
        for key in ("hours", "frames", "bytes", "seconds", "tokens", "effective_unique_tokens", "stored_bytes",
                    "images"):
            if agg.get(key) is not None:
                agg[f"{key}_estimated_total"] = agg[key] * scale
    return out


def streams(keys: Iterable[tuple[str, str]], cameras: int | None = None) -> tuple[int, str]:
    """(streams, how they were found) of a video corpus, the one count of every route (a local folder, a
    location, a sample, a draw by shard, the full pass): `cameras` where asked for; else one stream
    (camera) for each distinct key, a key being (the folder holding a file, "") for whole files and
    (the folder of a shard, the sample's video field or column) for shard members (shards.stream_key)."""
    if cameras is not None:  # checked before the work: data inspect's options, inspect_paths
        return cameras, f"asked for (--cameras {cameras})"
    n = max(1, len(set(keys)))
    return n, (f"{n} stream(s): one for each folder holding the files, and in a folder of shards one for each "
               "video field (WebDataset) or column (MDS) of a sample")


def folder_keys(paths: Iterable[str | Path], files: list[Path]) -> list[tuple[str, str]]:
    """The stream keys of local files: the folder under a folder named that holds each (camera_0/,
    camera_1/, ...); files named one by one or lying in the folder named itself are one stream."""
    roots = [Path(p) for p in paths if Path(p).is_dir()]
    keys = []
    for f in files:
        root = next((r for r in roots if f.is_relative_to(r)), None)
        keys.append((str(f.parent.relative_to(root)) if root is not None else ".", ""))
    return keys


def workload_data(report: dict[str, Any]) -> dict[str, Any]:
    """The workload `[data]` keys the inspection measured (SI units, as the schema stores them)."""
    a = report["aggregate"]
    if report["kind"] == "image":
        # an image corpus (data.kind = "images"): the workload plans each image as one intra-coded frame
        image: dict[str, Any] = {"kind": "images", "codec": str(a["codec"]), "width": int(a["width"]),
                                 "height": int(a["height"]),
                                 "images": float(a.get("images_estimated_total", a["images"])),
                                 # with its unit: a plain number of bytes is refused as a likely slip
                                 "image_bytes": f"{float(a['bytes_per_image']):.10g} B"}
        if len(a["groups"]) > 1:
            image["pixels_per_frame"] = float(a["pixels_per_frame"])
        return image
    if report["kind"] == "video":
        data: dict[str, Any] = {"kind": "video", "codec": str(a["codec"]), "width": int(a["width"]),
                                "height": int(a["height"]), "fps": float(a["fps"]), "bitrate": float(a["bitrate"])}
        if a.get("gop_median") is not None:
            data["gop"] = max(1, int(round(a["gop_median"])))
        # as a loader drawing frames uniformly sees the corpus: frames of the mean size, and the random access
        # cost of its GOP distribution (weighted by pixels), not the dominant file's size or the median GOP
        if len(a.get("groups", [])) > 1:
            data["pixels_per_frame"] = float(a["pixels_per_frame"])
        data["random_decodes"] = float(a["random_decodes_pixel_weighted"])
        n = int(a.get("streams", 1))
        data["cameras"] = n
        data["hours"] = float(a.get("hours_estimated_total", a["hours"])) / n  # hours of each stream
        return data
    data = {"kind": "tokens"}
    if a.get("bytes_per_token"):
        data["bytes_per_token"] = float(a["bytes_per_token"])
    return data


def workload_intervals(report: dict[str, Any], data: dict[str, Any]) -> dict[str, list[float]]:
    """The sample's interval of each workload key written (`[measured_interval]`), in the key's units:
    a video's hours per stream, bit rate, mean frame size and keyframe interval (whole frames, widened
    outward); a token corpus's bytes per token and effective unique tokens. None from a full pass."""
    iv = report["aggregate"].get("intervals") or {}
    out: dict[str, list[float]] = {}

    def put(key: str, name: str, scale: float = 1.0) -> None:
        # a bound of 0 (a sample too small to exclude it) is not a value the key takes: no interval
        if name in iv and iv[name]["high"] > iv[name]["low"] > 0:
            out[key] = [float(iv[name]["low"]) * scale, float(iv[name]["high"]) * scale]

    if report["kind"] == "video":
        put("data.hours", "hours", 1.0 / int(report["aggregate"].get("streams", 1)))
        put("data.bitrate", "bitrate")
        if "pixels_per_frame" in data:
            put("data.pixels_per_frame", "pixels_per_frame")
        if "gop" in data and "gop_median" in iv:
            low, high = max(1, math.floor(iv["gop_median"]["low"])), max(1, math.ceil(iv["gop_median"]["high"]))
            if high > low:
                out["data.gop"] = [low, high]
    elif report["kind"] == "tokens":
        if "bytes_per_token" in data:
            put("data.bytes_per_token", "bytes_per_token")
        if "_training.tokens" in data:
            put("training.tokens", "effective_unique_tokens")
    return out


def to_workload(report: dict[str, Any], path: str | Path, source: str) -> Path:
    """Write (or update) a workload TOML: the `[data]` keys measured, and `[measured]` naming their source.

    An existing file keeps its other sections; its `[data]` keys the inspection did not measure stay."""
    import tomllib

    import tomli_w

    p = Path(path)
    doc: dict[str, Any] = {}
    if p.exists():
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise UserError(str(path), f"expected a workload TOML file to update ({err})") from None
    data = workload_data(report)
    if report["kind"] in ("video", "image") and "pixels_per_frame" not in data:
        # a single-size corpus now: a mean size an earlier (mixed) inspection wrote no longer holds
        doc.get("data", {}).pop("pixels_per_frame", None)
        doc.get("measured", {}).pop("data.pixels_per_frame", None)
    if report["kind"] == "image":
        # an image corpus sets its own frame keys (workload/schema.IMAGE_FRAME_KEYS): those an earlier video
        # inspection, or a 1-fps stream of images written before data.kind = "images", left are dropped
        for key in IMAGE_FRAME_KEYS:
            doc.get("data", {}).pop(key, None)
            doc.get("measured", {}).pop(f"data.{key}", None)
            doc.get("measured_interval", {}).pop(f"data.{key}", None)
    doc.setdefault("data", {}).update(data)
    data = dict(data)
    if report["kind"] == "tokens":
        a = report["aggregate"]
        unique = a.get("effective_unique_tokens_estimated_total", a["effective_unique_tokens"])
        if "tokens" not in doc.setdefault("training", {}):
            doc["training"]["tokens"] = float(unique)
            data["_training.tokens"] = unique
    # the sample's intervals of the keys written (issue 26); a key measured again without one (a
    # full pass) loses the interval an earlier sample wrote
    ranges = doc.setdefault("measured_interval", {})
    for key in [k for k in data if k != "kind"]:
        ranges.pop("training.tokens" if key == "_training.tokens" else f"data.{key}", None)
    ranges.update(workload_intervals(report, data))
    if not ranges:
        doc.pop("measured_interval")
    measured = doc.setdefault("measured", {})
    for key in data:
        if key == "_training.tokens":
            measured["training.tokens"] = f"{source}: the effective unique tokens (duplicates removed)"
        elif key != "kind":
            measured[f"data.{key}"] = source
    text = ("# written by `trainplan data inspect`; [measured] names the keys measured on the data\n"
            + tomli_w.dumps(doc))
    from trainplan.outputs import write_output

    # the safe writer (issue 29): regular files only, atomically through a fresh temporary file,
    # mode and links kept, nothing left behind on a full disk
    write_output(text, p, may_replace_input=True)  # a workload it updates on purpose (written by it before)
    return p


def finite(obj: Any) -> Any:
    """JSON-safe: non-finite floats become None."""
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# ---------------------------------------------------------------- token tables (parquet, arrow)


def _open_table(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if path.suffix.lower() == ".parquet":
            pf = pq.ParquetFile(path)
            return pf.schema_arrow, (lambda cols: pf.iter_batches(batch_size=1024, columns=cols))
        try:
            reader = pa.ipc.open_file(path)
            return reader.schema, (lambda cols: (reader.get_batch(i).select(cols) for i in range(reader.num_record_batches)))
        except pa.ArrowInvalid:
            stream = pa.ipc.open_stream(path)
            return stream.schema, (lambda cols: (b.select(cols) for b in stream))
    except (pa.ArrowInvalid, OSError) as err:
        raise UserError(str(path), f"expected a parquet or arrow table ({err})") from None


def table_documents(path: Path, count: Callable[[str], int]) -> Iterator[tuple[Document, int | None]]:
    """A token table's rows as documents, with the token id width in bytes (None for text): the
    first of `ID_COLUMNS` that holds lists of integers, else the first of `TEXT_COLUMNS` holding
    strings; one row is one document."""
    import pyarrow as pa

    schema, batches = _open_table(path)
    fields = {f.name: f.type for f in schema}
    column, width = None, None
    for name in ID_COLUMNS:
        t = fields.get(name)
        if t is not None and (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type):
            column, width = name, t.value_type.bit_width // 8
            break
    if column is None:
        column = next((n for n in TEXT_COLUMNS
                       if n in fields and (pa.types.is_string(fields[n]) or pa.types.is_large_string(fields[n]))), None)
    if column is None:
        raise UserError(str(path), f"expected a token id list column ({', '.join(ID_COLUMNS)}) or a text column "
                                   f"({', '.join(TEXT_COLUMNS)}), got columns {', '.join(fields) or 'none'}")
    for batch in batches([column]):
        values = batch.column(0)
        if width is not None:
            dtype = np.dtype(f"<i{width}") if pa.types.is_signed_integer(values.type.value_type) else np.dtype(f"<u{width}")
            for row in values:
                ids = np.asarray(row.values.to_numpy(zero_copy_only=False), dtype=dtype)
                if ids.size:
                    yield next(token_id_documents(ids, None, chunk=ids.size)), width
        else:
            for text in values.to_pylist():
                if text:
                    yield text_document(text, count), None
