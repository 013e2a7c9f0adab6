"""`trainplan probe [decode|read|matmul|transfer|allreduce|all]`: measure what the plan assumes (docs/index.md).

Each subcommand prints its figures (`--format table|json`) and, with `--output FILE`,
records them in a calibration file that `trainplan plan --calibration FILE` reads.
The decode probe takes the clip format from a workload (the built-in default is the
reference workload, 1080p30 H.264 at 8 Mbit/s) so it measures the video the plan is
about; the options override single figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from trainplan import units
from trainplan.workload import calibration
from trainplan.measure import probe
from trainplan.errors import UserError
from trainplan.planning.evaluate import clean

FORMATS = ("table", "json")

WorkloadArg = Annotated[Optional[Path], typer.Argument(help="workload TOML file; the built-in default without one")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="override a workload key: KEY=VALUE (units allowed)")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table or json")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="write or update this calibration TOML file")]


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        from trainplan.interfaces.options import check_format
        check_format(fmt, tuple(FORMATS))


def _emit(data: dict[str, Any], fmt: str, table: Callable[[dict[str, Any]], str]) -> None:
    if fmt == "json":
        typer.echo(json.dumps(clean(data), indent=2))
    else:
        typer.echo(table(data))


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for size, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _parse(value: str | None, dimension: str, key: str) -> float | None:
    return None if value is None else units.parse(value, dimension, key)  # type: ignore[arg-type]


# ---------------------------------------------------------------- sizes (issue 29)

#: x264's presets (x264.h x264_preset_names), the names libx264 opens an encoder with
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
                "placebo")

# Memory a probe's sizes lead to, checked (workload/limits.check_allocation) before it runs.
#: matmul: a, b and out in float32 (4 bytes each) and the float64 normal sample each is cast from (8):
#: 20 bytes per element of an n x n matrix.
MATMUL_BYTES_PER_ELEMENT = 3 * 4 + 8
#: hand-over: batches alive at once: the one the worker fills, the DataLoader's prefetch of 2 per worker
#: (torch's prefetch_factor default), and the one the loop holds.
HANDOVER_BATCHES_HELD = 4
#: decode: frames x264 holds while encoding: its rc-lookahead (40 by default) and the reference and
#: B frames behind it; 64 bounds them at every preset.
ENCODER_FRAMES_HELD = 64
#: decode: bytes of a yuv420p frame per pixel (a full luma plane and two quarter chroma planes).
YUV420_BYTES_PER_PIXEL = 1.5
#: decode: the most frames in a synthetic clip: an hour at 30 frames/s (the figure settles within a few
#: thousand; the default is two keyframe intervals).
MAX_PROBE_FRAMES = 108_000


def _check_decode_sizes(fmt: probe.ClipFormat, frames: int | None, side: int, batch: int, seconds: float) -> None:
    """The synthetic clip's frames, memory and time, before it is encoded."""
    import math

    from trainplan import limits

    limits.check_seconds("--seconds", seconds)
    n = frames if frames is not None else max(60, 2 * fmt.gop)
    n = int(math.ceil(n / fmt.gop) * fmt.gop)
    if n > MAX_PROBE_FRAMES:
        raise UserError("--frames", f"expected at most {MAX_PROBE_FRAMES:,} frames (an hour at 30 frames/s), got "
                        f"{n:,}" + (f" (two keyframe intervals of data.gop {fmt.gop})" if frames is None else ""))
    frame = fmt.width * fmt.height * YUV420_BYTES_PER_PIXEL
    limits.check_allocation("--height" if fmt.height >= fmt.width else "--width", ENCODER_FRAMES_HELD * frame,
                            f"encoding {fmt.width} x {fmt.height} px frames")
    clip = n / fmt.fps * fmt.bitrate / 8  # the encoded clip, held in memory (and copied once)
    limits.check_allocation("--frames", 2 * clip + ENCODER_FRAMES_HELD * frame,
                            f"a clip of {n:,} frames at {fmt.bitrate / 1e6:g} Mbit/s")
    limits.check_allocation("--batch", HANDOVER_BATCHES_HELD * batch * side * side * 3,
                            f"batches of {batch:,} frames of {side} x {side} px")


# ---------------------------------------------------------------- decode


def _decode_settings(file: Path | None, sets: list[str], width: int | None, height: int | None,
                     fps: float | None, bitrate: str | None, gop: int | None, side: int | None,
                     access: str | None) -> tuple[probe.ClipFormat, int, str]:
    from trainplan.workload.load import load_workload

    from trainplan.errors import named_as

    # each flag is read as its workload key is (issue 29): 0 is refused, not replaced by the default
    flags = {"width": width, "height": height, "fps": fps, "bitrate": bitrate, "gop": gop, "side": side}
    extra = [f"data.{k}={v}" for k, v in flags.items() if v is not None]
    with named_as({f"data.{k}": f"--{k}" for k, v in flags.items() if v is not None}):
        w = load_workload(file, [*sets, *extra])
    d = w.data
    fmt = probe.ClipFormat(width=d.width, height=d.height, fps=d.fps, bitrate=d.bitrate, gop=d.gop)
    chosen = access or ("random" if d.access == "random" else "sequential")
    if chosen not in ("sequential", "random"):
        raise UserError("--access", f"expected sequential or random, got {chosen!r}")
    return fmt, d.side, chosen


def run_decode(fmt: probe.ClipFormat, side: int, access: str, frames: int | None, samples: int,
               postprocess: str, preset: str, handoff: str = "none", batch: int = 16,
               seconds: float = 0.0) -> dict[str, Any]:
    from trainplan.progress import progress

    with progress("decode probe: encoding and decoding a clip"):
        result = probe.decode(fmt, frames=frames, access=access, random_samples=samples,  # type: ignore[arg-type]
                              postprocess=postprocess, side=side, preset=preset,  # type: ignore[arg-type]
                              handoff=handoff, batch=batch, min_seconds=seconds)  # type: ignore[arg-type]
    return result.to_dict()


def write_decode(path: Path, d: dict[str, Any], machine: dict[str, Any]) -> None:
    calibration.write(path, "decode", settings=calibration.decode_settings(d), results=d,
                      values=calibration.decode_values(d), machine=machine)


#: A probe's frame this many times smaller or larger (in pixels) than 1080p is told apart in the table: pixel
#: scaling is an approximation near 1080p, not a law at 64x64 (issue 29).
FAR_FROM_1080P = 16


def decode_table(d: dict[str, Any]) -> str:
    lines = [
        f"decode probe: {d['width']}x{d['height']} H.264, {d['fps']:g} fps, {d['bitrate'] / 1e6:g} Mbit/s "
        f"(encoded at {d['achieved_bitrate'] / 1e6:.2f}), keyframe every {d['gop']} frames, one thread",
        f"  post-processing: {d['postprocess_text']}"
        + (f"; {d['handoff_text']} ({d['batch']} frames)" if d.get("handoff", "none") != "none" else ""),
        f"  {'access':<11} {'frames/CPU-s':>13} {'at 1080p':>9} {'frames/wall-s':>14} {'decoded/used':>13} "
        f"{'expected':>9} {'used/CPU-s':>11}",
    ]
    for name in ("sequential", "random"):
        r = d.get(name)
        if not r:
            continue
        lines.append(f"  {name:<11} {r['frames_per_cpu_second']:>13.1f} {r['frames_per_cpu_second_1080p']:>9.1f} "
                     f"{r['frames_per_wall_second']:>14.1f} {r['frames_decoded_per_frame_used']:>13.2f} "
                     f"{r['expected_frames_decoded_per_frame_used']:>9.2f} {r['frames_used_per_cpu_second']:>11.1f}")
    from trainplan.measure.decode import PIXELS_1080P
    from trainplan.workload.schema import ClusterSection

    assumed = ClusterSection.model_fields["core_fps_1080p"].default
    lines.append(f"  cluster.core_fps_1080p for the plan ({d['access']}): {d['core_fps_1080p']:.1f} frames/s "
                 f"(the plan assumes {assumed:g})")
    pixels = d["width"] * d["height"]
    if not PIXELS_1080P / FAR_FROM_1080P <= pixels <= PIXELS_1080P * FAR_FROM_1080P:
        # a frame's fixed costs (and the resize to the model side) do not shrink with its pixels: at 64x64 the
        # 1080p-equivalent is no statement about 1080p, and the plan applies it only at the size it was measured
        size = f"{d['width']}x{d['height']}"
        scale = (f"{PIXELS_1080P / pixels:.3g}x fewer pixels than 1080p" if pixels < PIXELS_1080P
                 else f"{pixels / PIXELS_1080P:.3g}x the pixels of 1080p")
        lines.append(f"  measured at {size}, {scale}: cost is not in proportion to pixels this far from 1080p, so "
                     f"the 1080p column says nothing about 1080p; a plan applies this rate only to {size} frames")
    return "\n".join(lines)


def run_decode_files(videos: list[Path], file: Path | None, sets: list[str], side: int | None, access: str | None,
                     samples: int, postprocess: str, sample: int, decoders: int | None) -> dict[str, Any]:
    """The decode probe on the user's files (a sample of them), in the workload's side and access pattern."""
    from trainplan.measure import inspect as insp
    from trainplan.workload.load import load_workload

    w = load_workload(file, sets)
    chosen = access or ("random" if w.data.access == "random" else "sequential")
    if chosen not in ("sequential", "random"):
        raise UserError("--access", f"expected sequential or random, got {chosen!r}")
    if postprocess not in probe.POSTPROCESS_TEXT:
        raise UserError("--postprocess", f"expected one of {', '.join(probe.POSTPROCESS_TEXT)}, got {postprocess!r}")
    images = insp.collect(videos, insp.IMAGE_SUFFIXES)
    found = insp.collect(videos, insp.VIDEO_SUFFIXES)
    if images and not found:  # an image folder: PIL, every image up to --sample x 16 of them
        chosen_images = insp.sample(images, sample * IMAGES_A_FILE_SAMPLED)
        d = probe.decode_images(chosen_images, side=side or w.data.side, postprocess=postprocess)  # type: ignore[arg-type]
        d["files_found"] = len(images)
        return d
    if not found:
        raise UserError("PATH", "expected video files (.mp4, .mkv, .mov, ...), images (.jpg, .png, .webp) or "
                        "folders holding them")
    chosen_files = insp.sample(found, sample)
    for f in chosen_files:
        insp.inspect_video(f)  # a file PyAV cannot open is refused here, in one line
    d = probe.decode_user_files(chosen_files, access=chosen, side=side or w.data.side,  # type: ignore[arg-type]
                                postprocess=postprocess, samples=samples, max_decoders=decoders)  # type: ignore[arg-type]
    d["files_found"] = len(found)
    return d


def run_loader(factory: str, file: Path | None, sets: list[str], seconds: float, items: int) -> dict[str, Any]:
    """The loader probe (measure/loader.py) and the 1080p rate it gives the workload's frames."""
    from trainplan.accounts import pipeline
    from trainplan.measure import loader
    from trainplan.workload.load import load_workload

    w = load_workload(file, sets)
    r = loader.probe_loader(factory, seconds=seconds, max_items=items).to_dict()
    d = w.data
    g = float(pipeline.decoded_per_used(d.access if d.access != "decoded" else "sequential", d.gop, d.random_decodes))
    pixels = float(d.pixels_per_frame or d.width * d.height)
    r.update(width=d.width, height=d.height, codec=d.codec, access=d.access, gop=d.gop, decoded_per_used=g,
             pixels_per_frame=pixels, side=d.side, core_fps_1080p=loader.core_fps_1080p(r["items_per_cpu_second"], g,
                                                                                         pixels),
             decoder=f"the user's loader {factory}")
    return r


def write_loader(path: Path, d: dict[str, Any], machine: dict[str, Any]) -> None:
    """The loader's rate as the decode probe of the calibration (one decode rate a file; the format check
    then holds it to the workload's frame size and codec)."""
    settings = {k: d[k] for k in ("width", "height", "codec", "gop", "access", "side")}
    settings.update(source="loader", decoder=d["decoder"], threads=1, postprocess="the loader's own")
    note = (f"the user's loader {d['factory']}, {d['items']} items one after another: {d['cpu_per_item'] * 1e3:.3g} ms "
            f"CPU and {d['wall_per_item'] * 1e3:.3g} ms wall an item ({d['wait_share'] * 100:.0f} % waiting); "
            f"{d['items_per_cpu_second']:.1f} items per CPU-second x {d['decoded_per_used']:g} decoded a frame used x "
            f"{d['pixels_per_frame'] / 1e6:.3g} Mpx / 2.07 Mpx")
    calibration.write(path, "decode", settings=settings, results=d,
                      values=[{"key": "cluster.core_fps_1080p", "value": float(d["core_fps_1080p"]), "note": note}],
                      machine=machine)


def loader_table(d: dict[str, Any]) -> str:
    lo, hi = d["cpu_per_item_spread"]
    return "\n".join([
        f"loader probe: {d['factory']}, {d['items']} items one after another in this process",
        f"  CPU {d['cpu_per_item'] * 1e3:.3g} ms an item (10-90 %: {lo * 1e3:.3g}-{hi * 1e3:.3g}), wall "
        f"{d['wall_per_item'] * 1e3:.3g} ms: {d['items_per_cpu_second']:.1f} items per CPU-second, "
        f"{d['items_per_wall_second']:.1f} per wall-second",
        f"  waiting (fetch) {d['wait_share'] * 100:.1f} % of an item's time, computing (prep) "
        f"{(1 - d['wait_share'] - d.get('core_wait_share', 0.0)) * 100:.1f} %"
        + (f", ready but waiting for a core (this machine's load) {d['core_wait_share'] * 100:.1f} %"
           if d.get("core_wait_share", 0.0) >= 0.005 else ""),
        f"  cluster.core_fps_1080p for the plan ({d['access']}, {d['width']}x{d['height']} {d['codec']}): "
        f"{d['core_fps_1080p']:.1f} frames/s"])


# Images decoded by the image decode probe for each video file `--sample` names: images are small, so more of them
IMAGES_A_FILE_SAMPLED = 16


def write_decode_files(path: Path, d: dict[str, Any], machine: dict[str, Any]) -> None:
    settings = {k: d[k] for k in ("width", "height", "codec", "gop", "access", "side", "postprocess", "threads",
                                  "contention_decoders")}
    settings["source"] = d.get("source", "files")
    settings["decoder"] = d.get("decoder", "PyAV")  # which decoder (or loader) the rate is of
    settings["files"] = len(d["files"])
    calibration.write(path, "decode", settings=settings, results=d, values=calibration.decode_files_values(d),
                      machine=machine)


def decode_files_table(d: dict[str, Any]) -> str:
    lines = [f"decode probe on {len(d['files'])} of {d['files_found']} file(s): {d['codec']} {d['width']}x{d['height']}, "
             f"keyframe every {d['gop']:g} frames (median), {d['postprocess_text']}; decoder {d.get('decoder', 'PyAV')}",
             f"  {'decoder':<18} {'access':<11} {'frames/CPU-s':>13} {'at 1080p':>9} {'frames/wall-s':>14} "
             f"{'decoded/used':>13} {'(G+1)/2':>8} {'used/CPU-s':>11}"]
    for r in d["results"]:
        counted = "-" if r["frames_decoded_per_frame_used"] is None else f"{r['frames_decoded_per_frame_used']:.2f}"
        lines.append(f"  {r['decoder'] + ' ' + r['device']:<18} {r['access']:<11} {r['frames_per_cpu_second']:>13.1f} "
                     f"{r['frames_per_cpu_second_1080p']:>9.1f} {r['frames_per_wall_second']:>14.1f} {counted:>13} "
                     f"{r['expected_frames_decoded_per_frame_used']:>8.2f} {r['frames_used_per_cpu_second']:>11.1f}")
    if d["contention"]:
        lines.append("  contention (PyAV, in order): decoders at once -> frames/CPU-s per decoder (vs one alone), "
                     "CPU share")
        for c in d["contention"]:
            lines.append(f"    {c['decoders']:>3}  {c['frames_per_cpu_second']:>9.1f}  ({c['relative_to_one'] * 100:.0f} %)"
                         f"  {c['cpu_share'] * 100:.0f} % of a core")
    for s in d["skipped"]:
        lines.append(f"  skipped: {s}")
    lines.append(f"  cluster.core_fps_1080p for the plan ({d['access']}, at {d['contention_decoders']} decoder(s) at "
                 f"once): {d['core_fps_1080p']:.1f} frames/s (alone {d['uncontended_core_fps_1080p']:.1f}; "
                 "docs/pipeline-and-bill.md assumes 120)")
    return "\n".join(lines)


# ---------------------------------------------------------------- other probes


def write_handover(path: Path, d: dict[str, Any], machine: dict[str, Any]) -> None:
    calibration.write(path, calibration.HANDOVER_PROBE, settings={"side": d["side"], "batch": d["batch"]},
                      results=d, values=calibration.handover_values(d), machine=machine)


def handover_table(d: dict[str, Any]) -> str:
    return (f"hand-over probe: one DataLoader worker, {d['side']} px uint8 frames in batches of {d['batch']}, "
            f"{d['frames']:,} frames in {d['wall_seconds']:.1f} s\n"
            f"  worker CPU {d['worker_cpu_per_frame'] * 1e3:.3f} ms a frame, less {d['making_cpu_per_frame'] * 1e3:.4f} ms "
            f"making it\n"
            f"  data.loader_cpu_per_frame for the plan: {d['loader_cpu_per_frame'] * 1e3:.3f} ms a frame")


def run_read(path: Path | str, size: str | None, repeats: int = 5) -> dict[str, Any]:
    from trainplan.measure import locations

    nbytes = _parse(size, "bytes", "--size")  # None only when not given: 0 is refused, not the default
    if locations.is_url(path):  # where the data lives: an object store, a web server (issue 26)
        return locations.read_probe(str(path), repeats=repeats, size=int(
            nbytes if nbytes is not None else locations.READ_TEST_OBJECT_BYTES)).to_dict()
    return probe.read(Path(path), size=int(nbytes if nbytes is not None else 64 * 2**20)).to_dict()


def write_read(path: Path, d: dict[str, Any], machine: dict[str, Any]) -> None:
    if "location" in d:
        calibration.write(path, "read", settings={"location": d["location"], "object": d["object"],
                                                  "object_bytes": d["object_bytes"], "repeats": d["repeats"]},
                          results=d, values=calibration.location_read_values(d), machine=machine)
        return
    calibration.write(path, "read", settings={"path": d["path"], "bytes": d["bytes"], "block_bytes": d["block_bytes"]},
                      results=d, values=calibration.read_values(d), machine=machine)


def read_table(d: dict[str, Any]) -> str:
    if "location" in d:
        return location_read_table(d)
    return (f"read probe: {units.format_quantity(d['bytes'], 'bytes')} from {d['path']}{' (written by the probe)' if d['created'] else ''}\n"
            f"  cold {_rate(d['cold_bytes_per_second'], 'B/s')}   warm {_rate(d['warm_bytes_per_second'], 'B/s')}\n"
            f"  cold means: {d['cold_method']}")


def location_read_table(d: dict[str, Any]) -> str:
    lines = [f"read probe: {d['object']} ({units.format_quantity(d['object_bytes'], 'bytes')}{', written by the probe' if d['created'] else ''})",
             f"  time to first byte {d['first_byte_seconds'] * 1e3:.3g} ms; one connection "
             f"{_rate(d['per_connection_bytes_per_second'], 'B/s')} on whole objects",
             "  by request size: " + ", ".join(f"{r['request_bytes'] / 2**10:.0f} KiB {_rate(r['bytes_per_second'], 'B/s')}"
                                               for r in d["by_request_size"]),
             "  by connections:  " + ", ".join(f"{r['connections']} {_rate(r['bytes_per_second'], 'B/s')}"
                                               for r in d["by_connections"]),
             f"  cluster.link for the plan: {_rate(d['link_bytes_per_second'], 'B/s')} "
             f"({d['best_connections']} connections) from {d['location']}"]
    return "\n".join(lines)


def run_matmul(n: int, seconds: float) -> dict[str, Any]:
    from trainplan.progress import progress

    with progress("matmul probe"):
        results, skipped = probe.matmul(n, min_seconds=seconds)
    return {"results": [r.to_dict() for r in results], "skipped": skipped}


def _peak_candidate(d: dict[str, Any]) -> dict[str, Any]:
    """The figure --as-peak records: the GPU's when there is one, else one CPU thread's (a per-core peak)."""
    rs = d["results"]
    gpu = [r for r in rs if r["device"].startswith("cuda")]
    if gpu:
        return gpu[0]
    one = [r for r in rs if r["library"] == "torch" and r["threads"] == 1]
    return one[0] if one else rs[0]


def write_matmul(path: Path, d: dict[str, Any], machine: dict[str, Any], as_peak: bool) -> None:
    values = calibration.matmul_peak_values(_peak_candidate(d)) if as_peak else []
    calibration.write(path, "matmul", settings={"n": d["results"][0]["n"]},
                      results={f"{r['library']}_{r['device']}_{r['dtype']}_{r['threads'] or 'default'}_threads": r
                               for r in d["results"]},
                      values=values, machine=machine)


def matmul_table(d: dict[str, Any]) -> str:
    lines = ["matmul probe: achieved FLOP/s of one square matmul (2 n^3 FLOP)"]
    for r in d["results"]:
        threads = f"{r['threads']} thread(s)" if r["threads"] else "default threads"
        per_cpu = f"  ({_rate(r['flops_per_cpu_second'], 'FLOP/CPU-s')})" if r.get("flops_per_cpu_second") else ""
        lines.append(f"  {r['library']:<6} {r['device']:<7} {r['dtype']:<9} n={r['n']:<5} {threads:<16} "
                     f"{_rate(r['flops_per_second'], 'FLOP/s')}{per_cpu}")
    for s in d["skipped"]:
        lines.append(f"  skipped: {s}")
    return "\n".join(lines)


def transfer_table(d: dict[str, Any]) -> str:
    return (f"transfer probe: host to {d['device']}, {units.format_quantity(d['bytes'], 'bytes')} copies\n"
            f"  pinned {_rate(d['pinned_bytes_per_second'], 'B/s')}   pageable {_rate(d['pageable_bytes_per_second'], 'B/s')}")


def allreduce_table(d: dict[str, Any]) -> str:
    return (f"allreduce probe: {d['backend']}, {d['world_size']} {d['launched_by']}, {units.format_quantity(d['bytes'], 'bytes')} message\n"
            f"  {d['seconds_per_allreduce'] * 1e3:.2f} ms each; algorithm {_rate(d['algorithm_bytes_per_second'], 'B/s')}; "
            f"bus (2(N-1)/N M / t) {_rate(d['bus_bytes_per_second'], 'B/s')}")


def _skip(why: probe.ProbeSkipped) -> None:
    typer.echo(f"trainplan: skipped: {why}", err=True)


# ---------------------------------------------------------------- the commands (registered below)


def decode_cmd(
    file: Annotated[Optional[list[Path]], typer.Argument(
        help="a workload TOML (the built-in default without one) and/or your video files or folders: "
             "given videos, they are decoded instead of a synthetic clip")] = None,
    set_: SetOpt = None,
    width: Annotated[Optional[int], typer.Option(help="frame width in pixels (default data.width)")] = None,
    height: Annotated[Optional[int], typer.Option(help="frame height in pixels (default data.height)")] = None,
    fps: Annotated[Optional[float], typer.Option(help="frames per second (default data.fps)")] = None,
    bitrate: Annotated[Optional[str], typer.Option(help="stored bit rate, e.g. '8 Mbit/s' (default data.bitrate)")] = None,
    gop: Annotated[Optional[int], typer.Option(help="keyframe interval in frames (default data.gop)")] = None,
    side: Annotated[Optional[int], typer.Option(help="model image side in pixels (default data.side)")] = None,
    access: Annotated[Optional[str], typer.Option(help="sequential or random: which figures are the headline "
                                                  "and go to the calibration (default data.access)")] = None,
    frames: Annotated[Optional[int], typer.Option(help="frames in the synthetic clip (default two GOPs, >= 60)")] = None,
    samples: Annotated[int, typer.Option(help="random-access targets")] = 16,
    postprocess: Annotated[str, typer.Option(help="rgb_resize (the plan's assumed decode rate includes it), rgb or none")] = "rgb_resize",
    preset: Annotated[str, typer.Option(help="x264 preset of the synthetic clip")] = "veryfast",
    handoff: Annotated[str, typer.Option(help="none, or shared_memory: hand each batch over as a DataLoader "
                                         "worker does (needs torch)")] = "none",
    batch: Annotated[int, typer.Option(help="frames per handed-off batch", min=1)] = 16,
    seconds: Annotated[float, typer.Option(help="decode the clip again until this many CPU-seconds "
                                           "are spent (a steadier figure)", min=0)] = 0.0,
    sample: Annotated[int, typer.Option("--sample", help="video files decoded (a uniform sample)", min=1)] = 4,
    decoders: Annotated[Optional[int], typer.Option(help="contention: up to this many decoders at once "
                                                    "(default the cores present; 0 skips it)", min=0)] = None,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Decode on one thread: frames per CPU-second. Your files (in order, random access, torchcodec
    when installed, contention with 1..k decoders), or a synthetic H.264 clip in the workload's format."""
    _check_format(format)
    workload_files = [p for p in (file or []) if p.suffix.lower() == ".toml"]
    videos = [p for p in (file or []) if p.suffix.lower() != ".toml"]
    if len(workload_files) > 1:
        raise UserError("FILE", "expected at most one workload TOML")
    file = workload_files[0] if workload_files else None  # type: ignore[assignment]
    if videos:
        d = run_decode_files(videos, file, set_ or [], side, access, samples, postprocess, sample, decoders)
        if output is not None:
            write_decode_files(output, d, probe.machine())
        if format == "json":  # the table lists them itself
            for s in d["skipped"]:
                typer.echo(f"trainplan: skipped: {s}", err=True)
        _emit(d, format, decode_files_table)
        return
    if postprocess not in probe.POSTPROCESS_TEXT:
        raise UserError("--postprocess", f"expected one of {', '.join(probe.POSTPROCESS_TEXT)}, got {postprocess!r}")
    if handoff not in probe.HANDOFF_TEXT:
        raise UserError("--handoff", f"expected one of {', '.join(probe.HANDOFF_TEXT)}, got {handoff!r}")
    if preset not in X264_PRESETS:  # libx264 refuses any other name when the encoder opens: an internal error
        raise UserError("--preset", f"expected one of x264's presets ({', '.join(X264_PRESETS)}), got {preset!r}")
    if samples < 1:
        raise UserError("--samples", f"expected at least 1, got {samples}")
    if frames is not None and frames < 1:
        raise UserError("--frames", f"expected at least 1, got {frames}")
    fmt, side_px, chosen = _decode_settings(file, set_ or [], width, height, fps, bitrate, gop, side, access)
    _check_decode_sizes(fmt, frames, side_px, batch, seconds)
    d = run_decode(fmt, side_px, chosen, frames, samples, postprocess, preset, handoff, batch, seconds)
    if output is not None:
        write_decode(output, d, probe.machine())
    _emit(d, format, decode_table)


def loader_cmd(
    factory: Annotated[str, typer.Argument(metavar="MODULE:FACTORY", help="a callable returning your Dataset "
                                           "(map-style or iterable), e.g. mydata:make_dataset")],
    file: Annotated[Optional[Path], typer.Argument(help="the workload TOML whose data the loader reads "
                                                   "(frame size, codec, access)")] = None,
    set_: SetOpt = None,
    seconds: Annotated[float, typer.Option(help="seconds of items timed", min=0)] = 2.0,
    items: Annotated[int, typer.Option(help="at most this many items timed", min=1)] = 10_000,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Your own Dataset and transform, per item: CPU and wall seconds, the wait share; its rate as the
    plan's decode rate (cluster.core_fps_1080p) at the workload's frame size and access."""
    _check_format(format)
    d = run_loader(factory, file, set_ or [], seconds, items)
    if output is not None:
        write_loader(output, d, probe.machine())
    _emit(d, format, loader_table)


def handover_cmd(
    side: Annotated[int, typer.Option(help="frame side in pixels, as the model takes it")] = 224,
    batch: Annotated[int, typer.Option(help="frames per batch, as the loader hands them over")] = 16,
    seconds: Annotated[float, typer.Option(help="seconds of hand-over measured")] = 2.0,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """A DataLoader worker's CPU per frame besides decoding it (collation, the copy into shared
    memory, the hand-over): data.loader_cpu_per_frame."""
    _check_format(format)
    from trainplan.measure import handover
    from trainplan import limits

    limits.check_seconds("--seconds", seconds, low=0.0, low_included=False)
    if side < 1 or batch < 1:
        raise UserError("--side" if side < 1 else "--batch", "expected at least 1")
    frame = side * side * 3  # uint8 RGB
    limits.check_allocation("--side", handover.DISTINCT_FRAMES * frame,
                            f"{handover.DISTINCT_FRAMES} ready frames of {side} x {side} px")
    limits.check_allocation("--batch", (handover.DISTINCT_FRAMES + HANDOVER_BATCHES_HELD * batch) * frame,
                            f"{HANDOVER_BATCHES_HELD} batches of {batch:,} frames of {side} x {side} px in flight")
    try:
        d = handover.handover(side=side, batch=batch, seconds=seconds).to_dict()
    except probe.ProbeSkipped as why:
        _skip(why)
        return
    if output is not None:
        write_handover(output, d, probe.machine())
    _emit(d, format, handover_table)


def read_cmd(
    path: Annotated[str, typer.Argument(help="a file to read, or a directory to write a test file in; or a "
                                             "location URL (s3://, gs://, az://, https://): an object or a prefix")] = ".",
    size: Annotated[Optional[str], typer.Option(help="test file size when PATH is a directory (default 64 MiB), "
                                                     "or a URL prefix holding no object (default 16 MiB)")] = None,
    repeats: Annotated[int, typer.Option(help="a URL: requests of each kind timed (their median)", min=1)] = 5,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Bytes/s reading a file, cold (page cache dropped for the file) and warm; at a URL: time to
    first byte, throughput per connection, by request size and with concurrent connections."""
    _check_format(format)
    d = run_read(path, size, repeats)
    if output is not None:
        write_read(output, d, probe.machine())
    _emit(d, format, read_table)


def matmul_cmd(
    n: Annotated[int, typer.Option(help="matrix size (CPU); a GPU uses 8192", min=16)] = 1024,
    seconds: Annotated[float, typer.Option(help="seconds per measurement", min=0.01)] = 0.5,
    as_peak: Annotated[bool, typer.Option("--as-peak", help="record the achieved rate as "
                                          "cluster.accelerator.peak_flops (GPU, else one CPU thread)")] = False,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Achieved FLOP/s of numpy, and of torch on the CPU and a GPU when present."""
    _check_format(format)
    from trainplan import limits

    limits.check_seconds("--seconds", seconds, low=0.01)
    limits.check_allocation("--n", MATMUL_BYTES_PER_ELEMENT * n * n, f"the {n:,} x {n:,} matrices")
    d = run_matmul(n, seconds)
    if format == "json":  # the table lists them itself
        for s in d["skipped"]:
            typer.echo(f"trainplan: skipped: {s}", err=True)
    if output is not None:
        write_matmul(output, d, probe.machine(), as_peak)
    _emit(d, format, matmul_table)


def transfer_cmd(
    size: Annotated[str, typer.Option(help="bytes per copy")] = "256 MiB",
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Host-to-device bytes/s with torch on a GPU (skips without one)."""
    _check_format(format)
    try:
        d = probe.transfer(int(_parse(size, "bytes", "--size") or 0)).to_dict()
    except probe.ProbeSkipped as why:
        _skip(why)
        raise typer.Exit(0) from None
    if output is not None:
        calibration.write(output, "transfer", settings={"bytes": d["bytes"]}, results=d,
                          values=calibration.transfer_values(d), machine=probe.machine())
    _emit(d, format, transfer_table)


def allreduce_cmd(
    processes: Annotated[int, typer.Option(help="local processes (ignored under torchrun)", min=2)] = 2,
    size: Annotated[str, typer.Option(help="message size")] = "16 MiB",
    repeats: Annotated[int, typer.Option(help="all-reduces timed", min=1)] = 10,
    backend: Annotated[Optional[str], typer.Option(help="gloo or nccl (default: nccl under torchrun with "
                                                   "CUDA, else gloo)")] = None,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """All-reduce bytes/s with torch.distributed: gloo over local processes, or NCCL under torchrun."""
    _check_format(format)
    try:
        r = probe.allreduce(processes, int(_parse(size, "bytes", "--size") or 0), repeats, backend)
    except probe.ProbeSkipped as why:
        _skip(why)
        raise typer.Exit(0) from None
    d = r.to_dict()
    import os

    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun only rank 0 reports
    if output is not None:
        calibration.write(output, "allreduce", settings={k: d[k] for k in ("backend", "world_size", "bytes",
                                                                            "launched_by")},
                          results=d, values=calibration.allreduce_values(d), machine=probe.machine())
    _emit(d, format, allreduce_table)


def all_cmd(
    file: WorkloadArg = None,
    set_: SetOpt = None,
    path: Annotated[Path, typer.Option(help="where the read probe writes its test file")] = Path("."),
    processes: Annotated[int, typer.Option(help="all-reduce processes", min=2)] = 2,
    format: FormatOpt = "table",  # noqa: A002
    output: OutputOpt = None,
) -> None:
    """Every probe in turn, with a progress bar; those that cannot run here say why."""
    _check_format(format)
    out = run_all(file, set_ or [], path, processes, output)
    if format == "json":
        typer.echo(json.dumps(clean(out), indent=2))
        return
    parts = []
    for name, table in (("decode", decode_table), ("read", read_table), ("matmul", matmul_table),
                        ("transfer", transfer_table), ("allreduce", allreduce_table)):
        if out.get(name):
            parts.append(table(out[name]))
    for s in out["skipped"]:
        parts.append(f"skipped {s['probe']}: {s['reason']}")
    if output is not None:
        parts.append(f"calibration written to {output}")
    typer.echo("\n".join(parts))


# ---------------------------------------------------------------- registration


def register(app: typer.Typer) -> None:
    probe_app = typer.Typer(help="Measure on this machine what the plan assumes; --output writes a calibration file.",
                            no_args_is_help=True, add_completion=False)

    from trainplan.interfaces.commands import probe_model  # issue 12: `probe model`
    probe_model.register(probe_app)

    probe_app.command("decode")(decode_cmd)
    probe_app.command("loader")(loader_cmd)
    probe_app.command("handover")(handover_cmd)
    probe_app.command("read")(read_cmd)
    probe_app.command("matmul")(matmul_cmd)
    probe_app.command("transfer")(transfer_cmd)
    probe_app.command("allreduce")(allreduce_cmd)
    from trainplan.measure.collectives import register_probe  # allgather, reducescatter, alltoall (issue 13)
    register_probe(probe_app)

    probe_app.command("all")(all_cmd)
    app.add_typer(probe_app, name="probe")


def _handover(side: int) -> dict[str, Any]:
    from trainplan.measure import handover

    return handover.handover(side=side).to_dict()


def run_all(file: Path | None, sets: list[str], path: Path, processes: int,
            output: Path | None) -> dict[str, Any]:
    """Run the set of probes with a progress bar on stderr; record each in `output` as it finishes."""
    from trainplan.progress import progress

    machine = probe.machine()
    fmt, side, access = _decode_settings(file, sets, None, None, None, None, None, None, None)
    out: dict[str, Any] = {"machine": machine, "skipped": []}
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("decode", lambda: run_decode(fmt, side, access, None, 16, "rgb_resize", "veryfast")),
        ("handover", lambda: _handover(side)),
        ("read", lambda: run_read(path, "64 MiB")),
        ("matmul", lambda: run_matmul(1024, 0.5)),
        ("transfer", lambda: probe.transfer().to_dict()),
        ("allreduce", lambda: probe.allreduce(processes).to_dict()),
    ]
    writers: dict[str, Callable[[Path, dict[str, Any]], None]] = {
        "decode": lambda p, d: write_decode(p, d, machine),
        "handover": lambda p, d: write_handover(p, d, machine),
        "read": lambda p, d: write_read(p, d, machine),
        "matmul": lambda p, d: write_matmul(p, d, machine, as_peak=False),
        "transfer": lambda p, d: calibration.write(p, "transfer", settings={"bytes": d["bytes"]}, results=d,
                                                   values=calibration.transfer_values(d), machine=machine),
        "allreduce": lambda p, d: calibration.write(
            p, "allreduce", settings={k: d[k] for k in ("backend", "world_size", "bytes", "launched_by")},
            results=d, values=calibration.allreduce_values(d), machine=machine),
    }
    with progress("probing", total=len(steps)) as bar:
        for name, fn in steps:
            bar.describe(f"probe {name}")
            try:
                out[name] = fn()
                if name == "matmul":
                    for s in out[name]["skipped"]:
                        out["skipped"].append({"probe": "matmul (part)", "reason": s})
                if output is not None:
                    writers[name](output, out[name])
            except probe.ProbeSkipped as why:
                out[name] = None
                out["skipped"].append({"probe": name, "reason": str(why)})
            bar.advance()
    return out
