"""The queue of docs/simulation.md written in SimPy: the outside reference for trainplan.simulate.queue.

Same semantics as the engine (see trainplan/queue.py): one serial reader feeding a
read-ahead `Store` (unbounded unless `read_ahead_frames`), c decoder processes taking
frames FIFO, a `Store` of `buffer_frames` decoded frames, and an accelerator that
trains on one frame per step. It records when every frame did what, and measures
busy over the same window (the same warm-up and drain) so the two can be compared on
one service-time sample. It knows nothing of the engine beyond the spec and the
sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy


@dataclass
class SimpyRun:
    step_start: np.ndarray  # per frame
    enter_buffer: np.ndarray
    decode_done: np.ndarray
    decode_start: np.ndarray
    steps_in_order: np.ndarray  # step starts in the order they happened
    busy: float
    mean_buffer_frames: float
    decoder_busy: float  # mean over decoders, fraction of the window
    events: int  # SimPy events processed


def simulate_simpy(
    read_seconds: np.ndarray,
    decode_work: np.ndarray,
    decoder_seconds: tuple[float, ...],
    step_seconds: float,
    buffer_frames: int,
    read_ahead_frames: int | None = None,
    warmup_fraction: float = 0.1,
) -> SimpyRun:
    n = len(read_seconds)
    read = np.asarray(read_seconds, dtype=float).tolist()
    work = np.asarray(decode_work, dtype=float).tolist()
    env = simpy.Environment()
    buffer = simpy.Store(env, capacity=buffer_frames)
    step_start = [0.0] * n
    enter = [0.0] * n
    done = [0.0] * n
    start = [0.0] * n
    order: list[float] = []
    level_changes: list[tuple[float, int]] = []  # (time, +1 enter / -1 leave)

    if decoder_seconds:
        ahead = simpy.Store(env, capacity=read_ahead_frames if read_ahead_frames else float("inf"))

        def reader():
            for i in range(n):
                yield env.timeout(read[i])
                yield ahead.put(i)

        def decoder(d: int, seconds: float):
            while True:
                i = yield ahead.get()
                start[i] = env.now
                yield env.timeout(work[i] * seconds)
                done[i] = env.now
                yield buffer.put(i)
                enter[i] = env.now
                level_changes.append((env.now, +1))

        env.process(reader())
        for d, seconds in enumerate(decoder_seconds):
            env.process(decoder(d, seconds))
    else:  # pre-decoded frames: the reader feeds the buffer itself

        def reader():
            for i in range(n):
                start[i] = env.now
                yield env.timeout(read[i])
                done[i] = env.now
                yield buffer.put(i)
                enter[i] = env.now
                level_changes.append((env.now, +1))

        env.process(reader())

    def accelerator():
        for _ in range(n):
            i = yield buffer.get()
            step_start[i] = env.now
            order.append(env.now)
            level_changes.append((env.now, -1))
            yield env.timeout(step_seconds)

    acc = env.process(accelerator())
    events = 0
    while acc.is_alive:  # env.run(until=acc), counting events
        env.step()
        events += 1

    steps = np.asarray(order)
    c = max(len(decoder_seconds), 1)
    k0 = max(int(warmup_fraction * n), 1)
    k1 = n - (buffer_frames + c + (read_ahead_frames or 0))
    t0, t1 = steps[k0], steps[k1]
    window = t1 - t0
    busy = (k1 - k0) * step_seconds / window

    # time-weighted buffer level, integrated event by event
    area = 0.0
    level = 0
    last = 0.0
    for t, dl in level_changes:
        lo, hi = max(last, t0), min(t, t1)
        if hi > lo:
            area += level * (hi - lo)
        level += dl
        last = t
    if t1 > last:
        area += level * (t1 - max(last, t0))
    s = np.asarray(start)
    dd = np.asarray(done)
    dbusy = float((np.clip(dd, t0, t1) - np.clip(s, t0, t1)).sum() / window / c)
    return SimpyRun(
        step_start=np.asarray(step_start), enter_buffer=np.asarray(enter), decode_done=dd,
        decode_start=s, steps_in_order=steps, busy=float(min(1.0, busy)),
        mean_buffer_frames=area / window, decoder_busy=dbusy, events=events,
    )
