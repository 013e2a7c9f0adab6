"""A real end-to-end check of the pipeline account (SPEC §7) on the machine at hand.

Synthetic H.264 clips are written to disk; a PyTorch DataLoader with worker processes
decodes them with PyAV (one thread each, colour conversion and resize to the model side
included); a small real model trains on the CPU. The profiler measures the busy
fraction of the training loop, and the plan predicts it from probes taken on the same
machine:

- demand D: the model's step rate with data ready (the step probe: one batch held in
  memory), in frames per CPU-second of the trainer. It enters the plan as a custom
  accelerator whose peak is the achieved single-thread matmul rate (the matmul probe)
  and whose MFU is what the measured step achieves of it, end-to-end; the plan's
  D = μΦ/(6Pn) then gives back the measured step rate.
- supply S: `cluster.cores` = loader workers, `cluster.core_fps_1080p` measured by the
  decode probe on a clip of the same format (written to a calibration file and read by
  `load_workload(..., calibration=FILE)`, as `trainplan plan --calibration` does), and
  `cluster.link` by the read probe on the clips' directory.
- predicted busy = min(1, S / D) with prefetch; measured busy = step time / wall time.

The accelerator is the CPU itself here, so trainer and decoders share the machine's
cores. Both rates are measured in CPU-seconds, so that time-slicing by other work on a
shared machine cancels to first order (if the trainer and a decoder each get a share
s of a core, the measured busy is (r s)/(D s) = r/D). What does not cancel: with more
busy processes than cores (2 workers + the trainer on 2 cores) the workers do not get a
core each and the plan, which gives each worker a core, over-predicts; and caches and
memory bandwidth shared with the neighbours slow both sides a little. The default
settings therefore use one worker and two model sizes, which on 2 cores keep one busy
process per core.

Run:  python examples/video_training.py [--settings 1:64x1,1:128x1] [--seconds 4] [--json]
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

from trainplan import calibration, probe
from trainplan import profile as tp_profile


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
    seconds: float = 4.0  # measured time per setting, after warm-up
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
                with tp_profile.hop("read"):
                    with open(path, "rb") as f:
                        data = f.read()
                container, stream = probe.open_single_threaded(data)
                with container:
                    frames = container.decode(stream)
                    while True:
                        with tp_profile.hop("decode"):
                            frame = next(frames, None)
                            if frame is None:
                                break
                            rgb = probe.postprocess_frame(frame, "rgb_resize", self.side)
                        yield torch.from_numpy(rgb)


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)


# ---------------------------------------------------------------- model


class PatchMLP(nn.Module):
    """A small vision model: patches -> linear embedding -> residual MLP blocks -> mean -> classes.

    Every weight is applied once per token (no attention), so training costs 6 P FLOP
    per token up to the head, as SPEC §3 counts."""

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
    """The step probe: (frames per CPU-second, frames per wall second) with data ready."""
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


# ---------------------------------------------------------------- calibration and the plan


def calibrate(cfg: Config, clip_dir: Path, cal_path: Path) -> dict[str, Any]:
    """Run the read and matmul probes here and write them to the calibration file."""
    machine = probe.machine()
    rd = probe.read(clip_dir / "clip-000.mp4").to_dict()
    calibration.write(cal_path, "read", settings={"path": rd["path"], "block_bytes": rd["block_bytes"]},
                      results=rd, values=calibration.read_values(rd), machine=machine)
    mm = probe.matmul_torch(512, "float32", "cpu", threads=1, min_seconds=0.5).to_dict()
    calibration.write(cal_path, "matmul", settings={"n": mm["n"], "dtype": mm["dtype"], "threads": 1},
                      results={"torch_cpu_1_thread": mm}, values=[], machine=machine)
    return {"read": rd, "matmul": mm}


def calibrate_decode(cfg: Config, clip: probe.Clip, cal_path: Path, repeats: int = 3) -> dict[str, Any]:
    """The decode probe on a clip of the workload's format (one the workers decode), run just before
    a setting is measured so that probe and run see the same machine; the median of `repeats`."""
    runs = [probe.decode_sequential(clip, postprocess="rgb_resize", side=cfg.side)[0] for _ in range(repeats)]
    median = sorted(runs, key=lambda r: r.frames_per_cpu_second)[repeats // 2]
    d = probe.DecodeProbe(median, None, "sequential", clip.seconds_to_encode).to_dict()
    calibration.write(cal_path, "decode", settings=calibration.decode_settings(d), results=d,
                      values=calibration.decode_values(d), machine=probe.machine())
    return d


def predict(cfg: Config, setting: Setting, params: int, demand_fps: float, peak_flops: float,
            cal_path: Path) -> Any:
    """The plan's pipeline account for this setting, through the workload loader and the plan."""
    from trainplan import pipeline, plan
    from trainplan.workload import load_workload

    n = cfg.tokens_per_frame
    mfu = demand_fps * 6 * params * n / peak_flops  # what the measured step achieves of the peak
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
    decode = calibrate_decode(cfg, clip, cal_path)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = PatchMLP(cfg.side, cfg.patch, setting.width, setting.depth, cfg.classes)
    step = make_step(model, cfg.classes)
    params = params_of(model)
    ready = torch.randint(0, 256, (cfg.batch, cfg.side, cfg.side, 3), dtype=torch.uint8)
    demand_cpu, demand_wall = step_rate_cpu(step, ready, seconds=min(1.5, cfg.seconds / 2))
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
    probe_ratio = worker_fps / decode["frames_per_cpu_second"]
    contended = abs(share_ratio - 1) > MAX_SHARE_IMBALANCE or abs(probe_ratio - 1) > MAX_PROBE_DRIFT
    # what the plan would say had it known the shares: S s_decode / (D s_step)
    at_shares = min(1.0, predicted.supply_fps * decode_share / (predicted.demand_fps * result.step_cpu_share))
    return {
        "setting": setting.name,
        "decode_probe_frames_per_cpu_second": decode["frames_per_cpu_second"],
        "decode_probe_frames_per_cpu_second_1080p": decode["frames_per_cpu_second_1080p"],
        "contended": contended,
        "share_ratio": share_ratio,
        "worker_to_probe_decode_ratio": probe_ratio,
        "predicted_busy_at_measured_shares": at_shares,
        "workers": setting.workers,
        "model_width": setting.width,
        "model_depth": setting.depth,
        "params": params,
        "demand_fps_cpu": demand_cpu,
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


def run(cfg: Config, settings: list[Setting], workdir: Path | None = None, attempts: int = 1) -> dict[str, Any]:
    """Measure each setting; with `attempts` > 1 a run the machine's other work kept off the CPU
    (see MAX_SHARE_IMBALANCE, MAX_PROBE_DRIFT) is measured again, up to `attempts` times. Every attempt is reported."""
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
            tries = []
            for _ in range(max(1, attempts)):
                tries.append(run_setting(cfg, s, files, cal_path, peak, clip))
                if not tries[-1]["contended"]:
                    break
            row = dict(tries[-1])
            row["attempts"] = len(tries)
            row["earlier_attempts"] = [{k: t[k] for k in ("predicted_busy", "measured_busy", "relative_error",
                                                          "step_cpu_share", "decode_cpu_share")} for t in tries[:-1]]
            rows.append(row)
        return {
            "machine": probe.machine(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "decode_frames_per_cpu_second": rows[0]["decode_probe_frames_per_cpu_second"] if rows else None,
            "decode_frames_per_cpu_second_1080p": rows[0]["decode_probe_frames_per_cpu_second_1080p"] if rows else None,
            "read_cold_bytes_per_second": probes["read"]["cold_bytes_per_second"],
            "matmul_flops_per_second_1_thread": peak,
            "config": cfg.__dict__,
            "settings": rows,
        }
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)


DEFAULT_SETTINGS = "1:64x1,1:128x1"


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
    ap.add_argument("--attempts", type=int, default=1,
                    help="measure a setting again when other work kept it off the CPU (default %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    cfg = Config(width=args.width, height=args.height, bitrate=args.bitrate, side=args.side, batch=args.batch,
                 seconds=args.seconds)
    out = run(cfg, [Setting.parse(s) for s in args.settings.split(",") if s.strip()], attempts=args.attempts)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    print(f"decode probe: {out['decode_frames_per_cpu_second']:.0f} frames/CPU-s at {cfg.width}x{cfg.height} "
          f"({out['decode_frames_per_cpu_second_1080p']:.1f} at 1080p-equivalent); "
          f"matmul 1 thread {out['matmul_flops_per_second_1_thread'] / 1e9:.1f} GFLOP/s; "
          f"load average {out['load_average']}")
    print(f"{'setting':28} {'params':>8} {'demand':>8} {'supply':>8} {'predicted':>9} {'measured':>9} {'error':>7} "
          f"{'CPU share step/decode':>22}")
    for r in out["settings"]:
        note = "  (flagged: unequal CPU shares or probe drift)" if r["contended"] else ""
        print(f"{r['setting']:28} {r['params']:>8} {r['predicted_demand_fps']:>8.0f} "
              f"{r['predicted_supply_fps']:>8.0f} {r['predicted_busy']:>9.3f} {r['measured_busy']:>9.3f} "
              f"{r['relative_error'] * 100:>6.1f}% {r['step_cpu_share']:>10.2f} / {r['decode_cpu_share']:.2f}{note}")
    worst = max(abs(r["relative_error"]) for r in out["settings"])
    return 0 if math.isfinite(worst) else 1


if __name__ == "__main__":
    sys.exit(main())
