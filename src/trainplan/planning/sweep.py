"""`trainplan sweep`: the report's figures over a grid of workloads, vectorized with numpy.

A grid is the cartesian product of the values of each varied key
(`--vary KEY=START:STOP[:STEP|xFACTOR]`, or `KEY=a,b,c`). Numeric keys that enter
the formulas as plain arithmetic are evaluated in one numpy call per chunk of the
grid; every other key (the accelerator kind, the access pattern, the ZeRO stage,
any string or switch) is looped over, one workload per distinct value, and the
numeric grid evaluated inside each.

The figures come from planning.evaluate.evaluate, the one evaluation `trainplan plan`
uses too, called with arrays; the columns are the figures planning/figures.py declares
for the sweep. tests/test_sweep.py checks every column against build_report point by point.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
from pydantic import ValidationError

from trainplan.errors import UserError, comma_items, refuse_repeats
from trainplan.planning import evaluate as plan_mod
from trainplan.planning import execution, model_terms
from trainplan.planning import inputs as inputs_mod
from trainplan.planning.figures import FIGURES
from trainplan.planning.inputs import EXECUTION_KEYS, GridRows, PlanInputs
from trainplan.workload.load import load_workload
from trainplan.workload.schema import SECTIONS, Workload, leaf_keys, parse_override_value
from trainplan.workload.codecs import FRAME_KINDS

# Points evaluated per numpy call: bounds the memory of a long sweep (about 100 arrays of this length).
CHUNK_POINTS = 250_000
# Rows the CSV and JSON writers format at a time: their memory is the output and one piece of rows.
ROWS_PER_PIECE = 65_536
# Above this many points a progress bar is drawn on stderr.
PROGRESS_POINTS = 100_000
# Relative slack when deciding whether STOP is on the grid (float steps do not land exactly).
GRID_SLACK = 1e-9
# The most points a sweep may have (a guard against a typo such as 1:1e9).
MAX_POINTS = 50_000_000
# Memory one point costs per column, for the cap derived from the machine's memory (max_points):
# the float64 cell (8 B), its copy when handed to Arrow (8 B), and its text in the CSV or JSON the
# writer builds (~ 10-30 B). Measured from the command line, 1e7 points x 3 columns: CSV peaks at
# 0.60 GB (20 B a cell), JSON at 1.09 GB (36 B a cell) (docs/speed.md); 64 B leaves room.
BYTES_PER_CELL = 64

# Keys evaluated as arrays (planning/inputs.py).
PIPELINE_ARGS, VECTOR_KEYS, SHAPE_KEYS = inputs_mod.PIPELINE_ARGS, inputs_mod.VECTOR_KEYS, inputs_mod.SHAPE_KEYS


@dataclass(frozen=True)
class Axis:
    """One varied key and its values (floats for a numeric key, strings/bools otherwise)."""

    key: str
    values: tuple[Any, ...]
    numeric: bool


# ---------------------------------------------------------------- grid syntax


def _section_field(key: str) -> tuple[type, str]:
    parts = key.split(".")
    if len(parts) != 2 or parts[0] not in SECTIONS or parts[1] not in SECTIONS[parts[0]].model_fields:
        return None, ""  # type: ignore[return-value]
    return SECTIONS[parts[0]], parts[1]


def parse_value(key: str, text: Any) -> Any:
    """One value of `key` as the workload schema reads it (units converted, constraints checked)."""
    section, name = _section_field(key)
    if section is None:
        return text
    try:
        value = getattr(section.model_validate({name: text}), name)
    except ValidationError as err:
        e = err.errors()[0]
        msg = e["msg"].removeprefix("Value error, ")
        shown = f", got {text!r}" if "got" not in msg else ""
        raise UserError("--vary", f"{key}: {msg[0].lower() + msg[1:]}{shown}") from None
    return value


def _value_types(annotation: Any) -> set[type]:
    """The types a field's annotation admits, through Annotated, X | None and unions; a Literal's values'
    own types (serving.dtype's 'int8' is text, not an int: a substring test of the annotation read it as one)."""
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return {type(v) for v in typing.get_args(annotation)}
    if origin is typing.Annotated:
        return _value_types(typing.get_args(annotation)[0])
    if origin is not None and typing.get_args(annotation):
        return {t for arg in typing.get_args(annotation) for t in _value_types(arg)}
    return {annotation} if isinstance(annotation, type) else set()


def _is_whole(key: str) -> bool:
    section, name = _section_field(key)
    if section is None:
        return False
    return int in _value_types(section.model_fields[name].annotation) - {bool}


def _is_numeric_key(key: str) -> bool:
    section, name = _section_field(key)
    if section is None:
        return False
    types = _value_types(section.model_fields[name].annotation) - {type(None)}
    return bool(types) and types <= {int, float}


def parse_vary(spec: str) -> Axis:
    """KEY=START:STOP[:STEP|xFACTOR] (STOP included, STEP 1 by default) or KEY=a,b,c."""
    if "=" not in spec:
        raise UserError("--vary", f"expected KEY=START:STOP[:STEP] or KEY=a,b,c, got {spec!r}")
    key, _, grid = (s.strip() for s in spec.partition("="))
    known = set(leaf_keys())
    if key not in known and not key.startswith("cluster.accelerator."):
        import difflib

        near = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UserError("--vary", f"unknown workload key {key!r}{hint}")
    if not grid:
        raise UserError("--vary", f"{key}: expected values after '='")
    numeric = _is_numeric_key(key) or key.startswith("cluster.accelerator.")
    if ":" in grid:
        if not numeric:
            raise UserError("--vary", f"{key}: not a number; give its values as a list a,b,c")
        return Axis(key, tuple(_range(key, grid)), True)
    items = comma_items("--vary", grid, f"{key}: expected values")
    if len(items) > MAX_POINTS:
        raise UserError("--vary", f"{key}: {len(items):,} values; expected at most {MAX_POINTS:,}")
    if numeric and not key.startswith("cluster.accelerator."):
        values = tuple(float(parse_value(key, s)) for s in items)
    else:
        if not key.startswith("cluster.accelerator."):
            # each value is checked as --set would read it, here, so a value the key never takes is a
            # refusal naming the key, not a row marked "no plan" (those are rules between keys: a layout)
            for item in items:
                parse_value(key, parse_override_value(item))
        if key == "cluster.accelerator":  # each name in the catalogue: a typo is refused, not a row of n/a
            from trainplan.catalogue.accelerators import resolve_accelerator

            for item in items:
                resolve_accelerator(item, f"--vary {key}")
        values = tuple(items)
    # names differ only in case are one value ("h100-sxm,H100-SXM", "fr,FR"): the same row twice
    refuse_repeats(f"--vary {key}", tuple(v.lower() if isinstance(v, str) else v for v in values), grid)
    return Axis(key, values, numeric and not key.startswith("cluster.accelerator."))


def _range(key: str, grid: str) -> list[float]:
    parts = [p.strip() for p in grid.split(":")]
    if len(parts) not in (2, 3) or not all(parts):
        raise UserError("--vary", f"{key}: expected START:STOP[:STEP|xFACTOR], got {grid!r}")
    if key.startswith("cluster.accelerator."):
        from trainplan import units
        from trainplan.catalogue.accelerators import ACCELERATOR_FIGURES

        dim = ACCELERATOR_FIGURES.get(key.rsplit(".", 1)[1], "count")
        conv: Callable[[str], float] = lambda s: units.parse(s, dim, key)  # noqa: E731
    else:
        conv = lambda s: float(parse_value(key, s))  # noqa: E731
    start, stop = conv(parts[0]), conv(parts[1])
    if stop < start:
        raise UserError("--vary", f"{key}: expected STOP ({parts[1]}) no smaller than START ({parts[0]})")
    if len(parts) == 3 and parts[2][:1] in "xX*":
        try:
            factor = float(parts[2][1:])
        except ValueError:
            raise UserError("--vary", f"{key}: expected a factor such as x2, got {parts[2]!r}") from None
        if not factor > 1:
            raise UserError("--vary", f"{key}: expected a factor above 1, got {parts[2]!r}")
        if start <= 0:
            raise UserError("--vary", f"{key}: a geometric grid needs START above 0, got {parts[0]!r}")
        n = int(math.floor(math.log(stop / start) / math.log(factor) + GRID_SLACK)) + 1
        _check_count(key, n)
        values = start * factor ** np.arange(n)
        if _is_whole(key):
            values = np.unique(np.round(values))
    else:
        step = conv(parts[2]) if len(parts) == 3 else 1.0
        if not step > 0:
            raise UserError("--vary", f"{key}: expected a STEP above 0, got {parts[2]!r}")
        span = (stop - start) / step + GRID_SLACK
        if not math.isfinite(span):
            raise UserError("--vary", f"{key}: expected a STEP that divides STOP - START into at most "
                            f"{MAX_POINTS:,} values, got {grid!r}")
        n = int(math.floor(span)) + 1
        _check_count(key, n)  # counted before any array of them is built
        values = start + step * np.arange(n)
    if _is_whole(key) and np.any(values != np.floor(values)):
        raise UserError("--vary", f"{key}: expected whole numbers, got {grid!r}")
    return np.asarray(values, dtype=np.float64).tolist()  # one C loop, not 10^6 float() calls


def _check_count(key: str, n: int) -> None:
    if n > MAX_POINTS:
        count = f"{n:,}" if n < 10**15 else "more than 10^15"
        raise UserError("--vary", f"{key}: {count} values; expected at most {MAX_POINTS:,}")


def max_points(columns: int) -> int:
    """The most points a sweep of `columns` columns may have on this machine: the memory budget
    (trainplan.machine.budget_bytes: half the available memory, TRAINPLAN_MEMORY_BYTES to change it)
    over BYTES_PER_CELL a cell, and never above MAX_POINTS."""
    from trainplan import machine

    return max(1, min(MAX_POINTS, machine.budget_bytes() // (BYTES_PER_CELL * max(columns, 1))))


def _check_memory(axes: list[Axis], figures: list[str] | None) -> None:
    """Refuse, naming the key with the most values, a grid whose columns would not fit in memory."""
    total = math.prod(len(a.values) for a in axes)
    columns = len(axes) + (len(figures) if figures else sum(1 for f in FIGURES.values() if f.sweep))
    cap = max_points(columns)
    if total > cap:
        from trainplan import machine

        widest = max(axes, key=lambda a: len(a.values))
        shape = " x ".join(f"{len(a.values):,}" for a in axes)
        raise UserError("--vary", f"{widest.key}: {shape} = {total:,} points of {columns} columns; expected at "
                        f"most {cap:,} (half of this machine's {machine.available_memory_bytes() / 2**30:.1f} GiB "
                        f"available at {BYTES_PER_CELL} B a cell; fewer --figures, or {machine.MEMORY_ENV} "
                        f"to change it)")


# ---------------------------------------------------------------- evaluation


def _vectorizable(w: Workload, axis: Axis, probe: Callable[[str], Workload]) -> bool:
    """Whether `axis` can be evaluated as an array on top of `w`. Model keys are arrays only when
    setting them changes that figure alone (a user's model does not inherit the default shape, so
    naming one may change the others: then the key is looped)."""
    key = axis.key
    if not axis.numeric or key not in VECTOR_KEYS | SHAPE_KEYS:
        return False
    if key == "training.seq_len":
        return False  # the sequence shapes the FLOPs per token and the activations: per workload
    model = plan_mod.resolve_model(w)
    if key in model_terms.SCALAR_KEYS and model_terms.architecture_known(w, model.count):
        return False  # the architecture's activations and FLOPs are evaluated per workload (issue 12)
    if key in execution.FIT_KEYS and execution.micro_batch_is_chosen(w, model):
        return False  # the micro-batch chosen to fit depends on it: per workload
    if key.startswith("model.") and execution.has_shape(model):
        # the shape feeds the execution model (activations, attention FLOPs, a predicted step): per workload
        return False
    if not key.startswith("model."):
        return True
    if not _count_is_params(w):
        return False
    other = probe(f"{key}={_override(axis.values[0])}")
    same = all(getattr(other.model, n) == getattr(w.model, n)
               for n in ("params", "layers", "width", "vocab", "hf_config", "family") if n != key.split(".")[1])
    return same and _count_is_params(other)


def _count_is_params(w: Workload) -> bool:
    """model.params is the count and the shape only sizes activations (plan.resolve_model)."""
    m = w.model
    return m.params is not None and m.hf_config is None and m.vocab is None and m.family == "standard"


def evaluate(w: Workload, arrays: dict[str, np.ndarray], figures: list[str] | None = None,
             grid: GridRows | None = None) -> dict[str, np.ndarray]:
    """The sweep's figures (planning/figures.py, `sweep=True`) for workload `w` with the keys in
    `arrays` replaced by arrays of one length: planning.evaluate.evaluate, broadcast to columns.
    With `figures`, only the accounts those figures need are computed; `grid` says the arrays are rows
    of a product grid (the execution model then runs once per combination of its own keys)."""
    inputs = PlanInputs.of(w, arrays, grid=grid)
    values = plan_mod.evaluate(inputs, [f for f in figures if f not in arrays] if figures else None)
    keep = {k: v for k, v in values.items() if (FIGURES[k].sweep if k in FIGURES else True)}
    return {k: np.broadcast_to(np.asarray(v), (inputs.length,)) for k, v in keep.items()}


# ---------------------------------------------------------------- the grid


@dataclass
class SweepResult:
    """Columns of equal length: the varied keys, then the figures by dotted name."""

    keys: list[str]
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def _fill_grid(columns: dict[str, np.ndarray], axes: list[Axis], start: int) -> None:
    """Write the grid of `axes` (last axis fastest) into columns[key][start:start + its size]: each
    axis's values broadcast over the grid's shape, one pass per column and no index arrays."""
    shape = tuple(len(a.values) for a in axes)
    stop = start + math.prod(shape)
    for i, a in enumerate(axes):
        along = [1] * len(shape)
        along[i] = shape[i]
        column = columns[a.key]
        column[start:stop].reshape(shape)[...] = np.asarray(a.values, column.dtype).reshape(along)


def _override(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _check_configs(base: Any, axes: list[Axis]) -> None:
    """Each config.json a sweep varies, read as --set would read it: a missing or broken one is refused
    before the grid, not shown as a row of no plan (issue 29)."""
    from trainplan.workload.params import load_hf_config

    for axis in axes:
        if axis.key != "model.hf_config":
            continue
        for value in axis.values:
            try:
                load_hf_config(base.base_dir / str(value))
            except UserError as err:
                raise UserError(f"--vary model.hf_config ({value})", err.expected) from None


def sweep(file: Any, sets: list[str], varies: list[str], calibration: Any = None,
          figures: list[str] | None = None, progress: bool | None = None) -> SweepResult:
    """Evaluate the report's figures at every point of the grid given by `varies`."""
    axes = _grid_axes(varies, figures)  # before any workload is read or column allocated
    names = [a.key for a in axes]
    base = load_workload(file, sets, calibration)
    looped = [a for a in axes if not _vectorizable(base, a, lambda extra: load_workload(file, list(sets) + [extra],
                                                                                        calibration))]
    vector = [a for a in axes if a not in looped]
    total = math.prod(len(a.values) for a in axes)
    per_combo = math.prod(len(a.values) for a in vector)
    _check_vector_values(base, vector)
    _check_configs(base, axes)

    keys = names
    # The rows are written straight into the order the axes were given (the first --vary slowest),
    # though looped axes are evaluated outermost: where that differs, each chunk's rows go to their
    # places (no reordering copy of every column at the end, issue 29).
    reorder = [a.key for a in looped + vector] != names
    shape = tuple(len(a.values) for a in axes)
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]  # elements, C order, given order
    where = {a.key: i for i, a in enumerate(axes)}
    vector_shape = tuple(len(a.values) for a in vector)
    # the varied keys' columns first, each written once; the figures' columns on the first chunk,
    # when their dtypes are known
    columns: dict[str, np.ndarray] = {a.key: np.empty(total, dtype=_dtype(a.values[0])) for a in axes}
    if reorder:
        _fill_grid(columns, axes, 0)
    figure_keys: list[str] | None = None
    # the vector axes as a product grid, for the execution model's keys among them (PlanInputs.grid):
    # their values as arrays once, not once a chunk (10^7 values would be converted 40 times)
    vector_keys = tuple(a.key for a in vector)
    vector_values = tuple(np.asarray(a.values, float) for a in vector) if set(vector_keys) & EXECUTION_KEYS else ()
    offset = 0
    no_plan: list[tuple[int, str]] = []  # (offset, reason) of combinations that have no plan (a layout they break)
    show = progress if progress is not None else total > PROGRESS_POINTS
    with _progress(total, show) as advance:
        for picks in itertools.product(*(range(len(a.values)) for a in looped)):
            combo = tuple(a.values[i] for a, i in zip(looped, picks))
            extra = [f"{a.key}={_override(v)}" for a, v in zip(looped, combo)]
            if not reorder:
                for a, v in zip(looped, combo):
                    columns[a.key][offset:offset + per_combo] = v
                if vector:
                    _fill_grid(columns, vector, offset)
            base_place = sum(i * strides[where[a.key]] for a, i in zip(looped, picks))
            try:
                w = load_workload(file, list(sets) + extra, calibration) if extra else base
            except UserError as err:  # this combination breaks a rule (a layout that does not divide): no plan
                rows_at: Any = slice(offset, offset + per_combo)
                if reorder:
                    _, rows_at = _rows_in_given_order(0, per_combo, base_place, vector, vector_shape, strides, where)
                no_plan.append((rows_at, f"{err.where}: {err.expected}"))
                offset += per_combo
                advance(per_combo)
                continue
            for start in range(0, per_combo, CHUNK_POINTS):
                n = min(per_combo - start, CHUNK_POINTS)
                place: Any = slice(offset, offset + n)
                if reorder:  # the chunk's grid gathered, and the rows' places in the given order
                    picked, place = _rows_in_given_order(start, n, base_place, vector, vector_shape, strides, where)
                    arrays = {a.key: np.asarray(a.values, float)[ix] for a, ix in zip(vector, picked)}
                    grid = None
                else:  # the chunk's grid: views of the key columns, not copies
                    arrays = {a.key: columns[a.key][offset:offset + n] for a in vector}
                    grid = GridRows(vector_keys, vector_values, start, n) if vector_values else None
                figs = evaluate(w, arrays, figures, grid)
                figure_keys = _store_figures(columns, figure_keys, figs, place, total, figures, keys,
                                             {**dict(zip((a.key for a in looped), combo)), **arrays})
                offset += n
                advance(n)
    if no_plan:
        _mark_no_plan(columns, figure_keys, no_plan, total)
        figure_keys = [*(figure_keys or []), "no_plan"]
    return SweepResult(keys, {k: columns[k] for k in [*keys, *(figure_keys or [])]})


def _grid_axes(varies: list[str], figures: list[str] | None) -> list[Axis]:
    """The axes of `varies`, checked: at least one, each key once, at most MAX_POINTS points, room in memory."""
    axes = [parse_vary(v) for v in varies]
    if not axes:
        raise UserError("--vary", "expected at least one KEY=START:STOP[:STEP]")
    names = [a.key for a in axes]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise UserError("--vary", f"each key may be varied once, got {twice} twice")
    _check_figures(figures, names)
    total = math.prod(len(a.values) for a in axes)
    if total > MAX_POINTS:
        raise UserError("--vary", f"{total:,} points; expected at most {MAX_POINTS:,}")
    _check_memory(axes, figures)
    return axes


def _rows_in_given_order(start: int, n: int, base_place: int, vector: list[Axis], vector_shape: tuple[int, ...],
                         strides: list[int], where: dict[str, int]) -> tuple[Any, np.ndarray]:
    """(each vector axis's value index, the row in the given order) of points start .. start + n - 1 of a
    combination of the looped axes, whose first row in the given order is `base_place`."""
    picked = np.unravel_index(np.arange(start, start + n), vector_shape) if vector else ()
    place = np.full(n, base_place, dtype=np.int64)
    for a, ix in zip(vector, picked):
        place += ix * strides[where[a.key]]
    return picked, place


def _store_figures(columns: dict[str, np.ndarray], figure_keys: list[str] | None, figs: dict[str, Any], place: Any,
                   total: int, figures: list[str] | None, keys: list[str], varied: dict[str, Any]) -> list[str]:
    """The figures' keys, after a chunk's figures are written to their rows of `columns` (made on the first)."""
    if figure_keys is None:
        cols = {**varied, **figs}
        figure_keys = [k for k in _wanted(cols, keys, figures) if k not in columns]
        columns.update({k: np.empty(total, dtype=_dtype(figs[k])) for k in figure_keys})
    elif not figures:  # a looped key (data.kind) brings figures the first chunk had not: blank before
        for k in (k for k in figs if k not in columns):
            columns[k] = _blank_column(total, figs[k])
            figure_keys.append(k)
    for k in figure_keys:
        if k in figs:
            columns[k][place] = figs[k]  # a scalar or a broadcast view: no temporary copy
        else:  # a figure this configuration has not (a video bill on a token run): blank
            columns[k] = _blank_rows(columns[k], place)
    return figure_keys


def _mark_no_plan(columns: dict[str, np.ndarray], figure_keys: list[str] | None, no_plan: list[tuple[Any, str]],
                  total: int) -> None:
    """Rows of combinations without a plan: numbers NaN (null in JSON, empty in CSV), flags false, and a
    `no_plan` column that says why (empty where there is a plan)."""
    if figure_keys is None:
        raise UserError("--vary", f"no configuration of the grid has a plan; the first: {no_plan[0][1]}")
    reasons = np.full(total, "", dtype=object)
    for rows_at, why in no_plan:
        reasons[rows_at] = why
        for k in figure_keys:
            col = columns[k]
            col[rows_at] = np.nan if col.dtype.kind == "f" else False if col.dtype.kind == "b" else ""
    columns["no_plan"] = reasons


def _blank_column(total: int, value: Any) -> np.ndarray:
    """A column first met after some rows were written: blank (NaN, or None) until its rows are."""
    dtype = _dtype(value)
    if dtype == np.float64:
        return np.full(total, np.nan)
    return np.full(total, None, dtype=object)


def _blank_rows(col: np.ndarray, place: Any) -> np.ndarray:
    """`col` with the rows at `place` blank: NaN for numbers, None otherwise (a flag becomes an object column,
    since a missing flag is neither true nor false)."""
    if col.dtype.kind != "f" and col.dtype != object:
        col = col.astype(object)
    col[place] = np.nan if col.dtype.kind == "f" else None
    return col


def _dtype(value: Any) -> Any:
    """Column dtype of a chunk's value: object for strings (the accelerator, the bottleneck), else its own."""
    if isinstance(value, str):
        return object
    dtype = np.asarray(value).dtype
    if dtype.kind in "OUS":
        return object
    return np.float64 if dtype.kind in "iuf" else dtype  # a count constant in one chunk may vary in the next


def _check_figures(figures: list[str] | None, keys: list[str]) -> None:
    """UserError naming --figures for a name that is neither a varied key nor a figure a sweep writes
    (planning/figures.py, `sweep=True`): checked before any point is evaluated."""
    from trainplan.errors import did_you_mean

    known = [*keys, *(k for k, f in FIGURES.items() if f.sweep)]
    for name in figures or []:
        if name not in known:
            raise UserError("--figures", f"unknown figure {name!r}{did_you_mean(name, known)}; expected a varied key "
                            f"or one of the {len(known) - len(keys)} figures a sweep writes (a sweep without "
                            "--figures lists them all in its header)")


def _wanted(cols: dict[str, Any], keys: list[str], figures: list[str] | None) -> list[str]:
    """The columns written: the varied keys, then the requested figures (all by default)."""
    if figures:
        _check_figures([f for f in figures if f not in cols], keys)
        return keys + [f for f in figures if f not in keys]
    return keys + [k for k in cols if k not in keys]


def _check_vector_values(w: Workload, vector: list[Axis]) -> None:
    """Cross-field rules of the workload that a single value cannot break (patch <= side)."""
    keys = {a.key: np.asarray(a.values) for a in vector}
    if w.data.kind in FRAME_KINDS and ("data.side" in keys or "data.patch" in keys):
        side = keys.get("data.side", np.asarray([w.data.side])).min()
        patch = keys.get("data.patch", np.asarray([w.data.patch])).max()
        if patch > side:
            raise UserError("--vary", f"data.patch: expected a patch no larger than data.side "
                            f"({side:g} px), got {patch:g} px")


class _progress:
    """A rich progress bar on stderr for long sweeps; a no-op otherwise."""

    def __init__(self, total: int, show: bool) -> None:
        self.total, self.show, self.bar = total, show, None

    def __enter__(self) -> Callable[[int], None]:
        if not self.show:
            return lambda n: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.__enter__()
        task = self.bar.add_task("sweep", total=self.total)
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


# ---------------------------------------------------------------- output


def _to_arrow(result: SweepResult, finite_only: bool = False):  # noqa: ANN202 - pyarrow.Table
    """The rows as an Arrow table; `finite_only`: a non-finite float becomes an empty (null) field,
    as JSON writes null (a CSV is read by people: no inf or nan in it)."""
    import pyarrow as pa

    data = {}
    for k, v in result.columns.items():
        if v.dtype == object or v.dtype.kind in "US":
            data[k] = pa.array([str(x) for x in v])
        elif finite_only and v.dtype.kind == "f":
            arr = np.ascontiguousarray(v)
            data[k] = pa.array(arr, mask=~np.isfinite(arr))
        else:
            data[k] = pa.array(np.ascontiguousarray(v))
    return pa.table(data)


def to_csv(result: SweepResult) -> bytes:
    """CSV of the rows: Arrow's writer where pyarrow is installed (the `parquet` extra), else a
    vectorised numpy formatter; both write floats so that they read back to the same value."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return _csv_numpy(result)
    table = _to_arrow(result, finite_only=True)
    sink = pa.BufferOutputStream()
    # a batch of rows a call, not the whole table in one: Ctrl-C and SIGTERM are answered between calls, where
    # one call over 10^6 rows of 85 figures held them for 10 s
    with pacsv.CSVWriter(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=ROWS_PER_PIECE):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _csv_fields(column: np.ndarray) -> list[str]:
    """One column as CSV fields: shortest round-trip floats, true/false, strings quoted where needed."""
    if column.dtype == bool:
        return ["true" if v else "false" for v in column.tolist()]
    if column.dtype.kind in "iuf":  # repr reads back to the same float; a non-finite one is an empty field
        return [repr(v) if math.isfinite(v) else "" for v in column.astype(np.float64).tolist()]
    out = []
    for v in map(str, column.tolist()):
        out.append('"' + v.replace('"', '""') + '"' if ("," in v or '"' in v or "\n" in v) else v)
    return out


def _pieces(result: SweepResult) -> Iterator[dict[str, np.ndarray]]:
    """The rows ROWS_PER_PIECE at a time (views of the columns)."""
    for lo in range(0, len(result), ROWS_PER_PIECE):
        yield {k: v[lo:lo + ROWS_PER_PIECE] for k, v in result.columns.items()}


def _csv_numpy(result: SweepResult) -> bytes:
    """CSV without pyarrow: each column of a piece of rows formatted at once, the piece's rows joined and
    encoded (about 1 s per 6 million fields); the text of one piece at a time, not of every row."""
    import io

    header = ",".join(f'"{k}"' for k in result.columns)
    out = io.BytesIO()  # grows in place; getvalue() hands over its buffer without a copy
    out.write((header + "\n").encode("utf-8"))
    for piece in _pieces(result):
        fields = [_csv_fields(np.asarray(v)) for v in piece.values()]
        out.write(("\n".join(map(",".join, zip(*fields))) + "\n").encode("utf-8"))
    return out.getvalue()


def to_parquet(result: SweepResult) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("--format", "parquet needs pyarrow: pip install 'trainplan[parquet]' "
                        "(csv and json need nothing more)") from None

    sink = pa.BufferOutputStream()
    pq.write_table(_to_arrow(result), sink)
    return sink.getvalue().to_pybytes()


def to_json(result: SweepResult) -> bytes:
    """A JSON array of the rows, one object a line, built a piece of rows at a time (UTF-8, ending in a
    newline): its memory is the text, once, and one piece's objects, not an object per row."""
    import json

    from trainplan.quantities import json_safe

    import io

    encode = json.JSONEncoder(allow_nan=False).encode
    out = io.BytesIO()  # grows in place; getvalue() hands over its buffer without a copy
    out.write(b"[")
    first = True
    for piece in _pieces(result):
        cols = {k: v.tolist() for k, v in piece.items()}
        m = len(next(iter(cols.values())))
        out.write(b"\n" if first else b",\n")
        first = False
        out.write(",\n".join(encode(json_safe({k: cols[k][i] for k in cols})) for i in range(m)).encode("utf-8"))
    out.write(b"]\n" if first else b"\n]\n")
    return out.getvalue()


def rows(result: SweepResult) -> Iterator[dict[str, Any]]:
    for i in range(len(result)):
        yield {k: v[i] for k, v in result.columns.items()}


def plot(result: SweepResult, figure: str, against: str, fmt: str = "svg") -> bytes:
    """One figure against one varied key; one line per combination of the other varied keys."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if against not in result.keys:
        raise UserError("--against", f"expected one of the varied keys ({', '.join(result.keys)}), got {against!r}")
    if figure not in result.columns or result.columns[figure].dtype == object:
        numeric = [k for k, v in result.columns.items() if v.dtype != object and k not in result.keys]
        raise UserError("--plot", f"expected a numeric figure such as {', '.join(numeric[:4])}, got {figure!r}")
    others = [k for k in result.keys if k != against]
    x = np.asarray(result.columns[against], float)
    y = np.asarray(result.columns[figure], float)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if others:
        labels = np.array([", ".join(f"{k}={_override(result.columns[k][i])}" for k in others)
                           for i in range(len(result))]) if len(result) <= 200_000 else None
        groups = list(dict.fromkeys(labels)) if labels is not None else []
        if labels is not None and len(groups) <= 12:
            for g in groups:
                m = labels == g
                ax.plot(x[m], y[m], marker=".", label=g)
            ax.legend(fontsize=7)
        else:
            ax.scatter(x, y, s=2, alpha=0.4)
    else:
        ax.plot(x, y, marker=".")
    ax.set_xlabel(against)
    ax.set_ylabel(figure)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    plt.close(fig)
    return buf.getvalue()
