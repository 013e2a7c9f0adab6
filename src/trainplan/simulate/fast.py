"""The queue engine compiled (numba, the `fast` extra): the same recurrence, statistics in the same pass.

`trainplan.simulate.queue._recurrence` is the reference: plain Python, always there.
This module runs the very same max-plus recurrence (same float operations in the same
order, no fast-math, so no reassociation or fused multiply-add) over numpy arrays, with
a binary heap of (finish time, frame) pairs compared as Python compares tuples. Each
frame's times are therefore bit-identical to the reference's (tests/test_queue.py checks
every array on several workloads and variabilities).

Statistics are fused into the same loop: a frame's read, read-blocked, queue, decode,
decode-blocked and buffer intervals are all known the moment it leaves the decoder heap
(rank k), and they all end by its step start A_k. Steps are in rank order, so frames of
rank < k0 end before the window opens (t0 = A_k0) and contribute nothing; frames of rank
in [k0, k1) end before it closes (t1 = A_k1); frames of rank >= k1 are clipped to t1,
which is known by then. Each overlap is `min(max(end, t0), t1) - min(max(start, t0), t1)`
as in the reference, summed in rank order (the reference sums with numpy's pairwise
sum, so sums agree to rounding, not to the bit).

Streaming (issue 29): the kernel advances over one chunk of frames per call, its state
carried between calls (the heap, each decoder's frame, rings of the last B step starts and
the last Q decode starts, a few scalars), so a run holds no array over its frames: the
chunk's service times, O(decoders + B + Q) state and the frames recorded for a timeline
(docs/simulation.md says which frames and why they suffice). `run` records every frame
(rank 0 on) to return the per-frame trace; `simulate` records only those a timeline needs.

Ahead of time (issue 29): the first run that needs the kernel compiles it once with numba's
ahead-of-time compiler (numba.pycc, about 4 s) into an extension module cached next to this file
(else under ~/.cache/trainplan), keyed by the kernel's source and the numba, numpy and Python
versions. Later runs load that module in a few milliseconds without importing numba at all: numba's
own cache still costs 0.3 s to import numba and 0.2-0.45 s to initialise its CPU target, and 100 MB
of memory, on every start. Where the module cannot be built (no C compiler, a numba without pycc,
a cache nobody may write) or TRAINPLAN_AOT=0 is set, the same kernel runs through numba's JIT. The
two compile the same function with the same signature (C-contiguous arrays), and tests/test_queue.py
holds their results bit-identical.

Only importable where numba is: `available()` says whether it is, without importing it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import platform
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

INSTALL_HINT = "pip install 'trainplan[fast]' (numba) for the compiled queue engine"

# Indexes into the `sums` array the kernel fills (time in seconds, summed over frames).
READ_BUSY, READ_BLOCKED, READ_QUEUE, BUFFER, READ_QUEUE_WAIT, DECODER_BLOCKED_WAIT, BUFFER_WAIT, \
    READ_SECONDS, WORK, T0, T1 = range(11)
N_SUMS = 11
# Columns of a recorded frame's times (trainplan.simulate._kernel RS .. ST).
REC_READ_START, REC_READ_DONE, REC_QUEUED, REC_DECODE_START, REC_DECODE_DONE, REC_ENTER, REC_STEP = range(7)

# Below this many frames in one call, the pure-Python engine finishes before numba would be
# imported and its cached machine code loaded (~0.4 s here: 0.22 s to import numba, 0.18 s to load
# the cached code with the BLAS probe skipped, 0.38 s with it; against 0.7-1.5 µs a frame in Python):
# measured by benchmarks/bench_queue.py, which prints both.
WORTH_FRAMES = 500_000
# With the ahead-of-time module built, loading the kernel is one extension import (~5 ms here), so
# the compiled engine is worth it from this many frames (the pure engine: 0.7-1.5 µs a frame).
AOT_WORTH_FRAMES = 20_000

# queue_chunk's signature, for the ahead-of-time module: every array C-contiguous (as run_stream
# passes them; numba's JIT specialises on that layout too, and the generic 'A' layout ran 2x slower)
AOT_SIGNATURE = ("void(f8[::1], f8[::1], i8, i8, f8[::1], i8[::1], f8, i8, i8, b1, i8, i8, i8, f8[::1], i8[::1], "
                 "f8[::1], i8[::1], i8[::1], f8[:,::1], i8[::1], f8[::1], f8[::1], f8[:,::1], i8[:,::1], f8[:,::1], "
                 "i8[::1], f8[::1], f8[::1], f8[::1])")
AOT_MODULE = "trainplan_queue_kernel"


def available() -> bool:
    """Whether numba is installed (checked without importing it)."""
    return importlib.util.find_spec("numba") is not None


_BROKEN: list[str] = []  # why numba, though installed, could not be loaded (once per process)
_LOADED: list[Callable[..., None]] = []  # the kernel, once loaded in this process
_AOT_FAILED: list[str] = []  # why the ahead-of-time module could not be built (once per process)


def _aot_wanted() -> bool:
    return os.environ.get("TRAINPLAN_AOT", "1") != "0"


@functools.lru_cache(maxsize=1)
def _aot_key() -> str:
    """The kernel's source and the versions that shape its machine code (numba's read without importing it)."""
    from importlib import metadata

    source = (Path(__file__).with_name("_kernel.py")).read_bytes()
    try:
        numba_version = metadata.version("numba")
    except metadata.PackageNotFoundError:
        numba_version = "none"
    text = "\0".join([numba_version, np.__version__, sys.version, platform.machine(), AOT_SIGNATURE])
    return hashlib.sha256(source + text.encode()).hexdigest()[:16]


def _aot_dirs() -> list[Path]:
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainplan"
    return [Path(__file__).with_name("__pycache__"), home]


def _aot_file(folder: Path) -> Path | None:
    d = folder / f"queue-kernel-{_aot_key()}"
    found = sorted(d.glob(f"{AOT_MODULE}*.so")) + sorted(d.glob(f"{AOT_MODULE}*.pyd")) if d.is_dir() else []
    return found[0] if found else None


def _load_aot() -> Callable[..., None] | None:
    """The ahead-of-time kernel where a module for this key is cached; None where none is."""
    for folder in _aot_dirs():
        path = _aot_file(folder)
        if path is None:
            continue
        spec = importlib.util.spec_from_file_location(AOT_MODULE, path)
        if spec is None or spec.loader is None:
            continue
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError:
            continue
        return module.queue_chunk  # type: ignore[no-any-return]
    return None


def _build_aot() -> bool:
    """Compile the kernel ahead of time into the first cache folder that can be written (numba.pycc), moved
    into place whole so a concurrent run sees the module or nothing. False (and why, once) where it cannot."""
    try:
        with warnings.catch_warnings(), _without_blas_probe():
            warnings.simplefilter("ignore")  # numba.pycc's pending deprecation
            from numba.pycc import CC

            from trainplan.simulate import _kernel
            for folder in _aot_dirs():
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    work = Path(tempfile.mkdtemp(prefix="queue-kernel-build-", dir=folder))
                except OSError:
                    continue
                import shutil

                try:
                    cc = CC(AOT_MODULE)
                    cc.output_dir = str(work)
                    cc.verbose = False
                    cc.export("queue_chunk", AOT_SIGNATURE)(_kernel.queue_chunk.py_func)
                    with contextlib.redirect_stdout(sys.stderr):
                        cc.compile()
                except BaseException:
                    shutil.rmtree(work, ignore_errors=True)  # no half-built folder left in the cache
                    raise
                final = folder / f"queue-kernel-{_aot_key()}"
                try:
                    os.replace(work, final)
                except OSError:  # another run put its module there first: keep that one
                    shutil.rmtree(work, ignore_errors=True)
                return True
    except Exception as err:  # noqa: BLE001 - any failure of the optional build falls back to the JIT kernel
        _AOT_FAILED.append(f"{type(err).__name__}: {err}")
    return False


def aot_built() -> bool:
    """Whether the ahead-of-time module for this kernel is cached (checked without importing numba)."""
    return _aot_wanted() and any(_aot_file(folder) is not None for folder in _aot_dirs())


def worth_it(frames: int) -> bool:
    """Use the compiled engine: numba is installed and loads, and either is loaded already or the run is long."""
    if not available() or _BROKEN:
        return False
    if _LOADED or "trainplan.simulate._kernel" in sys.modules:
        return True
    if frames < (AOT_WORTH_FRAMES if aot_built() else WORTH_FRAMES):
        return False
    try:
        kernel()
    except ImportError as err:  # e.g. a numba too old for this numpy: fall back to the reference engine
        _BROKEN.append(str(err))
        return False
    return True


# numba's CPU target, when first used in a process, imports scipy.linalg only to learn whether
# np.dot would have a BLAS (numba.np.arraymath): 0.24 s of the 0.38 s its first call costs here
# (benchmarks/bench_queue.py). The kernel does no linear algebra, so that check is answered "no
# BLAS" while the target loads; scipy.linalg stays importable afterwards.
_BLAS_PROBE = "scipy.linalg.cython_blas"


@contextlib.contextmanager
def _without_blas_probe() -> Iterator[None]:
    if _BLAS_PROBE in sys.modules:
        yield
        return
    sys.modules[_BLAS_PROBE] = None  # type: ignore[assignment]  # import of it raises ImportError
    try:
        yield
    finally:
        if _BLAS_PROBE in sys.modules and sys.modules[_BLAS_PROBE] is None:
            del sys.modules[_BLAS_PROBE]


def kernel() -> Callable[..., None]:
    """The compiled kernel: the ahead-of-time module (built on first use), else numba's JIT; raises
    ImportError where numba is missing or cannot load."""
    if _LOADED:
        return _LOADED[0]
    if _aot_wanted():
        run = _load_aot()
        if run is None and not _AOT_FAILED and available() and _build_aot():
            run = _load_aot()
        if run is not None:
            _LOADED.append(run)
            return run
    _LOADED.append(_jit_kernel())
    return _LOADED[0]


def _jit_kernel() -> Callable[..., None]:
    """numba's JIT of the kernel (its own cache next to the source)."""
    if "trainplan.simulate._kernel" in sys.modules:
        from trainplan.simulate._kernel import queue_chunk

        return queue_chunk  # type: ignore[no-any-return]
    with _without_blas_probe():
        from trainplan.simulate._kernel import queue_chunk

        try:  # load the CPU target's registries now, inside the context (numba's internals: optional)
            from numba.core.registry import cpu_target

            cpu_target.target_context.refresh()
        except (ImportError, AttributeError):
            pass
    return queue_chunk  # type: ignore[no-any-return]


class Streamed(NamedTuple):
    """What one streamed run keeps: the fused sums and the recorded frames (in the order recorded)."""

    sums: np.ndarray  # N_SUMS entries, by the indexes above
    group_busy: np.ndarray  # seconds inside the window, per decoder group
    group_blocked: np.ndarray
    records: np.ndarray  # (frames recorded, 7): REC_* times in seconds
    record_ids: np.ndarray  # (frames recorded, 3): frame, decoder, rank
    extra_reads: np.ndarray  # (reads, 2): start, end of reads far ahead of the records (unbounded read-ahead)
    extra_ids: np.ndarray  # their frames


def run_stream(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]],
    frames: int,
    dec: np.ndarray,
    group: np.ndarray,
    groups: int,
    step: float,
    buffer: int,
    read_ahead: int | None,
    no_decoder: bool,
    window: tuple[int, int],
    record_from: int,
    records: int,
    extra_reads: int,
) -> Streamed:
    """One compiled run over `chunks` of (read seconds, decode work) of consecutive frames, `frames` in all
    (for pre-decoded frames, the work is the read seconds). Memory: the chunk in hand, a few numbers per
    decoder, the last `buffer` step starts and `read_ahead` decode starts, and the `records` rows asked for."""
    run_chunk = kernel()
    dec = np.ascontiguousarray(dec, dtype=np.float64)
    group = np.ascontiguousarray(group, dtype=np.int64)
    c = max(dec.shape[0], 1)
    q = -1 if read_ahead is None else int(read_ahead)
    fstate = np.array([0.0, -np.inf, 0.0, np.inf])  # P of the last frame read, next step's earliest start, t0, t1
    istate = np.zeros(5, np.int64)
    ht, hi, hd = np.empty(c), np.empty(c, np.int64), np.empty(c, np.int64)
    slot_f, slot_rec = np.zeros((c, 4)), np.full(c, -1, np.int64)
    a_ring, s_ring = np.empty(max(int(buffer), 1)), np.empty(max(q, 1))
    rec_f, rec_i = np.full((records, 7), np.nan), np.full((records, 3), -1, np.int64)
    extra_f, extra_i = np.empty((extra_reads, 2)), np.empty(extra_reads, np.int64)
    sums = np.zeros(N_SUMS)
    gbusy, gblocked = np.zeros(max(groups, 1)), np.zeros(max(groups, 1))
    lo = 0
    for read, work in chunks:
        read = np.ascontiguousarray(read, dtype=np.float64)
        work = np.ascontiguousarray(work, dtype=np.float64)
        run_chunk(read, work, lo, int(frames), dec, group, float(step), int(buffer), q, bool(no_decoder),
                  int(window[0]), int(window[1]), int(record_from), fstate, istate, ht, hi, hd, slot_f, slot_rec,
                  a_ring, s_ring, rec_f, rec_i, extra_f, extra_i, sums, gbusy, gblocked)
        lo += read.shape[0]
    if lo != frames:
        raise ValueError(f"{lo} frames streamed, {frames} expected")
    nrec, nx = int(istate[3]), int(istate[4])
    return Streamed(sums, gbusy, gblocked, rec_f[:nrec], rec_i[:nrec], extra_f[:nx], extra_i[:nx])


