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
        if fs.isfile(path):
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
