"""End to end on this machine (issue 14): the user's files -> inspect -> probe -> plan -> a real loader, profiled.

1. Synthetic H.264 files are written with PyAV/libx264 (640x360, 30 fps, a keyframe every
   `gop` frames).
2. `data inspect` measures them and writes the workload's [data] section (provenance measured).
3. `probe decode` on those files (PyAV, one thread, the loader's post-processing) writes
   `cluster.core_fps_1080p` to a calibration file; the read rate is the emulated link's. The
   hand-over probe (`trainplan probe handover`: a DataLoader worker yielding ready frames) writes
   `data.loader_cpu_per_frame` beside it: the worker's CPU per frame outside the decoder.
4. The plan predicts busy and the binding hop for each setting (and, for comparison, without the
   hand-over: `predicted_busy_without_handover`).
5. A torch DataLoader whose worker processes decode the files (in order, or at random access)
   feeds a small model on the CPU, under the profiler: measured busy and the stall split.

Settings vary the loader workers, the model size and the access pattern; two settings slow
the reads (each worker's file read sleeps as a 0.4 MB/s connection would take), so the loader is
I/O-bound and the stall split must name fetch; the others are decode-bound (prep).

The step's demand and the decoders' supply are measured per CPU-second (examples/video_training.py
holds the model, the clips and the step probe this example reuses), so that time-slicing by other
work on a shared machine cancels to first order. Where the plan says the trainer waits, the step is
probed again fed at the plan's supply (`step_rate_fed`): a step after a wait runs slower on this VM,
by how much depending on what the other core does meanwhile. Each setting runs `--repeats` times
and the median run is reported with the load average.

Run:  python examples/video_pipeline_e2e.py [--seconds 4] [--repeats 3] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
import video_training as vt  # noqa: E402

from trainplan.measure import handover as measure_handover  # noqa: E402
from trainplan.measure import inspect as insp  # noqa: E402
from trainplan.measure import probe  # noqa: E402
from trainplan.measure import profiler as tp_profile  # noqa: E402


@dataclass(frozen=True)
class Run:
    workers: int
    width: int
    access: str  # sequential | random
    # bytes/s of an emulated slow read, per worker (a per-connection cap, as object stores have: k workers
    # read at k times it); None reads at the disk's own rate
    link: float | None = None

    @property
    def name(self) -> str:
        slow = f", reads at {self.link / 1e6:g} MB/s a worker" if self.link else ""
        return f"{self.workers} worker(s), model {self.width}, {self.access}{slow}"


class Frames(IterableDataset):
    """Frames of the files, decoded in each worker: in order, or one frame at a random target each
    (seek to the keyframe before it, decode forward); reads optionally slowed to `link` bytes/s."""

    def __init__(self, files: list[Path], side: int, access: str, link: float | None, gop: int) -> None:
        self.files, self.side, self.access, self.link, self.gop = [str(f) for f in files], side, access, link, gop
        self.pts = {str(f): probe._file_facts(Path(f))[2] for f in files}  # noqa: SLF001 - packet pts, in order

    def _read(self, path: str) -> bytes:
        t0 = time.perf_counter()
        data = Path(path).read_bytes()
        if self.link:  # timed by the caller's `read` record, charged to the file's frames
            time.sleep(max(0.0, len(data) / self.link - (time.perf_counter() - t0)))
        return data

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = get_worker_info()
        mine = self.files if info is None else self.files[info.id :: info.num_workers] or self.files
        seed = 0 if info is None else info.id
        while True:
            for path in mine:
                w0, c0 = time.perf_counter(), time.thread_time()
                data = self._read(path)
                read = (time.perf_counter() - w0, time.thread_time() - c0)
                container, stream = probe.open_single_threaded(data)
                n = 0
                with container:
                    if self.access == "sequential":
                        frames = container.decode(stream)
                        while True:
                            with tp_profile.hop("decode"):
                                frame = next(frames, None)
                                if frame is None:
                                    break
                                rgb = probe.postprocess_frame(frame, "rgb_resize", self.side)
                            n += 1
                            yield torch.from_numpy(rgb)
                    else:
                        pts = self.pts[path]
                        for t in probe.random_targets(len(pts), self.gop, 16, seed):
                            target = pts[t]
                            with tp_profile.hop("decode"):
                                container.seek(target, stream=stream, backward=True, any_frame=False)
                                rgb = None
                                for frame in container.decode(stream):
                                    if frame.pts is not None and frame.pts >= target:
                                        rgb = probe.postprocess_frame(frame, "rgb_resize", self.side)
                                        break
                            if rgb is not None:
                                n += 1
                                yield torch.from_numpy(rgb)
                        seed += 1000
                tp_profile.record("read", read[0], read[1], frames=n)


class PacedFrames(IterableDataset):
    """Ready frames, one every 1/fps seconds in each worker, the time spent spinning on a core (as a
    decoder does) or asleep (as a worker waiting on a read does): the plan's supply, without decoding."""

    def __init__(self, side: int, fps: float, spin: bool) -> None:
        self.ready, self.period, self.spin = vt.ReadyFrames(side), 1.0 / fps, spin

    def __iter__(self) -> Iterator[torch.Tensor]:
        due = time.perf_counter()
        for frame in self.ready:
            due += self.period
            if self.spin:
                while time.perf_counter() < due:
                    pass
            else:
                time.sleep(max(0.0, due - time.perf_counter()))
            yield frame


def step_rate_fed(step: Any, cfg: vt.Config, supply_fps: float, workers: int, spin: bool, seconds: float,
                  min_steps: int = 4) -> float:
    """The step probe at the plan's supply: frames per CPU-second of the step, fed by `workers` workers
    that together deliver `supply_fps` frames a second (PacedFrames)."""
    loader = DataLoader(PacedFrames(cfg.side, supply_fps / workers, spin), batch_size=cfg.batch, num_workers=workers,
                        worker_init_fn=vt._worker_init, prefetch_factor=PREFETCH)  # noqa: SLF001
    r = vt.profiled_steps(loader, step, max(cfg.warmup, workers * PREFETCH), seconds, min_steps=min_steps)
    del loader
    return r.frames / r.step_cpu_seconds


def predict(cfg: vt.Config, run: Run, workload: Path, cal: dict[tuple[str, int], Path], params: int, demand_fps: float,
            peak: float, handover: float | None = None) -> Any:
    """The plan of `run` with the calibration's decode rate and hand-over (`handover`, seconds a frame,
    replaces the measured hand-over: 0 plans without it)."""
    from trainplan.accounts import pipeline
    from trainplan.planning import evaluate as plan
    from trainplan.workload.load import load_workload

    n = cfg.tokens_per_frame
    mfu = min(1.0, demand_fps * 6 * params * n / peak)
    sets = [f"data.access=\"{run.access}\"", f"data.side={cfg.side}", f"data.patch={cfg.patch}", "data.cameras=1",
            f"model.params={params}", f"cluster.accelerator.peak_flops={peak}", "cluster.accelerator.memory=8e9",
            f"cluster.mfu={mfu}", "cluster.mfu_end_to_end=true", f"cluster.cores={max(run.workers, 1)}",
            "training.precision=\"fp32\""]
    if run.link:  # the aggregate read rate of `workers` connections
        sets.append(f"cluster.link={run.link * run.workers}")
    if handover is not None:
        sets.append(f"data.loader_cpu_per_frame={handover!r}")
    w = load_workload(workload, sets, calibration=cal[(run.access, run.workers)])
    return pipeline.pipeline_account(**plan.pipeline_inputs(w))


def measure(cfg: vt.Config, run: Run, files: list[Path], workload: Path, cal: dict[tuple[str, int], Path],
            peak: float, min_steps: int = 32) -> dict[str, Any]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = vt.PatchMLP(cfg.side, cfg.patch, run.width, 1, cfg.classes)
    step = vt.make_step(model, cfg.classes)
    params = vt.params_of(model)
    demand = vt.step_rate_ready(step, cfg, cfg.probe_seconds)
    pred = predict(cfg, run, workload, cal, params, demand, peak)
    if pred.busy < 1:
        # where busy < 1 the trainer waits between steps, and on this VM a step after a wait runs slower;
        # how much slower depends on what the rest of the machine does meanwhile (a decoder busy on the
        # other core keeps it awake). So the step is probed fed at the plan's own supply, by workers that
        # spend the plan's time a frame as its binding hop does: busy on a core for decode, asleep for a read
        demand = step_rate_fed(step, cfg, pred.supply_fps, run.workers, spin=pred.bottleneck != "read",
                               seconds=max(cfg.probe_seconds, min_steps * cfg.batch / pred.supply_fps),
                               min_steps=min_steps)
        pred = predict(cfg, run, workload, cal, params, demand, peak)
    without = predict(cfg, run, workload, cal, params, demand, peak, handover=0.0)
    # prefetch: a worker may run a whole file ahead (60 frames, 4 batches of 16). With the default 2, a worker
    # whose batches wait behind another worker's (the loader delivers in order) stops reading: two workers
    # then read 1.7x one, not 2x
    loader = DataLoader(Frames(files, cfg.side, run.access, run.link, cfg.gop), batch_size=cfg.batch,
                        num_workers=run.workers, worker_init_fn=vt._worker_init, prefetch_factor=PREFETCH)  # noqa: SLF001
    # not counted: the batches the workers made ready before the first step (a head start no steady state has)
    warmup = max(cfg.warmup, run.workers * PREFETCH)
    # slowed reads arrive a file (about 1.4 s) at a time: a longer window, so its edges weigh little
    seconds = cfg.seconds * (3 if run.link else 1)
    seconds = max(seconds, min_steps * cfg.batch / pred.supply_fps)  # and at least min_steps steps counted
    r = vt.profiled_steps(loader, step, warmup, seconds, predicted=pred, min_steps=min_steps)
    del loader
    stall = r.stall
    named = None
    if stall.get("fetch") is not None:
        # a trainer that waits under NO_STALL of its time is not held up by any hop (which of two
        # near-zero waits is larger is noise)
        named = ("none" if stall["fetch"] + stall["prep"] < NO_STALL
                 else "read" if stall["fetch"] > stall["prep"] else "decode")
    # the plan's rates are per CPU-second and give the trainer and each decoder a core; on a shared
    # machine they get shares s_step and s_decode of one, so the plan at those shares is
    # min(1, S s_decode / (D s_step)) (as in examples/video_training.py)
    s_dec = r.hops["decode"].cpu_share if "decode" in r.hops else 1.0
    at_shares = min(1.0, pred.supply_fps * s_dec / (pred.demand_fps * max(r.step_cpu_share, 1e-9)))
    return {"setting": run.name, "params": params, "demand_fps_cpu": demand,
            "predicted_busy_at_measured_shares": at_shares, "decode_cpu_share": s_dec,
            "predicted_busy": pred.busy, "predicted_bottleneck": pred.bottleneck,
            "predicted_busy_without_handover": without.busy,
            "measured_busy": r.busy, "relative_error": r.busy_relative_error, "steps": r.steps,
            # where a gap comes from: the plan's supply and demand against what the run delivered and trained on
            "predicted_supply_fps": pred.supply_fps, "measured_delivered_fps": r.delivered_fps,
            "predicted_demand_fps": pred.demand_fps, "measured_demand_fps": r.demand_fps,
            "decode_hop_fps_cpu": r.hops["decode"].frames_per_cpu_second if "decode" in r.hops else None,
            "stall_fetch": stall.get("fetch"), "stall_prep": stall.get("prep"), "stall_names": named,
            "cores_needed_prep": r.cores_needed_prep, "step_cpu_share": r.step_cpu_share,
            "load_average": os.getloadavg()[0]}


# Two workers only where they read: on this 2-vCPU machine two decoding workers and the trainer's step
# want three cores, and the plan gives the step its own accelerator (docs/measurement.md has the figures)
SETTINGS = [Run(1, 96, "sequential"), Run(1, 192, "sequential"), Run(1, 96, "random"),
            Run(1, 512, "sequential", link=0.4e6), Run(2, 512, "sequential", link=0.4e6)]
# --quick (the test suite): one decode-bound and one read-bound setting, to check the split names the hop
QUICK = [Run(1, 96, "sequential"), Run(1, 512, "sequential", link=0.4e6)]
PREFETCH = 4  # batches a worker may hold ready: a whole file's frames
TARGET = 0.10  # issue 14: predicted busy within 10 % (relative) of the profiled busy, for >= 3 settings
NO_STALL = 0.02  # a trainer waiting under this share of its time is named as held up by no hop


def run_all(runs: list[Run], seconds: float, repeats: int, probe_seconds: float = 1.5,
            min_steps: int = 32) -> dict[str, Any]:
    """Files -> inspect -> probe decode (one calibration a pattern and decoder count) -> plan -> profiled loader."""
    cfg = vt.Config(seconds=seconds, probe_seconds=probe_seconds, clips=4, clip_frames=60, gop=15)
    base = Path(tempfile.mkdtemp(prefix="trainplan-e2e-"))
    try:
        files = vt.make_clips(base / "clips", cfg)
        report = insp.inspect_paths([base / "clips"])
        workload = insp.to_workload(report, base / "workload.toml", "measured by data inspect on the example's files")
        from trainplan.interfaces.commands.probe import write_decode_files, write_handover

        cal: dict[tuple[str, int], Path] = {}
        probes = {}
        # one calibration per access pattern and decoder count, as a user would probe for their loader: with
        # k workers the plan takes the rate of k decoders at once (the contention curve's last point)
        for access, decoders in sorted({(r.access, r.workers) for r in runs}):
            cal[(access, decoders)] = base / f"calibration-{access}-{decoders}.toml"
            d = probe.decode_user_files(files, access=access, side=cfg.side, max_decoders=decoders,  # type: ignore[arg-type]
                                        contention_seconds=1.0 if decoders > 1 else 0.5, torchcodec=False)
            d["files_found"] = len(files)
            write_decode_files(cal[(access, decoders)], d, probe.machine())
            probes[f"{access}, {decoders} decoder(s)"] = {k: d[k] for k in ("core_fps_1080p", "uncontended_core_fps_1080p",
                                                                           "contention_ratio", "gop", "skipped")}
        # the hand-over probe, recorded beside each decode rate (provenance measured in the plan)
        handover = measure_handover.handover(side=cfg.side, batch=cfg.batch, seconds=probe_seconds).to_dict()
        for path in cal.values():
            write_handover(path, handover, probe.machine())
        mm = max((probe.matmul_torch(512, "float32", "cpu", threads=1, min_seconds=0.3).to_dict() for _ in range(3)),
                 key=lambda r: r["flops_per_cpu_second"])
        peak = mm["flops_per_cpu_second"]
        rows = []
        for run in runs:
            got = sorted((measure(cfg, run, files, workload, cal, peak, min_steps) for _ in range(max(1, repeats))),
                         key=lambda r: r["relative_error"])
            row = got[len(got) // 2]
            row["errors_of_repeats"] = [g["relative_error"] for g in got]
            row["expected_hop"] = "read" if run.link else "decode"
            rows.append(row)
        within = sum(abs(r["relative_error"]) <= TARGET for r in rows)
        return {"inspect": report["aggregate"], "decode_probes": probes, "handover_probe": handover, "settings": rows,
                "within_target": within, "target": TARGET, "load_average": os.getloadavg()}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def table(out: dict[str, Any]) -> str:
    a = out["inspect"]
    lines = [f"inspect: {a['files']} files {a['width']}x{a['height']} {a['codec']}, GOP {a['gop_median']:g}, "
             f"{a['bitrate'] / 1e6:.2f} Mbit/s; load average {out['load_average'][0]:.2f}"]
    for name, d in out["decode_probes"].items():
        lines.append(f"decode probe ({name}): core_fps_1080p {d['core_fps_1080p']:.1f} "
                     f"(alone {d['uncontended_core_fps_1080p']:.1f})")
    h = out["handover_probe"]
    lines.append(f"hand-over probe: {h['loader_cpu_per_frame'] * 1e3:.3f} ms of a worker's CPU a frame "
                 f"(data.loader_cpu_per_frame; {h['worker_cpu_per_frame'] * 1e3:.3f} ms less "
                 f"{h['making_cpu_per_frame'] * 1e3:.4f} ms making it, {h['frames']} frames)")
    lines.append(f"{'setting':52} {'predicted':>9} {'measured':>9} {'error':>7} {'plan binds':>10} "
                 f"{'fetch':>6} {'prep':>6} {'split names':>11} {'at shares':>9} {'CPU step/dec':>12} {'no hand-over':>12}")
    for r in out["settings"]:
        lines.append(f"{r['setting']:52} {r['predicted_busy']:>9.3f} {r['measured_busy']:>9.3f} "
                     f"{r['relative_error'] * 100:>6.1f}% {r['predicted_bottleneck']:>10} "
                     f"{r['stall_fetch'] or 0:>6.2f} {r['stall_prep'] or 0:>6.2f} {r['stall_names'] or '-':>11} "
                     f"{r['predicted_busy_at_measured_shares']:>9.3f} {r['step_cpu_share']:>6.2f}/{r['decode_cpu_share']:.2f} "
                     f"{r['predicted_busy_without_handover']:>12.3f}")
    lines.append(f"within {out['target'] * 100:.0f} %: {out['within_target']} of {len(out['settings'])} settings")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="two settings (decode-bound, read-bound), for the tests")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = run_all(QUICK if args.quick else SETTINGS, args.seconds, args.repeats)
    print(json.dumps(out, indent=2, default=str) if args.json else table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
