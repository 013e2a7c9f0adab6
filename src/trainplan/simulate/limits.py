"""Plausible ranges of the simulation's inputs (issues 16 and 29), in one place for `trainplan simulate`
and its `--vary` grid. Beyond them a run is a typo, not a question. No numpy here: the CLI starts light.

The MAX_FRAMES comment's old reason (arrays per frame) is gone: the compiled engine streams its frames
(docs/simulation.md); the bound now keeps one run to seconds, and the pure-Python reference, which
still holds every frame, to a few GB.
"""

from __future__ import annotations

from typing import Final

MAX_SEED: Final = 2**63 - 1  # numpy's generators take any seed >= 0; one that fits in int64 is plenty
MAX_FRAMES: Final = 20_000_000  # seconds of compiled simulation; the Python reference holds ~ 150 B a frame
MAX_BUFFER_FRAMES: Final = 1_000_000  # a frame buffer of a million decoded frames is ~ 150 GB at 224 px
MAX_TIMELINE: Final = 1_000_000  # timeline intervals kept for --plot
MIN_MEAN_FRAME_SECONDS: Final = 1e-9  # the mean of an empirical sample: a billion frames a second per core
MAX_FRAME_SECONDS: Final = 3600.0  # a decode time or read latency above an hour per frame is not a measurement
MAX_CV: Final = 100.0  # a coefficient of variation beyond 100 is a heavy tail no sample of this size estimates
MAX_KEYFRAME_COST: Final = 1e4  # a keyframe costing ten thousand ordinary frames
MAX_BUFFER_SIZES: Final = 64  # --buffers: each size is one more run of the queue
# --vary: the most simulations one grid runs. Each is at least 1,000 frames and a spec of up to a few
# thousand decoders (~ 40 kB), so 100,000 of them are ~ 4 GB of specs at the worst and 10^8 frames at
# the least: minutes, not the hours of seed=0:999999. Overridable with TRAINPLAN_MAX_SIMULATIONS.
MAX_SIMULATIONS: Final = 100_000
