"""`trainplan scaling optimal|fit|loss` (docs/serving-scaling-energy.md): Chinchilla-style scaling laws.

- `optimal --budget C [--law E,A,B,ALPHA,BETA]` -> JSON `params`, `tokens`, `loss`, `tokens_per_param`.
  The default law is the Chinchilla paper's fit (Hoffmann et al. 2022, Approach 3: E = 1.69,
  A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28; trainplan.accounts.scaling.CHINCHILLA_APPROACH3).
- `fit RUNS.csv` -> JSON `E`, `A`, `B`, `alpha`, `beta` and `E_se` ... (bootstrap standard errors),
  fitted the way the replication of Besiroglu et al. (2024) does it, from the grid's `--starts`
  best starts by objective (128 of 4,500 by default; 0 runs every start); a progress bar on
  stderr (a terminal) while the bootstrap refits.
- `loss --params N --tokens D [--law ...]` -> the law's loss and the floors at N and at D.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.accounts import scaling
from trainplan import units
from trainplan.errors import UserError, named_as

FORMATS = ("json", "table")

LawOpt = Annotated[Optional[str], typer.Option(
    "--law", help="E,A,B,ALPHA,BETA; default Hoffmann et al. (2022) Approach 3: 1.69,406.4,410.7,0.34,0.28")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table (default) or json")]
from trainplan.interfaces.options import OutputOpt  # noqa: E402 - the one --output of every command

GRIDS = {"replication": scaling.REPLICATION_GRID, "small": scaling.SMALL_GRID}


def _law(text: str | None) -> scaling.ScalingLaw:
    return scaling.CHINCHILLA_APPROACH3 if text is None else scaling.parse_law(text)


# each figure's label on the terminal (JSON keeps the keys): L(N, D) = E + A / N^alpha + B / D^beta
LABELS = {"params": "parameters N", "tokens": "tokens D", "loss": "predicted loss", "tokens_per_param": "tokens per parameter",
          "budget_flops": "compute budget C", "params_exponent": "N grows as C^", "tokens_exponent": "D grows as C^",
          "law_E": "law: E (irreducible loss)", "law_A": "law: A", "law_B": "law: B", "law_alpha": "law: alpha (N)",
          "law_beta": "law: beta (D)", "law_source": "law from", "E_se": "E standard error", "A_se": "A standard error",
          "B_se": "B standard error", "alpha_se": "alpha standard error", "beta_se": "beta standard error",
          "runs_used": "runs fitted"}


def _emit(out: dict[str, Any], fmt: str, output: Path | None = None) -> None:
    if fmt not in FORMATS:
        from trainplan.interfaces.options import check_format
        check_format(fmt, tuple(FORMATS))
    from trainplan.quantities import json_safe

    from trainplan.outputs import write_output

    clean = json_safe(out)
    if fmt == "json":
        write_output(json.dumps(clean, indent=2) + "\n", output)
    else:
        from trainplan.quantities import key_value_lines

        write_output(key_value_lines(clean, {"tokens_per_param": "ratio", "loss": "ratio"}, LABELS) + "\n", output)


def optimal_command(
    budget: Annotated[str, typer.Option("--budget", help="training compute C, FLOP (6e23, '1e21 FLOP')")],
    law: LawOpt = None,
    output_format: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Compute-optimal parameters and tokens for a budget C = 6ND (closed form)."""
    c = units.parse(budget, "flops", "--budget")
    fitted = _law(law)
    with named_as({"budget": "--budget"}):  # the flag the user typed (issue 16)
        opt = scaling.compute_optimal(c, fitted)
    if opt.params < 1 or opt.tokens < 1:  # the closed form goes on below one parameter or one token; no run does
        raise UserError("--budget", f"expected a budget that trains at least one parameter on one token under "
                        f"this law (its split gives N = {opt.params:.3g}, D = {opt.tokens:.3g}), got {budget}")
    _emit({
        "params": opt.params, "tokens": opt.tokens, "loss": opt.loss, "tokens_per_param": opt.tokens_per_param,
        "budget_flops": opt.budget_flops, "params_exponent": opt.params_exponent,
        "tokens_exponent": opt.tokens_exponent, **{f"law_{k}": v for k, v in fitted.as_dict().items()},
        "law_source": fitted.source,
    }, output_format, output)


def _fixed(items: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise UserError("--fix", f"expected NAME=VALUE such as E=1.69, got {item!r}")
        if name.strip() in out:  # the first value would be dropped without a word (issue 29)
            raise UserError(f"--fix {name.strip()}", "expected each constant held once, got it twice")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UserError(f"--fix {name.strip()}", f"expected a number, got {value!r}") from None
        held = out[name.strip()]
        # the law's own ranges, as --law takes them: E >= 0, A, B, alpha, beta above 0 (a loss that falls)
        if not math.isfinite(held) or (held < 0 if name.strip() == "E" else held <= 0):
            raise UserError(f"--fix {name.strip()}", f"expected {'0 or more' if name.strip() == 'E' else 'above 0'} "
                            f"(L = E + A/N^alpha + B/D^beta falls with N and D), got {value!r}")
    return out


def fit_command(
    runs_csv: Annotated[Path, typer.Argument(metavar="RUNS.csv", help="CSV with params, tokens (or flops), loss")],
    fix: Annotated[Optional[list[str]], typer.Option("--fix", help="hold a constant: E=1.69, alpha=0.34 ...")] = None,
    drop: Annotated[int, typer.Option("--drop", help="highest-loss runs dropped first", min=0)] = scaling.OUTLIERS_DROPPED,
    grid: Annotated[str, typer.Option("--grid", help="replication (4,500 starts) or small (8)")] = "replication",
    starts: Annotated[int, typer.Option(
        "--starts", help="run L-BFGS-B from the grid's N best starts by objective (0: every start)",
        min=0)] = scaling.PRUNED_STARTS,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="resamples for the standard errors", min=2)] = scaling.BOOTSTRAP_RESAMPLES,
    seed: Annotated[int, typer.Option("--seed", help="seed of the bootstrap")] = scaling.BOOTSTRAP_SEED,
    at_params: Annotated[Optional[str], typer.Option("--at-params", help="extrapolate to N parameters")] = None,
    at_tokens: Annotated[Optional[str], typer.Option("--at-tokens", help="... trained on D tokens")] = None,
    output_format: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Fit E, A, B, alpha, beta to a table of runs (Huber on log loss, L-BFGS-B from a grid)."""
    if grid not in GRIDS:
        raise UserError("--grid", f"one of {', '.join(GRIDS)}, got {grid!r}")
    runs = scaling.read_runs(runs_csv)
    if output is not None and str(output) != "-":
        from trainplan.outputs import check_output_path

        check_output_path(output)  # the runs read (`--output RUNS.csv`) are refused before the fit, not after
    fixed = _fixed(fix)
    from trainplan.progress import progress_bar

    fit = scaling.fit_scaling_law(runs, fixed=fixed, grid=GRIDS[grid], drop_highest=drop, prune=starts)
    with progress_bar("bootstrap", bootstrap) as advance:
        boot = scaling.bootstrap_scaling_law(runs, fit, resamples=bootstrap, seed=seed, fixed=fixed,
                                             drop_highest=drop, progress=lambda done: advance(1))
    out: dict[str, Any] = dict(scaling.fit_summary(boot))
    if (at_params is None) != (at_tokens is None):
        raise UserError("--at-params" if at_params is None else "--at-tokens",
                        "give both --at-params and --at-tokens to extrapolate")
    if at_params is not None and at_tokens is not None:
        with named_as({"params": "--at-params", "tokens": "--at-tokens"}):  # the flags typed
            ext = scaling.extrapolate(boot, units.parse_counted(at_params, units.PARAM_NOUNS, "--at-params"),
                                      units.parse_counted(at_tokens, units.TOKEN_NOUNS, "--at-tokens"))
        out |= {"extrapolated_params": ext.params, "extrapolated_tokens": ext.tokens,
                "extrapolated_loss": ext.loss, "extrapolated_low": ext.low, "extrapolated_high": ext.high,
                "extrapolated_level": ext.level}
    _emit(out, output_format, output)


def loss_command(
    params: Annotated[str, typer.Option("--params", help="parameters N (7B, 7e9)")],
    tokens: Annotated[str, typer.Option("--tokens", help="training tokens D (1.4T, 1.4e12)")],
    law: LawOpt = None,
    output_format: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """L(N, D), and the floors left when N or D is held and the other grows without bound."""
    n = units.parse_counted(params, units.PARAM_NOUNS, "--params")
    d = units.parse_counted(tokens, units.TOKEN_NOUNS, "--tokens")
    fitted = _law(law)
    with named_as({"params": "--params", "tokens": "--tokens"}):  # the flags the user typed (issue 16)
        out = {"params": n, "tokens": d, "loss": scaling.loss(fitted, n, d),
               "floor_at_params": scaling.loss_floor_at_params(fitted, n),
               "floor_at_tokens": scaling.loss_floor_at_tokens(fitted, d),
               "flops": scaling.FLOP_PER_PARAM_TOKEN * n * d, "law_source": fitted.source}
    _emit(out, output_format, output)


def register(app: typer.Typer) -> None:
    """Add the `scaling` group (called by cli.py's discovery)."""
    group = typer.Typer(help="Scaling laws: compute-optimal N and D, fitting E, A, B, alpha, beta to runs.",
                        no_args_is_help=True, rich_markup_mode=None)
    group.command("optimal")(optimal_command)
    group.command("fit")(fit_command)
    group.command("loss")(loss_command)
    app.add_typer(group, name="scaling")
