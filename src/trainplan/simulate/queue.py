"""The input pipeline as a queue, simulated frame by frame (docs/simulation.md).

The formula of §7 says the accelerator is busy `min(1, S / D)` of the time. That is
a claim about a queue, and this module runs the queue:

    reader ──▶ read-ahead queue ──▶ c decoders ──▶ bounded buffer (B frames) ──▶ accelerator

Semantics (each a choice, written down here once):

- **Reader.** One serial reader (the storage link). Frame i costs
  `read_seconds_per_frame` (+ `read_latency_seconds`: one request in flight, so a
  request's latency is paid on every frame) and frames are read in order. A read frame
  enters the read-ahead queue of `read_ahead_frames` (64 by default, `READ_AHEAD_FRAMES`;
  None: unbounded, the reader runs ahead freely); a reader holding a frame blocks while
  that queue is full.
- **Decoders.** c parallel decoders, heterogeneous allowed (CPU cores and video-decode
  engines). A free decoder takes the next read frame, in read order; when several
  wait, the one that has waited longest goes first (FIFO, as a SimPy `Store`). Frame i
  costs `work[i] × decoder_seconds_per_frame[d]` on decoder d, where `work` is a
  multiplier of mean 1 (1 exactly without variability). A decoder holding a finished
  frame blocks while the buffer is full; blocked decoders enter in the order they
  finished. With no decoder at all (pre-decoded frames) the reader feeds the buffer
  itself and blocks on it.
- **Buffer.** `buffer_frames` (B ≥ 1) decoded frames, consumed in the order they
  entered (so frames may reach the accelerator slightly out of read order, as with a
  loader that does not force order). A frame leaves the buffer when its step begins;
  the accelerator holds that one frame while it trains on it.
- **Accelerator.** Trains on one frame in `step_seconds_per_frame` (1 / demand_fps)
  whenever a frame is in the buffer; a fluid, per-frame picture of a step that in
  reality consumes a batch.

Engine. No generic event objects: the queue is a max-plus recurrence over frames.
With k the rank in which decoded frames enter the buffer, A_k the start of the k-th
step and s the step time,

    E_k = max(C_k, A_{k-B})            enter once the frame k-B has left (full buffer)
    A_k = max(E_k, A_{k-1} + s)        train on it once it is there and the last step is done
    S_j = max(P_j, E_k)                frame j = k + c goes to the decoder just freed

and a heap of decoding frames ordered by finish time C gives the rank. Completions
leave the heap in time order because every frame pushed finishes after the one just
popped. The reads are a cumulative sum (numpy) when read-ahead is unbounded. One heap
operation and a dozen float operations per frame, in plain Python; the statistics
are numpy over the per-frame arrays. This is the reference. The same recurrence
compiled (trainplan.simulate.fast, numba, the `fast` extra) gives bit-identical
per-frame times, sums the statistics in the same pass and streams the frames a chunk
at a time (O(1) memory per frame, the sample drawn in chunks by `sample_chunks`); `engine="auto"` uses it
when installed and worth its import (see docs/simulation.md).

Measurement. The first `WARMUP_FRACTION` of the frames (filling the pipeline from
empty) and the last `B + c` (+ read-ahead) frames (the drain after the input runs out,
when the buffer empties at full speed) are left out: busy, throughput and every
utilisation are measured over the window from the start of step k0 to the start of
step k1 that holds the frames in between. The accelerator is busy `(k1-k0)·s` of that
window, exactly.

Variability (`Variability`, off by default). The means are kept: a distribution
multiplies the mean service time by a factor of mean 1 (exponential: cv 1; lognormal:
the given cv; empirical: a probe's per-frame seconds divided by their mean, resampled
with replacement). Keyframes: every G-th frame (frame 0 first) costs `keyframe_cost`
times an ordinary one, normalised so that the mean over a GOP is still the decoder's
mean (a core's rate is measured over whole streams, keyframes included). Read time may
vary (lognormal, `read_cv`) and carries a fixed latency per request. The step time is
deterministic. Draws, in order from `np.random.default_rng(seed)`: decode, then read.

`formula_busy(spec)` is §7's formula on the mean service times of the spec (read
latency included, since a serial reader pays it on every frame). With variability off
the simulation agrees with it to a fraction of a point; with variability on the
formula is an upper bound (stages that share no buffer of infinite size lose time
to each other's fluctuations), and a larger buffer recovers most of the loss.
"""

from __future__ import annotations

import heapq
import math
from array import array
from dataclasses import asdict, dataclass, field, replace
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from trainplan.errors import UserError
from trainplan.workload.codecs import FRAME_KINDS

WARMUP_FRACTION = 0.1  # share of frames discarded while the pipeline fills from empty
# Encoded frames the reader may hold ahead of the decoders. Assumed: a loader prefetches
# as many encoded frames as the decoded buffer holds (64 by default, docs/simulation.md); None is unbounded.
READ_AHEAD_FRAMES = 64
DISTRIBUTIONS = ("deterministic", "exponential", "lognormal", "empirical")
# Frames drawn and simulated at a time by the streamed (compiled) engine: 512 KiB per array, so a run
# holds a few MB whatever its length. Even, though any size draws the same numbers (tests/test_queue.py).
CHUNK_FRAMES = 1 << 16


@dataclass(frozen=True)
class Variability:
    """Service-time variability; `None` or the default instance means deterministic."""

    decode: str = "deterministic"  # "exponential" | "lognormal" | "empirical"
    decode_cv: float = 0.0  # coefficient of variation of a lognormal decode time
    read_cv: float = 0.0  # coefficient of variation of a lognormal read time (0: fixed)
    empirical_decode_seconds: tuple[float, ...] = ()  # per-frame seconds from a probe, resampled
    keyframe_interval: int = 0  # G: every G-th frame is a keyframe (0: no keyframe effect)
    keyframe_cost: float = 1.0  # a keyframe costs this many ordinary frames
    read_latency_seconds: float = 0.0  # fixed latency of each read request

    @property
    def is_off(self) -> bool:
        return (
            self.decode == "deterministic"
            and self.decode_cv == 0.0
            and self.read_cv == 0.0
            and (self.keyframe_interval <= 1 or self.keyframe_cost == 1.0)
            and self.read_latency_seconds == 0.0
        )


@dataclass(frozen=True)
class QueueSpec:
    """The queue in seconds per frame; heterogeneous decoders allowed."""

    read_seconds_per_frame: float  # one serial reader (storage/link)
    decoder_seconds_per_frame: tuple[float, ...]  # one entry per parallel decoder
    step_seconds_per_frame: float  # accelerator time to train on one frame (1 / demand_fps)
    buffer_frames: int = 64  # decoded frames the buffer holds (data.buffer)
    frames: int = 100_000
    seed: int = 0
    variability: Variability | None = None
    decoder_names: tuple[str, ...] = ()  # a group name per decoder ("cpu", "nvdec"); default "decoder"
    read_ahead_frames: int | None = READ_AHEAD_FRAMES  # read frames waiting for a decoder; None: unbounded


@dataclass(frozen=True)
class ServiceTimes:
    """One seeded sample of service times for every frame."""

    read_seconds: np.ndarray  # per frame, latency included
    decode_work: np.ndarray  # per frame multiplier of a decoder's mean seconds (mean 1)
    step_seconds: float


class Interval(NamedTuple):
    """Who was busy (or blocked, `who` ending in " blocked") from `start` to `end`, seconds."""

    who: str
    start: float
    end: float

    @property
    def lane(self) -> str:
        return self.who.removesuffix(" blocked")

    @property
    def state(self) -> str:
        return "blocked" if self.who.endswith(" blocked") else "busy"


@dataclass(frozen=True)
class StageUse:
    """Time-weighted use of one stage over the measurement window (fractions 0-1 per unit)."""

    name: str
    units: int
    busy: float  # serving a frame
    blocked: float  # holding a finished frame, downstream full
    idle: float  # waiting for work (starved)


@dataclass(frozen=True)
class QueueResult:
    busy: float  # accelerator busy fraction, simulated
    formula_busy: float  # min(1, S/D) on the spec's mean service times
    sample_formula_busy: float  # the same formula on this sample's mean times (the measured frames)
    difference: float  # busy - formula_busy
    throughput_fps: float  # frames trained per second
    demand_fps: float  # 1 / step seconds
    mean_buffer_frames: float  # time-weighted frames in the buffer
    mean_read_queue_frames: float  # time-weighted frames read and not yet taken by a decoder
    utilisation: dict[str, float]  # busy fraction per stage: read, each decoder group, accelerator
    waits: dict[str, float]  # time-weighted waits, see `simulate`
    stages: tuple[StageUse, ...]
    bottleneck: str  # the busiest stage, in §7's words: "read", "decode" or "accelerator"
    frames: int
    warmup_frames: int
    cooldown_frames: int
    window_seconds: float
    seed: int
    variability: dict[str, Any] | None
    timeline: tuple[Interval, ...] = field(default=(), repr=False)
    buffer_trace: tuple[tuple[float, int], ...] = field(default=(), repr=False)  # (time, frames) steps
    # The span the timeline covers completely: from the start of the measured window to the
    # start of the first interval left out (every interval starting in it is in `timeline`).
    timeline_span: tuple[float, float] = (0.0, 0.0)

    def to_dict(self, timeline: bool = True) -> dict[str, Any]:
        """JSON-ready, SI units (seconds, frames, frames/s, fractions)."""
        # the timeline and buffer trace left out of asdict's deep copy (2,000 intervals: 25 ms), written below
        out: dict[str, Any] = {
            k: v for k, v in asdict(replace(self, timeline=(), buffer_trace=())).items()
            if k not in ("timeline", "buffer_trace", "stages", "timeline_span")
        }
        out["stages"] = [asdict(s) for s in self.stages]
        if timeline:
            out["timeline"] = [
                {"who": i.lane, "state": i.state, "start": i.start, "end": i.end} for i in self.timeline
            ]
            out["buffer_trace"] = [list(p) for p in self.buffer_trace]
            out["timeline_span"] = list(self.timeline_span)
        return out


# ---------------------------------------------------------------- checks and sampling


def _check(spec: QueueSpec) -> None:
    def bad(key: str, expected: str) -> UserError:
        return UserError(f"simulate.{key}", expected)

    if not (math.isfinite(spec.read_seconds_per_frame) and spec.read_seconds_per_frame >= 0):
        raise bad("read_seconds_per_frame", "a finite number of seconds >= 0")
    for d in spec.decoder_seconds_per_frame:
        if not (math.isfinite(d) and d > 0):
            raise bad("decoder_seconds_per_frame", f"finite seconds > 0 per decoder, got {d!r}")
    if not (math.isfinite(spec.step_seconds_per_frame) and spec.step_seconds_per_frame > 0):
        raise bad("step_seconds_per_frame", "finite seconds > 0 (a positive demand in frames/s)")
    if int(spec.buffer_frames) != spec.buffer_frames or spec.buffer_frames < 1:
        raise bad("buffer_frames", "a whole number of frames >= 1 (data.buffer)")
    if int(spec.frames) != spec.frames or spec.frames < 100:
        raise bad("frames", "a whole number of frames >= 100")
    if spec.read_ahead_frames is not None and spec.read_ahead_frames < 1:
        raise bad("read_ahead_frames", "a whole number >= 1, or none for unbounded")
    if spec.decoder_names and len(spec.decoder_names) != len(spec.decoder_seconds_per_frame):
        raise bad("decoder_names", "one name per decoder")
    if not spec.decoder_seconds_per_frame and spec.read_seconds_per_frame <= 0 and not _latency(spec):
        raise bad("read_seconds_per_frame", "> 0 when there is no decoder (the reader feeds the buffer)")
    v = spec.variability
    if v is None:
        return
    if v.decode not in DISTRIBUTIONS:
        raise UserError("simulate.decode", f"one of {', '.join(DISTRIBUTIONS)}, got {v.decode!r}")
    if not (v.decode_cv >= 0 and v.read_cv >= 0):
        raise UserError("simulate.cv", "a coefficient of variation >= 0")
    if v.decode == "exponential" and v.decode_cv not in (0.0, 1.0):
        raise UserError("simulate.cv", "an exponential time has cv 1; use lognormal for another cv")
    if v.decode == "empirical":
        sample = np.asarray(v.empirical_decode_seconds, dtype=float)
        if sample.size == 0 or not np.all(np.isfinite(sample)) or np.any(sample < 0) or sample.sum() <= 0:
            raise UserError("simulate.empirical", "a non-empty sample of per-frame decode seconds >= 0")
    if v.keyframe_interval < 0 or not (v.keyframe_cost > 0):
        raise UserError("simulate.keyframe", "an interval >= 0 frames and a cost > 0 (times a normal frame)")
    if not (v.read_latency_seconds >= 0 and math.isfinite(v.read_latency_seconds)):
        raise UserError("simulate.read_latency", "a duration >= 0")


def _latency(spec: QueueSpec) -> float:
    return spec.variability.read_latency_seconds if spec.variability is not None else 0.0


def _lognormal_factors(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    """Factors of mean 1 and coefficient of variation `cv` (sigma^2 = ln(1 + cv^2))."""
    sigma2 = math.log1p(cv * cv)
    return rng.lognormal(mean=-sigma2 / 2, sigma=math.sqrt(sigma2), size=n)


def _decode_draws(v: Variability) -> bool:
    """Whether the decode work is drawn from the generator (else it is 1 for every frame)."""
    return v.decode in ("exponential", "empirical") or (v.decode in ("lognormal", "deterministic") and v.decode_cv > 0)


def _draw_work(rng: np.random.Generator, v: Variability, m: int) -> np.ndarray:
    if v.decode == "exponential":
        return rng.exponential(1.0, m)
    if v.decode == "empirical":
        sample = np.asarray(v.empirical_decode_seconds, dtype=float)
        return rng.choice(sample / sample.mean(), size=m, replace=True)
    if _decode_draws(v):
        return _lognormal_factors(rng, v.decode_cv, m)
    return np.ones(m)


def sample_chunks(spec: QueueSpec, size: int = CHUNK_FRAMES) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per-frame (read seconds, decode work) in chunks of `size` consecutive frames, seeded with
    `np.random.default_rng(spec.seed)`; the same numbers whatever the chunk size (the generator's
    stream does not depend on how many are drawn at a time). All decode draws come before all
    read draws: where both vary, a second generator is first advanced past the decode draws."""
    _check(spec)
    n = int(spec.frames)
    v = spec.variability or Variability()
    size = max(1, int(size))
    rng = np.random.default_rng(spec.seed)
    read_rng = rng
    if _decode_draws(v) and v.read_cv > 0:
        read_rng = np.random.default_rng(spec.seed)
        for lo in range(0, n, size):
            _draw_work(read_rng, v, min(size, n - lo))  # discarded: only the generator's state is kept
    g = v.keyframe_interval
    keyframes = g > 1 and v.keyframe_cost != 1.0
    scale = g / (g - 1 + v.keyframe_cost) if keyframes else 1.0  # a GOP's mean stays 1
    # A constant stage is one array for the whole run, sliced for the last chunk (read-only, so no
    # consumer can change it under the next chunk): two fresh arrays a chunk were an eighth of a
    # 2e7-frame run of the compiled engine.
    same_work = None if _decode_draws(v) or keyframes else _constant(min(size, n), 1.0)
    same_read = (None if v.read_cv > 0
                 else _constant(min(size, n), spec.read_seconds_per_frame + v.read_latency_seconds))
    for lo in range(0, n, size):
        m = min(size, n - lo)
        work = _draw_work(rng, v, m) if same_work is None else same_work[:m]
        if keyframes:
            kf = np.ones(m)
            kf[(-lo) % g::g] = v.keyframe_cost  # frames 0, G, 2G, ... of the whole run
            work = work * (kf * scale)
        if same_read is not None:
            read = same_read[:m]
        else:
            read = spec.read_seconds_per_frame * _lognormal_factors(read_rng, v.read_cv, m)
            if v.read_latency_seconds:
                read = read + v.read_latency_seconds
        yield read, work


def _constant(size: int, value: float) -> np.ndarray:
    out = np.full(size, value, dtype=float)
    out.setflags(write=False)
    return out


def sample_service_times(spec: QueueSpec) -> ServiceTimes:
    """Per-frame service times, seeded with `np.random.default_rng(spec.seed)` (`sample_chunks` in one chunk)."""
    read, work = next(sample_chunks(spec, int(spec.frames)))
    return ServiceTimes(read_seconds=read, decode_work=work, step_seconds=float(spec.step_seconds_per_frame))


def formula_busy(spec: QueueSpec) -> float:
    """§7's busy fraction min(1, S/D), S = min(1/read, Σ 1/decoder_i), D = 1/step, on mean times."""
    read = spec.read_seconds_per_frame + _latency(spec)
    read_fps = math.inf if read <= 0 else 1.0 / read
    decode_fps = sum(1.0 / d for d in spec.decoder_seconds_per_frame) if spec.decoder_seconds_per_frame else math.inf
    supply = min(read_fps, decode_fps)
    return min(1.0, supply * spec.step_seconds_per_frame)


# ---------------------------------------------------------------- the engine


def _recurrence(
    reads: list[float],
    work: list[float],
    dec: tuple[float, ...],
    step: float,
    buffer: int,
    read_ahead: int | None,
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """The max-plus recurrence. Returns per frame P (entered the read-ahead queue; None
    when unbounded, where P is `reads` itself), S (decode start, after `read_ahead` leading
    entries), E (entered the buffer) and decoder index, and per rank A (step start, after
    `buffer` leading entries) and the frame's index, as typed arrays (`array.array`).

    `reads` holds P already (cumulative read completions) when `read_ahead` is None,
    else the per-frame read seconds. The lists A and S carry `buffer` and `read_ahead`
    leading -inf entries, so that "the step of rank k - B" and "the decode start of
    frame j - Q" need no branch before there is one.
    """
    n = len(work)
    c = min(len(dec), n)
    B = buffer
    inf = math.inf
    # typed arrays (8 bytes an entry, read back by numpy without a copy) rather than lists of float
    # objects (8 + 24 bytes): the reference holds every frame, so its memory is a few arrays of them
    A = array("d", [-inf]) * B + array("d", [0.0]) * n  # A[k + B]: start of the k-th step
    E = array("d", [0.0]) * n
    order = array("q", [0]) * n
    who = array("q", [0]) * n
    bounded = read_ahead is not None
    q = int(read_ahead) if bounded else 0
    S = array("d", [-inf]) * q + array("d", [0.0]) * n  # S[j + q]: decode start of frame j
    P = array("d", [0.0]) * n if bounded else reads
    heap, p_prev = _hand_out_first(c, reads, work, dec, bounded, q, P, S, who)
    if not bounded:
        a_next = _hand_out_unbounded(heap, n, c, work, dec, step, B, P, S, A, E, order, who)
    else:
        a_next = _hand_out_bounded(heap, n, c, reads, work, dec, step, B, q, p_prev, P, S, A, E, order, who)
    _drain(heap, n, c, step, B, a_next, A, E, order)
    return (P if bounded else None), S, E, A, order, who  # S and A with their leading q and B entries


def _hand_out_first(c: int, r: Any, work: Any, dec: tuple[float, ...], bounded: bool, q: int, P: Any, S: Any,
                    who: Any) -> tuple[list[tuple[float, int]], float]:
    """(the heap of decode finishes, the last read's P) after the first c frames go to the c idle decoders."""
    p_prev = 0.0
    heap: list[tuple[float, int]] = []
    for j in range(c):
        if bounded:
            p = p_prev + r[j]
            if S[j] > p:
                p = S[j]
            P[j] = p
            p_prev = p
        S[j + q] = P[j]
        who[j] = j
        heap.append((P[j] + work[j] * dec[j], j))
    heapq.heapify(heap)
    return heap, p_prev


def _hand_out_unbounded(heap: list[tuple[float, int]], n: int, c: int, work: Any, dec: tuple[float, ...],
                        step: float, B: int, P: Any, S: Any, A: Any, E: Any, order: Any, who: Any) -> float:
    """The earliest start of the next step after frames c .. n-1 are handed out, reads unbounded (P given)."""
    heapreplace = heapq.heapreplace
    a_next = -math.inf  # earliest start of the next step (last start + s)
    j = c  # the next frame to hand to a decoder
    for k in range(n - c):
        ci, i = heap[0]
        ab = A[k]
        e = ci if ci >= ab else ab
        a = e if e >= a_next else a_next
        A[k + B] = a
        a_next = a + step
        E[i] = e
        order[k] = i
        p = P[j]
        st = p if p >= e else e
        S[j] = st
        d = who[i]
        who[j] = d
        heapreplace(heap, (st + work[j] * dec[d], j))
        j += 1
    return a_next


def _hand_out_bounded(heap: list[tuple[float, int]], n: int, c: int, r: Any, work: Any, dec: tuple[float, ...],
                      step: float, B: int, q: int, p_prev: float, P: Any, S: Any, A: Any, E: Any, order: Any,
                      who: Any) -> float:
    """The earliest start of the next step after frames c .. n-1 are handed out, q frames read ahead at most."""
    heapreplace = heapq.heapreplace
    a_next = -math.inf  # earliest start of the next step (last start + s)
    j = c  # the next frame to hand to a decoder
    for k in range(n - c):
        ci, i = heap[0]
        ab = A[k]
        e = ci if ci >= ab else ab
        a = e if e >= a_next else a_next
        A[k + B] = a
        a_next = a + step
        E[i] = e
        order[k] = i
        p = p_prev + r[j]
        sq = S[j]  # decode start of frame j - q: its slot in the read-ahead queue frees then
        if sq > p:
            p = sq
        P[j] = p
        p_prev = p
        st = p if p >= e else e
        S[j + q] = st
        d = who[i]
        who[j] = d
        heapreplace(heap, (st + work[j] * dec[d], j))
        j += 1
    return a_next


def _drain(heap: list[tuple[float, int]], n: int, c: int, step: float, B: int, a_next: float, A: Any, E: Any,
           order: Any) -> None:
    """Nothing: the last c frames, no frame left to hand out, enter the buffer and the steps (A, E, order)."""
    heappop = heapq.heappop
    for k in range(n - c, n):
        ci, i = heappop(heap)
        ab = A[k]
        e = ci if ci >= ab else ab
        a = e if e >= a_next else a_next
        A[k + B] = a
        a_next = a + step
        E[i] = e
        order[k] = i


def _groups(spec: QueueSpec) -> tuple[list[str], list[int]]:
    """Group names and a group index per decoder."""
    if spec.decoder_names:
        names: list[str] = []
        index = []
        for n in spec.decoder_names:
            if n not in names:
                names.append(n)
            index.append(names.index(n))
        return names, index
    return ["decoder"], [0] * len(spec.decoder_seconds_per_frame)


@dataclass(frozen=True)
class QueueTrace:
    """Per-frame times of one run (seconds; frame = read order, rank = order of entering the buffer)."""

    read_start: np.ndarray  # the reader starts reading the frame
    read_done: np.ndarray  # ... has read it
    queued: np.ndarray  # it enters the read-ahead queue (later than read_done if the queue was full)
    decode_start: np.ndarray
    decode_done: np.ndarray
    enter_buffer: np.ndarray  # later than decode_done while the buffer was full
    step_start: np.ndarray  # the accelerator starts training on it
    decoder: np.ndarray  # index of the decoder that decoded it (-1: no decoder)
    order: np.ndarray  # order[k] = frame that entered the buffer k-th
    step_seconds: float


ENGINES = ("auto", "python", "compiled")


def _engine(engine: str, frames: int) -> bool:
    """True for the compiled engine. "auto": compiled when numba is installed and worth its import."""
    from trainplan.simulate import fast

    if engine not in ENGINES:
        raise UserError("simulate.engine", f"one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "python":
        return False
    if engine == "compiled":
        if not fast.available():
            raise UserError("--engine", f"compiled needs numba: {fast.INSTALL_HINT}")
        try:
            fast.kernel()
        except ImportError as err:
            raise UserError("--engine", f"compiled needs a numba that loads here ({err})") from None
        return True
    return fast.worth_it(frames)


@dataclass(frozen=True)
class _Prepared:
    n: int
    step: float
    buffer: int
    read: np.ndarray  # per-frame read seconds
    reads: np.ndarray  # what the recurrence reads: cumulative reads (unbounded), per-frame reads, or zeros
    work: np.ndarray
    decoders: tuple[float, ...]
    read_ahead: int | None
    no_decoder: bool


#: Bytes a frame costs the pure-Python reference engine, which holds every frame: its typed arrays
#: of times (8 B an entry), numpy's views of them, the sample and the statistics' temporaries.
#: Measured: 5e6 frames peaked at 0.65 GB from the command line, 0.06 GB of it the interpreter
#: (117 B a frame; 280 B with lists of float objects before, docs/speed.md); 150 leaves room.
PYTHON_BYTES_PER_FRAME = 150


def python_frames_limit() -> int:
    """The most frames the pure-Python engine runs on this machine: the memory budget
    (trainplan.machine.budget_bytes, TRAINPLAN_MEMORY_BYTES to change it) over PYTHON_BYTES_PER_FRAME."""
    from trainplan import machine

    return machine.budget_bytes() // PYTHON_BYTES_PER_FRAME


def _prepare(spec: QueueSpec, times: ServiceTimes | None) -> _Prepared:
    _check(spec)
    if int(spec.frames) > python_frames_limit():
        from trainplan.simulate import fast

        raise UserError("--frames", f"at most {python_frames_limit():,} frames with the pure-Python engine on "
                        f"this machine ({PYTHON_BYTES_PER_FRAME} B a frame in half its available memory), got "
                        f"{int(spec.frames):,}; the compiled engine streams any number: {fast.INSTALL_HINT}")
    if times is None:
        times = sample_service_times(spec)
    n = int(spec.frames)
    if len(times.read_seconds) != n or len(times.decode_work) != n:
        raise UserError("simulate.times", f"{n} service times per stage, as spec.frames says")
    read = np.asarray(times.read_seconds, dtype=float)
    decoders = tuple(float(d) for d in spec.decoder_seconds_per_frame)
    no_decoder = not decoders
    if no_decoder:  # pre-decoded frames: the reader is the one "decoder", feeding the buffer
        work = read
        decoders = (1.0,)
        read_ahead: int | None = None
        reads_arr = np.zeros(n)
    else:
        work = np.asarray(times.decode_work, dtype=float)
        read_ahead = spec.read_ahead_frames
        reads_arr = np.cumsum(read) if read_ahead is None else read
    return _Prepared(n, float(times.step_seconds), int(spec.buffer_frames), read, reads_arr, work, decoders,
                     read_ahead, no_decoder)


def _trace(pr: _Prepared, P: np.ndarray, S: np.ndarray, C: np.ndarray, E: np.ndarray, A_f: np.ndarray,
           order: np.ndarray, who: np.ndarray) -> QueueTrace:
    n, read, step = pr.n, pr.read, pr.step
    if pr.no_decoder:
        return QueueTrace(S, C, E, E, E, E, A_f, np.full(n, -1), order, step)
    if pr.read_ahead is None:
        read_done = P
    else:
        read_done = np.empty(n)
        read_done[0] = read[0]
        read_done[1:] = P[:-1] + read[1:]
    return QueueTrace(read_done - read, read_done, P, S, C, E, A_f, who, order, step)


def _typed(values: np.ndarray) -> array:
    """A float64 array as a typed array: 8 bytes an entry, not a list of float objects."""
    out = array("d")
    out.frombytes(memoryview(np.ascontiguousarray(values, dtype=np.float64)).cast("B"))  # one copy
    return out


def _run_python(pr: _Prepared) -> QueueTrace:
    n = pr.n
    P_l, S_l, E_l, A_l, order_l, who_l = _recurrence(
        _typed(pr.reads), _typed(pr.work), pr.decoders, pr.step, pr.buffer, pr.read_ahead)
    # views of the typed arrays, no copies (numpy keeps them alive)
    P = pr.reads if P_l is None else np.frombuffer(P_l, float)
    S = np.frombuffer(S_l, float)[S_l.buffer_info()[1] - n:]
    E = np.frombuffer(E_l, float)
    A = np.frombuffer(A_l, float)[A_l.buffer_info()[1] - n:]  # by rank
    order = np.frombuffer(order_l, np.int64).astype(np.intp, copy=False)
    who = np.frombuffer(who_l, np.int64).astype(np.intp, copy=False)
    C = S + pr.work * np.asarray(pr.decoders)[who]
    A_f = np.empty(n)
    A_f[order] = A
    return _trace(pr, P, S, C, E, A_f, order, who)


def _stream(spec: QueueSpec, times: ServiceTimes | None, window: tuple[int, int], record_from: int, records: int,
            extra_reads: int) -> Any:
    """One compiled run, streamed: the sample is drawn (or `times` read) a chunk at a time."""
    from trainplan.simulate import fast

    _check(spec)
    n = int(spec.frames)
    if times is not None:
        if len(times.read_seconds) != n or len(times.decode_work) != n:
            raise UserError("simulate.times", f"{n} service times per stage, as spec.frames says")
        step = float(times.step_seconds)
        read_all, work_all = times.read_seconds, times.decode_work
        chunks: Any = ((read_all[i:i + CHUNK_FRAMES], work_all[i:i + CHUNK_FRAMES]) for i in range(0, n, CHUNK_FRAMES))
    else:
        step = float(spec.step_seconds_per_frame)
        chunks = sample_chunks(spec)
    decoders = tuple(float(d) for d in spec.decoder_seconds_per_frame)
    no_decoder = not decoders
    if no_decoder:  # pre-decoded frames: the reader is the one "decoder", feeding the buffer
        chunks = ((r, r) for r, _w in chunks)
        decoders, read_ahead = (1.0,), None
    else:
        read_ahead = spec.read_ahead_frames
    names, gidx = _groups(spec)
    return fast.run_stream(chunks, n, np.asarray(decoders), np.asarray(gidx or [0], np.int64), len(names), step,
                           int(spec.buffer_frames), read_ahead, no_decoder, window, record_from, records, extra_reads)


def _recorded(spec: QueueSpec, out: Any, step: float) -> QueueTrace:
    """The recorded frames of a streamed run as a trace, in frame order (the reads far ahead of the
    decoders last, as frames whose other intervals lie beyond any timeline: at +inf)."""
    from trainplan.simulate import fast

    rec, ids = out.records, out.record_ids
    if out.extra_reads.shape[0]:
        x = np.full((out.extra_reads.shape[0], 7), math.inf)
        x[:, fast.REC_READ_START] = out.extra_reads[:, 0]
        x[:, fast.REC_READ_DONE] = out.extra_reads[:, 1]
        x[:, fast.REC_QUEUED] = out.extra_reads[:, 1]
        xi = np.zeros((x.shape[0], 3), np.int64)
        xi[:, 0] = out.extra_ids
        xi[:, 2] = -1
        rec, ids = np.concatenate([rec, x]), np.concatenate([ids, xi])
    by_frame = np.argsort(ids[:, 0], kind="stable")
    rec, ids = rec[by_frame], ids[by_frame]
    col = rec.T
    ranks = ids[:, 2]
    order = np.empty(ranks.size, np.intp)  # order[rank] = frame, where every frame is recorded
    if ranks.size and ranks.min() >= 0 and ranks.max() < ranks.size:
        order[ranks] = ids[:, 0]
    if not spec.decoder_seconds_per_frame:
        S, C, E = col[fast.REC_DECODE_START], col[fast.REC_DECODE_DONE], col[fast.REC_ENTER]
        return QueueTrace(S, C, E, E, E, E, col[fast.REC_STEP], np.full(ranks.size, -1), order, step)
    return QueueTrace(col[fast.REC_READ_START], col[fast.REC_READ_DONE], col[fast.REC_QUEUED],
                      col[fast.REC_DECODE_START], col[fast.REC_DECODE_DONE], col[fast.REC_ENTER], col[fast.REC_STEP],
                      ids[:, 1].astype(np.intp), order, step)


def run(spec: QueueSpec, times: ServiceTimes | None = None, engine: str = "auto") -> QueueTrace:
    """The recurrence on `times` (sampled from `spec` when None): every frame's times.

    `engine`: "python" (the reference), "compiled" (numba, the `fast` extra; bit-identical
    times) or "auto" (compiled when installed and worth its import)."""
    _check(spec)
    n = int(spec.frames)
    if _engine(engine, n):  # every frame recorded from rank 0; no statistics (the window opens after the end)
        out = _stream(spec, times, (n, n), 0, n, 0)
        step = float(times.step_seconds) if times is not None else float(spec.step_seconds_per_frame)
        return _recorded(spec, out, step)
    return _run_python(_prepare(spec, times))


def _window(spec: QueueSpec) -> tuple[int, int, int, int]:
    """Warm-up frames, drain frames, and the measured steps k0 .. k1-1."""
    n = int(spec.frames)
    c = len(spec.decoder_seconds_per_frame)
    cooldown = int(spec.buffer_frames) + max(c, 1) + (spec.read_ahead_frames or 0)
    warmup = max(int(WARMUP_FRACTION * n), 1)
    k0, k1 = warmup, n - cooldown
    if k1 - k0 < 10:
        raise UserError("simulate.frames", f"more frames: {n} leaves too few after warm-up {warmup} "
                        f"and drain {cooldown}")
    return warmup, cooldown, k0, k1


def simulate(spec: QueueSpec, times: ServiceTimes | None = None, timeline_limit: int = 2000,
             engine: str = "auto") -> QueueResult:
    """Run the queue on `times` (sampled from `spec` when None) and measure its steady state.

    Waits (time-weighted over the window, see the module's notes):
    `accelerator_starved` (fraction of time without a frame, 1 - busy),
    `decoders_blocked` / `decoders_starved` (mean number of decoders holding a frame the
    full buffer refuses / waiting for a read), `reader_blocked` (fraction, bounded
    read-ahead only), `mean_buffer_wait_seconds` (a frame's time in the buffer),
    `mean_read_queue_wait_seconds` (a read frame's wait for a decoder),
    `mean_decoder_blocked_seconds` (per frame).

    `engine` as for `run`; the compiled engine sums the statistics in the same pass as the
    recurrence (equal to the reference's numpy sums up to rounding), streaming the frames a chunk
    at a time: it keeps only the frames the timeline can show, never an array per frame.
    """
    _check(spec)
    warmup, cooldown, k0, k1 = _window(spec)
    if _engine(engine, int(spec.frames)):
        limit = max(int(timeline_limit), 0)
        records = extra = 0
        if limit:
            # every frame that can reach the first `limit` intervals or the buffer's trace beside them:
            # those decoding at rank k0 and the next limit + read-ahead + buffer + 2 decoders handed out
            # (docs/simulation.md); with unbounded read-ahead, the first limit + 1 reads beyond them
            c = len(spec.decoder_seconds_per_frame)
            records = min(int(spec.frames), limit + (spec.read_ahead_frames or 0) + int(spec.buffer_frames) + 2 * c + 4)
            extra = limit + 1 if spec.read_ahead_frames is None and c else 0
        out = _stream(spec, times, (k0, k1), k0, records, extra)
        step = float(times.step_seconds) if times is not None else float(spec.step_seconds_per_frame)
        return _result(spec, _recorded(spec, out, step), warmup, cooldown, k0, k1, limit,
                       (out.sums, out.group_busy, out.group_blocked))
    return _result(spec, _run_python(_prepare(spec, times)), warmup, cooldown, k0, k1, timeline_limit, None)


class _Totals(NamedTuple):
    """What the statistics need from a run: the window, time-in-state sums over it, means over measured frames."""

    t0: float
    t1: float
    read_busy: float  # seconds, summed over frames, inside the window
    read_blocked: float
    read_queue: float
    buffer: float
    group_busy: list[float]  # per decoder group
    group_blocked: list[float]
    mean_read_queue_wait: float  # seconds per measured frame
    mean_decoder_blocked: float
    mean_buffer_wait: float
    mean_read_seconds: float
    mean_work: float  # decode work multiplier (0 without decoders)


def _result(spec: QueueSpec, tr: QueueTrace, warmup: int, cooldown: int, k0: int, k1: int, timeline_limit: int,
            fused: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> QueueResult:
    """Statistics of a run: numpy over the per-frame arrays, or the sums the compiled pass fused (then
    `tr` holds only the recorded frames, enough for the timeline)."""
    n = int(spec.frames)
    step = tr.step_seconds
    no_decoder = not spec.decoder_seconds_per_frame
    names, gidx = _groups(spec)
    totals = _fused_totals(fused, k0, k1) if fused is not None else _traced_totals(spec, tr, k0, k1, names, gidx)
    t0, t1 = totals.t0, totals.t1
    window = t1 - t0

    busy = min(1.0, (k1 - k0) * step / window)  # min: float rounding of a saturated run
    throughput = (k1 - k0) / window
    buf_frames = totals.buffer / window
    rq_frames = totals.read_queue / window
    stages, utilisation, waits = _stage_uses(totals, window, busy, names, gidx, no_decoder)
    bottleneck = _bottleneck(stages, utilisation["read"], busy)

    A_f = tr.step_start
    timeline, trace, span = _timeline(
        spec, t0, window / (k1 - k0), timeline_limit, (tr.read_start, tr.read_done), (tr.read_done, tr.queued),
        (tr.decode_start, tr.decode_done), (tr.decode_done, tr.enter_buffer),
        (A_f, A_f + step) if timeline_limit > 0 else (A_f, A_f), tr.enter_buffer, A_f, tr.decoder,
    )
    fb = formula_busy(spec)
    v = spec.variability
    return QueueResult(
        busy=busy,
        formula_busy=fb,
        sample_formula_busy=_sample_formula_busy(spec, totals, step, no_decoder),
        difference=busy - fb,
        throughput_fps=throughput,
        demand_fps=1.0 / step,
        mean_buffer_frames=buf_frames,
        mean_read_queue_frames=rq_frames,
        utilisation=utilisation,
        waits=waits,
        stages=tuple(stages),
        bottleneck=bottleneck,
        frames=n,
        warmup_frames=warmup,
        cooldown_frames=cooldown,
        window_seconds=window,
        seed=spec.seed,
        variability=None if v is None or v.is_off else asdict(v) | {
            "empirical_decode_seconds": len(v.empirical_decode_seconds)},
        timeline=timeline,
        buffer_trace=trace,
        timeline_span=span,
    )


def _fused_totals(fused: tuple[np.ndarray, np.ndarray, np.ndarray], k0: int, k1: int) -> _Totals:
    """The totals of a run from the sums the compiled pass fused into its loop."""
    sums, gbusy, gblocked = fused
    from trainplan.simulate import fast

    m = k1 - k0
    t0, t1 = float(sums[fast.T0]), float(sums[fast.T1])
    return _Totals(
        t0, t1, float(sums[fast.READ_BUSY]), float(sums[fast.READ_BLOCKED]), float(sums[fast.READ_QUEUE]),
        float(sums[fast.BUFFER]), [float(x) for x in gbusy], [float(x) for x in gblocked],
        float(sums[fast.READ_QUEUE_WAIT]) / m, float(sums[fast.DECODER_BLOCKED_WAIT]) / m,
        float(sums[fast.BUFFER_WAIT]) / m, float(sums[fast.READ_SECONDS]) / m, float(sums[fast.WORK]) / m)


def _traced_totals(spec: QueueSpec, tr: QueueTrace, k0: int, k1: int, names: list[str], gidx: list[int]) -> _Totals:
    """The totals of a run from its per-frame arrays (numpy), over the window of steps k0 .. k1-1."""
    no_decoder = not spec.decoder_seconds_per_frame
    read_start, read_done, P, S, C, E, A_f = (
        tr.read_start, tr.read_done, tr.queued, tr.decode_start, tr.decode_done, tr.enter_buffer, tr.step_start)
    who, order = tr.decoder, tr.order
    A = A_f[order]  # step starts in rank order (increasing)
    # Measurement window: steps k0 .. k1-1.
    t0, t1 = float(A[k0]), float(A[k1])

    def overlap(start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return np.clip(end, t0, t1) - np.clip(start, t0, t1)

    measured = order[k0:k1]
    g_busy: list[float] = []
    g_blocked: list[float] = []
    mean_work = 0.0
    if not no_decoder:
        g_of_frame = np.asarray(gidx)[who]
        dec_busy = overlap(S, C)
        dec_blocked = overlap(C, E)
        for g in range(len(names)):
            mask = g_of_frame == g
            g_busy.append(float(dec_busy[mask].sum()))
            g_blocked.append(float(dec_blocked[mask].sum()))
        mean_work = float(((C - S) / np.asarray(spec.decoder_seconds_per_frame)[who])[measured].mean())
    return _Totals(
        t0, t1, float(overlap(read_start, read_done).sum()), float(overlap(read_done, P).sum()),
        float(overlap(P, S).sum()), float(overlap(E, A_f).sum()), g_busy, g_blocked,
        float((S[measured] - P[measured]).mean()), float((E[measured] - C[measured]).mean()),
        float((A_f[measured] - E[measured]).mean()), float((read_done - read_start)[measured].mean()),
        mean_work)


def _stage_uses(totals: _Totals, window: float, busy: float, names: list[str], gidx: list[int],
                no_decoder: bool) -> tuple[list[StageUse], dict[str, float], dict[str, float]]:
    """(each stage's use, busy fraction by stage, waits) of a run: reader, decoder groups, accelerator."""
    stages: list[StageUse] = []
    utilisation: dict[str, float] = {}
    waits: dict[str, float] = {"accelerator_starved": 1.0 - busy}
    r_busy = totals.read_busy / window
    r_blocked = totals.read_blocked / window
    stages.append(StageUse("read", 1, r_busy, r_blocked, max(0.0, 1 - r_busy - r_blocked)))
    utilisation["read"] = r_busy
    waits["reader_blocked"] = r_blocked
    waits["mean_read_queue_wait_seconds"] = totals.mean_read_queue_wait
    total_blocked = 0.0
    total_starved = 0.0
    if not no_decoder:
        for g, name in enumerate(names):
            units = gidx.count(g)
            b = totals.group_busy[g] / window / units
            bl = totals.group_blocked[g] / window / units
            idle = max(0.0, 1.0 - b - bl)
            stages.append(StageUse(name, units, b, bl, idle))
            utilisation[name] = b
            total_blocked += bl * units
            total_starved += idle * units
    waits["decoders_blocked"] = total_blocked
    waits["decoders_starved"] = total_starved
    waits["mean_decoder_blocked_seconds"] = totals.mean_decoder_blocked
    waits["mean_buffer_wait_seconds"] = totals.mean_buffer_wait
    stages.append(StageUse("accelerator", 1, busy, 0.0, 1.0 - busy))
    utilisation["accelerator"] = busy
    return stages, utilisation, waits


def _bottleneck(stages: list[StageUse], r_busy: float, busy: float) -> str:
    """The busiest of read, decode (every decoder pooled) and accelerator, in §7's words;
    the accelerator wins a tie (a balanced pipeline keeps it busy)."""
    dec_units = sum(s.units for s in stages[1:-1])
    pooled = {"read": r_busy, "accelerator": busy}
    if dec_units:
        pooled["decode"] = sum(s.busy * s.units for s in stages[1:-1]) / dec_units
    most = max(pooled.values())
    return next(k for k in ("accelerator", "decode", "read") if k in pooled and pooled[k] >= most - 1e-9)


def _sample_formula_busy(spec: QueueSpec, totals: _Totals, step: float, no_decoder: bool) -> float:
    """§7's busy fraction min(1, S/D) on the sample's own mean read seconds and decode work."""
    mean_read = totals.mean_read_seconds
    if no_decoder:
        return min(1.0, step / mean_read) if mean_read > 0 else 1.0
    mean_work = totals.mean_work
    supply = sum(1.0 / (mean_work * d) for d in spec.decoder_seconds_per_frame)
    if mean_read > 0:
        supply = min(supply, 1.0 / mean_read)
    return min(1.0, supply * step)


def _timeline(
    spec: QueueSpec,
    t0: float,
    seconds_per_frame: float,
    limit: int,
    read: tuple[np.ndarray, np.ndarray],
    read_blocked: tuple[np.ndarray, np.ndarray],
    decode: tuple[np.ndarray, np.ndarray],
    decode_blocked: tuple[np.ndarray, np.ndarray],
    steps: tuple[np.ndarray, np.ndarray],
    enter: np.ndarray,
    leave: np.ndarray,
    who: np.ndarray,
) -> tuple[tuple[Interval, ...], tuple[tuple[float, int], ...], tuple[float, float]]:
    """The first `limit` intervals (by start) that end after t0, the start of the window
    (steady state), the buffer's occupancy over the span they cover, and that span."""
    if limit <= 0:
        return (), (), (t0, t0)
    names, gidx = _groups(spec)
    count = [0] * len(names)
    lanes = []
    for g in gidx:
        lanes.append(f"{names[g]}[{count[g]}]")
        count[g] += 1
    horizon = t0 + 2.0 * limit * seconds_per_frame  # holds > limit intervals (>= 2 a frame)
    parts = []  # (start, end, kind, frame)

    def take(pair: tuple[np.ndarray, np.ndarray], kind: int, hi: float, cand: np.ndarray) -> None:
        start, end = pair[0][cand], pair[1][cand]
        mask = (end > t0) & (start < hi) & (end > start)
        parts.append((start[mask], end[mask], np.full(int(mask.sum()), kind), cand[mask]))

    def collect(hi: float) -> tuple[np.ndarray, ...]:
        parts.clear()
        # A frame's intervals all lie between its read start and the end of its step: only
        # frames with that span across (t0, hi) can contribute (the same intervals, in the
        # same frame order, from a few thousand frames instead of all of them).
        cand = np.nonzero((steps[1] > t0) & (read[0] < hi))[0]
        take(read, 0, hi, cand)
        take(read_blocked, 1, hi, cand)
        take(decode, 2, hi, cand)
        take(decode_blocked, 3, hi, cand)
        take(steps, 4, hi, cand)
        return tuple(np.concatenate([p[f] for p in parts]) for f in range(4))

    start, end, kind, frame = collect(horizon)
    if start.size < limit:
        start, end, kind, frame = collect(math.inf)
    ranked = np.lexsort((kind, start))
    sel = ranked[:limit]
    cut = float(start[ranked[limit]]) if ranked.size > limit else float(end.max(initial=t0))
    out = []
    for s_, e_, k_, f_ in zip(start[sel].tolist(), end[sel].tolist(), kind[sel].tolist(), frame[sel].tolist()):
        if k_ == 0:
            w = "read"
        elif k_ == 1:
            w = "read blocked"
        elif k_ == 2:
            w = lanes[who[f_]]
        elif k_ == 3:
            w = lanes[who[f_]] + " blocked"
        else:
            w = "accelerator"
        out.append(Interval(w, s_, e_))
    if not out:
        return (), (), (t0, t0)
    lo = t0
    hi = cut
    inside = (enter <= lo) & (leave > lo)
    level = int(inside.sum())
    ev_in = enter[(enter > lo) & (enter <= hi)]
    ev_out = leave[(leave > lo) & (leave <= hi)]
    times = np.concatenate([ev_in, ev_out])
    delta = np.concatenate([np.ones(ev_in.size, dtype=int), -np.ones(ev_out.size, dtype=int)])
    o = np.lexsort((delta, times))  # leave before enter at one instant
    levels = level + np.cumsum(delta[o])
    trace = [(lo, level)] + list(zip(times[o].tolist(), levels.tolist()))
    return tuple(out), tuple(trace), (lo, hi)


# ---------------------------------------------------------------- helpers


def buffer_sweep(spec: QueueSpec, buffers: tuple[int, ...], times: ServiceTimes | None = None,
                 engine: str = "auto") -> list[dict[str, float]]:
    """Busy at several buffer sizes on one service-time sample (the sample does not depend on B)."""
    rows = []
    if engine == "auto" and _engine("auto", int(spec.frames) * len(buffers)):
        engine = "compiled"
    if times is None and engine != "compiled":  # the compiled engine draws the sample as it streams
        times = sample_service_times(spec)
    for b in buffers:
        r = simulate(replace(spec, buffer_frames=int(b)), times, timeline_limit=0, engine=engine)
        rows.append({"buffer_frames": int(b), "busy": r.busy, "formula_busy": r.formula_busy,
                     "difference": r.difference, "mean_buffer_frames": r.mean_buffer_frames})
    return rows


# ---------------------------------------------------------------- from the pipeline account (§7)


#: The most CPU decoders the queue simulates one by one (issue 16). More cores are coalesced into
#: this many decoders of several cores each, with the same total rate: the simulation's state is
#: a few numbers per decoder, and a queue of thousands of parallel servers behaves as its total
#: rate (the busy fraction is min(1, S/D) to within the sampling error at that size).
MAX_CPU_DECODERS = 4096


def queue_spec_from_pipeline(
    account: Any,
    buffer_frames: int = 64,
    frames: int = 100_000,
    seed: int = 0,
    variability: Variability | None = None,
    read_ahead_frames: int | None = READ_AHEAD_FRAMES,
) -> tuple[QueueSpec, list[str]]:
    """The queue of a `pipeline.PipelineAccount` (one accelerator), and notes on what it leaves out.

    Times are per frame used: a used frame costs g decoded frames (g = decoded_per_used,
    (G+1)/2 for random access), so a core decodes a used frame in g / core_fps seconds
    and an engine in g / engine_fps. Fractional cores (cores = 23.5) become 23 whole
    decoders and one at half speed, which keeps the total rate exact. Pre-decoded frames
    (g = 0) have no decoder. The reader is the storage link; host-to-device transfer is
    not a stage of the queue, and where it (or a tokenizer) is slower than read and
    decode it is folded into the serial reader so that the capacity still binds (noted).
    """
    if getattr(account, "kind", "video") not in FRAME_KINDS:
        raise UserError("data.kind", "video: the queue simulates frames (token data has no decoder to queue on)")
    notes: list[str] = []
    n = float(account.tokens_per_frame)
    g = float(account.decoded_per_used)
    demand = float(account.demand_fps)
    if not (demand > 0 and math.isfinite(demand)):
        raise UserError("pipeline.demand_fps", f"a finite demand > 0 frames/s, got {demand!r}")
    serial_fps = _serial_reader_fps(account.stage_tokens_per_second, n, notes)
    o = float(getattr(account, "loader_cpu_per_frame", 0.0))
    if o > 0:
        g, core_fps, cores, engines, engine_fps, hand_note = _with_hand_over(account, g, o)
        notes.append(hand_note)
    else:
        core_fps, cores = float(account.core_fps), float(account.cores)
        engines = int(round(float(account.video_decoders)))
        engine_fps = (float(account.decoder_fps) - cores * core_fps) / engines if engines > 0 and g > 0 else 0.0
    decoders, names = _decoders(g, core_fps, cores, engines, engine_fps, notes) if g > 0 else ([], [])
    if not getattr(account, "prefetch", True):
        notes.append("cluster.prefetch is false: the formula's busy is S/(S+D); the queue always overlaps "
                     "loading with compute, so it is compared with min(1, S/D)")
    spec = QueueSpec(
        read_seconds_per_frame=0.0 if math.isinf(serial_fps) else 1.0 / serial_fps,
        decoder_seconds_per_frame=tuple(decoders),
        step_seconds_per_frame=1.0 / demand,
        buffer_frames=int(buffer_frames),
        frames=int(frames),
        seed=int(seed),
        variability=variability,
        decoder_names=tuple(names),
        read_ahead_frames=read_ahead_frames,
    )
    return spec, notes


def _serial_reader_fps(stage: Any, n: float, notes: list[str]) -> float:
    """Frames/s of the queue's serial reader: the storage link's, or a slower tokenizer's or transfer's (noted)."""
    read_fps = float(stage["read"]) / n
    serial_fps = read_fps
    for other in ("tokenize", "transfer"):
        fps_other = float(stage.get(other, math.inf)) / n
        if fps_other < min(serial_fps, float(stage["decode"]) / n):
            notes.append(f"{other} ({fps_other:.6g} frames/s) binds before read and decode; "
                         f"the simulated reader carries its time")
            serial_fps = fps_other
    return serial_fps


def _decoders(g: float, core_fps: float, cores: float, engines: int, engine_fps: float,
              notes: list[str]) -> tuple[list[float], list[str]]:
    """(seconds per used frame, group name) of each decoder: the whole cores, a fractional one, the engines."""
    decoders: list[float] = []
    names: list[str] = []
    whole = int(math.floor(cores + 1e-9))
    frac = cores - whole
    if whole > MAX_CPU_DECODERS:
        # coalesce: MAX_CPU_DECODERS decoders of cores / MAX_CPU_DECODERS cores each keep the
        # total rate exact and the memory bounded (issue 16)
        share = cores / MAX_CPU_DECODERS
        whole, frac = MAX_CPU_DECODERS, 0.0
        core_fps_each = core_fps * share
        notes.append(f"{cores:g} cores simulated as {MAX_CPU_DECODERS} decoders of {share:.4g} cores each "
                     "(same total rate)")
    else:
        core_fps_each = core_fps
    decoders += [g / core_fps_each] * whole
    names += ["cpu"] * whole
    if frac > 1e-9:
        decoders.append(g / (core_fps * frac))
        names.append("cpu")
        notes.append(f"{cores:g} cores: {whole} decoders and one at {frac:.3g} of a core's speed")
    if engines > 0:
        decoders += [g / engine_fps] * engines
        names += ["nvdec"] * engines
    if not decoders:
        raise UserError("cluster.cores", "at least one decoder (a CPU core or a video engine) for encoded video")
    return decoders, names


def _with_hand_over(account: Any, g: float, o: float) -> tuple[float, float, float, int, float, str]:
    """The decoders of a pipeline whose loader spends o core-seconds on each frame used besides decoding
    it (data.loader_cpu_per_frame, docs/pipeline-and-bill.md), as (g, core_fps, cores, engines, engine_fps,
    note) for the queue: with E used frames/s from the engines, their hand-over takes E o of the cores, and
    each remaining core takes g / core_fps + o a frame; where the engines' hand-over alone fills the
    cores, the engines deliver cores / o between them. Pre-decoded frames (g = 0) become cores that
    each hand over a frame in o seconds (g = 1 frame of work at 1 / o frames/s). The total rate is
    the formula's; the split of the engines' hand-over over the cores is folded into the rates."""
    cores, core_fps = float(account.cores), float(account.core_fps)
    if g <= 0:
        return 1.0, 1.0 / o, cores, 0, 0.0, (f"data.loader_cpu_per_frame {o:g} s: pre-decoded frames are handed "
                                              f"over by {cores:g} cores at {1 / o:.4g} frames/s each")
    engines = int(round(float(account.video_decoders)))
    engine_fps = (float(account.decoder_fps) - cores * core_fps) / engines if engines > 0 else 0.0
    engine_used = engines * engine_fps / g
    spare = cores - engine_used * o
    per_core = g / (g / core_fps + o)  # decoded frames/s of a core that also hands its frames over
    if spare >= 0:
        return g, per_core, spare, engines, engine_fps, (
            f"data.loader_cpu_per_frame {o:g} s: {spare:.4g} of {cores:g} cores decode at {per_core:.4g} frames/s "
            f"each, hand-over included; the engines' hand-over takes the other {cores - spare:.4g}")
    if cores <= 0:  # no core to hand a frame over: nothing reaches the accelerator
        return g, per_core, 0.0, 0, 0.0, f"data.loader_cpu_per_frame {o:g} s: no core hands the engines' frames over"
    capped = g * cores / (o * engines)  # decoded frames/s of an engine whose hand-over fills the cores
    return g, per_core, 0.0, engines, capped, (
        f"data.loader_cpu_per_frame {o:g} s: the engines' hand-over fills the {cores:g} cores; the engines "
        f"deliver {cores / o:.4g} frames used a second between them")


def simulated_check(
    account: Any,
    frames: int = 200_000,
    seed: int = 0,
    variability: Variability | None = None,
    buffer_frames: int | None = None,
) -> dict[str, Any]:
    """The simulated busy fraction next to the formula's, for `trainplan plan --simulate`.

    Takes a pipeline.PipelineAccount (a workload's: planning/simulation.py). Keys: `busy` (simulated),
    `formula_busy` (min(1, S/D) of the simulated stages, §7's busy when prefetching),
    `difference` (busy - formula_busy), `pipeline_busy` (the plan's figure), and the
    simulation's throughput, bottleneck, buffer, frames, seed and notes. Token data has
    no queue: then `busy` is None and a note says why.
    """
    buffer = 64 if buffer_frames is None else buffer_frames
    if getattr(account, "kind", "video") not in FRAME_KINDS:
        return _no_queue(account)
    spec, notes = queue_spec_from_pipeline(account, buffer, frames, seed, variability)
    r = simulate(spec, timeline_limit=0)
    return {
        "busy": r.busy,
        "formula_busy": r.formula_busy,
        "difference": r.difference,
        "pipeline_busy": float(account.busy),
        "throughput_fps": r.throughput_fps,
        "demand_fps": r.demand_fps,
        "bottleneck": r.bottleneck,
        "mean_buffer_frames": r.mean_buffer_frames,
        "buffer_frames": spec.buffer_frames,
        "frames": spec.frames,
        "seed": spec.seed,
        "variability": r.variability,
        "notes": notes,
    }


def _no_queue(account: Any) -> dict[str, Any]:
    return {"busy": None, "formula_busy": float(account.busy), "difference": None,
            "pipeline_busy": float(account.busy),
            "notes": ["token data: no decode stage to queue on, nothing simulated"]}
