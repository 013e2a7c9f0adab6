"""A workload's input pipeline as a queue: its pipeline account handed to the simulation
(simulate/queue.py takes accounts, never a workload, so the simulation stays beside the plan)."""

from __future__ import annotations

from typing import Any

from trainplan.accounts import pipeline as pipeline_mod
from trainplan.planning.evaluate import pipeline_inputs
from trainplan.simulate.queue import (READ_AHEAD_FRAMES, QueueSpec, Variability, queue_spec_from_pipeline,
                                      simulated_check)
from trainplan.workload.schema import Workload


def pipeline_account_of(workload: Workload) -> Any:
    """The workload's PipelineAccount, as the plan computes it."""
    return pipeline_mod.pipeline_account(**pipeline_inputs(workload))


def queue_spec_from_workload(
    workload: Workload,
    frames: int = 100_000,
    seed: int = 0,
    variability: Variability | None = None,
    buffer_frames: int | None = None,
    read_ahead_frames: int | None = READ_AHEAD_FRAMES,
) -> tuple[QueueSpec, Any, list[str]]:
    """The queue of a `Workload` (data.buffer sizes the buffer): spec, its PipelineAccount, notes."""
    account = pipeline_account_of(workload)
    b = workload.data.buffer if buffer_frames is None else buffer_frames
    spec, notes = queue_spec_from_pipeline(account, b, frames, seed, variability, read_ahead_frames)
    return spec, account, notes


def simulated_check_of(workload: Workload, frames: int = 200_000, seed: int = 0,
                       variability: Variability | None = None, buffer_frames: int | None = None) -> dict[str, Any]:
    """`trainplan plan --simulate`: the workload's queue simulated beside the formula (queue.simulated_check)."""
    buffer = workload.data.buffer if buffer_frames is None else buffer_frames
    return simulated_check(pipeline_account_of(workload), frames, seed, variability, buffer)
