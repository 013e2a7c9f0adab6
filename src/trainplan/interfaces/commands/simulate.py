"""`trainplan simulate`: the input pipeline as a discrete-event queue (docs/simulation.md).

    trainplan simulate [FILE.toml] [--set KEY=VALUE]... [--frames N] [--seed S]
                       [--format table|json] [--plot PATH] [--output PATH]
                       [--decode-dist deterministic|exponential|lognormal|empirical] [--cv X]
                       [--empirical FILE] [--read-cv X] [--keyframe-cost K] [--keyframe-interval G]
                       [--read-latency 1ms] [--buffers 1,4,16,64,256] [--timeline N]
                       [--vary KEY=VALUES]... [--jobs N] [--engine auto|python|compiled]

The workload gives the stages (trainplan.accounts.pipeline: per-core and per-engine decode
rates at this frame size, the read rate, the demand); data.buffer sizes the buffer.
Variability is off unless a flag turns it on; `--cv` alone means lognormal decode
times. `--buffers` adds busy at several buffer sizes on the same sample (the size
that recovers what variability loses). `--plot` draws the timeline (PNG, SVG or PDF).
`--vary` runs a grid instead (buffer sizes x variability x cores ..., trainplan.simulate.grid)
in parallel across cores with a progress bar: JSON `rows`, one per combination, each with
the varied keys and `busy`, `formula_busy`, `difference`, `throughput_fps`,
`mean_buffer_frames`, `bottleneck`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.errors import UserError, comma_items, refuse_repeats

FORMATS = ("table", "json")
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
# Colours of the timeline, by kind of lane (busy); blocked time is drawn grey, hatched.
LANE_COLOURS = {"read": "#4c72b0", "cpu": "#55a868", "nvdec": "#8172b2", "decoder": "#55a868",
                "accelerator": "#c44e52"}
BLOCKED_COLOUR = "#bbbbbb"
ENGINES = ("auto", "python", "compiled")  # trainplan.simulate.queue.ENGINES
READ_AHEAD_DEFAULT = 64  # trainplan.simulate.queue.READ_AHEAD_FRAMES (not imported here: the CLI starts light)

# Plausible ranges of the flags (issues 16 and 29): trainplan.simulate.limits, shared with --vary.
from trainplan.simulate.limits import (  # noqa: E402
    MAX_BUFFER_FRAMES, MAX_BUFFER_SIZES, MAX_CV, MAX_FRAME_SECONDS, MAX_FRAMES, MAX_KEYFRAME_COST, MAX_SEED,
    MAX_TIMELINE, MIN_MEAN_FRAME_SECONDS,
)


def _variability(decode_dist: str | None, cv: float | None, empirical: Path | None, read_cv: float | None,
                 keyframe_cost: float | None, keyframe_interval: int | None, read_latency: str | None,
                 gop: int) -> Any:
    from trainplan import units
    from trainplan.simulate.queue import DISTRIBUTIONS, Variability

    dist = decode_dist
    if dist is None:
        dist = "empirical" if empirical is not None else ("lognormal" if cv else "deterministic")
    if dist not in DISTRIBUTIONS:
        raise UserError("--decode-dist", f"one of {', '.join(DISTRIBUTIONS)}, got {dist!r}")
    # options that another choice makes meaningless are refused, not run as something else or left unread
    if cv and dist in ("deterministic", "empirical"):
        why = "deterministic times have no spread" if dist == "deterministic" else "the file's times are the spread"
        raise UserError("--cv", f"expected no --cv with --decode-dist {dist} ({why}), got {cv:g}")
    if empirical is not None and dist != "empirical":
        raise UserError("--empirical", f"expected --decode-dist empirical with it (or no --decode-dist), got {dist}")
    if keyframe_interval is not None and keyframe_cost is None:
        raise UserError("--keyframe-interval", "expected --keyframe-cost with it (the interval places costlier "
                        "keyframes; without a cost every frame costs the same)")
    if dist == "exponential" and cv is None:
        cv = 1.0
    if dist == "lognormal" and not cv:
        raise UserError("--cv", "a coefficient of variation > 0 for lognormal decode times (e.g. --cv 0.5)")
    sample: tuple[float, ...] = ()
    if dist == "empirical":
        if empirical is None:
            raise UserError("--empirical", "a file of per-frame decode seconds for --decode-dist empirical")
        sample = read_sample(empirical)
    latency = units.parse(read_latency, "time", "--read-latency") if read_latency is not None else 0.0
    if not 0 <= latency <= MAX_FRAME_SECONDS:
        raise UserError("--read-latency", f"expected a latency from 0 to {MAX_FRAME_SECONDS:g} s, got {read_latency!r}")
    v = Variability(
        decode=dist, decode_cv=float(cv or 0.0), read_cv=float(read_cv or 0.0),
        empirical_decode_seconds=sample,
        keyframe_interval=int(keyframe_interval if keyframe_interval is not None else (gop if keyframe_cost else 0)),
        keyframe_cost=float(keyframe_cost if keyframe_cost is not None else 1.0),
        read_latency_seconds=latency,
    )
    return None if v.is_off else v


def read_sample(path: Path) -> tuple[float, ...]:
    """Per-frame decode seconds: a JSON list, a JSON object with `frame_seconds` or
    `decode_seconds`, or text with one number a line (commas allowed; # comments).
    Each time is in [0, MAX_FRAME_SECONDS] and at least one is above zero."""
    from trainplan import limits  # regular files only, size and nesting caps (issue 16)

    where = str(path)
    text = limits.read_text(path, "empirical")
    expected = "numbers (seconds per frame), one a line or a JSON list"
    values: list[float] = []
    if text.lstrip()[:1] in ("[", "{"):
        data = limits.loads_json(text, where)
        if isinstance(data, dict):
            data = data.get("frame_seconds", data.get("decode_seconds"))
        if not isinstance(data, list) or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in data):
            raise UserError(where, f"{expected}, not true/false, strings or tables")
        try:
            values = [float(x) for x in data]
        except OverflowError:  # an integer past float range
            raise UserError(where, f"{expected}, each below 1.8e308") from None
    else:
        import re

        try:
            for number, line in enumerate(text.splitlines(), 1):
                line = line.split("#", 1)[0].strip()
                for token in line.split():
                    pieces = token.split(",")
                    # "0,004" is a comma decimal, not the numbers 0 and 4 (issue 29): a comma joins
                    # two numbers only beside a point or an exponent ("0.004,0.005") or a space
                    if len(pieces) > 1 and any(re.fullmatch(r"[-+]?\d+", p) for p in pieces):
                        raise UserError(f"{where}: line {number}", f"numbers with a decimal point; {token!r} "
                                        "reads as a comma decimal (write 0.004, and separate numbers with "
                                        "', ' or spaces)")
                if line:
                    values.extend(float(x) for x in line.replace(",", " ").split())
        except (ValueError, OverflowError):
            raise UserError(where, expected) from None
    if not values or any(not (0 <= v <= MAX_FRAME_SECONDS) for v in values) or sum(values) <= 0:
        raise UserError(where, f"at least one per-frame decode time, each in seconds in [0, {MAX_FRAME_SECONDS:g}]")
    if sum(values) / len(values) < MIN_MEAN_FRAME_SECONDS:
        raise UserError(where, f"a mean decode time of at least {MIN_MEAN_FRAME_SECONDS:g} s per frame (a "
                        f"billion frames a second per core is not a measurement), got {sum(values) / len(values):g} s")
    return tuple(values)


def _buffers(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    items = comma_items("--buffers", text, "whole numbers of frames")
    try:
        out = tuple(int(x) for x in items)
    except ValueError:
        raise UserError("--buffers", f"whole numbers of frames separated by commas, got {text!r}") from None
    if not out or any(not 1 <= b <= MAX_BUFFER_FRAMES for b in out):
        raise UserError("--buffers", f"expected buffer sizes from 1 to {MAX_BUFFER_FRAMES:,} frames, got {text!r}")
    if len(out) > MAX_BUFFER_SIZES:
        raise UserError("--buffers", f"expected at most {MAX_BUFFER_SIZES} buffer sizes, got {len(out)}")
    refuse_repeats("--buffers", out, text)
    return out


def simulation_report(workload: Any, frames: int, seed: int, variability: Any, buffers: tuple[int, ...] = (),
                      timeline: int = 2000, read_ahead: int | None = READ_AHEAD_DEFAULT, engine: str = "auto",
                      ) -> tuple[dict[str, Any], Any]:
    """The JSON object of `trainplan simulate` and the QueueResult behind it."""
    from trainplan.planning.simulation import queue_spec_from_workload
    from trainplan.simulate.queue import buffer_sweep, simulate

    spec, account, notes = queue_spec_from_workload(workload, frames=frames, seed=seed, variability=variability,
                                                    read_ahead_frames=read_ahead)
    times = None  # each run draws the sample from the seed as it goes (the compiled engine streams it)
    result = simulate(spec, times, timeline_limit=timeline, engine=engine)
    out = result.to_dict()
    out = {
        "busy": out.pop("busy"), "formula_busy": out.pop("formula_busy"), "difference": out.pop("difference"),
        "pipeline_busy": float(account.busy), "pipeline_bottleneck": account.bottleneck, **out,
    }
    out["queue"] = {
        "read_seconds_per_frame": spec.read_seconds_per_frame,
        "decoders": _decoder_summary(spec),
        "step_seconds_per_frame": spec.step_seconds_per_frame,
        "buffer_frames": spec.buffer_frames,
        "read_ahead_frames": spec.read_ahead_frames,
    }
    if buffers:
        out["buffer_sweep"] = buffer_sweep(spec, buffers, times, engine)
    out["notes"] = notes
    return out, result


def vary_report(file: Path | None, sets: list[str], calibration: Path | None, vary: list[str], frames: int,
                seed: int, variability: Any, read_ahead: int | None, jobs: int, engine: str,
                gop: int) -> dict[str, Any]:
    """The JSON object of `trainplan simulate --vary`: one row per combination of the varied keys."""
    from trainplan.simulate import fast, grid
    from trainplan.progress import progress_bar
    from trainplan.planning.simulation import queue_spec_from_workload
    from trainplan.workload.load import load_workload

    varies = [grid.parse_vary(v) for v in vary]

    def base_spec(extra: list[str]) -> Any:
        w = load_workload(file, [*sets, *extra], calibration)
        spec, _account, _notes = queue_spec_from_workload(w, frames=frames, seed=seed, variability=variability,
                                                          read_ahead_frames=read_ahead)
        return spec

    points, specs = grid.grid_specs(base_spec, varies, gop)
    workers = jobs or grid.default_jobs()
    used = "compiled" if engine == "compiled" or (
        engine == "auto" and fast.worth_it(frames * len(specs))) else "python"
    with progress_bar(f"{len(specs)} simulations", len(specs)) as advance:
        rows = grid.run_grid(specs, used, workers, advance)
    return {
        "vary": {v.key: [grid.number(x) for x in v.values] for v in varies},
        "frames": frames,
        "seed": seed,
        "engine": used,
        "jobs": min(workers, len(specs)),
        "simulations": len(specs),
        "rows": [{**p, **r} for p, r in zip(points, rows)],
    }


def vary_table(rep: dict[str, Any]) -> str:
    keys = list(rep["vary"])
    head = [f"{k:>14}" for k in keys] + [f"{'busy':>9}", f"{'formula':>9}", f"{'difference':>11}",
                                          f"{'frames/s':>11}", f"{'buffer':>8}", "  bottleneck"]
    lines = [f"{rep['simulations']:,} simulations of {rep['frames']:,} frames (seed {rep['seed']}, "
             f"{rep['engine']} engine, {rep['jobs']} processes)", "".join(head)]
    for row in rep["rows"]:
        cells = [f"{row[k]:>14g}" for k in keys]
        cells += [f"{100 * row['busy']:>8.2f}%", f"{100 * row['formula_busy']:>8.2f}%",
                  f"{100 * row['difference']:>+10.2f}p", f"{row['throughput_fps']:>11,.1f}",
                  f"{row['mean_buffer_frames']:>8.2f}", f"  {row['bottleneck']}"]
        lines.append("".join(cells))
    return "\n".join(lines)


def _decoder_summary(spec: Any) -> list[dict[str, Any]]:
    names = spec.decoder_names or ("decoder",) * len(spec.decoder_seconds_per_frame)
    groups: dict[str, list[float]] = {}
    for n, s in zip(names, spec.decoder_seconds_per_frame):
        groups.setdefault(n, []).append(s)
    return [{"name": n, "units": len(v), "frames_per_second": sum(1 / s for s in v)} for n, v in groups.items()]


def as_table(rep: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "n.a." if x is None else f"{100 * x:.2f} %"

    lines = [
        f"queue of {rep['frames']:,} frames (seed {rep['seed']}; first {rep['warmup_frames']:,} "
        f"and last {rep['cooldown_frames']:,} left out)",
        f"  busy (simulated)        {pct(rep['busy'])}",
        f"  busy (formula, §7)      {pct(rep['formula_busy'])}   difference {100 * rep['difference']:+.2f} points",
        f"  throughput              {rep['throughput_fps']:,.1f} frames/s of a demand of {rep['demand_fps']:,.1f}",
        f"  bottleneck              {rep['bottleneck']} (formula: {rep['pipeline_bottleneck']})",
        f"  buffer                  {rep['mean_buffer_frames']:.2f} of {rep['queue']['buffer_frames']} frames "
        f"on average; a frame waits {1e3 * rep['waits']['mean_buffer_wait_seconds']:.3f} ms in it",
        "  stage          units    busy   blocked   idle",
    ]
    for s in rep["stages"]:
        lines.append(f"  {s['name']:<13} {s['units']:>5} {pct(s['busy']):>9} {pct(s['blocked']):>9} {pct(s['idle']):>9}")
    w = rep["waits"]
    lines.append(f"  decoders blocked on a full buffer: {w['decoders_blocked']:.3f} on average; "
                 f"starved of reads: {w['decoders_starved']:.3f}")
    if rep.get("variability"):
        v = rep["variability"]
        parts = [f"decode {v['decode']}" + (f" cv {v['decode_cv']:g}" if v["decode_cv"] else "")]
        if v["read_cv"]:
            parts.append(f"read cv {v['read_cv']:g}")
        if v["keyframe_interval"] > 1 and v["keyframe_cost"] != 1:
            parts.append(f"keyframe every {v['keyframe_interval']} costs {v['keyframe_cost']:g}x")
        if v["read_latency_seconds"]:
            parts.append(f"read latency {1e3 * v['read_latency_seconds']:g} ms")
        lines.append(f"  variability: {', '.join(parts)}; formula on this sample's means "
                     f"{pct(rep['sample_formula_busy'])}")
    else:
        lines.append("  variability: off (deterministic service times)")
    if rep.get("buffer_sweep"):
        lines.append("  buffer (frames)   busy")
        for row in rep["buffer_sweep"]:
            lines.append(f"  {row['buffer_frames']:>15} {pct(row['busy']):>9}")
    for n in rep.get("notes", []):
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def plot_timeline(result: Any, path: Path, title: str | None = None) -> None:
    """Draw who was busy when (and blocked, grey) above the buffer's occupancy; PNG/SVG/PDF by suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    path = Path(path)
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise UserError("--plot", f"a file ending in {', '.join(PLOT_SUFFIXES)}, got {path.name!r}")
    from trainplan.outputs import check_output_path, write_output

    check_output_path(path, "--plot")
    if not result.timeline:
        raise UserError("--timeline", "at least one interval to draw (--timeline > 0)")
    t0, t1 = result.timeline_span
    lanes: list[str] = []
    for i in result.timeline:
        if i.lane not in lanes:
            lanes.append(i.lane)
    decoders = sorted((ln for ln in lanes if ln not in ("read", "accelerator")),
                      key=lambda ln: (ln.split("[")[0], int(ln.split("[")[1].rstrip("]")) if "[" in ln else 0))
    lanes = (["read"] if "read" in lanes else []) + decoders + (["accelerator"] if "accelerator" in lanes else [])
    row = {ln: k for k, ln in enumerate(reversed(lanes))}
    scale = 1e3  # milliseconds
    height = min(12.0, 1.5 + 0.3 * len(lanes))
    fig, (ax, axb) = plt.subplots(2, 1, figsize=(11, height + 2.2), sharex=True,
                                  gridspec_kw={"height_ratios": [height, 1.6]})
    bars: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i in result.timeline:
        bars.setdefault((i.lane, i.state), []).append(((i.start - t0) * scale, (i.end - i.start) * scale))
    for (lane, state), spans in bars.items():
        kind = lane.split("[")[0]
        colour = BLOCKED_COLOUR if state == "blocked" else LANE_COLOURS.get(kind, "#dd8452")
        # a thin white edge shows where one frame ends and the next begins
        ax.broken_barh(spans, (row[lane] - 0.4, 0.8), facecolors=colour, edgecolor="white", linewidth=0.4,
                       hatch="//" if state == "blocked" else None)
    ax.set_yticks(range(len(lanes)), list(reversed(lanes)))
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    kinds = [k for k in ("read", "cpu", "nvdec", "decoder", "accelerator")
             if any(ln.split("[")[0] == k for ln in lanes)]
    handles = [Patch(color=LANE_COLOURS[k], label=f"{k} busy") for k in kinds]
    handles.append(Patch(facecolor=BLOCKED_COLOUR, hatch="//", label="blocked (downstream full)"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8,
              ncols=len(handles), frameon=False)
    fig.suptitle(title or (f"who was busy when: simulated busy {100 * result.busy:.1f} %, "
                           f"formula {100 * result.formula_busy:.1f} %, "
                           f"mean buffer {result.mean_buffer_frames:.1f} frames"), fontsize=10)
    if result.buffer_trace:
        ts = [(t - t0) * scale for t, _ in result.buffer_trace]
        levels = [lv for _, lv in result.buffer_trace]
        axb.step(ts + [(t1 - t0) * scale], levels + [levels[-1]], where="post", color="#444444", lw=1)
    axb.set_ylim(bottom=0)
    axb.set_ylabel("buffer\n(frames)")
    axb.set_xlabel("time since the start of the measured window (ms)")
    ax.set_xlim(0, max((t1 - t0) * scale, 1e-9))
    fig.tight_layout()
    import io

    image = io.BytesIO()
    fig.savefig(image, format=path.suffix.lower().lstrip("."))
    plt.close(fig)
    write_output(image.getvalue(), path, "--plot")  # regular files only, atomically (issue 16)


def _check_options(frames: int, seed: int, read_ahead: int, timeline: int, cv: float | None, read_cv: float | None,
                   keyframe_cost: float | None, keyframe_interval: int | None, plot: Path | None, engine: str,
                   jobs: int) -> None:
    """Nothing: raises UserError for the first of `simulate`'s options out of its range."""
    if not 1000 <= frames <= MAX_FRAMES:
        raise UserError("--frames", f"expected 1000 to {MAX_FRAMES:,} frames, got {frames}")
    if not 0 <= seed <= MAX_SEED:
        raise UserError("--seed", f"expected a whole number from 0 to 2^63-1, got {seed}")
    if not 0 <= read_ahead <= MAX_BUFFER_FRAMES:
        raise UserError("--read-ahead", f"expected a whole number of frames from 0 (unbounded) to "
                        f"{MAX_BUFFER_FRAMES:,}, got {read_ahead}")
    if not 0 <= timeline <= MAX_TIMELINE:
        raise UserError("--timeline", f"expected a number of intervals from 0 to {MAX_TIMELINE:,}, got {timeline}")
    for name, value in (("--cv", cv), ("--read-cv", read_cv)):
        if value is not None and not (0 <= value <= MAX_CV):
            raise UserError(name, f"expected a coefficient of variation from 0 to {MAX_CV:g}, got {value}")
    if keyframe_cost is not None and not (0 < keyframe_cost <= MAX_KEYFRAME_COST):
        raise UserError("--keyframe-cost", f"expected a cost above 0 and at most {MAX_KEYFRAME_COST:g} "
                        f"(times an ordinary frame), got {keyframe_cost}")
    if keyframe_interval is not None and not 1 <= keyframe_interval <= MAX_BUFFER_FRAMES:
        raise UserError("--keyframe-interval", f"expected a whole number of frames from 1 to "
                        f"{MAX_BUFFER_FRAMES:,}, got {keyframe_interval}")
    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        raise UserError("--plot", f"a file ending in {', '.join(PLOT_SUFFIXES)}, got {plot.name!r}")
    if engine not in ENGINES:
        raise UserError("--engine", f"one of {', '.join(ENGINES)}, got {engine!r}")
    if jobs < 0:
        raise UserError("--jobs", f"a number of worker processes >= 0 (0: every core), got {jobs}")


def simulate_command(
    file: Annotated[Optional[Path], typer.Argument(help="workload TOML file; the built-in default without one")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a workload key: KEY=VALUE")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="calibration file of a probe")] = None,
    frames: Annotated[int, typer.Option("--frames", help="frames to simulate")] = 200_000,
    seed: Annotated[int, typer.Option("--seed", help="seed of the service-time sample")] = 0,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    plot: Annotated[Optional[Path], typer.Option("--plot", help="draw the timeline to FILE (.png, .svg, .pdf)")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write to this file")] = None,
    decode_dist: Annotated[Optional[str], typer.Option(
        "--decode-dist", help="deterministic, exponential, lognormal or empirical")] = None,
    cv: Annotated[Optional[float], typer.Option("--cv", help="coefficient of variation of decode times")] = None,
    empirical: Annotated[Optional[Path], typer.Option(
        "--empirical", help="per-frame decode seconds from a probe (JSON list or one a line)")] = None,
    read_cv: Annotated[Optional[float], typer.Option("--read-cv", help="coefficient of variation of reads")] = None,
    keyframe_cost: Annotated[Optional[float], typer.Option(
        "--keyframe-cost", help="a keyframe costs this many ordinary frames")] = None,
    keyframe_interval: Annotated[Optional[int], typer.Option(
        "--keyframe-interval", help="frames between keyframes (default data.gop)")] = None,
    read_latency: Annotated[Optional[str], typer.Option("--read-latency", help="latency per read, e.g. 1ms")] = None,
    buffers: Annotated[Optional[str], typer.Option(
        "--buffers", help="also busy at these buffer sizes, e.g. 1,4,16,64,256")] = None,
    timeline: Annotated[int, typer.Option("--timeline", help="intervals kept in the timeline")] = 2000,
    read_ahead: Annotated[int, typer.Option(
        "--read-ahead", help="encoded frames read ahead of the decoders (0: unbounded)")] = READ_AHEAD_DEFAULT,
    vary: Annotated[Optional[list[str]], typer.Option(
        "--vary", help="simulate a grid: KEY=VALUES, e.g. buffer=1,4,16,64 cv=0:2 cores=4:32:4 (repeatable)")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="worker processes for --vary (0: every core)")] = 0,
    engine: Annotated[str, typer.Option(
        "--engine", help="auto, python (the reference) or compiled (numba, the `fast` extra)")] = "auto",
) -> None:
    """Simulate the input pipeline as a queue: busy fraction, waits and a timeline (docs/simulation.md)."""
    from trainplan.outputs import write_output
    from trainplan.workload.load import load_workload

    if output_format not in FORMATS:
        from trainplan.interfaces.options import check_format
        check_format(output_format, tuple(FORMATS))
    _check_options(frames, seed, read_ahead, timeline, cv, read_cv, keyframe_cost, keyframe_interval, plot, engine,
                   jobs)
    sweep = _buffers(buffers)
    from trainplan.outputs import check_output_path

    for option, path in (("--output", output), ("--plot", plot)):
        if path is not None and str(path) != "-":
            check_output_path(path, option)  # a bad path fails before the simulation runs
    if output is not None and plot is not None and str(output) != "-" and \
            os.path.abspath(output) == os.path.abspath(plot):  # the table would overwrite the plot (issue 29)
        raise UserError("--plot", f"expected a file other than --output ({output})")
    workload = load_workload(file, set_ or [], calibration)
    variability = _variability(decode_dist, cv, empirical, read_cv, keyframe_cost, keyframe_interval,
                               read_latency, workload.data.gop)
    if vary:
        varied = {v.split("=", 1)[0].strip() for v in vary}
        if "cv" in varied and decode_dist in ("deterministic", "empirical"):
            # as --cv is refused with these distributions: a grid over cv would run as another one
            raise UserError("--vary cv", f"expected no cv with --decode-dist {decode_dist} (its times' spread is "
                            "fixed)")
        if plot is not None or sweep:
            raise UserError("--plot" if plot is not None else "--buffers",
                            "not with --vary (vary the buffer with --vary buffer=...)")
        rep = vary_report(file, set_ or [], calibration, vary, frames, seed, variability, read_ahead or None,
                          jobs, engine, workload.data.gop)
        text = json.dumps(rep, indent=2, allow_nan=False) if output_format == "json" else vary_table(rep)
        write_output(text, output)
        return
    rep, result = simulation_report(workload, frames, seed, variability, sweep,
                                    max(timeline, 1) if plot is not None else timeline, read_ahead or None,
                                    engine)
    if plot is not None:
        plot_timeline(result, plot)
        rep["plot"] = str(plot)
    if output_format == "json":
        text = json.dumps(rep, indent=2, allow_nan=False)
    else:
        text = as_table(rep)
    write_output(text, output)


def register(app: typer.Typer) -> None:
    """Add `simulate` to the trainplan app (called by cli.py's command discovery)."""
    app.command("simulate")(simulate_command)
