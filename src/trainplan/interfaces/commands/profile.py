"""`trainplan profile SCRIPT [-- ARGS...]`: run a training script and watch whether it waits on data.

Every `torch.utils.data.DataLoader` the script iterates is wrapped by a
`trainplan.measure.profiler.Profiler` (a script without one can wrap its own loop with
`trainplan.measure.profiler.current().wrap(iterable)`). The time between fetches is the step.
With a workload (`--workload FILE`, `--set`, `--calibration`) the plan's prediction for
the same job is shown next to the measurement, and `--output CAL.toml` records the
measured, end-to-end MFU of the step (`cluster.mfu`, `cluster.mfu_end_to_end = true`).
"""

from __future__ import annotations

import json
import math
import os
import runpy
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.workload import calibration
from trainplan.measure import profiler as profile_mod
from trainplan.errors import UserError
from trainplan.planning.evaluate import clean

#: runs of each pass of `profile --stalls` (the median used, the spread shown)
DEFAULT_STALL_REPEATS = 3


def _predicted(workload_file: Path | None, sets: list[str], cal: Path | None) -> tuple[Any, Any]:
    from trainplan.accounts import pipeline
    from trainplan.planning import evaluate as plan
    from trainplan.workload.load import load_workload

    w = load_workload(workload_file, sets, cal)
    return w, pipeline.pipeline_account(**plan.pipeline_inputs(w))


def read_script(script: Path) -> str:
    """The text of `script`, read as an input of this run (so that `--output SCRIPT` is refused) and
    compiled: a script that does not compile is the user's input error (one line, exit 2), before
    anything runs; an exception raised while it runs stays the script's own (ScriptFailed)."""
    from trainplan import limits

    if not script.exists():
        raise UserError(str(script), "no such script")
    text = limits.read_text(script, "script")
    try:
        compile(text, str(script), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as err:  # ValueError: a NUL byte in the source
        line = f" line {err.lineno}" if getattr(err, "lineno", None) else ""
        raise UserError(f"profile: {script}{line}", getattr(err, "msg", None) or str(err)) from None
    return text


def run_script(script: Path, args: list[str], prof: profile_mod.Profiler) -> int:
    """Run `script` as __main__ with `args` under `prof`; return its exit status. The streams trainplan
    writes to are kept before and put back after (reopened on their descriptor when the script closed
    them); a process the script forked ends where the script ends, with its status, and reports nothing."""
    read_script(script)
    uninstall = profile_mod.install(prof)
    saved_argv, saved_path, streams = sys.argv[:], sys.path[:], _keep_streams()
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        status = _run_as_main(script, os.getpid())
    finally:
        uninstall()
        sys.argv, sys.path[:] = saved_argv, saved_path
        _put_back_streams(streams)
    return status


def _run_as_main(script: Path, parent: int) -> int:
    """The exit status of `script` run as __main__, as `python SCRIPT` ends: `sys.exit("message")` prints
    the message and is status 1; an exception prints the script's traceback (ScriptFailed). In a process
    the script forked (not `parent`) nothing returns: it exits with that status (`_leave_child`)."""
    try:
        runpy.run_path(str(script), run_name="__main__")
        status = 0
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except Exception as err:  # the script's own error: its traceback, not ours (issue 29)
        _print_script_traceback(err, script)
        if os.getpid() != parent:
            _leave_child(SCRIPT_EXCEPTION_STATUS)
        raise ScriptFailed(f"{type(err).__name__}: {err}") from None
    if os.getpid() != parent:
        _leave_child(status)
    return status


def _exit_status(code: object) -> int:
    """The status of `sys.exit(code)` as Python gives it: None 0, an int itself, anything else 1 after
    printing it to the script's stderr."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    stream = sys.stderr if sys.stderr is not None and not sys.stderr.closed else sys.__stderr__
    try:
        print(code, file=stream, flush=True)
    except (OSError, ValueError):  # the script's stderr is gone: the status still stands
        pass
    return 1


def _leave_child(status: int) -> None:
    """End a process the script forked, at the end of the script: its output flushed, its status, and
    nothing of trainplan's (no report, no calibration file, no cleanup of the parent's)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)


def _keep_streams() -> list[tuple[str, Any, int | None]]:
    """(name, stream, descriptor) of sys.stdout and sys.stderr before the script runs."""
    kept = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # a stream in memory (tests) has no descriptor
            fd = None
        kept.append((name, stream, fd))
    return kept


def _put_back_streams(kept: list[tuple[str, Any, int | None]]) -> None:
    """sys.stdout and sys.stderr as they were before the script, a closed one reopened on its descriptor,
    so that the report and trainplan's own lines are written."""
    for name, stream, fd in kept:
        if getattr(stream, "closed", False) and fd is not None:
            stream = open(fd, "w", encoding=stream.encoding, errors=stream.errors,  # noqa: SIM115
                          closefd=False, buffering=1 if stream.line_buffering else -1)
        setattr(sys, name, stream)


#: The exit status of a script that ends with an uncaught exception, as `python script.py` gives it.
SCRIPT_EXCEPTION_STATUS = 1


class ScriptFailed(Exception):
    """The profiled script raised: its traceback is printed; nothing of the run is written."""


def _print_script_traceback(err: BaseException, script: Path) -> None:
    """The traceback as `python script.py` would print it: from the script's first frame (runpy's and
    trainplan's frames left out); a SyntaxError as Python shows it (file, line, caret)."""
    import traceback

    tb = err.__traceback__
    mine = str(script.resolve())
    while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()) != mine:
        tb = tb.tb_next
    if tb is None:
        lines = traceback.format_exception_only(type(err), err)
    else:
        lines = traceback.format_exception(type(err), err, tb)
    try:
        sys.stderr.write("".join(lines))
    except (OSError, ValueError):  # the script closed its stderr: as Python, the traceback is lost
        pass


def _stall_passes(script: Path, args: list[str], data: list[Path], warmup: int, sync: str,
                  frames_per_batch: float | None, format: str, repeats: int = DEFAULT_STALL_REPEATS) -> None:  # noqa: A002
    """`--stalls`: DS-Analyzer's differential passes (see profiler.differential_stalls)."""
    read_script(script)  # a FIFO or a folder is named as such (not opened), a missing script as missing
    files = [f for p in data for f in (sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p])]
    for f in files:
        if not f.is_file():
            raise UserError(str(f), "expected an existing data file or folder for --data")
    statuses: list[int] = []

    def one(prof: profile_mod.Profiler) -> None:
        statuses.append(run_script(script, args, prof))

    try:
        out = profile_mod.differential_stalls(one, files, warmup=warmup, sync=sync,  # type: ignore[arg-type]
                                              frames_per_batch=frames_per_batch, repeats=repeats)
    except RuntimeError as err:
        raise UserError(str(script), f"{err}; a script without a DataLoader can wrap its loop with "
                        "trainplan.measure.profiler.current().wrap(iterable)") from None
    except ScriptFailed as err:
        print(f"trainplan: {script}: the script failed ({err}); nothing was profiled", file=sys.stderr)
        raise typer.Exit(SCRIPT_EXCEPTION_STATUS) from None
    out["script_exit_status"] = max(statuses) if statuses else 0
    if format == "json":
        typer.echo(json.dumps(clean(out), indent=2))
    else:
        t, sp = out["seconds_per_step"], out["seconds_per_step_spread"]
        st = out["stall"]

        def ms(name: str) -> str:
            return (f"{name} {t[name] * 1e3:.2f} ms ({sp[name]['min'] * 1e3:.2f}-{sp[name]['max'] * 1e3:.2f} "
                    f"over {sp[name]['runs']})")

        prep = (f"prep stall {st['prep'] * 100:.1f} %" if st["prep"] is not None
                else f"not split {st['unsplit'] * 100:.1f} %")
        each = ", ".join(f"{b * 100:.0f}" for b in out["busy_of_each_repeat"])
        lines = [f"profile --stalls: {script.name}, {out['method']}",
                 f"  seconds per step (median, min-max): {ms('synthetic')}, {ms('warm')}, {ms('cold')}",
                 f"  busy (AU) {out['busy'] * 100:.1f} % (each repeat: {each} %)   fetch stall "
                 f"{st['fetch'] * 100:.1f} %   {prep}  (sum {out['sums_to_one'] * 100:.0f} %)",
                 f"  split by {out['split']}"]
        if out["cores_needed_prep"] is not None:
            lines.append(f"  cores needed to remove the prep stall: {out['cores_needed_prep']:.2f}")
        lines.extend(f"  {n}" for n in out["notes"])
        typer.echo("\n".join(lines))
    if out["script_exit_status"] != 0:
        raise typer.Exit(out["script_exit_status"])


def _profiled_run(script: Path, args: list[str], prof: profile_mod.Profiler, output: Path | None,
                  plan_account: Any) -> tuple[int, Any]:
    """(the script's exit status, the profile of its run) of `script` run under `prof`; the run's failures
    end the command as `profile` reports them."""
    try:
        try:
            status = run_script(script, args, prof)
        except ScriptFailed as err:
            print(f"trainplan: {script}: the script failed ({err}); nothing was profiled or written",
                  file=sys.stderr)
            raise typer.Exit(SCRIPT_EXCEPTION_STATUS) from None
        if status != 0 and output is not None:
            print(f"trainplan: {script}: the script exited with status {status}; {output} not written",
                  file=sys.stderr)
            raise typer.Exit(status)
        try:
            result = prof.result(predicted=plan_account)
        except RuntimeError as err:
            if status != 0:  # the script stopped itself: its status, not a profiling complaint
                print(f"trainplan: {script}: the script exited with status {status} ({err})", file=sys.stderr)
                raise typer.Exit(status) from None
            raise UserError(str(script), f"{err}; a script without a DataLoader can wrap its loop with "
                            "trainplan.measure.profiler.current().wrap(iterable)") from None
    finally:
        prof.close()
    return status, result


def _record_mfu(output: Path, w: Any, plan_account: Any, result: Any, data: dict[str, Any], script: Path,
                warmup: int) -> None:
    """Nothing: the run's measured, end-to-end MFU set in `data` and written to the calibration file `output`."""
    from trainplan.planning import evaluate as plan_mod

    model = plan_mod.resolve_model(w)
    flops_per_frame = plan_account.tokens_per_frame * model.active_params * 6.0
    peak = w.accelerator.peak(w.training.precision)
    mfu = result.mfu(flops_per_frame, peak, w.cluster.count)
    data["mfu"] = mfu
    calibration.write(output, "profile", settings={"script": str(script), "warmup": warmup,
                                                   "timing": result.timing},
                      results=clean({k: v for k, v in data.items() if k not in ("hops", "predicted")}),
                      values=calibration.mfu_values(mfu, f"step of {script.name}: {result.demand_fps:.1f} "
                                                    f"frames/s x 6 P n FLOP per frame / peak"),
                      machine=__import__("trainplan.measure.probe", fromlist=["machine"]).machine())


def register(app: typer.Typer) -> None:
    @app.command("profile", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def profile_cmd(
        ctx: typer.Context,
        script: Annotated[Path, typer.Argument(help="the training script (its own arguments after --)")],
        workload: Annotated[Optional[Path], typer.Option("--workload", "-w", help="workload TOML to compare with")] = None,
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a workload key: KEY=VALUE")] = None,
        cal: Annotated[Optional[Path], typer.Option("--calibration", help="calibration TOML for the prediction")] = None,
        compare: Annotated[Optional[bool], typer.Option(help="show the plan's prediction (default: when a "
                                                        "workload, --set or --calibration is given)")] = None,
        warmup: Annotated[int, typer.Option(help="batches not counted (loader start-up)", min=0)] = 5,
        sync: Annotated[str, typer.Option(help="auto, none, cuda-sync or cuda-events")] = "auto",
        frames_per_batch: Annotated[Optional[float], typer.Option(help="frames in a batch (default: the "
                                                                  "leading dimension of its first tensor)")] = None,
        format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",  # noqa: A002
        output: Annotated[Optional[Path], typer.Option("--output", "-o", help="record the measured MFU in this "
                                                       "calibration TOML (needs the workload's model)")] = None,
        stalls: Annotated[bool, typer.Option("--stalls", help="run the script three times (synthetic batches, "
                                             "data warm in the page cache, data cold) and split the wait into "
                                             "fetch and prep stalls")] = False,
        data: Annotated[Optional[list[Path]], typer.Option("--data", help="the script's data files or folders "
                                                           "(warmed and dropped from the page cache by --stalls)")] = None,
        repeats_given: Annotated[Optional[int], typer.Option("--repeats", help="--stalls: runs of each pass (the "
                                                   "median used, the spread shown)  [default: 3]", min=1)] = None,
    ) -> None:
        """Run a training script and report its busy fraction, slowest hop and cores needed."""
        if format not in ("table", "json"):
            from trainplan.interfaces.options import check_format
            check_format(format, ("table", "json"))
        if frames_per_batch is not None and not (1 <= frames_per_batch < math.inf):
            # a batch of 0 or -5 frames is a slip: it would print a rate of 0 or a negative one (issue 29)
            raise UserError("--frames-per-batch", f"expected at least 1 frame a batch, got {frames_per_batch:g}")
        if repeats_given is not None and not stalls:  # the repeats are of --stalls' passes: alone, unused
            raise UserError("--repeats", "expected --stalls with it (the runs of each pass of the stall split)")
        repeats = DEFAULT_STALL_REPEATS if repeats_given is None else repeats_given
        if stalls:
            _stall_passes(script, list(ctx.args), data or [], warmup, sync, frames_per_batch, format, repeats)
            return
        if sync not in ("auto", "none", "cuda-sync", "cuda-events"):
            raise UserError("--sync", f"expected auto, none, cuda-sync or cuda-events, got {sync!r}")
        w = plan_account = None
        if compare is None:
            compare = workload is not None or bool(set_) or cal is not None
        if compare or output is not None:
            w, plan_account = _predicted(workload, set_ or [], cal)  # bad input is refused before the run
        read_script(script)
        if output is not None:
            from trainplan.outputs import check_output_path

            # before the run: the script or the workload as --output is refused (the calibration read may be updated)
            check_output_path(output, may_replace_input="calibration")
        prof = profile_mod.Profiler(warmup=warmup, sync=sync, frames_per_batch=frames_per_batch)  # type: ignore[arg-type]
        status, result = _profiled_run(script, list(ctx.args), prof, output, plan_account)
        data = result.to_dict()
        data["script_exit_status"] = status
        if output is not None and w is not None and plan_account is not None:
            _record_mfu(output, w, plan_account, result, data, script, warmup)
        if format == "json":
            typer.echo(json.dumps(clean(data), indent=2))
        else:
            typer.echo(profile_mod.summary(result))
        if status != 0:
            raise typer.Exit(status)
