"""Corpora as they are stored: plain files, WebDataset tar shards, parquet / arrow token tables and
MosaicML streaming (MDS) shards, at any location fsspec reads (issue 26, docs/data-where-it-lives.md).

The unit of a corpus is what one inspection reads: a file, or one member of a shard (a clip or an
image in a WebDataset tar; a sample of an MDS shard). `units(locations)` lists them without reading
their bytes: a tar's member headers are read (one small range request each), never its members; an
MDS index names its shards and samples. A member is read in place by a range request for its bytes
and handed to the per-file inspection of `inspect.py` (video: `inspect_video`, tokens:
`inspect_tokens`), so the figures of a clip are the same whether it is a file or a member.

`inspect_units(units, sample=N)` inspects all units or a seeded sample of N, and states every corpus
figure with its interval (`sampling.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import math
import os
import random
import re
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Collection, Iterable, Iterator

import numpy as np

from trainplan.errors import UserError
from trainplan.measure import inspect as insp
from trainplan.measure import locations, sampling

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp"})
SHARD_SUFFIXES = frozenset({".tar"})
MDS_INDEX = "index.json"
# Shards whose member headers are listed at once (concurrent requests; s3fs's pool holds 10 connections
# by default, and a listing's requests are small).
LISTING_CONNECTIONS = 8
# Bytes a tar header read asks for: one 512-byte header block and room for a long-name block.
TAR_HEADER_REQUEST_BYTES = 2**16
LISTED = (insp.VIDEO_SUFFIXES | insp.TOKEN_ID_SUFFIXES | insp.TEXT_SUFFIXES | insp.TABLE_SUFFIXES
          | SHARD_SUFFIXES | IMAGE_SUFFIXES | {".json", ".mds"})


@dataclass(frozen=True)
class Unit:
    """One thing to inspect: a whole object, or `size` bytes at `offset` inside it (a shard member)."""

    url: str  # what a person reads: the object's URL, with "#member" for a member
    entry: locations.Entry
    member: str | None
    offset: int
    size: int
    suffix: str
    column: str | None = None  # an MDS sample's column holding the member
    refused: str | None = None  # why a shard (or its tail) cannot be read: skipped as a bad file is

    @property
    def kind(self) -> str:
        return "refused" if self.refused else suffix_kind(self.suffix)


def check_readable(unit: Unit) -> None:
    """Raise the UserError of a unit listed as unreadable (inspect.read_each skips it, as a bad file)."""
    if unit.refused:
        raise UserError(locations.display(unit.url), unit.refused)


@functools.lru_cache(maxsize=256)
def suffix_kind(suffix: str) -> str:
    """The corpus kind a unit of this suffix belongs to: video, image or tokens (cached: asked for every
    unit of a corpus, twice)."""
    if suffix in IMAGE_SUFFIXES:
        return "image"
    return "tokens" if insp.kind_of(Path("x" + suffix)) != "video" else "video"


def _entry_unit(e: locations.Entry) -> Unit:
    return Unit(e.url, e, None, 0, e.size, e.suffix)


def tar_units(entry: locations.Entry, fs: Any) -> list[Unit]:
    """The video and image members of a WebDataset tar shard, from its headers alone. A shard cut short or
    corrupt keeps the members listed before the break that lie whole inside it, and one unit for the rest,
    refused (skipped and named by inspect.read_each, as a bad file)."""
    out: list[Unit] = []
    try:
        with fs.open(entry.path, "rb", block_size=TAR_HEADER_REQUEST_BYTES) as f, \
                tarfile.open(fileobj=f, mode="r:") as tar:
            for m in tar:
                suffix = PurePosixPath(m.name).suffix.lower()
                if m.isfile() and (suffix in insp.VIDEO_SUFFIXES or suffix in IMAGE_SUFFIXES):
                    out.append(Unit(f"{entry.url}#{m.name}", entry, m.name, m.offset_data, m.size, suffix))
    except tarfile.TarError as err:
        out = [u for u in out if entry.size is None or u.offset + u.size <= entry.size]
        out.append(Unit(entry.url, entry, None, 0, entry.size, entry.suffix,
                        refused=f"expected a tar shard (WebDataset) ({err}); the {len(out)} whole member(s) "
                                "before the break are kept"))
    except ValueError as err:  # fsspec's HTTP file: the server answers no range requests
        raise UserError(locations.display(entry.url), f"expected a server that answers range requests, to read "
                                                      f"a shard's members in place ({str(err)[:120]})") from None
    return out


def units(paths: Iterable[str | Path]) -> list[Unit]:
    """Every unit under the locations named, in order: files, the members of tar shards, the samples of
    MDS shards (a folder or prefix holding an `index.json`)."""
    out: list[Unit] = []
    for raw in paths:
        fs, _ = locations.filesystem(raw)
        entries = locations.listing(raw, LISTED)
        indexes = [e for e in entries if e.name == MDS_INDEX]
        mds_dirs = {str(PurePosixPath(e.path).parent) for e in indexes}
        for e in indexes:
            out.extend(mds_units(e, fs))
        kept = [e for e in entries  # an MDS shard is read through its index; other .json files are not a corpus
                if str(PurePosixPath(e.path).parent) not in mds_dirs and e.suffix not in (".json", ".mds")]
        for e in kept:
            if e.suffix not in LISTED:
                raise UserError(locations.display(e.url), "expected a video, image or token file, a shard (.tar, "
                                                          ".parquet, .arrow) or a folder of them")
        tars = [e for e in kept if e.suffix in SHARD_SUFFIXES]
        with ThreadPoolExecutor(max(1, min(LISTING_CONNECTIONS, len(tars)))) as pool:  # shards' headers at once
            members = dict(zip((e.path for e in tars), pool.map(lambda e: tar_units(e, fs), tars)))
        for e in kept:
            out.extend(members[e.path] if e.suffix in SHARD_SUFFIXES else [_entry_unit(e)])
    return out


@dataclass(frozen=True)
class ShardDraw:
    """Shards drawn at random (`data inspect --sample N --by-shard`): every member of each, or with
    `--shard-fraction F` a seeded random share F of each shard's members (two stages)."""

    units: list[Unit]
    clusters: list[int]  # each unit's shard, by its place among the corpus's shards
    shards: int  # shards in the corpus (M)
    drawn: int  # shards drawn and read (m)
    weights: list[float] | None = None  # each unit's M_i / m_i (members of its shard / drawn there); None: whole


def units_by_shard(paths: Iterable[str | Path], sample: int, seed: int = 0, fraction: float = 1.0) -> ShardDraw:
    """Shards in a seeded random order, each read whole (or, `fraction` < 1, ceil(fraction x its members)
    of its members drawn at random, at least one), until `sample` members are in hand: a uniform sample
    of m of the M shards (the first m of a random permutation). Only the drawn shards' headers (tar) or
    sample offsets (MDS) are read, a batch at a time (the shards the members still wanted need at the
    mean size so far, up to LISTING_CONNECTIONS at once); the listing and an MDS index are read once."""
    if not 0 < fraction <= 1:
        raise UserError("--shard-fraction", f"expected a share of each shard's members above 0 and at most 1, "
                                            f"got {fraction}")
    # (entry or index, filesystem, MDS shard index, the index's shards as read; None for a tar shard)
    shards: list[tuple[Any, Any, int, list[dict[str, Any]] | None]] = []
    for raw in paths:
        fs, _ = locations.filesystem(raw)
        for e in locations.listing(raw, LISTED):
            if e.name == MDS_INDEX:
                listed = mds_shards(e, fs)
                shards += [(e, fs, i, listed) for i in range(len(listed))]
            elif e.suffix in SHARD_SUFFIXES:
                shards.append((e, fs, 0, None))
            elif e.suffix not in (".mds", ".json"):
                raise UserError("--by-shard", f"expected a corpus of shards (.tar or MDS), got "
                                f"{locations.display(e.url)}")
    if not shards:
        raise UserError("--by-shard", "expected a corpus of shards (.tar or MDS), found none")
    units_out: list[Unit] = []
    clusters: list[int] = []
    weights: list[float] = []
    drawn = 0
    order = random.Random(seed).sample(range(len(shards)), len(shards))

    def members_of(place: int) -> list[Unit]:
        entry, fs, i, listed = shards[place]
        return tar_units(entry, fs) if listed is None else mds_units(entry, fs, keep={i}, listed=listed)

    # the shards' headers are read a batch at a time, concurrently (a round trip each on an object store):
    # the next shards of the random order, as many as the members still wanted need at the mean size so far.
    # Every shard read is drawn: a batch is the next shards of the permutation, so the draw stays the first
    # m of a random order (a uniform sample of shards), m at most a batch past the fewest that would do.
    def kept(members: list[Unit]) -> int:  # the members a shard gives the sample (its second stage)
        return len(members) if fraction >= 1 or not members else max(1, math.ceil(fraction * len(members)))

    read: list[tuple[int, list[Unit]]] = []
    in_hand = 0
    with ThreadPoolExecutor(LISTING_CONNECTIONS) as pool:
        while len(read) < len(order) and in_hand < sample:
            mean = in_hand / len(read) if read else 0.0
            batch = 1 if mean <= 0 else max(1, min(LISTING_CONNECTIONS, math.ceil((sample - in_hand) / mean)))
            places = order[len(read): len(read) + batch]
            got = list(zip(places, pool.map(members_of, places)))
            read += got
            in_hand += sum(kept(m) for _, m in got)
    for place, members in read:
        if fraction < 1 and members:
            # the second stage: its own seeded stream for each shard, so a shard's members drawn do not
            # depend on which shards were drawn before it; kept in the shard's order
            take = kept(members)
            keep = sorted(random.Random(f"{seed}:{place}").sample(range(len(members)), take))
            weights += [len(members) / take] * take
            members = [members[k] for k in keep]
        units_out += members
        clusters += [place] * len(members)
        drawn += 1
    return ShardDraw(units_out, clusters, len(shards), drawn, weights if fraction < 1 else None)


def once(found: list[Unit]) -> tuple[list[Unit], list[str]]:
    """Each unit once (inspect.once): a local file by its resolved path, else by its URL, a member by its
    object's and its own name; and the names of those named more than once."""
    folders: dict[str, str] = {}

    def resolved(path: str) -> str:
        # Path.resolve of each file walks every component of its path with lstat (48 us a file here:
        # 0.5 s of a 10,000-clip pass, spent before any worker starts); a folder is resolved once, and a
        # file that is not a link is that folder's real path and its name
        folder, name = os.path.split(path)
        if name in ("", ".", "..") or os.path.islink(path):
            return str(Path(path).resolve())
        if folder not in folders:
            folders[folder] = str(Path(folder or ".").resolve())
        return os.path.join(folders[folder], name)

    def key(u: Unit) -> tuple[str, str | None]:
        return (resolved(u.entry.path) if not locations.is_url(u.entry.url) else u.entry.url), u.member

    return insp.once(found, key, lambda u: locations.display(u.url))


def needs_units(paths: Iterable[str | Path]) -> bool:
    """True when the locations need this module rather than `inspect.inspect_paths` (plain local files
    only): a URL, or a shard, a token table or an MDS index among the files. A local folder of video, images
    or token files goes through inspect.inspect_paths (skipped files named, cameras from the folders)."""
    special = SHARD_SUFFIXES | insp.TABLE_SUFFIXES
    for raw in paths:
        if locations.is_url(raw):
            return True
        p = Path(str(raw)[len("file://"):] if str(raw).startswith("file://") else raw)
        found = p.rglob("*") if p.is_dir() else [p]
        if any(f.suffix.lower() in special or f.name == MDS_INDEX for f in found):
            return True
    return False


# ---------------------------------------------------------------- MDS (MosaicML streaming)


def mds_units(index: locations.Entry, fs: Any, keep: Collection[int] | None = None,
              listed: list[dict[str, Any]] | None = None) -> list[Unit]:
    """The samples of the MDS shards an `index.json` lists, one unit per video (else image, else token)
    column of each sample (read from each shard's sample offsets; nothing else of a shard is read).

    An MDS shard (format `mds`, version 2) is: uint32 n; n + 1 uint32 byte offsets of the samples
    from the shard's start; the samples. A sample is the uint32 sizes of its variable-size columns,
    in column order, then each column's bytes (a fixed-size column has no size entry). `keep`: only
    the shards of these indexes (a draw by shard); `listed`: the index's shards when already read."""
    shards = listed if listed is not None else mds_shards(index, fs)
    base = PurePosixPath(index.path).parent
    out: list[Unit] = []
    for i, shard in enumerate(shards):
        if keep is not None and i not in keep:
            continue
        where = f"{locations.display(index.url)}: shards[{i}]"
        if shard.get("format") != "mds":
            raise UserError(where, f"expected format \"mds\", got {shard.get('format')!r}")
        if shard.get("compression"):
            raise UserError(where, "expected an uncompressed MDS shard (compression is not read in place)")
        names, encodings, sizes = shard["column_names"], shard["column_encodings"], shard["column_sizes"]
        suffixes = [_mds_suffix(name, encodings[j]) for j, name in enumerate(names)]
        pick = [j for j, suffix in enumerate(suffixes) if suffix is not None]
        if not pick:
            raise UserError(where, "expected a column of video, image, token ids or text")
        path = str(base / shard["raw_data"]["basename"])
        entry = locations.Entry(index.url.rsplit("/", 1)[0] + "/" + shard["raw_data"]["basename"], path,
                                int(shard["raw_data"]["bytes"]))
        n = int(shard["samples"])
        head = fs.cat_file(path, start=0, end=4 * (n + 2))
        count = int(np.frombuffer(head[:4], "<u4")[0])
        if count != n:
            raise UserError(where, f"expected {n} samples in {entry.url}, its header says {count}")
        offsets = np.frombuffer(head[4: 4 * (n + 2)], "<u4").astype(np.int64)
        variable = [j for j, s in enumerate(sizes) if s is None]
        # the sample's columns of one kind, a unit each: video before images before token ids before text (a
        # sample of two cameras' clips is two video units, two streams)
        first = min(pick, key=lambda j: (suffixes[j] not in insp.VIDEO_SUFFIXES, suffixes[j] not in IMAGE_SUFFIXES,
                                         suffixes[j] != ".npy", j))
        kind = suffix_kind(suffixes[first] or "")
        # token ids and text of one sample are one document: its first column of them only
        chosen = {first} if kind == "tokens" else {j for j in pick if suffix_kind(suffixes[j] or "") == kind}
        for k in range(n):
            start, end = int(offsets[k]), int(offsets[k + 1])
            # the sample's size header only (its variable-size columns' byte counts), not its bytes
            sizes_head = fs.cat_file(path, start=start, end=min(end, start + 4 * len(variable))) if variable else b""
            if len(sizes_head) < 4 * len(variable):
                raise UserError(where, f"expected sample {k} of {entry.url} to hold its {len(variable)} column "
                                       "sizes; the shard is cut short")
            lens = np.frombuffer(sizes_head, "<u4") if variable else []
            pos = start + 4 * len(variable)
            for j in range(len(names)):
                length = int(sizes[j]) if sizes[j] is not None else int(lens[variable.index(j)])
                if j in chosen:
                    out.append(Unit(f"{entry.url}#{k}.{names[j]}", entry, f"{k}.{names[j]}", pos, length,
                                    suffixes[j] or "", column=encodings[j]))
                pos += length
    return out


def mds_shards(index: locations.Entry, fs: Any) -> list[dict[str, Any]]:
    """The shards an MDS `index.json` lists (each with its `samples` count)."""
    try:
        shards = json.loads(fs.cat_file(index.path))["shards"]
        _ = [int(sh["samples"]) for sh in shards]
    except (ValueError, KeyError, TypeError) as err:
        raise UserError(locations.display(index.url), f"expected an MDS index.json with a shards list ({err})") from None
    return shards


#: An MDS bytes column holds video when its whole name is one of these, or its last word is one of the
#: first two (`video`, `front_video`, `cam_0_videos`), or a container (`mp4`, `rear.mp4`); not
#: `clip_embedding` (CLIP's) nor `video_meta`.
MDS_VIDEO_WORDS = ("video", "videos", "clip", "clips")


def _mds_suffix(name: str, encoding: str) -> str | None:
    """The suffix a member of an MDS column is inspected as: video bytes by the column's name (a word of it),
    images
    by their encoding, token ids (an ndarray column named as in insp.ID_COLUMNS) as .npy, text (a str
    column named as in insp.TEXT_COLUMNS) as .txt."""
    low = name.lower()
    if (encoding == "ndarray" or encoding.startswith("ndarray:")) and low in insp.ID_COLUMNS:
        return ".npy"
    if encoding in ("jpeg", "png", "pil"):
        return ".jpg" if encoding == "jpeg" else ".png"
    if encoding == "bytes":  # video bytes: a column named video or clip, or by a container, or with such a part
        parts = [p for p in re.split(r"[._\-\s]+", low) if p]  # front_video, video_rear, cam0.mp4, left.mkv
        if parts and f".{parts[-1]}" in insp.VIDEO_SUFFIXES:  # named by its container: mp4, rear.mp4
            return f".{parts[-1]}"
        if low in MDS_VIDEO_WORDS or (parts and parts[-1] in MDS_VIDEO_WORDS[:2]):
            return ".mp4"
    if encoding == "str" and low in insp.TEXT_COLUMNS:
        return ".txt"
    return None


# ---------------------------------------------------------------- reading a unit


@contextlib.contextmanager
def staged(unit: Unit, fs: Any | None = None) -> Iterator[Path]:
    """A local path holding the unit's bytes for the per-file inspection: the file itself when it is a
    local file, else its bytes (a member's by one range request) in a temporary file."""
    if unit.member is None:
        with locations.local_copy(unit.entry, fs) as p:
            yield p
        return
    fs = fs or locations.filesystem(unit.entry.url)[0]
    data = fs.cat_file(unit.entry.path, start=unit.offset, end=unit.offset + unit.size)
    if unit.column is not None and unit.column.split(":")[0] == "ndarray":
        buf = io.BytesIO()
        np.save(buf, mds_ndarray(data, unit.column, unit.url), allow_pickle=False)
        data = buf.getvalue()  # the token ids as a .npy file, as a token-id file is inspected
    with locations.bytes_copy(data, unit.suffix) as p:
        yield p


#: MDS's ndarray encoding (mosaicml-streaming's format): a value dtype code where the column does not
#: fix the dtype, then where it does not fix the shape a byte (ndim << 2 | shape dtype code) and the
#: shape, then the values, little-endian.
MDS_VALUE_DTYPES = {8: "u1", 9: "i1", 16: "<u2", 17: "<i2", 18: "<f2", 32: "<u4", 33: "<i4", 34: "<f4",
                    64: "<u8", 65: "<i8", 66: "<f8"}
MDS_SHAPE_DTYPES = ("u1", "<u2", "<u4", "<u8")


def mds_ndarray(data: bytes, encoding: str, where: str) -> np.ndarray:
    """The array of one MDS `ndarray`, `ndarray:DTYPE` or `ndarray:DTYPE:SHAPE` member, checked to be
    integer token ids whose byte count matches their shape."""
    args = encoding.split(":")[1:]
    try:
        pos = 0
        if args:
            dtype = np.dtype(args[0]).newbyteorder("<")
        else:
            dtype, pos = np.dtype(MDS_VALUE_DTYPES[data[0]]), 1
        if len(args) > 1:
            shape = tuple(int(x) for x in args[1].split(","))
        else:
            ndim, code = data[pos] >> 2, data[pos] & 3
            width = ndim * np.dtype(MDS_SHAPE_DTYPES[code]).itemsize
            shape = tuple(int(x) for x in np.frombuffer(data[pos + 1: pos + 1 + width], MDS_SHAPE_DTYPES[code]))
            pos += 1 + width
        values = np.frombuffer(data[pos:], dtype)
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise UserError(where, f"expected an MDS ndarray member ({encoding}) ({err})") from None
    if dtype.kind not in "iu":
        raise UserError(where, f"expected integer token ids in the MDS column, got dtype {dtype.name}")
    if values.size != int(np.prod(shape, dtype=np.float64)):
        raise UserError(where, f"expected {int(np.prod(shape, dtype=np.float64))} token ids (shape {shape}), "
                        f"got {values.size}")
    return values.reshape(-1)


def inspect_video_unit(unit: Unit, fs: Any | None = None) -> insp.VideoFile:
    """`inspect.inspect_video` on the unit, its path and size the unit's."""
    check_readable(unit)
    with staged(unit, fs) as p:
        try:
            record = insp.inspect_video(p)
        except UserError as err:
            raise UserError(locations.display(unit.url), err.expected) from None
    return dataclasses.replace(record, path=locations.display(unit.url), bytes=unit.size)


def inspect_image_unit(unit: Unit, fs: Any | None = None) -> dict[str, Any]:
    """An image member: inspect.py's one image inspection (its header: format, size, mode), as a dict."""
    check_readable(unit)
    with staged(unit, fs) as p:
        try:
            record = insp.inspect_image(p)
        except UserError as err:
            raise UserError(locations.display(unit.url), err.expected) from None
    size = int(unit.size if unit.size is not None else record.bytes)
    return dataclasses.replace(record, path=locations.display(unit.url), bytes=size,
                               bits_per_pixel=size * insp.BITS_PER_BYTE / (record.width * record.height)).to_dict()


def aggregate_images(records: list[dict[str, Any]]) -> dict[str, Any]:
    """inspect.py's image aggregate over the records' dicts."""
    return insp.aggregate_images([insp.ImageFile(**r) for r in records])


def image_intervals(records: list[dict[str, Any]], population: int, clusters: list[int] | None = None,
                    weights: list[float] | None = None) -> dict[str, dict[str, Any]]:
    c, w = clusters, weights
    out = {"bytes": sampling.total([r["bytes"] for r in records], population, clusters=c, weights=w),
           "pixels_per_image": sampling.ratio([r["width"] * r["height"] for r in records], [1.0] * len(records),
                                              population, clusters=c, weights=w),
           "bits_per_pixel": sampling.ratio([r["bytes"] * insp.BITS_PER_BYTE for r in records],
                                            [r["width"] * r["height"] for r in records], population, clusters=c,
                                            weights=w)}
    return {k: v.to_dict() for k, v in out.items() if v is not None}


# ---------------------------------------------------------------- the corpus


def corpus_kind(found: list[Unit], where: str) -> str:
    """The corpus's kind, its unreadable units aside (those are skipped); refused when all are unreadable."""
    if found and all(u.refused for u in found):
        check_readable(found[0])
    found = [u for u in found if not u.refused]
    kinds = {u.kind for u in found}
    if not found:
        raise UserError(where, "expected video, image or token files, shards (.tar, .parquet, .arrow) or an "
                               "MDS index.json")
    if "tokens" in kinds and ("video" in kinds or "image" in kinds):
        raise UserError(where, "expected either video/images or token files, not both in one inspection")
    return "video" if "video" in kinds else ("image" if "image" in kinds else "tokens")


def stream_key(u: Unit) -> tuple[str, str]:
    """A unit's stream key for inspect.streams: (its object's folder, "") for a whole file; (its shard's
    folder, the sample's video field) for a WebDataset member (KEY.front.mp4: front.mp4; KEY.mp4: mp4),
    (its shard's folder, the column) for an MDS member (SAMPLE.COLUMN)."""
    folder = str(PurePosixPath(u.entry.path).parent)
    if u.member is None:
        return folder, ""
    if u.column is not None:
        return folder, u.member.split(".", 1)[1]
    return folder, PurePosixPath(u.member).name.partition(".")[2]


def unit_streams(pool: list[Unit], cameras: int | None = None) -> tuple[int, str]:
    """(streams, how they were found) of a video corpus of units (inspect.streams of their keys)."""
    return insp.streams((stream_key(u) for u in pool), cameras)


def inspect_units(found: list[Unit] | ShardDraw, *, where: str, sample: int | None = None, seed: int = 0,
                  dtype: str | None = None, eos: int | None = None, tokenizer: str | None = None,
                  near: bool = True, progress: Callable[[int, Any], None] | None = None,
                  cameras: int | None = None, on_skip: Callable[[Path, str], None] | None = None) -> dict[str, Any]:
    """All units, or a seeded sample of `sample` of them, inspected; the report of `inspect.inspect_paths`
    (kind, files, aggregate, files_found, files_inspected) with `intervals` on the aggregate. Given a
    ShardDraw, every member of the drawn shards, the figures estimated over shards. A video corpus's
    streams: `cameras`, else `unit_streams` of the units found."""
    draw = found if isinstance(found, ShardDraw) else None
    found, repeated = (draw.units, []) if draw is not None else once(found)
    kind = corpus_kind(found, where)
    skipped = [u for u in found if u.kind not in (kind, "refused")]
    pool = [u for u in found if u.kind in (kind, "refused")]
    if sample is not None and sample < 1:
        raise UserError("--sample", f"expected at least 1 file, got {sample}")
    chosen = pool if draw is not None else sampling.draw(pool, sample, seed)
    # the estimators' units: the shards of a draw by shard (each member's), else the members themselves
    clusters = [c for u, c in zip(found, draw.clusters) if u.kind in (kind, "refused")] if draw is not None else None
    weights = [w for u, w in zip(found, draw.weights) if u.kind in (kind, "refused")] \
        if draw is not None and draw.weights is not None else None
    population = draw.shards if draw is not None else len(pool)
    if progress is not None:
        progress(len(chosen), None)
    fs_cache: dict[str, Any] = {}

    def fs_of(u: Unit) -> Any:
        key = locations.scheme(u.entry.url)
        if key not in fs_cache:
            fs_cache[key] = locations.filesystem(u.entry.url)[0]
        return fs_cache[key]

    def step(u: Unit) -> None:
        if progress is not None:
            progress(len(chosen), PurePosixPath(u.url.split("#")[-1]))

    out, kept, records = _inspect_chosen(kind, chosen, fs_of, step, on_skip, dtype=dtype, eos=eos, tokenizer=tokenizer,
                                near=near, progress=progress)
    if clusters is not None:  # the estimators' units of the members read (a member skipped is not replaced)
        clusters = [clusters[i] for i in kept]
        weights = [weights[i] for i in kept] if weights is not None else None
    if kind == "video":
        intervals = sampling.video_intervals(records, population, seed, clusters=clusters, weights=weights)
        out["aggregate"]["streams"], out["aggregate"]["streams_basis"] = unit_streams(pool, cameras)
    elif kind == "image":
        intervals = image_intervals(out["files"], population, clusters, weights)
    else:
        intervals = sampling.token_intervals(out["files"], population, clusters=clusters, weights=weights)
    out["location"] = where
    out["units"] = "shard members" if any(u.member is not None for u in pool) else "files"
    out["files_found"] = len(pool)
    out["files_inspected"] = len(chosen)
    out["named_more_than_once"] = repeated
    if skipped:
        out["units_skipped"] = {"count": len(skipped), "why": f"{skipped[0].kind} units beside a {kind} corpus"}
    # a complete pass is not scaled up for the units skipped (as the plain pass); a sample is, from those read
    _scale_up(out, draw, len(chosen) if len(chosen) == population else len(kept), clusters, weights, population,
              intervals, seed)
    return out


def _inspect_chosen(kind: str, chosen: list[Unit], fs_of: Callable[[Unit], Any], step: Callable[[Unit], None],
                    on_skip: Callable[[Path, str], None] | None, *, progress: Callable[[int, Any], None] | None,
                    **options: Any) -> tuple[dict[str, Any], list[int], list[Any]]:
    """The chosen units inspected through inspect.read_each (a unit that cannot be read is skipped and named):
    the report's kind, files, aggregate and skips, the places in `chosen` of the units read, and their video
    records (the estimators read their groups of pictures)."""
    if kind in ("video", "image"):
        inspect_one = inspect_video_unit if kind == "video" else inspect_image_unit

        def read(iu: tuple[int, Unit]) -> tuple[int, Any]:
            try:
                return iu[0], inspect_one(iu[1], fs_of(iu[1]))
            finally:
                step(iu[1])

        pairs, skipped = insp.read_each(list(enumerate(chosen)), read, on_skip=on_skip)
        records = [r for _, r in pairs]
        files = [r.to_dict() for r in records] if kind == "video" else records
        agg = insp.aggregate_video(records) if kind == "video" else aggregate_images(records)
        return ({"kind": kind, "files": files, "aggregate": agg,
                 **insp.skip_report(records if kind == "video" else [], skipped)}, [i for i, _ in pairs], records)
    with contextlib.ExitStack() as stack:
        paths = [stack.enter_context(staged(u, fs_of(u))) for u in chosen]
        out = insp.inspect_tokens(paths, **options, on_skip=on_skip, names=[locations.display(u.url) for u in chosen],
                                  progress=(lambda f: progress(len(chosen), f)) if progress else None)
    kept = [i for i, u in enumerate(chosen) if locations.display(u.url) in {f["path"] for f in out["files"]}]
    for rec, i in zip(out["files"], kept):
        rec["bytes"] = chosen[i].size
    agg = out["aggregate"]
    agg["stored_bytes"] = sum(chosen[i].size for i in kept)
    agg["bytes_per_token"] = agg["stored_bytes"] / agg["tokens"] if agg["tokens"] else None
    return out, kept, []


def _scale_up(out: dict[str, Any], draw: ShardDraw | None, inspected: int, clusters: list[int] | None,
              weights: list[float] | None, population: int, intervals: dict[str, Any], seed: int) -> None:
    """A sample's report completed: the shards drawn, and every corpus total scaled up from the sample."""
    agg = out["aggregate"]
    drawn = len(set(clusters)) if clusters is not None else inspected
    # a member's weight in the shard drawn (M_i / m_i of a two-stage draw; 1 where every member is inspected)
    weight = weights if weights is not None else [1.0] * inspected
    if draw is not None:
        out["units"] = "shard members, whole shards drawn" if weights is None else \
            "shard members, a share of each drawn shard's members drawn (two stages)"
        out["shards_found"], out["shards_inspected"] = draw.shards, drawn
        out["files_found"] = round(sum(weight) * draw.shards / drawn)  # the members of all shards, estimated
        if weights is not None:
            out["shard_members_drawn"] = inspected
    if drawn < population:
        scale = population / drawn
        # a uniform sample of units: corpus totals are the sample's times units found / units inspected; in
        # two stages each member counts M_i / m_i times, the interval's estimate (a single shard drawn: one
        # weight, and no interval)
        for key in ("hours", "frames", "bytes", "seconds", "tokens", "effective_unique_tokens", "stored_bytes"):
            if agg.get(key) is not None:
                agg[f"{key}_estimated_total"] = intervals[key]["estimate"] if weights is not None and key in \
                    intervals else agg[key] * scale * (weight[0] if weights is not None else 1.0)
        agg["intervals"] = intervals
        agg["sample_seed"] = seed
