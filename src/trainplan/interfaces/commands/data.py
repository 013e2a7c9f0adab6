"""`trainplan data mix` (epochs of each source of a mixture), `trainplan data demos`
(person-hours for N demonstrations), docs/serving-scaling-energy.md, and `trainplan data inspect PATH...` (the user's
own video or token files measured, issue 14). Thin: the formulas are in trainplan.accounts.datamix
and trainplan.measure.inspect."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.accounts import datamix
from trainplan import units
from trainplan.errors import UserError, named_as, printable
from trainplan.interfaces.cli import COMMANDS
from trainplan.interfaces.options import OutputOpt, check_format, figures_markdown, format_option

data_app = typer.Typer(help=COMMANDS["data"][1], no_args_is_help=True)  # the one line `trainplan --help` shows


def _source(text: str) -> datamix.Source:
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise UserError("--source", f"expected NAME:TOKENS:WEIGHT such as web:2T:0.7, got {text!r}")
    name, tokens, weight = parts
    return datamix.Source(name, units.parse_counted(tokens, units.TOKEN_NOUNS, f"--source {name} tokens"),
                          units.parse(weight, "fraction", f"--source {name} weight"))


SMALL_FORMATS = ("json", "table", "markdown")
SmallFormatOpt = format_option(SMALL_FORMATS)


def _write_small(values: dict[str, Any], fmt: str, output: Optional[Path], title: str) -> None:
    """A small answer as JSON (the default), an aligned table or Markdown; to stdout or --output."""
    from trainplan.outputs import write_output

    if fmt == "json":
        write_output(json.dumps(values, indent=2), output)
    elif fmt == "markdown":
        write_output(figures_markdown(title, values), output)
    else:
        from trainplan.quantities import key_value_lines

        write_output(key_value_lines({k: v for k, v in values.items() if not isinstance(v, (list, dict))}, {}),
                     output)


@data_app.command("mix")
def mix(
    tokens: Annotated[str, typer.Option("--tokens", help="tokens the run reads, e.g. 15T")],
    source: Annotated[list[str], typer.Option("--source", help="NAME:TOKENS:WEIGHT, repeated")],
    format: SmallFormatOpt = "json",  # noqa: A002 - json stays the default this command always wrote
    output: OutputOpt = None,
) -> None:
    """Epochs of each source: tokens read (weight share x total) / tokens available."""
    check_format(format, SMALL_FORMATS)
    with named_as({"training.tokens": "--tokens", "sources": "--source", "sources.": "--source "}):  # the flags typed (issue 16)
        result = datamix.mixture_epochs([_source(s) for s in source], units.parse_counted(tokens, units.TOKEN_NOUNS, "--tokens"))
    _write_small(asdict(result), format, output, "Epochs of each source")


@data_app.command("demos")
def demos(
    count: Annotated[int, typer.Argument(help="demonstrations to keep", min=0)],
    task: Annotated[str, typer.Option("--task", help="seconds per task, e.g. 45s or 1 min")] = "60 s",
    reset: Annotated[str, typer.Option("--reset", help="seconds per reset")] = "20 s",
    success: Annotated[float, typer.Option("--success", help="share of attempts kept")] = 1.0,
    operators: Annotated[int, typer.Option("--operators", min=1, help="operators recording in parallel (wall hours = person-hours / operators)")] = 1,
    format: SmallFormatOpt = "json",  # noqa: A002 - json stays the default this command always wrote
    output: OutputOpt = None,
) -> None:
    """Person-hours for N demonstrations: N / success x (task + reset)."""
    check_format(format, SMALL_FORMATS)
    with named_as({"success_rate": "--success", "demonstrations": "N", "operators": "--operators",
                   "seconds_per_task": "--task", "seconds_per_reset": "--reset"}):
        result = datamix.demonstration_hours(count, units.parse(task, "time", "--task"),
                                             units.parse(reset, "time", "--reset"), success, operators)
    _write_small(asdict(result), format, output, "Person-hours of demonstrations")


def _run_inspection(paths: list[str], where: str, options: dict[str, Any], *, full: bool, by_shard: bool,
                    sample_files: int | None, seed: int, scheduler: str | None, journal: Path | None,
                    batch: int | None,
                    cameras: int | None, shard_fraction: float | None = None) -> dict[str, Any]:
    """The inspection the options name: the Dask full pass, whole shards drawn, the units of a location or
    of shards (sampled or not), or the local files."""
    from trainplan.measure import inspect as insp
    from trainplan.measure import shards

    if shard_fraction is not None and not by_shard:
        raise UserError("--shard-fraction", "expected --by-shard with it (the share of each drawn shard's members)")
    if full:
        if sample_files is not None:
            raise UserError("--sample", "expected either --sample N or --full, not both")
        from trainplan.measure import distributed

        return _with_progress(lambda progress: distributed.full_pass(
            shards.units(paths), where=where, scheduler=scheduler, journal=journal, progress=progress, batch=batch,
            cameras=cameras, on_skip=_skip_line, **options))
    elif by_shard:
        if sample_files is None:
            raise UserError("--by-shard", "expected --sample N with it (the members to draw shards for)")
        return _with_progress(lambda progress: shards.inspect_units(
            shards.units_by_shard(paths, sample_files, seed, 1.0 if shard_fraction is None else shard_fraction),
            where=where, seed=seed, progress=progress, cameras=cameras, on_skip=_skip_line, **options))
    elif sample_files is not None or shards.needs_units(paths):
        return _with_progress(lambda progress: shards.inspect_units(
            shards.units(paths), where=where, sample=sample_files, seed=seed, progress=progress, cameras=cameras,
            on_skip=_skip_line, **options))
    else:
        return _with_progress(lambda progress: insp.inspect_paths(
            paths, sample_files=sample_files, seed=seed, progress=progress, on_skip=_skip_line, cameras=cameras,
            **options))


def _check_inspect_options(sample_files: int | None, cameras: int | None, seed: int, full: bool,
                           scheduler: str | None, journal: Path | None, batch: int | None) -> None:
    """UserError for the first of `data inspect`'s options out of range or without the option it belongs to
    (before the work, whichever route the inspection takes)."""
    if sample_files is not None and sample_files < 1:
        raise UserError("--sample", f"expected at least 1 file, got {sample_files}")
    if cameras is not None and cameras < 1:
        raise UserError("--cameras", f"expected at least 1 camera, got {cameras}")
    from trainplan.simulate.limits import MAX_SEED

    if not 0 <= seed <= MAX_SEED:
        raise UserError("--seed", f"expected a whole number from 0 to 2^63-1, got {seed}")
    if scheduler is not None and not full:
        raise UserError("--scheduler", "expected --full with it (the scheduler runs the full pass)")
    for flag, value in (("--journal", journal), ("--batch", batch)):
        if value is not None and not full:  # a --full option without --full would be silently unused
            raise UserError(flag, "expected --full with it (an option of the distributed full pass)")


def _shown_name(path: str) -> str:
    """A file's name as the table shows it: a tab, a line break or an escape sequence in a name would break
    the table's row (and reach the terminal), so each is shown as printable() shows it."""
    return printable(Path(path).name, one_line=True)


@data_app.command("inspect")
def inspect_cmd(
    paths: Annotated[list[str], typer.Argument(help="video or token files, folders of them, shards (.tar, .parquet, "
                                               ".arrow, MDS), or a location: s3://, gs://, az://, https://")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write (or update) a workload TOML: "
                                                   "its [data] section from the files, provenance measured")] = None,
    sample_files: Annotated[Optional[int], typer.Option("--sample", help="inspect a uniform random sample of N "
                                                        "files or shard members (totals scaled up, every figure "
                                                        "with a 95 % interval)")] = None,
    by_shard: Annotated[bool, typer.Option("--by-shard", help="--sample N draws whole shards (.tar or MDS) until "
                                           "N members: the shards not drawn are never read")] = False,
    shard_fraction: Annotated[Optional[float], typer.Option("--shard-fraction", help="--by-shard: inspect a seeded "
                                                            "random share F of each drawn shard's members (two "
                                                            "stages; default: every member)")] = None,
    full: Annotated[bool, typer.Option("--full", help="the full pass on a Dask cluster (--scheduler)")] = False,
    scheduler: Annotated[Optional[str], typer.Option(help="the Dask scheduler of --full: tcp://HOST:PORT, or "
                                                     "local:N for a local cluster of N workers")] = None,
    journal: Annotated[Optional[Path], typer.Option(help="--full: the file of finished units; a rerun with the "
                                                    "same journal inspects only the rest")] = None,
    batch: Annotated[Optional[int], typer.Option(help="--full: units a task (default: up to 100, leaving at least "
                                                 "16 tasks a worker)", min=1)] = None,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 0,
    dtype: Annotated[Optional[str], typer.Option(help="token id type of .bin files (default uint16)")] = None,
    eos: Annotated[Optional[int], typer.Option(help="end-of-document token id of .bin/.npy files (default: "
                                               "2048-token chunks are the documents)")] = None,
    tokenizer: Annotated[Optional[Path], typer.Option(help="a tokenizer.json to count text tokens (default: "
                                                      "GPT-2 pre-tokenizer pieces)")] = None,
    near: Annotated[bool, typer.Option(help="look for near duplicates (MinHash + LSH)")] = True,
    cameras: Annotated[Optional[int], typer.Option("--cameras", help="streams (cameras) the video holds "
                                                   "(default: one for each folder holding files)")] = None,
    files: Annotated[bool, typer.Option("--files/--no-files", help="list each file in the table")] = True,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",  # noqa: A002
) -> None:
    """Measure video (codec, size, fps, keyframe interval, bit rate, hours) or token corpora (tokens,
    bytes per token, duplicate shares, effective unique tokens)."""
    from trainplan.measure import inspect as insp

    if format not in ("table", "json"):
        from trainplan.interfaces.options import check_format
        check_format(format, ("table", "json"))
    _check_inspect_options(sample_files, cameras, seed, full, scheduler, journal, batch)
    from trainplan.measure import locations

    if output is not None:  # before the work: not a device, a FIFO, read-only, nor one of the inspected files
        from trainplan.outputs import refuse_inspected

        refuse_inspected(output, [Path(p) for p in paths if not locations.is_url(p)],
                         read=lambda f: f.suffix.lower() in insp.READ_SUFFIXES)
    from trainplan.measure import locations, shards

    _check_token_options(dtype, eos, tokenizer)
    where = ", ".join(locations.display(p) for p in paths)
    options = dict(dtype=dtype, eos=eos, tokenizer=str(tokenizer) if tokenizer else None, near=near)
    report = _run_inspection(paths, where, options, full=full, by_shard=by_shard, sample_files=sample_files,
                             seed=seed, scheduler=scheduler, journal=journal, batch=batch, cameras=cameras,
                             shard_fraction=shard_fraction)
    counted = report.get("aggregate", {}).get("tokens_counted_as")
    if dtype is not None and (report.get("kind") != "tokens" or counted != "token ids"):
        # the integer type of token-id files (.bin): text, video or images are not read as ids (issue 29)
        raise UserError("--dtype", "expected token-id files (.bin, .npy) with it, not text, video or images")
    if cameras is not None and report.get("kind") != "video":  # streams of video: unread for tokens or images
        raise UserError("--cameras", f"expected a video corpus with it (the streams the video holds), got "
                        f"{report.get('kind')} files")
    if report.get("files_skipped") or report.get("truncated") or report.get("named_more_than_once"):
        _report_skips(report)
    if output is not None:
        skipped = report.get("files_skipped") or 0  # the files read, not the files tried
        insp.to_workload(report, output, f"measured by `trainplan data inspect` on {where} "
                         f"({report['files_inspected'] - skipped} of {report['files_found']} files"
                         f"{f'; {skipped} skipped' if skipped else ''}{_interval_note(report['aggregate'])})")
        report["workload_written"] = str(output)
    if report["kind"] == "video" and len(report["aggregate"].get("groups", [])) > 1:
        report["aggregate"]["group_plans"] = group_plans(report, output)
    if format == "json":
        typer.echo(json.dumps(insp.finite(report), indent=2))
    else:
        typer.echo(inspect_table(report, files))


def _check_token_options(dtype: Optional[str], eos: Optional[int], tokenizer: Optional[Path]) -> None:
    """The token options checked before the work, whatever the input: --dtype one of the integer types,
    --eos an id that type holds (a .npy file's own type is checked against it when read), --tokenizer a
    tokenizer.json that loads (even for pre-tokenized ids, where it counts nothing: a wrong path is a
    mistake either way)."""
    from trainplan.measure import inspect as insp

    dt = insp.check_dtype(dtype)
    if eos is not None and eos < 0 or dtype is not None:
        insp.check_eos(eos, dt, "--dtype")
    if tokenizer is not None:
        insp.make_counter(str(tokenizer))


def group_plans(report: dict[str, Any], workload: Optional[Path]) -> list[dict[str, Any]]:
    """A plan of each format group alone (issue 25): the workload (the one written, else the built-in
    default) with the group's [data] keys, in order and at random access; the input pipeline's busy
    fraction, binding stage and cores needed for each. The corpus as a whole is the mix, weighted by
    each group's share of the decode work."""
    from trainplan.accounts import pipeline
    from trainplan.planning import evaluate as plan
    from trainplan.workload.load import load_workload

    out = []
    for g in report["aggregate"]["groups"]:
        row: dict[str, Any] = {"format": g["format"], "decode_share_sequential": g["decode_share_sequential"],
                               "decode_share_random": g["decode_share_random"]}
        for access in ("sequential", "random"):
            sets = [f"data.{k}={json.dumps(v)}" for k, v in g["workload"].items()]
            sets += [f'data.access="{access}"', "data.pixels_per_frame=" + str(float(g["width"] * g["height"]))]
            w = load_workload(workload if workload is not None and workload.exists() else None, sets)
            a = pipeline.pipeline_account(**plan.pipeline_inputs(w))
            row[access] = {"busy": a.busy, "bottleneck": a.bottleneck, "cores_needed": a.cores_needed,
                           "supply_fps": a.supply_fps}
        out.append(row)
    return out


def _skip_line(path: Path, reason: str) -> None:
    """One line on stderr for each file passed over (the inspection goes on with the rest)."""
    import sys

    from trainplan.limits import printable

    print(f"data inspect: skipped {printable(str(path), one_line=True)}: {reason}", file=sys.stderr)


def _report_skips(report: dict[str, Any]) -> None:
    import sys

    from trainplan.limits import printable

    repeated = report.get("named_more_than_once") or []
    if repeated:
        print(f"data inspect: {printable(repeated[0], one_line=True)}"
              + (f" and {len(repeated) - 1} other file(s)" if len(repeated) > 1 else "")
              + " named more than once: each inspected once", file=sys.stderr)
    for t in report.get("truncated", []):
        print(f"data inspect: truncated {printable(t['path'], one_line=True)}: {t['reason']} (measured as far as it "
              "goes)", file=sys.stderr)
    if report.get("files_skipped"):
        print(f"data inspect: {report['files_skipped']} of {report['files_inspected']} file(s) skipped, "
              f"{report['files_inspected'] - report['files_skipped']} inspected", file=sys.stderr)


def _with_progress(run: Any) -> Any:
    """Run `run(progress)` with a rich progress bar on stderr (shown when stderr is a terminal)."""
    import sys

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    with Progress(TextColumn("inspect {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def progress(total: int, path: Any) -> None:
            if path is None:
                bar.update(task, total=total)
            else:
                bar.update(task, advance=1, description=str(getattr(path, "name", path))[-40:])

        return run(progress)


def _num(v: Any, fmt: str = ".3g") -> str:
    return "-" if v is None else format(v, fmt)


def inspect_table(r: dict[str, Any], files: bool = True) -> str:
    a = r["aggregate"]
    skipped = r.get("files_skipped") or 0
    head = f"{r['files_inspected'] - skipped} of {r['files_found']} file(s) inspected" + (
        f", {skipped} skipped (unreadable)" if skipped else "")
    if r.get("units") == "shard members":
        head = f"{r['files_inspected'] - skipped} of {r['files_found']} shard member(s) inspected" + (
            f", {skipped} skipped (unreadable)" if skipped else "")
    lines = [head + (f" at {r['location']}" if r.get("location") else "")]
    if r["kind"] == "image":
        if files:
            for f in r["files"]:
                lines.append(f"  {_shown_name(f['path'])[-36:]:<36} {f['codec']:<5} {f['width']}x{f['height']:<6} "
                             f"{f['mode']:<5} {f['bytes']:>10,} B {f['bits_per_pixel']:>7.3f} bits/px")
        lines.append(f"  corpus: {a['images']:,} images, mostly {a['codec']} {a['width']}x{a['height']}; "
                     f"{a['pixels_per_frame'] / 1e6:.3g} Mpx and {a['bytes_per_image'] / 1e3:.3g} kB an image "
                     f"(mean), {a['bits_per_pixel']:.3g} bits per pixel")
        if len(a["groups"]) > 1:
            for g in a["groups"]:
                lines.append(f"    {g['format']:<24} {g['files']:>6} image(s) {g['decode_share_sequential'] * 100:>5.1f} % "
                             "of the pixels decoded")
    elif r["kind"] == "video":
        if files:
            lines.append(f"  {'file':<28} {'codec':<6} {'size':>10} {'fps':>6} {'frames':>7} {'Mbit/s':>7} "
                         f"{'bits/px':>8} {'GOP med':>7} {'min-max':>8}")
            for f in r["files"]:
                lines.append(f"  {_shown_name(f['path'])[-28:]:<28} {f['codec']:<6} {f['width']}x{f['height']:<5} "
                             f"{f['fps']:>6.2f} {f['frames']:>7} {f['bitrate'] / 1e6:>7.2f} {f['bits_per_pixel']:>8.4f} "
                             f"{_num(f['gop_median'], 'g'):>7} {_num(f['gop_min'], 'd')}-{_num(f['gop_max'], 'd'):<4}")
        lines.append(f"  corpus: {a['codec']} {a['width']}x{a['height']} at {a['fps']:g} fps "
                     f"({', '.join(a['containers'])}); {a['frames']:,} frames, {a['hours']:.4g} hours"
                     + (f" (about {a['hours_estimated_total']:.4g} in all files)" if "hours_estimated_total" in a else ""))
        lines.append(f"  bit rate {a['bitrate'] / 1e6:.3g} Mbit/s, {a['bits_per_pixel']:.4f} bits per pixel; keyframe "
                     f"every {_num(a['gop_median'], 'g')} frames (median; min {_num(a['gop_min'], 'd')}, max "
                     f"{_num(a['gop_max'], 'd')}, IQR {_num(a['gop_iqr'], 'g')})")
        lines.append(f"  as a loader drawing frames sees it: GOP {a['gop_frame_weighted']:.3g} frame-weighted, "
                     f"{a['random_decodes_pixel_weighted']:.3g} frames decoded per frame used at random access, "
                     f"{a['pixels_per_frame'] / 1e6:.3g} Mpx a frame; {a.get('streams', 1)} stream(s) "
                     f"({a.get('streams_basis', '')})")
        groups = a.get("groups", [])
        if len(groups) > 1:
            lines.append(f"  {len(groups)} formats (share of frames / of decode work in order / at random access):")
            for g in groups:
                lines.append(f"    {g['format']:<28} {g['files']:>4} file(s) {g['frame_share'] * 100:>5.1f} % "
                             f"{g['decode_share_sequential'] * 100:>5.1f} % {g['decode_share_random'] * 100:>5.1f} %  "
                             f"GOP {g['gop_frame_weighted']:.3g} frame-weighted")
            lines.append(f"  binding format: {a['binding_group_sequential']} in order, "
                         f"{a['binding_group_random']} at random access (the most decode work)")
            for gp in a.get("group_plans", []):
                s, rnd = gp["sequential"], gp["random"]
                lines.append(f"    planned alone: {gp['format']:<28} busy {s['busy']:.3g} in order "
                             f"({s['cores_needed']:.3g} cores needed), {rnd['busy']:.3g} at random access "
                             f"({rnd['cores_needed']:.3g} cores)")
    else:
        if files:
            for f in r["files"]:
                lines.append(f"  {_shown_name(f['path'])[-40:]:<40} {f['documents']:>8} docs {f['tokens']:>12,} tokens "
                             f"{_num(f['bytes_per_token'], '.3g'):>6} B/token")
        lines.append(f"  {a['documents']:,} documents, {a['tokens']:,} tokens ({a['tokens_counted_as']}), "
                     f"{_num(a['bytes_per_token'])} bytes per token stored")
        near = a["near_duplicate_share"]
        lines.append(f"  exact duplicates {a['exact_duplicate_share'] * 100:.2f} % of documents; near duplicates "
                     + (f"{near * 100:.2f} %" if near is not None else "not measured") + f" ({a['near_duplicate_method']})")
        lines.append(f"  effective unique tokens {a['effective_unique_tokens']:,} "
                     f"({(1 - a['duplicate_token_share']) * 100:.1f} % of the tokens)")
    lines.extend(_interval_lines(a, r["files_inspected"]))
    if "workload_written" in r:
        lines.append(f"  workload [data] written to {r['workload_written']} (provenance measured)")
    return "\n".join(lines)


def _interval_note(a: dict[str, Any]) -> str:
    """A sample's intervals of the keys a workload takes, for the provenance the plan shows."""
    from trainplan.units import significant

    names = {"hours": "hours", "bitrate": "bit rate (bit/s)", "bytes_per_token": "bytes per token"}
    parts = [f"{label} [{significant(a['intervals'][k]['low'])}, {significant(a['intervals'][k]['high'])}]"
             for k, label in names.items() if k in (a.get("intervals") or {})]
    return f"; 95 % intervals: {', '.join(parts)}" if parts else ""


def _interval_lines(a: dict[str, Any], inspected: int) -> list[str]:
    """A sample's figures with their intervals (docs/data-where-it-lives.md), one line each."""
    from trainplan.units import significant

    intervals = a.get("intervals") or {}
    if not intervals:
        return []
    lines = [f"  from a sample (seed {a.get('sample_seed', 0)}), each corpus figure with its "
             f"{next(iter(intervals.values()))['confidence'] * 100:g} % interval:"]
    for key, iv in intervals.items():
        note = (f"  (fewer units than the {iv['units_needed']:,} Cochran's rule asks for: it may cover less)"
                if iv.get("units_needed") and inspected < iv["units_needed"] else "")
        lines.append(f"    {key:<24} {significant(iv['estimate'])}  [{significant(iv['low'])}, "
                     f"{significant(iv['high'])}]{note}")
    return lines


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
