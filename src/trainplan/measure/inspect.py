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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from trainplan.errors import UserError

VIDEO_SUFFIXES = frozenset({".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v", ".ts", ".h264", ".hevc", ".mjpeg"})
TOKEN_ID_SUFFIXES = frozenset({".bin", ".npy"})
TEXT_SUFFIXES = frozenset({".jsonl", ".txt"})
SECONDS_PER_HOUR = 3600.0
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


def collect(paths: Iterable[str | Path], suffixes: frozenset[str] | None = None) -> list[Path]:
    """The files named, and the files under the folders named (sorted, recursive)."""
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
    return out


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
    return "video"


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("gop_intervals")
        return d


def inspect_video(path: str | Path) -> VideoFile:
    """Demux one file's video stream (no decoding): format, keyframe intervals, bit rate."""
    import av

    p = Path(path)
    try:
        container = av.open(str(p), "r")
    except (av.error.FFmpegError, OSError) as err:  # type: ignore[attr-defined]
        raise UserError(str(path), f"expected a video file PyAV can open ({err.__class__.__name__}: {err})") from None
    with container:
        if not container.streams.video:
            raise UserError(str(path), "expected a file with a video stream")
        stream = container.streams.video[0]
        ctx = stream.codec_context
        width, height = int(ctx.width), int(ctx.height)
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 0.0
        keyframe_at: list[int] = []
        sizes = 0
        packets = 0
        pts: list[int] = []
        for packet in container.demux(stream):
            if packet.size == 0 and packet.pts is None:
                continue  # the demuxer's flush packet
            if packet.is_keyframe:
                keyframe_at.append(packets)
            sizes += packet.size
            packets += 1
            if packet.pts is not None:
                pts.append(int(packet.pts))
        tb = float(stream.time_base) if stream.time_base else 0.0
        container_name = container.format.name
        codec = ctx.name
    if packets == 0:
        raise UserError(str(path), "expected a video stream with at least one packet")
    if fps <= 0:
        raise UserError(str(path), "the stream states no frame rate")
    seconds = packets / fps
    if len(pts) >= 2 and tb > 0:  # the timestamps' span when they cover every frame (one frame more)
        seconds = max(seconds, (max(pts) - min(pts)) * tb + 1 / fps)
    bitrate = sizes * BITS_PER_BYTE / seconds
    intervals = [b - a for a, b in zip(keyframe_at, keyframe_at[1:])]
    if intervals:
        q = np.percentile(intervals, [25, 75])
        gop = (float(statistics.median(intervals)), int(min(intervals)), int(max(intervals)),
               float(q[1] - q[0]), float(statistics.pstdev(intervals)))
    else:
        gop = (None, None, None, None, None)
    return VideoFile(
        path=str(p), container=container_name, codec=codec, width=width, height=height, fps=fps,
        frames=packets, seconds=seconds, hours=seconds / SECONDS_PER_HOUR, bytes=p.stat().st_size,
        bitrate=bitrate, bits_per_pixel=bitrate / (width * height * fps), keyframes=len(keyframe_at),
        gop_median=gop[0], gop_min=gop[1], gop_max=gop[2], gop_iqr=gop[3], gop_stdev=gop[4],
        gop_intervals=intervals)


def _mode(values: list[Any], weights: list[float]) -> Any:
    acc: dict[Any, float] = {}
    for v, w in zip(values, weights):
        acc[v] = acc.get(v, 0.0) + w
    return max(acc.items(), key=lambda kv: kv[1])[0]


def aggregate_video(files: list[VideoFile]) -> dict[str, Any]:
    """The corpus in one record: totals, the dominant format (by duration), and bit rate and bits per
    pixel as totals over the corpus (stored bits / seconds), the keyframe interval over all intervals."""
    if not files:
        raise UserError("PATH", "expected at least one video file")
    secs = [f.seconds for f in files]
    total_s = sum(secs)
    bits = sum(f.bitrate * f.seconds for f in files)
    pixel_rate = sum(f.width * f.height * f.fps * f.seconds for f in files) / total_s
    intervals = [i for f in files for i in f.gop_intervals]
    formats = sorted({(f.codec, f.width, f.height, round(f.fps, 3)) for f in files})
    agg: dict[str, Any] = {
        "files": len(files),
        "containers": sorted({f.container for f in files}),
        "codec": _mode([f.codec for f in files], secs),
        "width": _mode([f.width for f in files], secs),
        "height": _mode([f.height for f in files], secs),
        "fps": _mode([round(f.fps, 6) for f in files], secs),
        "formats": [{"codec": c, "width": w, "height": h, "fps": r} for c, w, h, r in formats],
        "frames": sum(f.frames for f in files),
        "seconds": total_s,
        "hours": total_s / SECONDS_PER_HOUR,
        "bytes": sum(f.bytes for f in files),
        "bitrate": bits / total_s,
        "bits_per_pixel": bits / total_s / pixel_rate,
        "keyframes": sum(f.keyframes for f in files),
    }
    if intervals:
        q = np.percentile(intervals, [25, 75])
        agg.update(gop_median=float(statistics.median(intervals)), gop_min=int(min(intervals)),
                   gop_max=int(max(intervals)), gop_iqr=float(q[1] - q[0]), gop_stdev=float(statistics.pstdev(intervals)))
    else:
        agg.update(gop_median=None, gop_min=None, gop_max=None, gop_iqr=None, gop_stdev=None)
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
    dt = np.dtype(dtype or "uint16").newbyteorder("<")
    if dt.kind not in "iu":
        raise UserError("--dtype", f"expected an integer dtype such as uint16 or uint32, got {dtype!r}")
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
        from trainplan.workload import limits  # a regular file of bounded size: never a FIFO (issue 29)

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

    def add(self, doc: Document) -> None:
        self.documents += 1
        self.tokens += doc.tokens
        self.bytes += doc.bytes
        digest = hashlib.blake2b(doc.key, digest_size=16).digest()
        if digest in self._seen:
            self.exact_documents += 1
            self.exact_tokens += doc.tokens
            return
        self._seen.add(digest)
        if not self.near or not doc.shingles:
            return
        from datasketch import MinHash

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
                   progress: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """Tokens, bytes per token and duplicate shares of a token corpus (ids or text), per file and in total."""
    dedup = Dedup(near=near)
    per_file = []
    counter: tuple[Callable[[str], int], str] | None = None
    counted = "token ids"
    stored_bytes = 0
    for f in files:
        before = (dedup.documents, dedup.tokens)
        size = f.stat().st_size
        stored_bytes += size
        if kind_of(f) == "token_ids":
            ids = read_token_ids(f, dtype)
            for doc in token_id_documents(ids, eos):
                dedup.add(doc)
            width = ids.dtype.itemsize
        else:
            counter = counter or make_counter(tokenizer)
            counted = counter[1]
            for text in text_documents(f):
                dedup.add(text_document(text, counter[0]))
            width = None
        tokens = dedup.tokens - before[1]
        per_file.append({"path": str(f), "kind": kind_of(f), "bytes": size, "documents": dedup.documents - before[0],
                         "tokens": tokens, "bytes_per_token": size / tokens if tokens else None,
                         "token_id_bytes": width})
        if progress is not None:
            progress(f)
    out = dedup.result()
    out["stored_bytes"] = stored_bytes
    out["bytes_per_token"] = stored_bytes / out["tokens"] if out["tokens"] else None
    out["tokens_counted_as"] = counted
    return {"kind": "tokens", "files": per_file, "aggregate": out}


# ---------------------------------------------------------------- the whole command


def inspect_paths(paths: Iterable[str | Path], *, sample_files: int | None = None, seed: int = 0,
                  dtype: str | None = None, eos: int | None = None, tokenizer: str | None = None,
                  near: bool = True, progress: Callable[[int, Path | None], None] | None = None) -> dict[str, Any]:
    """Inspect video or token files (not both in one call): per-file records and the aggregate.

    `progress(total, path)` is called once with path None and the number of files, then after each file."""
    files = collect(paths, VIDEO_SUFFIXES | TOKEN_ID_SUFFIXES | TEXT_SUFFIXES)
    if not files:
        raise UserError("PATH", "expected video files (.mp4, .mkv, ...) or token files (.bin, .npy, .jsonl, .txt)")
    kinds = {kind_of(f) != "video" for f in files}
    if len(kinds) > 1:
        raise UserError("PATH", "expected either video files or token files, not both in one inspection")
    total = len(files)
    chosen = sample(files, sample_files, seed)
    if progress is not None:
        progress(len(chosen), None)
    if kind_of(chosen[0]) == "video":
        records = []
        for f in chosen:
            records.append(inspect_video(f))
            if progress is not None:
                progress(len(chosen), f)
        out: dict[str, Any] = {"kind": "video", "files": [r.to_dict() for r in records],
                               "aggregate": aggregate_video(records)}
    else:
        out = inspect_tokens(chosen, dtype=dtype, eos=eos, tokenizer=tokenizer, near=near,
                             progress=(lambda f: progress(len(chosen), f)) if progress else None)
    out["files_found"] = total
    out["files_inspected"] = len(chosen)
    if len(chosen) < total:
        scale = total / len(chosen)
        agg = out["aggregate"]
        # a uniform sample of files: corpus totals are the sample's times files found / files inspected
        for key in ("hours", "frames", "bytes", "seconds", "tokens", "effective_unique_tokens", "stored_bytes"):
            if agg.get(key) is not None:
                agg[f"{key}_estimated_total"] = agg[key] * scale
    return out


def workload_data(report: dict[str, Any]) -> dict[str, Any]:
    """The workload `[data]` keys the inspection measured (SI units, as the schema stores them)."""
    a = report["aggregate"]
    if report["kind"] == "video":
        data: dict[str, Any] = {"kind": "video", "width": int(a["width"]), "height": int(a["height"]),
                                "fps": float(a["fps"]), "bitrate": float(a["bitrate"])}
        if a.get("gop_median") is not None:
            data["gop"] = max(1, int(round(a["gop_median"])))
        data["hours"] = float(a.get("hours_estimated_total", a["hours"]))
        return data
    data = {"kind": "tokens"}
    if a.get("bytes_per_token"):
        data["bytes_per_token"] = float(a["bytes_per_token"])
    return data


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
    doc.setdefault("data", {}).update(data)
    data = dict(data)
    if report["kind"] == "tokens":
        a = report["aggregate"]
        unique = a.get("effective_unique_tokens_estimated_total", a["effective_unique_tokens"])
        if "tokens" not in doc.setdefault("training", {}):
            doc["training"]["tokens"] = float(unique)
            data["_training.tokens"] = unique
    measured = doc.setdefault("measured", {})
    for key in data:
        if key == "_training.tokens":
            measured["training.tokens"] = f"{source}: the effective unique tokens (duplicates removed)"
        elif key != "kind":
            measured[f"data.{key}"] = source
    text = ("# written by `trainplan data inspect`; [measured] names the keys measured on the data\n"
            + tomli_w.dumps(doc))
    from trainplan.present.outputs import write_output

    # the safe writer (issue 29): regular files only, atomically through a fresh temporary file,
    # mode and links kept, nothing left behind on a full disk
    write_output(text, p)
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
