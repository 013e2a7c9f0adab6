"""A real end-to-end check of the pipeline account (docs/pipeline-and-bill.md) on the machine at hand.

Synthetic H.264 clips are written to disk; a PyTorch DataLoader with a worker process
decodes them with PyAV (one thread, colour conversion and resize to the model side
included); a small real model trains on the CPU with one thread. The profiler measures
the busy fraction of the training loop, and the plan predicts it from probes taken on the
same machine just before each run:

- supply S: `cluster.cores` = loader workers and `cluster.core_fps_1080p` from the loader
  probe: frames per CPU-second of one DataLoader worker decoding the clips with nothing to
  wait for (decode, conversion, resize, collate into shared memory, hand-over), written to
  a calibration file and read by `load_workload(..., calibration=FILE)` as `trainplan plan
  --calibration` does; `cluster.link` from the read probe. The bare decode probe's figure
  is reported next to it: here the worker's collate and hand-over cost about a tenth more.
- demand D: the step probe, frames per CPU-second of the model's step with data ready
  (batches through a DataLoader from memory), with a decoder running next to it, and at
  the duty cycle the plan predicts (see `calibrate_pipeline`). It enters the plan as a
  custom accelerator whose peak is the one-thread matmul probe's rate and whose MFU is
  what the step achieves of it, end-to-end; the plan's D = μΦ/(6Pn) gives it back.
- predicted busy = min(1, S / D) with prefetch; measured busy = step time / wall time.

The accelerator is the CPU itself here, so the trainer and the decoder share the
machine: caches, memory bandwidth, and on a VM the host. Rates are per CPU-second so that
time-slicing by other work cancels to first order. What this machine taught, each now in
the probes: swscale takes a thread per CPU unless told one (a "one-thread" decoder used
two); opening a 60-frame clip is a tenth of its decode; the step of a small model runs a
quarter slower next to a decoder than alone, and slower again after each wait for data.
What is not modelled: with more busy processes than cores (2 workers + the trainer on 2
cores) a worker does not get a core of its own, and the run is flagged (`contended`), as is
a run whose step outran the one-thread matmul probe (the machine's rate moved between the
probes: the ceiling is raised to the step's rate and the run goes on); the default settings
therefore vary the model size with one worker. Rates on this VM
wander by 10-25 % from minute to minute, so `--repeats N` measures each setting N times
and reports the median run.

Run:  python examples/video_training.py [--settings 1:96x1,1:144x1] [--seconds 6] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from trainplan.workload import calibration
from trainplan.measure import handover
from trainplan.measure import probe
from trainplan.measure import profiler as tp_profile


@dataclass(frozen=True)
class Setting:
    """One configuration: loader workers and the model's width and depth."""

    workers: int
    width: int
    depth: int

    @classmethod
    def parse(cls, text: str) -> Setting:
        """'WORKERS:WIDTHxDEPTH', e.g. '1:48x1'."""
        workers, _, shape = text.partition(":")
        width, _, depth = shape.partition("x")
        return cls(int(workers), int(width), int(depth or 1))

    @property
    def name(self) -> str:
        return f"{self.workers} worker{'s' if self.workers != 1 else ''}, model {self.width}x{self.depth}"


@dataclass(frozen=True)
class Config:
    width: int = 640
    height: int = 360
    fps: float = 30.0
    bitrate: float = 2e6
    gop: int = 30
    clip_frames: int = 60
    clips: int = 4
    side: int = 112
    patch: int = 14
    batch: int = 16
    classes: int = 10
    seconds: float = 6.0  # measured time per setting, after warm-up
    probe_seconds: float = 2.5  # each probe's measurement (this VM's rates wander by ~10 % over seconds)
    warmup: int = 4  # batches not counted (worker start, first clip)

    @property
    def clip_format(self) -> probe.ClipFormat:
        return probe.ClipFormat(self.width, self.height, self.fps, self.bitrate, self.gop)

    @property
    def tokens_per_frame(self) -> int:
        return (self.side // self.patch) ** 2


# ---------------------------------------------------------------- data


def make_clips(directory: Path, cfg: Config) -> list[Path]:
    """`cfg.clips` MP4 files of moving synthetic content in the workload's format.

    Two distinct clips are encoded (encoding is slow on a small machine) and copied to
    the rest; a copy decodes at the same cost as an original."""
    directory.mkdir(parents=True, exist_ok=True)
    originals = []
    for seed in range(min(2, cfg.clips)):
        clip = probe.synthesize_clip(cfg.clip_format, cfg.clip_frames, seed=seed)
        path = directory / f"clip-{seed:03d}.mp4"
        path.write_bytes(clip.data)
        originals.append(path)
    files = list(originals)
    for i in range(len(originals), cfg.clips):
        path = directory / f"clip-{i:03d}.mp4"
        shutil.copyfile(originals[i % len(originals)], path)
        files.append(path)
    return files


class ClipFrames(IterableDataset):
    """Frames of the clips, decoded in order on one thread, RGB at side x side, forever.

    Each worker takes every k-th clip; a clip's frames are decoded and post-processed as
    the decode probe does them, under the profiler's `read` and `decode` hop timers."""

    def __init__(self, files: list[Path], side: int) -> None:
        self.files = [str(f) for f in files]
        self.side = side

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = get_worker_info()
        mine = self.files if info is None else self.files[info.id :: info.num_workers] or self.files
        while True:
            for path in mine:
                wall0, cpu0 = time.perf_counter(), time.thread_time()
                with open(path, "rb") as f:
                    data = f.read()
                read = (time.perf_counter() - wall0, time.thread_time() - cpu0)
                n = 0
                with tp_profile.hop("decode", frames=0):  # opening probes the stream: part of decoding
                    container, stream = probe.open_single_threaded(data)
                with container:
                    frames = container.decode(stream)
                    while True:
                        with tp_profile.hop("decode"):
                            frame = next(frames, None)
                            if frame is None:
                                break
                            rgb = probe.postprocess_frame(frame, "rgb_resize", self.side)
                        n += 1
                        yield torch.from_numpy(rgb)
                tp_profile.record("read", read[0], read[1], frames=n)  # the file's cost, per frame in it


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)


# ---------------------------------------------------------------- model


class PatchMLP(nn.Module):
    """A small vision model: patches -> linear embedding -> residual MLP blocks -> mean -> classes.

    Every weight is applied once per token (no attention), so training costs 6 P FLOP
    per token up to the head, as docs/accounts.md counts."""

    def __init__(self, side: int, patch: int, width: int, depth: int, classes: int) -> None:
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(patch * patch * 3, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
            for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, h, w, c = images.shape
        p = self.patch
        x = images[:, : h - h % p, : w - w % p].float().div_(255.0)
        x = x.reshape(b, h // p, p, w // p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(b, (h // p) * (w // p), p * p * c)
        x = self.embed(x)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x.mean(dim=1))


def params_of(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def make_step(model: nn.Module, classes: int):  # noqa: ANN201 - a closure
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(batch: torch.Tensor) -> float:
        labels = torch.arange(batch.shape[0]) % classes
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(batch), labels)
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def step_rate_cpu(step: Any, batch: torch.Tensor, seconds: float) -> tuple[float, float]:
    """(frames per CPU-second, frames per wall second) of the step on one batch held in memory."""
    for _ in range(3):
        step(batch)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    n = 0
    while time.perf_counter() - wall0 < seconds:
        step(batch)
        n += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    frames = n * batch.shape[0]
    return frames / cpu, frames / wall


# Pre-made frames, forever: a loader whose data is always ready (nothing to decode); the hand-over
# probe's own dataset
ReadyFrames = handover.ready_frames_class()


def profiled_steps(loader: Any, step: Any, warmup: int, seconds: float, gap: float = 0.0,
                   predicted: Any = None, min_steps: int = 4) -> tp_profile.ProfileResult:
    """The training loop under the profiler: `step` on the loader's batches for `seconds` after the first
    counted one (`warmup` batches not counted), and for at least `min_steps` counted steps, sleeping `gap`
    seconds before each step. The clock starts at the first counted batch, not the first batch: on a
    loaded machine the warm-up alone can outlast `seconds` (it did: "no step was counted")."""
    with tp_profile.Profiler(warmup=warmup, sync="none") as prof:
        started = None
        for batch in prof.wrap(loader):
            if started is None and prof.counted > 0:
                started = time.perf_counter()
            if gap > 0:
                time.sleep(gap)
            with prof.step():
                step(batch)
            if started is not None and prof.counted >= min_steps and time.perf_counter() - started >= seconds:
                break
        return prof.result(predicted=predicted)


def step_rate_ready(step: Any, cfg: Config, seconds: float, gap: float = 0.0) -> float:
    """The step probe: frames per CPU-second of the step with data always ready, the batches
    coming through a DataLoader worker as in the real run (fresh shared-memory batches each
    step, which the step touches first; a batch held in memory stays in cache and flatters a
    small model by up to a quarter).

    `gap`: seconds the trainer sleeps before each step, as it waits for data in a run that
    is not busy all the time. On this VM a step that follows a wait runs slower (caches gone
    cold, a halted vCPU woken): after 40 ms waits, a quarter slower for the small model."""
    loader = DataLoader(ReadyFrames(cfg.side), batch_size=cfg.batch, num_workers=1, worker_init_fn=_worker_init)
    r = profiled_steps(loader, step, cfg.warmup, seconds, gap)
    del loader
    return r.frames / r.step_cpu_seconds


# ---------------------------------------------------------------- calibration and the plan


def calibrate(cfg: Config, clip_dir: Path, cal_path: Path) -> dict[str, Any]:
    """Run the read and matmul probes here and write them to the calibration file."""
    machine = probe.machine()
    rd = probe.read(clip_dir / "clip-000.mp4").to_dict()
    calibration.write(cal_path, "read", settings={"path": rd["path"], "block_bytes": rd["block_bytes"]},
                      results=rd, values=calibration.read_values(rd), machine=machine)
    # a ceiling, so the best of three short runs (one run on a busy VM can read a third low)
    runs = [probe.matmul_torch(512, "float32", "cpu", threads=1, min_seconds=0.3).to_dict() for _ in range(3)]
    mm = max(runs, key=lambda r: r["flops_per_cpu_second"])
    calibration.write(cal_path, "matmul", settings={"n": mm["n"], "dtype": mm["dtype"], "threads": 1},
                      results={"torch_cpu_1_thread": mm}, values=[], machine=machine)
    return {"read": rd, "matmul": mm}


def loader_rate(files: list[Path], cfg: Config, seconds: float) -> dict[str, float]:
    """The loader probe: frames per CPU-second of one DataLoader worker decoding the clips, its
    batches taken as fast as they come (nothing else to do). Everything a worker core does per
    frame is in it: open, decode, colour conversion and resize, collate into shared memory,
    hand-over; the decode probe alone leaves out the last two, about a sixth on this VM."""
    loader = DataLoader(ClipFrames(files, cfg.side), batch_size=cfg.batch, num_workers=1,
                        worker_init_fn=_worker_init)
    frames, cpu, wall = handover.worker_cpu(loader, cfg.warmup, seconds)
    del loader
    return {"frames_per_cpu_second": frames / cpu, "frames_per_wall_second": frames / wall, "cpu_share": cpu / wall}


def _probe_process(files: list[Path], cfg: Config, seconds: float, queue: Any, stop: Any) -> None:
    torch.set_num_threads(1)
    clip = probe.Clip(files[0].read_bytes(), cfg.clip_format, cfg.clip_frames, "veryfast", 0.0)
    seq, _ = probe.decode_sequential(clip, postprocess="rgb_resize", side=cfg.side, min_seconds=0.5)
    loader = loader_rate(files, cfg, seconds)
    queue.put((probe.DecodeProbe(seq, None, "sequential", 0.0).to_dict(), loader))
    while not stop.is_set():  # now be the decoding neighbour of the step probe
        probe.decode_sequential(clip, postprocess="rgb_resize", side=cfg.side)


def calibrate_pipeline(cfg: Config, files: list[Path], step: Any, cal_path: Path, seconds: float = 2.5,
                       busy_of: Any = None) -> tuple[dict[str, Any], float, dict[str, float]]:
    """The supply and demand probes, just before a setting is measured.

    Supply: the decode probe on one of the clips, then the loader probe (`loader_rate`) for
    `seconds`, in a process of their own with nothing else running; the loader's rate, per
    CPU-second of its worker, at 1080p-equivalent, is written to the calibration file as
    `cluster.core_fps_1080p`, the decode probe's settings and figure alongside.

    Demand: frames per CPU-second of the model's step with data ready (`step_rate_ready`),
    with that process decoding next to it. Here the "accelerator" is a CPU core sharing
    caches and memory bandwidth with the decoders, and where decode binds (busy < 1) a
    decoder never rests, so the step always has a decoding neighbour, while a decoder has a
    stepping one only part of the time. Measured alone, the step of the small model read a
    quarter faster than in the run; measured next to a stepping trainer, the decoder read a
    fifth slower than in a run at busy 0.3.

    And at the plan's own operating point: `busy_of(demand)` is the plan's busy fraction
    with that demand. Where it is below 1 the trainer waits (1/b - 1) step times before
    each step, so the step probe is taken again with that wait before each step, and that
    rate is the demand (one fixed-point iteration; `demand_iterations` keeps both figures).
    """
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    queue, stop = ctx.SimpleQueue(), ctx.Event()
    child = ctx.Process(target=_probe_process, args=(files, cfg, seconds, queue, stop))  # it has a worker: not daemonic
    child.start()
    iterations: dict[str, float] = {}
    try:
        d, loader = queue.get()
        d["decode_only_frames_per_cpu_second"] = d["frames_per_cpu_second"]
        d["loader"] = loader
        d["frames_per_cpu_second"] = loader["frames_per_cpu_second"]
        d["frames_per_cpu_second_1080p"] = d["core_fps_1080p"] = probe.to_1080p(loader["frames_per_cpu_second"],
                                                                                cfg.width, cfg.height)
        d["handoff"] = "dataloader"
        d["batch"] = cfg.batch
        calibration.write(cal_path, "decode", settings=calibration.decode_settings(d), results=d,
                          values=calibration.decode_values(d), machine=probe.machine())
        demand = iterations["ready"] = step_rate_ready(step, cfg, seconds / 2)
        if busy_of is not None:
            busy = iterations["busy_at_ready"] = busy_of(demand)
            if busy < 1:
                gap = iterations["gap_seconds"] = cfg.batch / demand * (1 / busy - 1)
                demand = iterations["at_plan_busy"] = step_rate_ready(step, cfg, seconds, gap)
    finally:
        stop.set()
        child.join(timeout=60)
        if child.is_alive():
            child.terminate()
    return d, demand, iterations


def step_flops_rate(cfg: Config, params: int, demand_fps: float) -> float:
    """FLOP a CPU-second the measured step reaches: 6 P n a frame at `demand_fps` frames a CPU-second."""
    return demand_fps * 6 * params * cfg.tokens_per_frame


def predict(cfg: Config, setting: Setting, params: int, demand_fps: float, peak_flops: float,
            cal_path: Path) -> Any:
    """The plan's pipeline account for this setting, through the workload loader and the plan."""
    from trainplan.accounts import pipeline
    from trainplan.planning import evaluate as plan
    from trainplan.workload.load import load_workload

    achieved = step_flops_rate(cfg, params, demand_fps)
    # Both rates are a CPU-second's, each taken over a second or two: on a shared machine the step can come
    # out a few % past the matmul probe taken minutes before. The plan uses only MFU x peak (the step's own
    # rate), so the ceiling is raised to it (MFU 1) and the run is flagged (`ceiling_raised`, run_setting).
    peak_flops = max(peak_flops, achieved)
    mfu = achieved / peak_flops  # what the measured step achieves of the peak
    overrides = [
        f"data.width={cfg.width}", f"data.height={cfg.height}", f"data.fps={cfg.fps}",
        f"data.bitrate={cfg.bitrate}", f"data.gop={cfg.gop}", 'data.access="sequential"',
        f"data.side={cfg.side}", f"data.patch={cfg.patch}", "data.cameras=1",
        f"model.params={params}", f"model.width={setting.width}", f"model.layers={setting.depth}",
        f"cluster.accelerator.peak_flops={peak_flops}", "cluster.accelerator.memory=8e9",
        f"cluster.mfu={mfu}", "cluster.mfu_end_to_end=true", "cluster.scaling_efficiency=1",
        f"cluster.cores={setting.workers}", "cluster.count=1", "training.precision=\"fp32\"",
    ]
    workload = load_workload(None, overrides, calibration=cal_path)
    return pipeline.pipeline_account(**plan.pipeline_inputs(workload))


# ---------------------------------------------------------------- one setting


# Both of the plan's rates are per CPU-second, and the plan gives the trainer and each decoder a
# core of its own. A run answers the plan's question when the trainer (in its steps) and the
# decoders (in their hop) got the same share of a CPU: each a whole core, or each time-sliced
# alike by other work on the machine (then the shares cancel in S/D). When the shares differ
# by more than this, the run measured the scheduler, and is flagged (and retried on request).
MAX_SHARE_IMBALANCE = 0.15
# ... and when the decoders' rate in the run drifts this far from the probe's taken just before.
MAX_PROBE_DRIFT = 0.2


def run_setting(cfg: Config, setting: Setting, files: list[Path], cal_path: Path, peak_flops: float,
                clip: probe.Clip, seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = PatchMLP(cfg.side, cfg.patch, setting.width, setting.depth, cfg.classes)
    step = make_step(model, cfg.classes)
    params = params_of(model)
    ready = torch.randint(0, 256, (cfg.batch, cfg.side, cfg.side, 3), dtype=torch.uint8)
    demand_in_memory, demand_wall = step_rate_cpu(step, ready, seconds=0.3)
    decode, demand_cpu, demand_iterations = calibrate_pipeline(
        cfg, files, step, cal_path, seconds=cfg.probe_seconds,
        busy_of=lambda d: predict(cfg, setting, params, d, peak_flops, cal_path).busy)
    predicted = predict(cfg, setting, params, demand_cpu, peak_flops, cal_path)

    loader = DataLoader(ClipFrames(files, cfg.side), batch_size=cfg.batch, num_workers=setting.workers,
                        worker_init_fn=_worker_init, prefetch_factor=2, persistent_workers=False)
    with tp_profile.Profiler(warmup=cfg.warmup, sync="none") as prof:
        started = None
        cpu0 = 0.0
        steps = 0
        for batch in prof.wrap(loader):
            if started is None and steps >= cfg.warmup - 1:
                started, cpu0 = time.perf_counter(), time.process_time()
            with prof.step():
                step(batch)
            steps += 1
            if started is not None and time.perf_counter() - started >= cfg.seconds:
                break
        trainer_cpu = time.process_time() - cpu0
        result = prof.result(predicted=predicted)
    del loader
    decode_share = result.hops["decode"].cpu_share if "decode" in result.hops else 1.0
    share_ratio = decode_share / max(result.step_cpu_share, 1e-9)
    # the decoders' own rate in the run (per CPU-second, in the hop) against the probe's just before:
    # apart, the machine changed under the run (other work arrived, or left)
    worker_fps = result.hops["decode"].frames_per_cpu_second if "decode" in result.hops else decode["frames_per_cpu_second"]
    probe_ratio = worker_fps / decode["decode_only_frames_per_cpu_second"]
    # the step outran the matmul probe: the machine's rate moved between the probes
    ceiling_raised = step_flops_rate(cfg, params, demand_cpu) > peak_flops
    contended = abs(share_ratio - 1) > MAX_SHARE_IMBALANCE or abs(probe_ratio - 1) > MAX_PROBE_DRIFT \
        or ceiling_raised
    # what the plan would say had it known the shares: S s_decode / (D s_step)
    at_shares = min(1.0, predicted.supply_fps * decode_share / (predicted.demand_fps * result.step_cpu_share))
    return {
        "setting": setting.name,
        "decode_probe_frames_per_cpu_second": decode["frames_per_cpu_second"],
        "decode_probe_frames_per_cpu_second_1080p": decode["frames_per_cpu_second_1080p"],
        "decode_only_frames_per_cpu_second": decode["decode_only_frames_per_cpu_second"],
        "decode_only_frames_per_cpu_second_1080p": probe.to_1080p(decode["decode_only_frames_per_cpu_second"],
                                                                  cfg.width, cfg.height),
        "contended": contended,
        "ceiling_raised": ceiling_raised,
        "share_ratio": share_ratio,
        "worker_to_probe_decode_ratio": probe_ratio,
        "predicted_busy_at_measured_shares": at_shares,
        "workers": setting.workers,
        "model_width": setting.width,
        "model_depth": setting.depth,
        "params": params,
        "demand_fps_cpu": demand_cpu,
        "demand_fps_cpu_batch_in_memory": demand_in_memory,
        "demand_iterations": demand_iterations,
        "demand_fps_wall": demand_wall,
        "predicted_busy": predicted.busy,
        "predicted_bottleneck": predicted.bottleneck,
        "predicted_supply_fps": predicted.supply_fps,
        "predicted_demand_fps": predicted.demand_fps,
        "predicted_cores_needed": predicted.cores_needed,
        "measured_busy": result.busy,
        "relative_error": result.busy_relative_error,
        "measured_delivered_fps": result.delivered_fps,
        "measured_demand_fps": result.demand_fps,
        "measured_cores_needed": result.cores_needed,
        "slowest_hop": result.slowest_hop,
        "decode_fps_per_cpu_second_in_workers": worker_fps,
        "trainer_cpu_share": trainer_cpu / max(result.wall_seconds, 1e-9),
        "step_cpu_share": result.step_cpu_share,
        "decode_cpu_share": decode_share,
        "load_average": os.getloadavg()[0],
        "steps": result.steps,
    }


def run(cfg: Config, settings: list[Setting], workdir: Path | None = None, repeats: int = 1) -> dict[str, Any]:
    """Measure each setting `repeats` times (probes and run each time). This VM's rates wander by
    10-25 % from one minute to the next in ways no CPU share shows, so a setting's figures are
    those of its median run (by relative error); every run is listed under `runs`."""
    own = workdir is None
    base = Path(tempfile.mkdtemp(prefix="trainplan-video-")) if own else workdir
    try:
        clip_dir = base / "clips"
        files = make_clips(clip_dir, cfg)
        clip = probe.Clip(files[0].read_bytes(), cfg.clip_format, cfg.clip_frames, "veryfast", 0.0)
        cal_path = base / "calibration.toml"
        probes = calibrate(cfg, clip_dir, cal_path)
        peak = probes["matmul"]["flops_per_cpu_second"]  # CPU-seconds, like both pipeline rates
        rows = []
        for s in settings:
            runs = [run_setting(cfg, s, files, cal_path, peak, clip) for _ in range(max(1, repeats))]
            ranked = sorted(runs, key=lambda r: r["relative_error"])
            row = dict(ranked[len(ranked) // 2])
            row["runs"] = [{k: r[k] for k in RUN_SUMMARY} for r in runs]
            row["flagged_runs"] = sum(r["contended"] for r in runs)
            rows.append(row)
        return {
            "machine": probe.machine(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "decode_frames_per_cpu_second": rows[0]["decode_probe_frames_per_cpu_second"] if rows else None,
            "decode_frames_per_cpu_second_1080p": rows[0]["decode_probe_frames_per_cpu_second_1080p"] if rows else None,
            "decode_only_frames_per_cpu_second": rows[0]["decode_only_frames_per_cpu_second"] if rows else None,
            "decode_only_frames_per_cpu_second_1080p": (rows[0]["decode_only_frames_per_cpu_second_1080p"]
                                                        if rows else None),
            "read_cold_bytes_per_second": probes["read"]["cold_bytes_per_second"],
            "matmul_flops_per_second_1_thread": peak,
            "config": cfg.__dict__,
            "settings": rows,
        }
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)


DEFAULT_SETTINGS = "1:96x1,1:144x1"
RUN_SUMMARY = ("predicted_busy", "measured_busy", "relative_error", "decode_probe_frames_per_cpu_second",
               "measured_delivered_fps", "demand_fps_cpu", "measured_demand_fps", "step_cpu_share",
               "decode_cpu_share", "contended")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default=DEFAULT_SETTINGS,
                    help="comma-separated WORKERS:WIDTHxDEPTH (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=Config.seconds, help="measured seconds per setting")
    ap.add_argument("--width", type=int, default=Config.width)
    ap.add_argument("--height", type=int, default=Config.height)
    ap.add_argument("--bitrate", type=float, default=Config.bitrate, help="bits/s")
    ap.add_argument("--side", type=int, default=Config.side)
    ap.add_argument("--batch", type=int, default=Config.batch)
    ap.add_argument("--repeats", type=int, default=1,
                    help="measure each setting this many times and report the median run (default %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    cfg = Config(width=args.width, height=args.height, bitrate=args.bitrate, side=args.side, batch=args.batch,
                 seconds=args.seconds)
    out = run(cfg, [Setting.parse(s) for s in args.settings.split(",") if s.strip()], repeats=args.repeats)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    print(f"loader probe (first setting): {out['decode_frames_per_cpu_second']:.0f} frames/CPU-s at "
          f"{cfg.width}x{cfg.height} ({out['decode_frames_per_cpu_second_1080p']:.1f} at 1080p-equivalent); decode "
          f"probe alone {out['decode_only_frames_per_cpu_second']:.0f} "
          f"({out['decode_only_frames_per_cpu_second_1080p']:.1f}); "
          f"matmul 1 thread {out['matmul_flops_per_second_1_thread'] / 1e9:.1f} GFLOP/s; "
          f"load average {out['load_average']}")
    print(f"{'setting':28} {'params':>8} {'demand':>8} {'supply':>8} {'predicted':>9} {'measured':>9} {'error':>7} "
          f"{'CPU share step/decode':>22}")
    for r in out["settings"]:
        note = "  (flagged: unequal CPU shares, probe drift or a step past the matmul probe)" if r["contended"] else ""
        print(f"{r['setting']:28} {r['params']:>8} {r['predicted_demand_fps']:>8.0f} "
              f"{r['predicted_supply_fps']:>8.0f} {r['predicted_busy']:>9.3f} {r['measured_busy']:>9.3f} "
              f"{r['relative_error'] * 100:>6.1f}% {r['step_cpu_share']:>10.2f} / {r['decode_cpu_share']:.2f}{note}")
    worst = max(abs(r["relative_error"]) for r in out["settings"])
    return 0 if math.isfinite(worst) else 1


if __name__ == "__main__":
    sys.exit(main())
