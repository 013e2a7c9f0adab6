"""End to end on this machine (issue 14): the user's files -> inspect -> probe -> plan -> a real loader, profiled.

1. Synthetic H.264 files are written with PyAV/libx264 (640x360, 30 fps, a keyframe every
   `gop` frames).
2. `data inspect` measures them and writes the workload's [data] section (provenance measured).
3. `probe decode` on those files (PyAV, one thread, the loader's post-processing) writes
   `cluster.core_fps_1080p` to a calibration file; the read rate is the emulated link's.
4. The plan predicts busy and the binding hop for each setting.
5. A torch DataLoader whose worker processes decode the files (in order, or at random access)
   feeds a small model on the CPU, under the profiler: measured busy and the stall split.

Settings vary the loader workers, the model size and the access pattern; one setting slows
the reads (each file's read sleeps as a link of `--link` bytes/s would take), so the loader is
I/O-bound and the stall split must name fetch; the others are decode-bound (prep).

The step's demand and the decoders' supply are measured per CPU-second (see
examples/video_training.py, whose loader, model and step probe this example reuses), so that
time-slicing by other work on a shared machine cancels to first order; each setting runs
`--repeats` times and the median run is reported with the load average.

Run:  python examples/video_pipeline_e2e.py [--seconds 4] [--repeats 3] [--json]
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

from trainplan.measure import calibration  # noqa: E402
from trainplan.measure import inspect as insp  # noqa: E402
from trainplan.measure import probe  # noqa: E402
from trainplan.measure import profiler as tp_profile  # noqa: E402


@dataclass(frozen=True)
class Run:
    workers: int
    width: int
    access: str  # sequential | random
    link: float | None = None  # bytes/s of an emulated slow read; None reads at the disk's own rate

    @property
    def name(self) -> str:
        slow = f", reads at {self.link / 1e6:g} MB/s" if self.link else ""
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


def predict(cfg: vt.Config, run: Run, workload: Path, cal: dict[str, Path], params: int, demand_fps: float,
            peak: float) -> Any:
    from trainplan.accounts import pipeline
    from trainplan.planning import evaluate as plan
    from trainplan.workload.schema import load_workload

    n = cfg.tokens_per_frame
    mfu = min(1.0, demand_fps * 6 * params * n / peak)
    sets = [f"data.access=\"{run.access}\"", f"data.side={cfg.side}", f"data.patch={cfg.patch}", "data.cameras=1",
            f"model.params={params}", f"cluster.accelerator.peak_flops={peak}", "cluster.accelerator.memory=8e9",
            f"cluster.mfu={mfu}", "cluster.mfu_end_to_end=true", f"cluster.cores={max(run.workers, 1)}",
            "training.precision=\"fp32\""]
    if run.link:
        sets.append(f"cluster.link={run.link}")
    w = load_workload(workload, sets, calibration=cal[run.access])
    return pipeline.pipeline_account(**plan.pipeline_inputs(w))


def measure(cfg: vt.Config, run: Run, files: list[Path], workload: Path, cal: dict[str, Path], peak: float) -> dict[str, Any]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = vt.PatchMLP(cfg.side, cfg.patch, run.width, 1, cfg.classes)
    step = vt.make_step(model, cfg.classes)
    params = vt.params_of(model)
    demand = vt.step_rate_ready(step, cfg, cfg.probe_seconds)
    pred = predict(cfg, run, workload, cal, params, demand, peak)
    if pred.busy < 1:
        # at the plan's own duty cycle (examples/video_training.py): where busy < 1 the trainer waits
        # (1/b - 1) step times before each step, and a step after a wait runs slower on this VM
        gap = cfg.batch / demand * (1 / pred.busy - 1)
        demand = vt.step_rate_ready(step, cfg, cfg.probe_seconds + (cfg.warmup + 8) * gap, gap)
        pred = predict(cfg, run, workload, cal, params, demand, peak)
    loader = DataLoader(Frames(files, cfg.side, run.access, run.link, cfg.gop), batch_size=cfg.batch,
                        num_workers=run.workers, worker_init_fn=vt._worker_init)  # noqa: SLF001
    with tp_profile.Profiler(warmup=cfg.warmup, sync="none") as prof:
        started = None
        for batch in prof.wrap(loader):
            started = started or time.perf_counter()
            with prof.step():
                step(batch)
            if time.perf_counter() - started >= cfg.seconds:
                break
        r = prof.result(predicted=pred)
    del loader
    stall = r.stall
    named = None
    if stall.get("fetch") is not None:
        named = "read" if stall["fetch"] > stall["prep"] else "decode"
    # the plan's rates are per CPU-second and give the trainer and each decoder a core; on a shared
    # machine they get shares s_step and s_decode of one, so the plan at those shares is
    # min(1, S s_decode / (D s_step)) (as in examples/video_training.py)
    s_dec = r.hops["decode"].cpu_share if "decode" in r.hops else 1.0
    at_shares = min(1.0, pred.supply_fps * s_dec / (pred.demand_fps * max(r.step_cpu_share, 1e-9)))
    return {"setting": run.name, "params": params, "demand_fps_cpu": demand,
            "predicted_busy_at_measured_shares": at_shares, "decode_cpu_share": s_dec,
            "predicted_busy": pred.busy, "predicted_bottleneck": pred.bottleneck,
            "measured_busy": r.busy, "relative_error": r.busy_relative_error,
            "stall_fetch": stall.get("fetch"), "stall_prep": stall.get("prep"), "stall_names": named,
            "cores_needed_prep": r.cores_needed_prep, "step_cpu_share": r.step_cpu_share,
            "load_average": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--link", type=float, default=0.4e6, help="bytes/s of the slowed reads")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cfg = vt.Config(seconds=args.seconds, probe_seconds=1.5, clips=4, clip_frames=60, gop=15)
    runs = [Run(1, 96, "sequential"), Run(1, 192, "sequential"), Run(1, 96, "random"),
            Run(1, 512, "sequential", link=args.link)]
    base = Path(tempfile.mkdtemp(prefix="trainplan-e2e-"))
    try:
        files = vt.make_clips(base / "clips", cfg)
        report = insp.inspect_paths([base / "clips"])
        workload = insp.to_workload(report, base / "workload.toml", "measured by data inspect on the example's files")
        from trainplan.interfaces.commands.probe import write_decode_files

        cal = {}
        for access in ("sequential", "random"):  # one calibration per access pattern, as a user would probe
            cal[access] = base / f"calibration-{access}.toml"
            d = probe.decode_user_files(files, access=access, side=cfg.side, max_decoders=1,  # type: ignore[arg-type]
                                        contention_seconds=0.5)
            d["files_found"] = len(files)
            write_decode_files(cal[access], d, probe.machine())
        mm = max((probe.matmul_torch(512, "float32", "cpu", threads=1, min_seconds=0.3).to_dict() for _ in range(3)),
                 key=lambda r: r["flops_per_cpu_second"])
        peak = mm["flops_per_cpu_second"]
        rows = []
        for run in runs:
            got = sorted((measure(cfg, run, files, workload, cal, peak) for _ in range(max(1, args.repeats))),
                         key=lambda r: r["relative_error"])
            rows.append(got[len(got) // 2])
        out = {"inspect": report["aggregate"], "decode_probe": {k: d[k] for k in ("core_fps_1080p", "gop",
                                                                                   "skipped")},
               "settings": rows, "load_average": os.getloadavg()}
        if args.json:
            print(json.dumps(out, indent=2, default=str))
        else:
            a = report["aggregate"]
            print(f"inspect: {a['files']} files {a['width']}x{a['height']} {a['codec']}, GOP {a['gop_median']:g}, "
                  f"{a['bitrate'] / 1e6:.2f} Mbit/s; decode probe core_fps_1080p {d['core_fps_1080p']:.1f}; "
                  f"load average {os.getloadavg()[0]:.2f}")
            print(f"{'setting':46} {'predicted':>9} {'measured':>9} {'error':>7} {'plan binds':>10} "
                  f"{'fetch':>6} {'prep':>6} {'split names':>11} {'at shares':>9} {'CPU step/dec':>12}")
            for r in rows:
                print(f"{r['setting']:46} {r['predicted_busy']:>9.3f} {r['measured_busy']:>9.3f} "
                      f"{r['relative_error'] * 100:>6.1f}% {r['predicted_bottleneck']:>10} "
                      f"{r['stall_fetch'] or 0:>6.2f} {r['stall_prep'] or 0:>6.2f} {r['stall_names'] or '-':>11} "
                      f"{r['predicted_busy_at_measured_shares']:>9.3f} {r['step_cpu_share']:>6.2f}/{r['decode_cpu_share']:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
