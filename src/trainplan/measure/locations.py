"""Where the data lives: any location fsspec reads (issue 26, docs/data-where-it-lives.md).

A location is a URL (`s3://bucket/prefix`, `gs://...`, `az://...`, `https://host/file`,
`file:///path`) or a plain local path. The filesystem behind a scheme comes from fsspec and
its optional packages (the `s3`, `gcs` and `azure` extras: s3fs, gcsfs, adlfs). Credentials
are never taken from the command line: each client reads its own environment variables and
config files (for S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, the
`~/.aws` files, and `AWS_ENDPOINT_URL` for an S3-compatible server). Text a person reads
names a location only through `display()`, which drops any user name or password written
into a URL.

`listing(url, suffixes)` returns the objects under a location with their sizes;
`local_copy(entry)` gives a path on this machine to hand to the per-file inspection in
`inspect.py` (the file itself when it is local, else a temporary copy: the demux pass of a
video and the token count read every byte anyway).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from trainplan.errors import UserError

# The optional package behind each scheme fsspec does not carry itself, and the extra that installs it.
EXTRAS: dict[str, tuple[str, str]] = {
    "s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
    "az": ("adlfs", "azure"), "abfs": ("adlfs", "azure"), "abfss": ("adlfs", "azure"),
    "http": ("aiohttp", "http"), "https": ("aiohttp", "http"),
}
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
# How much of an object a staging copy reads a request (bytes): 8 MiB, s3fs's own default block
# is 50 MiB for random access; sequential copies gain nothing past a few MiB on one connection.
COPY_BLOCK_BYTES = 8 * 2**20


def is_url(text: str | Path) -> bool:
    """True for `scheme://...` other than `file://` (a location that is not a local path)."""
    m = _SCHEME.match(str(text))
    return bool(m) and m.group(1).lower() != "file"


def scheme(text: str | Path) -> str:
    m = _SCHEME.match(str(text))
    return m.group(1).lower() if m else "file"


def display(url: str | Path) -> str:
    """The location as it may be printed: any `user:password@` in a URL removed."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@", r"\1", str(url))


@dataclass(frozen=True)
class Entry:
    """One object at a location: its URL (what a person reads), the filesystem's path, its size."""

    url: str
    path: str
    size: int

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.path).suffix.lower()

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name


def filesystem(url: str | Path) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) for a location; UserError naming the missing extra."""
    text = str(url)
    if not is_url(text):
        p = Path(text[len("file://"):] if text.startswith("file://") else text)
        import fsspec

        return fsspec.filesystem("file"), str(p.resolve())
    import fsspec

    s = scheme(text)
    try:
        fs, path = fsspec.core.url_to_fs(text)
    except ImportError:
        package, extra = EXTRAS.get(s, (s, s))
        raise UserError(display(text), f"reading {s}:// needs the {package} package "
                                       f"(pip install 'trainplan[{extra}]')") from None
    except ValueError as err:
        raise UserError(display(text), f"expected a location fsspec can read ({err})") from None
    except OSError as err:  # a filesystem that connects when made (ftp, sftp, ...)
        raise _client_error(text, err) from None
    return fs, path


def _url_of(fs: Any, path: str, original: str) -> str:
    if not is_url(original):
        return path
    return fs.unstrip_protocol(path)


def _client_error(url: str, err: Exception) -> UserError:
    """A storage client's refusal in one line (no credentials: the client's message names none)."""
    text = str(err).splitlines()[0] if str(err) else err.__class__.__name__
    return UserError(display(url), f"expected a location this machine can read ({err.__class__.__name__}: "
                                   f"{text[:200]})")


def listing(url: str | Path, suffixes: frozenset[str] | None = None) -> list[Entry]:
    """The objects at a location: itself when it is one object, else every object under it whose
    suffix is in `suffixes` (all when None), sorted by path."""
    text = str(url)
    fs, path = filesystem(text)
    try:
        if not fs.exists(path):
            raise UserError(display(text), "expected an existing file, folder or object prefix")
        if not text.endswith("/") and fs.isfile(path):  # a URL ending in / is a folder (a web server's page)
            info = fs.info(path)
            return [Entry(_url_of(fs, path, text), path, int(info.get("size") or 0))]
        found = fs.find(path, detail=True)
    except UserError:
        raise
    except (OSError, PermissionError, ValueError) as err:
        raise _client_error(text, err) from None
    except Exception as err:  # noqa: BLE001 - botocore and friends raise their own error types
        if err.__class__.__module__.split(".")[0] in ("botocore", "aiobotocore", "google", "azure", "aiohttp"):
            raise _client_error(text, err) from None
        raise
    out = []
    for p, info in sorted(found.items()):
        if info.get("type", "file") != "file":
            continue
        e = Entry(_url_of(fs, p, text), p, int(info.get("size") or 0))
        if suffixes is None or e.suffix in suffixes:
            if info.get("size") is None:  # a web server's page of links gives no sizes: ask each object
                e = Entry(e.url, p, int(fs.info(p).get("size") or 0))
            out.append(e)
    return out


def open_entry(entry: Entry, fs: Any | None = None) -> Any:
    """A binary, seekable file object on the entry (range requests on an object store)."""
    fs = fs or filesystem(entry.url)[0]
    return fs.open(entry.path, "rb", block_size=COPY_BLOCK_BYTES)


@contextlib.contextmanager
def local_copy(entry: Entry, fs: Any | None = None) -> Iterator[Path]:
    """A path on this machine holding the entry's bytes: the file itself when local, else a
    temporary copy (same suffix, so the per-file inspection recognises the kind), removed after."""
    if not is_url(entry.url):
        yield Path(entry.path)
        return
    fs = fs or filesystem(entry.url)[0]
    fd, name = tempfile.mkstemp(prefix="trainplan-", suffix=entry.suffix)
    try:
        with os.fdopen(fd, "wb") as out, open_entry(entry, fs) as src:
            while chunk := src.read(COPY_BLOCK_BYTES):
                out.write(chunk)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


@contextlib.contextmanager
def bytes_copy(data: bytes, suffix: str) -> Iterator[Path]:
    """A temporary file holding `data` (a shard member handed to the per-file inspection)."""
    fd, name = tempfile.mkstemp(prefix="trainplan-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


# ---------------------------------------------------------------- the read hop where the data lives

# Request sizes of the range-read scan (bytes): a WebDataset member's or a parquet page's order
# (64 KiB), a clip's (1 MiB), a shard loader's read-ahead (8 MiB).
READ_REQUEST_BYTES = (2**16, 2**20, 8 * 2**20)
# Concurrent requests in flight in the scaling scan (s3fs's pool holds 10 connections by default).
READ_CONNECTIONS = (1, 2, 4, 8)
# The test object `probe read URL` writes under a prefix that holds none (bytes).
READ_TEST_OBJECT_BYTES = 16 * 2**20
# Whole-object reads are capped at this many bytes a request (a larger object is read in ranges of it).
READ_WHOLE_CAP_BYTES = 256 * 2**20


@dataclass(frozen=True)
class LocationRead:
    location: str  # as display() writes it: no credentials
    object: str
    object_bytes: int
    created: bool
    repeats: int
    first_byte_seconds: float  # median time of a 1-byte range request: the request's round trip
    per_connection_bytes_per_second: float  # whole objects, one request at a time
    by_request_size: list[dict[str, float]]  # range reads of each size on one connection
    by_connections: list[dict[str, float]]  # whole objects with N requests in flight: total bytes/s
    best_connections: int
    link_bytes_per_second: float  # the best total over the connection counts: the plan's cluster.link

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _timed(fn: Any) -> float:
    import time

    started = time.perf_counter()
    fn()
    return max(time.perf_counter() - started, 1e-9)


def read_probe(url: str, *, repeats: int = 5, size: int = READ_TEST_OBJECT_BYTES,
               connections: tuple[int, ...] = READ_CONNECTIONS,
               request_sizes: tuple[int, ...] = READ_REQUEST_BYTES) -> LocationRead:
    """Measure reading from a location: the time to first byte, one connection's throughput on whole
    objects, throughput by range-request size, and total throughput with 1..N requests in flight.

    `url` an object: read it. A prefix or folder: read its largest object, or, when it holds none,
    write a `size`-byte test object there first and remove it after."""
    import statistics
    from concurrent.futures import ThreadPoolExecutor

    if repeats < 1:
        raise UserError("--repeats", f"expected at least 1, got {repeats}")
    fs, path = filesystem(url)
    created = False
    try:
        if fs.exists(path) and fs.isfile(path):
            target, nbytes = path, int(fs.info(path).get("size") or 0)
        else:
            objects = listing(url) if fs.exists(path) else []
            if objects:
                biggest = max(objects, key=lambda e: e.size)
                target, nbytes = biggest.path, biggest.size
            else:
                if size < 4096:
                    raise UserError("--size", f"expected a test object of at least 4096 bytes, got {size}")
                import numpy as np

                target = path.rstrip("/") + "/trainplan-read-probe.bin"
                fs.pipe_file(target, np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())
                created, nbytes = True, size
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - each storage client raises its own error types
        raise _client_error(url, err) from None
    if nbytes == 0:
        raise UserError(display(url), "expected a non-empty object to read")
    whole = min(nbytes, READ_WHOLE_CAP_BYTES)

    def read_whole() -> None:
        fs.cat_file(target, start=0, end=whole) if whole < nbytes else fs.cat_file(target)

    try:
        read_whole()  # warm-up: connection set-up, credentials, DNS
        ttfb = statistics.median(_timed(lambda: fs.cat_file(target, start=0, end=1)) for _ in range(repeats))
        one = statistics.median(_timed(read_whole) for _ in range(repeats))
        per_size = []
        for req in request_sizes:
            req = min(req, nbytes)
            t = statistics.median(_timed(lambda: fs.cat_file(target, start=0, end=req)) for _ in range(repeats))
            per_size.append({"request_bytes": req, "bytes_per_second": req / t, "seconds": t})
        per_conn = []
        for n in connections:
            with ThreadPoolExecutor(n) as pool:
                t = _timed(lambda: list(pool.map(lambda _: read_whole(), range(n * repeats))))
            per_conn.append({"connections": n, "bytes_per_second": whole * n * repeats / t})
    finally:
        if created:
            fs.rm_file(target)
    best = max(per_conn, key=lambda r: r["bytes_per_second"])
    return LocationRead(display(url), display(fs.unstrip_protocol(target) if is_url(url) else target), nbytes,
                        created, repeats, ttfb, whole / one, per_size, per_conn, int(best["connections"]),
                        float(best["bytes_per_second"]))
