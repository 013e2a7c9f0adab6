"""The read probe: bytes/s reading a file on a path, cold (its pages dropped from the page cache) and
warm."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.errors import UserError


@dataclass(frozen=True)
class ReadResult:
    path: str
    bytes: int
    block_bytes: int
    created: bool  # True when the probe wrote the file itself (a directory was given)
    cold_bytes_per_second: float
    warm_bytes_per_second: float
    cold_method: str  # how the page cache was emptied for the cold read, or why it could not be

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read(path: str | Path, *, size: int = 64 * 2**20, block: int = 4 * 2**20) -> ReadResult:
    """Bytes/s reading a file from `path`, cold and warm.

    `path` a file: read it (its whole length). `path` a directory: write a `size`-byte
    file of random bytes there, fsync it, read it, and remove it. Cold: the file's pages
    are dropped from the page cache first with posix_fadvise(DONTNEED) (a per-file hint
    that needs no privilege and leaves the rest of the machine's cache alone); a storage
    layer below the kernel (a hypervisor, a network filesystem's client) may still cache
    it, so on such a machine cold is an upper bound. Warm: read again at once.
    """
    p = Path(path)
    if block < 4096:
        raise UserError("block", f"expected a block of at least 4096 bytes, got {block}")
    created = False
    if p.is_dir():
        if size < 4096:
            raise UserError("--size", f"expected a test file of at least 4096 bytes, got {size}")
        block = min(block, size)
        free = shutil.disk_usage(p).free
        if size > free:  # refused before a byte is written (issue 29)
            raise UserError("--size", f"expected at most the {free:,} bytes free in {p}, got {size:,}")
        try:
            fd, name = tempfile.mkstemp(prefix="trainplan-read-probe-", dir=p)
        except OSError as err:
            from trainplan.limits import os_error_text

            raise UserError(str(path), f"cannot write a test file there: {os_error_text(err)}") from None
        target = Path(name)
        created = True
    elif p.is_file():
        target = p
    else:
        raise UserError(str(path), "expected an existing file or directory to read from")
    # the test file goes whatever stops the probe: Ctrl-C, SIGTERM (cli.main raises it as an
    # exception), a full disk while it is written, a failed read (issue 29)
    try:
        if created:
            _write_test_file(fd, size, block, str(path))
        method = _drop_from_cache(target)
        cold, nbytes = _timed_read(target, block)
        warm, _ = _timed_read(target, block)
    finally:
        if created:
            target.unlink(missing_ok=True)
    if nbytes == 0:
        raise UserError(str(path), "expected a non-empty file")
    return ReadResult(str(target), nbytes, block, created, nbytes / cold, nbytes / warm, method)


def _write_test_file(fd: int, size: int, block: int, shown: str) -> None:
    """`size` random bytes into the open file `fd`, fsynced; a full disk is the user's UserError."""
    rng = np.random.default_rng(0)
    chunk = rng.integers(0, 256, size=block, dtype=np.uint8).tobytes()
    try:
        with os.fdopen(fd, "wb") as f:
            written = 0
            while written < size:
                f.write(chunk[: min(block, size - written)])
                written += min(block, size - written)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        from trainplan.limits import os_error_text

        raise UserError(shown, f"cannot write a {size:,}-byte test file there: {os_error_text(err)}") from None


def _drop_from_cache(path: Path) -> str:
    if not hasattr(os, "posix_fadvise"):
        return "none: posix_fadvise is not available on this platform, so cold may be warm"
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd) if os.access(path, os.W_OK) else None
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError as err:
        return f"none: posix_fadvise failed ({err}), so cold may be warm"
    finally:
        os.close(fd)
    return "posix_fadvise(POSIX_FADV_DONTNEED) on the file"


def _timed_read(path: Path, block: int) -> tuple[float, int]:
    buf = bytearray(block)
    view = memoryview(buf)
    total = 0
    with open(path, "rb", buffering=0) as f:
        started = time.perf_counter()
        while True:
            n = f.readinto(view)
            if not n:
                break
            total += n
        elapsed = time.perf_counter() - started
    return max(elapsed, 1e-9), total
