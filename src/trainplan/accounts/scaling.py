"""Scaling laws (docs/serving-scaling-energy.md): L(N, D) = E + A / N^alpha + B / D^beta.

N is the parameter count, D the training tokens, L the final loss (nats per
token). Three uses:

- evaluate the law, and the floor left when N or D is held and the other grows
  without bound;
- the compute-optimal N and D for a budget C = 6 N D, in closed form;
- fit E, A, B, alpha, beta (or a subset, the others held) to a table of runs the
  way Hoffmann et al. (2022, Approach 3) and the replication of Besiroglu et al.
  (2024) do it, with bootstrap standard errors and an extrapolation interval.

The fit minimises  sum_i Huber_delta( LSE(a - alpha log N_i, b - beta log D_i, e) - log L_i )
over theta = (a, b, e, alpha, beta), with A = exp(a), B = exp(b), E = exp(e),
delta = 1e-3, by L-BFGS-B (scipy) from a grid of starts, keeping the best
converged one and polishing it with tight tolerances. The objective is vectorised
over the runs and has an analytic gradient. A cheap first pass evaluates the
objective at every start of the grid as one array and runs L-BFGS-B only from the
PRUNED_STARTS best of them (the replication ran all 4,500: `prune=0`); the optimum
is the full grid's on the Chinchilla runs and on synthetic laws (tests).

Pure: plain floats and numpy arrays in, frozen dataclasses out. The one piece
of I/O is `read_runs`, a small loader for a CSV table of runs.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trainplan.errors import UserError, comma_items, require_positive

# ---------------------------------------------------------------- constants

FLOP_PER_PARAM_TOKEN = 6.0
"""Training FLOP per parameter per token, C = 6 N D (docs/accounts.md; Kaplan et al. 2020, §2.1)."""

HUBER_DELTA = 1e-3
"""Huber threshold on the residual of log loss (Hoffmann et al. 2022, §3.3 and D.2)."""

OUTLIERS_DROPPED = 5
"""Highest-loss runs dropped before fitting: the replication drops 5 (Besiroglu et al. 2024,
§2, `nr_of_models_excluded = 5` in epoch-research/analyzing-chinchilla)."""

PARAMETER_NAMES = ("E", "A", "B", "alpha", "beta")

GRID_OPTIONS: dict[str, float | int] = {}
"""L-BFGS-B options of the grid pass: scipy's defaults, as the replication ran it."""

LBFGSB_OPTIONS: dict[str, float | int] = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 15000}
"""L-BFGS-B stopping rules of the polish that follows the grid pass. scipy's relative-reduction test divides by max(|f|, 1), and the
summed Huber loss here is about 1e-3, so its default ftol (2.2e-9) stops at a relative change
of ~2e-6: tens of iterations short of the optimum along the flat A-alpha / B-beta ridge
(measured on the Chinchilla runs: objective 1.2952e-3 at A = 151 with the defaults from
a = 5, b = 10 vs 1.01827e-3 at A = 478 with these). The replication used the defaults, so its
constants are those of the starts that happened to stop near the ridge's minimum.
The grid pass keeps the defaults (it only has to pick the basin, and it is the replication's
procedure); the best `POLISHED` grid results are then run on with these tight rules."""

POLISHED = 5
"""How many of the grid pass's best converged results are polished with LBFGSB_OPTIONS."""

PRUNED_STARTS = 128
"""Starts the grid pass runs L-BFGS-B from: the grid's starts with the lowest objective, all
evaluated first as one array (`objectives`). On the Chinchilla runs every one of the 4,500
starts converges, 351 of them to within 1e-6 of the best objective, and the polished optimum
from the best 128 by starting objective is the full grid's (tests/test_scaling.py proves it
there and on synthetic laws with known constants; `prune=0` runs every start)."""


@dataclass(frozen=True)
class ScalingLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta, loss in nats per token."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str = ""

    def loss(self, params: float, tokens: float) -> float:
        """Predicted final loss of a model of `params` parameters trained on `tokens` tokens."""
        return self.E + self.A / params**self.alpha + self.B / tokens**self.beta

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in PARAMETER_NAMES}


CHINCHILLA_APPROACH3 = ScalingLaw(
    E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28,
    source="Hoffmann et al. (2022), 'Training Compute-Optimal Large Language Models', "
    "Approach 3 fitted constants (eq. 10, §D.2)",
)
"""The Chinchilla paper's parametric fit; the default law of `trainplan scaling optimal`."""

EPOCH_REPLICATION = ScalingLaw(
    E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658,
    source="Besiroglu et al. (2024), 'Chinchilla Scaling: A replication attempt', Table 1 "
    "(fit to the 240 runs read off Hoffmann et al.'s Figure 4, 5 outliers dropped)",
)
"""The replication's constants, fitted to the runs shipped in trainplan/catalogue/chinchilla_runs.csv."""


# ---------------------------------------------------------------- evaluation


def loss(law: ScalingLaw, params: float, tokens: float) -> float:
    """L(N, D) of `law`; `params` and `tokens` must be positive."""
    require_positive("params", params)
    require_positive("tokens", tokens)
    return law.loss(params, tokens)


def loss_floor_at_params(law: ScalingLaw, params: float) -> float:
    """The loss a model of `params` parameters approaches with unlimited data: E + A / N^alpha."""
    require_positive("params", params)
    return law.E + law.A / params**law.alpha


def loss_floor_at_tokens(law: ScalingLaw, tokens: float) -> float:
    """The loss `tokens` tokens allow with an unlimited model: E + B / D^beta."""
    require_positive("tokens", tokens)
    return law.E + law.B / tokens**law.beta


@dataclass(frozen=True)
class ComputeOptimal:
    """The N and D that minimise L(N, D) under 6 N D = budget."""

    budget_flops: float
    params: float
    tokens: float
    loss: float
    tokens_per_param: float
    params_exponent: float  # N_opt proportional to C^a, a = beta / (alpha + beta)
    tokens_exponent: float  # D_opt proportional to C^b, b = alpha / (alpha + beta)


def compute_optimal(budget_flops: float, law: ScalingLaw = CHINCHILLA_APPROACH3) -> ComputeOptimal:
    """Closed form (Hoffmann et al. 2022, eq. 4 and §D.2):

    N_opt = G (C/6)^a,  D_opt = G^-1 (C/6)^b,  G = (alpha A / (beta B))^(1 / (alpha + beta)),
    a = beta / (alpha + beta),  b = alpha / (alpha + beta).

    Derivation: on D = C / (6N), dL/dN = 0 gives alpha A N^-alpha = beta B D^-beta.
    """
    require_positive("budget", budget_flops)
    if law.alpha <= 0 or law.beta <= 0 or law.A <= 0 or law.B <= 0:
        raise UserError("--law", "expected A, B, alpha and beta all positive for a compute-optimal split")
    s = law.alpha + law.beta
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1.0 / s)
    a = law.beta / s
    b = law.alpha / s
    half = budget_flops / FLOP_PER_PARAM_TOKEN
    n_opt = g * half**a
    d_opt = half**b / g
    return ComputeOptimal(
        budget_flops=budget_flops,
        params=n_opt,
        tokens=d_opt,
        loss=law.loss(n_opt, d_opt),
        tokens_per_param=d_opt / n_opt,
        params_exponent=a,
        tokens_exponent=b,
    )


def parse_law(text: str, key: str = "--law") -> ScalingLaw:
    """'E,A,B,ALPHA,BETA' -> ScalingLaw."""
    parts = comma_items(key, text, "expected five numbers E,A,B,ALPHA,BETA")
    if len(parts) != 5:
        raise UserError(key, f"expected five numbers E,A,B,ALPHA,BETA such as 1.69,406.4,410.7,0.34,0.28, got {text!r}")
    from trainplan import units

    try:
        [float(p) for p in parts]
    except ValueError:
        raise UserError(key, f"expected five numbers E,A,B,ALPHA,BETA, got {text!r}") from None
    values = [units.number(p, key) for p in parts]  # finite, in float range, no subnormal (issue 29)
    e, a, b, alpha, beta = values
    if e < 0 or min(a, b, alpha, beta) <= 0:
        # L = E + A/N^alpha + B/D^beta: a loss that falls towards E as N and D grow; a zero or negative
        # term would have it stand still or grow with more data (and a negative E is below any loss)
        raise UserError(key, f"expected E >= 0 and A, B, ALPHA, BETA above 0 (a loss that falls with N and D), "
                        f"got {text!r}")
    return ScalingLaw(*values, source=f"{key} {text}")


# ---------------------------------------------------------------- the runs table


@dataclass(frozen=True, eq=False)
class Runs:
    """A table of training runs: parameters N, tokens D, final loss L (arrays of one length)."""

    params: NDArray[np.float64]
    tokens: NDArray[np.float64]
    loss: NDArray[np.float64]
    source: str = ""

    def __len__(self) -> int:
        return int(self.params.shape[0])


# Accepted column names, first match wins (case-insensitive). The Chinchilla CSV of the
# replication uses 'Model Size', 'Training FLOP' and 'loss'.
#: How far a run's FLOP column may lie from 6 N D when its tokens are given too (rounding, the attention
#: FLOPs some tables add): beyond it the two columns describe two runs.
FLOP_AGREEMENT = 0.25
PARAMS_COLUMNS = ("params", "n", "parameters", "model size", "model_size")
TOKENS_COLUMNS = ("tokens", "d", "training tokens", "training_tokens")
FLOP_COLUMNS = ("flops", "flop", "training flop", "training_flop", "compute", "c")
LOSS_COLUMNS = ("loss", "l", "final loss", "final_loss")


def make_runs(params: ArrayLike, tokens: ArrayLike, losses: ArrayLike, source: str = "runs") -> Runs:
    """Validate three equal-length arrays of positive, finite numbers."""
    arrays = []
    for name, values in (("params", params), ("tokens", tokens), ("loss", losses)):
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            bad = int(np.flatnonzero(~np.isfinite(arr) | (arr <= 0))[0])
            raise UserError(source, f"expected positive finite values of {name}; row {bad + 1} has {arr[bad]!r}")
        arrays.append(arr)
    if not (len(arrays[0]) == len(arrays[1]) == len(arrays[2])):
        raise UserError(source, "expected params, tokens and loss of the same length")
    if len(arrays[0]) == 0:
        raise UserError(source, "expected at least one run")
    return Runs(arrays[0], arrays[1], arrays[2], source=source)


def read_runs(path: str | Path) -> Runs:
    """Read a CSV of runs. Columns (case-insensitive): params (or N, 'Model Size'), loss, and
    either tokens (D) or training FLOP (then D = FLOP / (6 N), as the replication does)."""
    from trainplan import limits  # regular files only, a size cap, remembered as an input (--output)

    where = str(path)
    if not Path(path).exists():
        raise UserError(where, "no such runs file (expected a CSV with columns params, tokens or flops, loss)")
    text = limits.read_text(path, "runs")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        rows = list(reader)
    except csv.Error as err:
        raise UserError(where, f"expected a CSV file ({err})") from None
    names = [name.strip().lower() for name in header if name is not None]
    twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if twice is not None:  # csv.DictReader keeps the last of two columns of one name (issue 29)
        raise UserError(where, f"expected each column once, got {twice!r} twice in the header")
    columns = {name.strip().lower(): name for name in header if name is not None}
    for choices, what in ((PARAMS_COLUMNS, "the parameter count"), (LOSS_COLUMNS, "the loss"),
                          (TOKENS_COLUMNS, "the tokens"), (FLOP_COLUMNS, "the training FLOP")):
        given = [c for c in choices if c in columns]
        if len(given) > 1:  # two spellings of one figure: which one is meant is not ours to guess
            raise UserError(where, f"expected one column for {what}, got {', '.join(repr(columns[c]) for c in given)}")

    def pick(choices: tuple[str, ...]) -> str | None:
        return next((columns[c] for c in choices if c in columns), None)

    params_col = pick(PARAMS_COLUMNS)
    loss_col = pick(LOSS_COLUMNS)
    tokens_col = pick(TOKENS_COLUMNS)
    flop_col = pick(FLOP_COLUMNS)
    if params_col is None:
        raise UserError(where, "missing column 'params' (the parameter count N; also accepted: N, 'Model Size')")
    if loss_col is None:
        raise UserError(where, "missing column 'loss' (the final loss of each run)")
    if tokens_col is None and flop_col is None:
        raise UserError(where, "missing column 'tokens' (training tokens D) or 'flops' (training FLOP C = 6ND)")

    def number(row_no: int, row: dict[str, str], col: str) -> float:
        text = (row.get(col) or "").strip()
        try:
            value = float(text)
        except ValueError:
            raise UserError(f"{where}:{row_no}", f"expected a number in column {col!r}, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise UserError(f"{where}:{row_no}", f"expected a positive number in column {col!r}, got {text!r}")
        return value

    n, d, l_ = [], [], []
    for i, row in enumerate(rows, start=2):  # row 1 is the header
        if None in row:  # more fields than the header names: "1,500" is a thousands separator, not two numbers
            raise UserError(f"{where}:{i}", f"expected {len(header)} fields as the header names, got "
                            f"{len(header) + len(row[None])} (a number written with a thousands separator?)")
        if all(not (v or "").strip() for v in row.values() if isinstance(v, str)):
            continue
        n_i = number(i, row, params_col)
        if tokens_col is not None:
            d_i = number(i, row, tokens_col)
            if flop_col is not None:  # both written: they must describe one run, C = 6 N D
                c_i = number(i, row, flop_col)
                if abs(c_i / (FLOP_PER_PARAM_TOKEN * n_i * d_i) - 1.0) > FLOP_AGREEMENT:
                    raise UserError(f"{where}:{i}", f"expected {flop_col!r} near 6 x {params_col} x {tokens_col} = "
                                    f"{FLOP_PER_PARAM_TOKEN * n_i * d_i:.3g}, got {c_i:.3g}")
        else:
            assert flop_col is not None
            d_i = number(i, row, flop_col) / (FLOP_PER_PARAM_TOKEN * n_i)
        n.append(n_i)
        d.append(d_i)
        l_.append(number(i, row, loss_col))
    if not n:
        raise UserError(where, "expected at least one run below the header")
    return make_runs(n, d, l_, source=where)


def drop_highest_loss(runs: Runs, count: int = OUTLIERS_DROPPED) -> tuple[Runs, int]:
    """Drop the `count` highest-loss runs (ties at the threshold all go, as in the replication's
    `losses < sorted(losses)[-count]`). Returns the kept runs and how many were dropped."""
    if count < 0:
        raise UserError("--drop", f"expected zero or more runs to drop, got {count}")
    if count == 0:
        return runs, 0
    if count >= len(runs):
        raise UserError("--drop", f"expected fewer runs dropped than the {len(runs)} in the table, got {count}")
    threshold = np.sort(runs.loss)[-count]
    keep = runs.loss < threshold
    kept = Runs(runs.params[keep], runs.tokens[keep], runs.loss[keep], source=runs.source)
    return kept, len(runs) - len(kept)


# ---------------------------------------------------------------- the objective


def huber(residual: NDArray[np.float64], delta: float = HUBER_DELTA) -> NDArray[np.float64]:
    """Huber loss: r^2 / 2 inside |r| <= delta, delta (|r| - delta / 2) outside (same as
    scipy.special.huber(delta, r))."""
    a = np.abs(residual)
    return np.where(a <= delta, 0.5 * residual**2, delta * (a - 0.5 * delta))


def objective_and_gradient(
    theta: NDArray[np.float64],
    log_n: NDArray[np.float64],
    log_d: NDArray[np.float64],
    log_l: NDArray[np.float64],
    delta: float = HUBER_DELTA,
) -> tuple[float, NDArray[np.float64]]:
    """Sum of Huber residuals of log loss and its gradient in theta = (a, b, e, alpha, beta).

    With t1 = a - alpha log N, t2 = b - beta log D, t3 = e, the prediction is
    lse = log(exp t1 + exp t2 + exp t3) and d lse / d t_j = softmax_j = w_j; the Huber
    derivative is clip(r, -delta, delta). Hence
      d/da = sum h' w1,  d/dalpha = -sum h' w1 log N,  d/db = sum h' w2,
      d/dbeta = -sum h' w2 log D,  d/de = sum h' w3.
    """
    a, b, e, alpha, beta = theta
    t1 = a - alpha * log_n
    t2 = b - beta * log_d
    m = np.maximum(np.maximum(t1, t2), e)
    x1 = np.exp(t1 - m)
    x2 = np.exp(t2 - m)
    x3 = np.exp(e - m)
    total = x1 + x2 + x3
    r = m + np.log(total) - log_l
    # Huber(r) = c (r - c/2) with c = clip(r, -delta, delta); c is also Huber'(r)
    c = np.clip(r, -delta, delta)
    value = float(c @ (r - 0.5 * c))
    h = c / total
    g1 = h * x1
    g2 = h * x2
    grad = np.array([g1.sum(), g2.sum(), float(h @ x3), -float(g1 @ log_n), -float(g2 @ log_d)])
    return value, grad


def objectives(
    thetas: NDArray[np.float64],
    log_n: NDArray[np.float64],
    log_d: NDArray[np.float64],
    log_l: NDArray[np.float64],
    delta: float = HUBER_DELTA,
) -> NDArray[np.float64]:
    """The objective of `objective_and_gradient` at many points at once: rows of `thetas`
    (a, b, e, alpha, beta) -> one summed Huber loss per row, as one (points x runs) array."""
    a, b, e, alpha, beta = (col[:, None] for col in np.asarray(thetas, dtype=np.float64).T)
    t1 = a - alpha * log_n
    t2 = b - beta * log_d
    m = np.maximum(np.maximum(t1, t2), e)
    r = m + np.log(np.exp(t1 - m) + np.exp(t2 - m) + np.exp(e - m)) - log_l
    c = np.clip(r, -delta, delta)
    return (c * (r - 0.5 * c)).sum(axis=1)


# ---------------------------------------------------------------- the grid of starts


@dataclass(frozen=True)
class StartGrid:
    """Starting points of the fit, in theta space: each axis a tuple of values, the grid their product."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    e: tuple[float, ...]
    alpha: tuple[float, ...]
    beta: tuple[float, ...]

    def points(self) -> NDArray[np.float64]:
        """All starts as rows (a, b, e, alpha, beta)."""
        return np.array(list(itertools.product(self.a, self.b, self.e, self.alpha, self.beta)), dtype=np.float64)

    def __len__(self) -> int:
        return len(self.a) * len(self.b) * len(self.e) * len(self.alpha) * len(self.beta)


REPLICATION_GRID = StartGrid(
    a=(0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    b=(0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    e=(-1.0, -0.5, 0.0, 0.5, 1.0),
    alpha=(0.0, 0.5, 1.0, 1.5, 2.0),
    beta=(0.0, 0.5, 1.0, 1.5, 2.0),
)
"""Hoffmann et al. (2022) §D.2 / Besiroglu et al. (2024): alpha, beta in {0, 0.5, ..., 2},
e in {-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}: 4,500 starts."""

SMALL_GRID = StartGrid(
    a=(5.0, 10.0), b=(5.0, 10.0), e=(0.0, 0.5), alpha=(0.5,), beta=(0.5,),
)
"""An 8-start grid for tests and quick looks; it reaches the same optimum on the Chinchilla runs."""


# ---------------------------------------------------------------- fitting


@dataclass(frozen=True)
class ScalingFit:
    """The best fit found from the grid, with what it was fitted to."""

    law: ScalingLaw
    theta: tuple[float, float, float, float, float]  # (a, b, e, alpha, beta), A = exp(a) ...
    objective: float  # summed Huber loss at the optimum
    runs_used: int
    runs_dropped: int
    starts: int
    converged: int  # starts whose L-BFGS-B run reported success
    fixed: tuple[str, ...] = ()  # names held at given values
    delta: float = HUBER_DELTA
    grid_law: ScalingLaw | None = None  # best of the grid pass before polishing (the replication's procedure)
    grid_objective: float = math.nan
    starts_run: int = 0  # starts L-BFGS-B ran from (the grid's best PRUNED_STARTS; all when not pruned)


def _check_identifiable(kept: Runs, free: set[int], where: str) -> None:
    """UserError unless the runs can pin the free constants: as many distinct (N, D) points as free
    constants, two sizes N where A or alpha is free, two token counts D where B or beta is free (runs
    repeated at one point carry one equation, and a power of a count that never changes has no slope:
    a fit there reports an exact objective with zero standard errors, which is no measurement)."""
    points = len({(float(n), float(d)) for n, d in zip(kept.params, kept.tokens)})
    if points < len(free):
        raise UserError(where, f"expected runs at {len(free)} or more distinct (params, tokens) points to fit "
                        f"{len(free)} constants, got {points}")
    if free & {0, 3} and len(np.unique(kept.params)) < 2:
        raise UserError(where, "expected runs at two or more model sizes to fit A and alpha (or hold them with "
                        "--fix), got one")
    if free & {1, 4} and len(np.unique(kept.tokens)) < 2:
        raise UserError(where, "expected runs at two or more token counts to fit B and beta (or hold them with "
                        "--fix), got one")


def _fixed_theta(fixed: Mapping[str, float] | None) -> dict[int, float]:
    """Map {'E': 1.69, 'alpha': 0.34} to theta indices and values (E, A, B go in as logs)."""
    out: dict[int, float] = {}
    index = {"A": 0, "B": 1, "E": 2, "alpha": 3, "beta": 4}
    for name, value in (fixed or {}).items():
        if name not in index:
            raise UserError("--fix", f"expected one of E, A, B, alpha, beta, got {name!r}")
        v = float(value)
        if not math.isfinite(v):
            raise UserError(f"--fix {name}", f"expected a finite number, got {value!r}")
        if name in ("A", "B", "E"):
            if v <= 0:
                raise UserError(f"--fix {name}", f"expected a positive number, got {value!r}")
            v = math.log(v)
        out[index[name]] = v
    return out


def _law_from_theta(theta: NDArray[np.float64], source: str) -> ScalingLaw:
    a, b, e, alpha, beta = (float(x) for x in theta)
    return ScalingLaw(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta, source=source)


def _run(
    x0: NDArray[np.float64],
    fun: Callable[[NDArray[np.float64]], tuple[float, NDArray[np.float64]]],
    options: Mapping[str, float | int],
) -> tuple[NDArray[np.float64], float, bool]:
    from scipy.optimize import minimize  # scipy costs 0.6 s to import: only when fitting

    result = minimize(fun, x0, jac=True, method="L-BFGS-B", options=dict(options))
    return np.asarray(result.x, dtype=np.float64), float(result.fun), bool(result.success)


def _one_blas_thread() -> AbstractContextManager[object]:
    """One BLAS thread while fitting: L-BFGS-B makes thousands of tiny BLAS calls, and a threaded
    OpenBLAS spinning its workers on a busy machine made them 11x slower (20.6 s vs 1.8 s for
    the Chinchilla fit, measured in one run on 2 shared cores)."""
    import scipy.optimize  # noqa: F401 - load scipy's BLAS first: threadpoolctl limits loaded libraries only

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # threadpoolctl is a dependency; without it the fit is only slower
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _minimise_from(
    starts: NDArray[np.float64],
    free: NDArray[np.int64],
    base: NDArray[np.float64],
    logs: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
    delta: float,
    polish: int = POLISHED,
) -> tuple[NDArray[np.float64], float, int, NDArray[np.float64], float]:
    """Run L-BFGS-B from each start (free coordinates only) with the grid options, then polish
    the `polish` best with LBFGSB_OPTIONS. Converged runs are preferred, as in the replication.

    Returns (best theta, its objective, converged grid runs, best theta of the grid pass alone,
    its objective)."""
    log_n, log_d, log_l = logs

    def fun(x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        theta = base.copy()
        theta[free] = x
        value, grad = objective_and_gradient(theta, log_n, log_d, log_l, delta)
        return value, grad[free]

    found: list[tuple[bool, float, NDArray[np.float64]]] = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), _one_blas_thread():
        for start in starts:
            x, value, ok = _run(start[free], fun, GRID_OPTIONS)
            if math.isfinite(value) and np.all(np.isfinite(x)):
                found.append((ok, value, x))
        if not found:
            raise UserError("scaling fit", "the optimiser found no finite fit from any start; check the runs")
        converged = sum(1 for ok, _, _ in found if ok)
        # converged first, then by objective
        found.sort(key=lambda item: (not item[0], item[1]))
        grid_x, grid_value = found[0][2], found[0][1]
        best_x, best_value = grid_x, grid_value
        for _ok, _value, x in found[:max(polish, 0)]:
            px, pvalue, pok = _run(x, fun, LBFGSB_OPTIONS)
            if math.isfinite(pvalue) and pvalue < best_value and np.all(np.isfinite(px)):
                best_x, best_value = px, pvalue
    theta = base.copy()
    theta[free] = best_x
    grid_theta = base.copy()
    grid_theta[free] = grid_x
    return theta, best_value, converged, grid_theta, grid_value


def fit_scaling_law(
    runs: Runs,
    *,
    fixed: Mapping[str, float] | None = None,
    grid: StartGrid = REPLICATION_GRID,
    delta: float = HUBER_DELTA,
    drop_highest: int = OUTLIERS_DROPPED,
    prune: int = PRUNED_STARTS,
) -> ScalingFit:
    """Fit E, A, B, alpha, beta (those not in `fixed`) to `runs`.

    `prune`: run L-BFGS-B from the `prune` starts of lowest objective only (all of the grid's
    starts are evaluated first, as one array); 0 runs from every start.

    `fixed` holds some constants at given values, e.g. {'E': 1.69} or {'alpha': 0.34, 'beta': 0.28};
    the grid then runs over the free coordinates only. The `drop_highest` highest-loss runs are
    dropped first (the replication drops 5).
    """
    if delta <= 0:
        raise UserError("delta", f"expected a positive Huber threshold, got {delta}")
    kept, dropped = drop_highest_loss(runs, drop_highest)
    held = _fixed_theta(fixed)
    free = np.array([i for i in range(5) if i not in held], dtype=np.int64)
    if len(free) == 0:
        raise UserError("--fix", "expected at least one constant left free to fit")
    if len(kept) < len(free):
        raise UserError(runs.source or "runs", f"expected at least {len(free)} runs to fit {len(free)} constants, "
                        f"got {len(kept)}")
    _check_identifiable(kept, set(int(i) for i in free), runs.source or "runs")
    base = np.zeros(5)
    for i, v in held.items():
        base[i] = v
    starts = grid.points()
    for i, v in held.items():
        starts[:, i] = v
    # collapse starts that differ only in held coordinates
    starts = np.unique(starts, axis=0)
    logs = (np.log(kept.params), np.log(kept.tokens), np.log(kept.loss))
    if prune < 0:
        raise UserError("--starts", f"expected a number of starts >= 0 (0: all), got {prune}")
    chosen = starts
    if 0 < prune < len(starts):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            first = objectives(starts, *logs, delta)
        first = np.where(np.isfinite(first), first, np.inf)
        chosen = starts[np.argsort(first, kind="stable")[:prune]]
    theta, value, converged, grid_theta, grid_value = _minimise_from(chosen, free, base, logs, delta)
    names = {0: "A", 1: "B", 2: "E", 3: "alpha", 4: "beta"}
    fixed_names = tuple(sorted(names[i] for i in held))
    source = (f"fitted to {len(kept)} runs of {runs.source or 'a table'} "
              f"(Huber delta {delta:g} on log loss, L-BFGS-B from {len(chosen)} of {len(starts)} starts"
              + (f", {', '.join(fixed_names)} held" if fixed_names else "") + ")")
    return ScalingFit(
        law=_law_from_theta(theta, source),
        theta=tuple(float(x) for x in theta),  # type: ignore[arg-type]
        objective=value,
        runs_used=len(kept),
        runs_dropped=dropped,
        starts=len(starts),
        converged=converged,
        fixed=fixed_names,
        delta=delta,
        grid_law=_law_from_theta(grid_theta, source + ", grid pass only, scipy's default tolerances"),
        grid_objective=grid_value,
        starts_run=len(chosen),
    )


# ---------------------------------------------------------------- uncertainty


BOOTSTRAP_RESAMPLES = 200
"""Resamples for the standard errors: the replication's notebook uses 200 (`bootstraps = 200`)."""
MAX_BOOTSTRAP_RESAMPLES = 100_000
"""The most resamples (issue 29): each is a Huber refit from several starts, so 10^5 is hours; the
standard errors of 200 already vary by about 5 % (1 / sqrt(2 x 200))."""

BOOTSTRAP_SEED = 42
"""Seed of the resampling RNG (the replication's notebook seeds numpy with 42)."""


@dataclass(frozen=True)
class BootstrapResult:
    """Standard errors of the constants from refits on resampled runs."""

    fit: ScalingFit
    standard_errors: dict[str, float] = field(hash=False)  # E_se, A_se, ... by parameter name
    samples: tuple[ScalingLaw, ...] = field(hash=False)
    resamples: int = 0
    seed: int = BOOTSTRAP_SEED


def bootstrap_scaling_law(
    runs: Runs,
    fit: ScalingFit | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    fixed: Mapping[str, float] | None = None,
    grid: StartGrid | None = None,
    delta: float = HUBER_DELTA,
    drop_highest: int = OUTLIERS_DROPPED,
    progress: Callable[[int], None] | None = None,
) -> BootstrapResult:
    """Refit on `resamples` resamples (with replacement) of the kept runs; the standard error of
    each constant is the standard deviation of its refits (ddof = 1), in the constants' own units
    (E, A, B, not their logs), as the replication reports them.

    Each refit starts from the point estimate (the replication's `init_params = true_params`),
    plus the starts of `grid` if one is given. Seeded: the same seed gives the same errors.
    `progress(done)` is called after each refit (the CLI's progress bar).
    """
    if not 2 <= resamples <= MAX_BOOTSTRAP_RESAMPLES:
        raise UserError("--bootstrap", f"expected 2 to {MAX_BOOTSTRAP_RESAMPLES:,} resamples, got {resamples:,}")
    if fit is None:
        fit = fit_scaling_law(runs, fixed=fixed, delta=delta, drop_highest=drop_highest)
    kept, _ = drop_highest_loss(runs, drop_highest)
    held = _fixed_theta(fixed)
    free = np.array([i for i in range(5) if i not in held], dtype=np.int64)
    base = np.array(fit.theta, dtype=np.float64)
    starts = base[None, :]
    if grid is not None:
        extra = grid.points()
        for i, v in held.items():
            extra[:, i] = v
        starts = np.unique(np.vstack([starts, extra]), axis=0)
    rng = np.random.default_rng(seed)
    log_n, log_d, log_l = np.log(kept.params), np.log(kept.tokens), np.log(kept.loss)
    n = len(kept)
    samples = []
    for _ in range(resamples):
        idx = rng.integers(0, n, size=n)
        theta, *_ = _minimise_from(starts, free, base, (log_n[idx], log_d[idx], log_l[idx]), delta, polish=1)
        samples.append(_law_from_theta(theta, f"bootstrap resample of {runs.source}"))
        if progress is not None:
            progress(len(samples))
    table = np.array([[s.E, s.A, s.B, s.alpha, s.beta] for s in samples])
    se = table.std(axis=0, ddof=1)
    errors = {f"{name}_se": float(v) for name, v in zip(PARAMETER_NAMES, se)}
    for name in fit.fixed:
        errors[f"{name}_se"] = 0.0
    return BootstrapResult(fit=fit, standard_errors=errors, samples=tuple(samples), resamples=resamples, seed=seed)


@dataclass(frozen=True)
class Extrapolation:
    """The fitted law's loss at (N, D) with a bootstrap percentile interval."""

    params: float
    tokens: float
    loss: float
    low: float
    high: float
    level: float


def extrapolate(boot: BootstrapResult, params: float, tokens: float, level: float = 0.95) -> Extrapolation:
    """L(N, D) of the point fit, and the central `level` interval of the bootstrap laws' L(N, D)."""
    require_positive("params", params)
    require_positive("tokens", tokens)
    if not 0 < level < 1:
        raise UserError("level", f"expected a fraction between 0 and 1, got {level}")
    values = np.array([s.loss(params, tokens) for s in boot.samples])
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return Extrapolation(params=params, tokens=tokens, loss=boot.fit.law.loss(params, tokens),
                         low=float(low), high=float(high), level=level)


def fit_summary(boot: BootstrapResult) -> dict[str, float | int | str]:
    """The JSON of `trainplan scaling fit`: E, A, B, alpha, beta, their *_se, and the fit's facts."""
    law = boot.fit.law
    out: dict[str, float | int | str] = {}
    for name in PARAMETER_NAMES:
        out[name] = float(getattr(law, name))
        out[f"{name}_se"] = boot.standard_errors[f"{name}_se"]
    out.update({
        "objective": boot.fit.objective,
        "runs_used": boot.fit.runs_used,
        "runs_dropped": boot.fit.runs_dropped,
        "starts": boot.fit.starts,
        "converged_starts": boot.fit.converged,
        "starts_run": boot.fit.starts_run,
        "bootstrap_resamples": boot.resamples,
        "bootstrap_seed": boot.seed,
        "fixed": ",".join(boot.fit.fixed) or "none (every constant fitted)",
        "source": law.source,
    })
    return out




__all__ = [
    "BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "CHINCHILLA_APPROACH3", "EPOCH_REPLICATION",
    "FLOP_PER_PARAM_TOKEN", "HUBER_DELTA", "OUTLIERS_DROPPED", "PRUNED_STARTS", "REPLICATION_GRID", "SMALL_GRID",
    "BootstrapResult", "ComputeOptimal", "Extrapolation", "Runs", "ScalingFit", "ScalingLaw", "StartGrid",
    "bootstrap_scaling_law", "compute_optimal", "drop_highest_loss", "extrapolate", "fit_scaling_law",
    "fit_summary", "huber", "loss", "loss_floor_at_params", "loss_floor_at_tokens", "make_runs",
    "objective_and_gradient", "objectives", "parse_law", "read_runs",
]
