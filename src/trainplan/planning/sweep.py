"""`trainplan sweep`: the report's figures over a grid of workloads, vectorized with numpy.

A grid is the cartesian product of the values of each varied key
(`--vary KEY=START:STOP[:STEP|xFACTOR]`, or `KEY=a,b,c`). Numeric keys that enter
the formulas as plain arithmetic are evaluated in one numpy call per chunk of the
grid; every other key (the accelerator kind, the access pattern, the ZeRO stage,
any string or switch) is looped over, one workload per distinct value, and the
numeric grid evaluated inside each.

The figures come from the same pure functions the plan uses (compute.training_flops,
memory.sharded_state / activation_bytes / retained_tensors / usable_memory,
network.ring_allreduce_bytes, storage.storage_account, pipeline.pipeline_arrays,
bill.over_epochs), compute.compute_account, memory.memory_account,
network.network_account and bill.bill_per_hour, all of which take arrays;
tests/test_sweep.py checks every column against plan.build_report point by point.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
from pydantic import ValidationError

from trainplan.accounts import bill as bill_mod
from trainplan.accounts import compute as compute_mod
from trainplan.accounts import memory as memory_mod
from trainplan.accounts import network as network_mod
from trainplan.accounts import pipeline as pipeline_mod
from trainplan.planning import evaluate as plan_mod
from trainplan.planning import model_terms
from trainplan.accounts import storage as storage_mod
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.errors import UserError
from trainplan.workload.schema import SECTIONS, Workload, leaf_keys, leaf_value, load_workload

# Points evaluated per numpy call: bounds the memory of a long sweep (about 100 arrays of this length).
CHUNK_POINTS = 250_000
# Above this many points a progress bar is drawn on stderr.
PROGRESS_POINTS = 100_000
# Relative slack when deciding whether STOP is on the grid (float steps do not land exactly).
GRID_SLACK = 1e-9
# The most points a sweep may have (a guard against a typo such as 1:1e9).
MAX_POINTS = 50_000_000

# Numeric workload keys evaluated as arrays, and the pipeline_arrays argument each one is (if any).
PIPELINE_ARGS: dict[str, str] = {
    "cluster.mfu": "mfu", "cluster.cores": "cores", "cluster.core_fps_1080p": "core_fps_1080p",
    "cluster.nvdec_fps_1080p": "nvdec_fps_1080p", "cluster.link": "link",
    "cluster.host_to_device": "host_to_device", "data.width": "width", "data.height": "height",
    "data.fps": "fps", "data.cameras": "cameras", "data.bitrate": "bitrate", "data.gop": "gop",
    "data.side": "side", "data.patch": "patch", "data.bytes_per_token": "bytes_per_token",
    "data.tokenizer_rate": "tokenizer_rate",
}
VECTOR_KEYS: frozenset[str] = frozenset(PIPELINE_ARGS) | frozenset({
    "model.params", "training.tokens", "training.micro_batch", "training.seq_len", "training.grad_accum",
    "training.saved_tensors_per_layer", "training.selective_keep", "training.epochs",
    "cluster.count", "cluster.scaling_efficiency", "cluster.interconnect", "cluster.runtime_buffers",
    "cluster.headroom", "data.hours",
    "storage.checkpoints_kept", "storage.write_rate", "storage.save_every", "storage.exports", "storage.copies",
    "prices.accelerator_hour", "prices.core_hour", "prices.storage_gb_month", "prices.transfer_gb",
    "prices.storage_months", "prices.data_hour",
})
# Shape keys: arrays only while the count is model.params and the shape sizes activations alone.
SHAPE_KEYS: frozenset[str] = frozenset({"model.layers", "model.width"})


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
        raise UserError("--vary", f"{key}: {msg[0].lower() + msg[1:]}, got {text!r}") from None
    return value


def _is_whole(key: str) -> bool:
    section, name = _section_field(key)
    if section is None:
        return False
    return "int" in str(section.model_fields[name].annotation)


def _is_numeric_key(key: str) -> bool:
    section, name = _section_field(key)
    if section is None:
        return False
    ann = str(section.model_fields[name].annotation)
    return ("float" in ann or "int" in ann) and "str" not in ann and "bool" not in ann


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
    items = [s.strip() for s in grid.split(",") if s.strip()]
    if numeric and not key.startswith("cluster.accelerator."):
        values = tuple(float(parse_value(key, s)) for s in items)
    else:
        values = tuple(items)
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
        values = start * factor ** np.arange(n)
        if _is_whole(key):
            values = np.unique(np.round(values))
    else:
        step = conv(parts[2]) if len(parts) == 3 else 1.0
        if not step > 0:
            raise UserError("--vary", f"{key}: expected a STEP above 0, got {parts[2]!r}")
        n = int(math.floor((stop - start) / step + GRID_SLACK)) + 1
        values = start + step * np.arange(n)
    if n > MAX_POINTS:
        raise UserError("--vary", f"{key}: {n:,} values; expected at most {MAX_POINTS:,}")
    if _is_whole(key) and np.any(values != np.floor(values)):
        raise UserError("--vary", f"{key}: expected whole numbers, got {grid!r}")
    return [float(v) for v in values]


# ---------------------------------------------------------------- evaluation


def _vectorizable(w: Workload, axis: Axis, probe: Callable[[str], Workload]) -> bool:
    """Whether `axis` can be evaluated as an array on top of `w`. Model keys are arrays only when
    setting them changes that figure alone (a user's model does not inherit the default shape, so
    naming one may change the others: then the key is looped)."""
    key = axis.key
    if not axis.numeric or key not in VECTOR_KEYS | SHAPE_KEYS:
        return False
    if key in model_terms.SCALAR_KEYS and model_terms.architecture_known(w, plan_mod.resolve_model(w).count):
        return False  # the architecture's activations and FLOPs are evaluated per workload (issue 12)
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


def evaluate(w: Workload, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every figure of the report for workload `w` with the keys in `arrays` replaced by arrays
    (all of one length). Returns {dotted figure name: array}."""
    model = plan_mod.resolve_model(w)
    t, c, d = w.training, w.cluster, w.data
    acc = w.accelerator
    length = len(next(iter(arrays.values()))) if arrays else 1

    def get(key: str) -> Any:
        if key in arrays:
            return arrays[key]
        return leaf_value(w, key)

    f = np.float64
    params = np.asarray(get("model.params") if "model.params" in arrays else model.params, f)
    active = params * (model.active_params / model.params) if "model.params" in arrays else \
        np.asarray(model.active_params, f)
    count = np.asarray(get("cluster.count"), f)
    mfu = np.asarray(get("cluster.mfu"), f)
    peak = acc.peak(t.precision)

    # the pipeline first: its figures feed the tokens (video), the wall time and the bill
    changes = {arg: arrays[key] for key, arg in PIPELINE_ARGS.items() if key in arrays}
    changes["params"] = active
    p = pipeline_mod.pipeline_arrays(**plan_mod.pipeline_inputs(w, model, **changes))

    if "training.tokens" in arrays or t.tokens is not None:
        tokens = np.asarray(get("training.tokens"), f)
    else:  # plan.training_tokens: data.hours of every camera at n tokens a frame, times epochs
        tokens = np.asarray(get("data.hours"), f) * p["tokens_per_hour"] * np.asarray(get("training.epochs"), f)

    # compute (SPEC §3)
    terms = model_terms.evaluate(w, model)  # issue 12: scalars here (their keys are looped)
    comp = compute_mod.compute_account(
        active, tokens, count, np.asarray(get("training.micro_batch"), f), np.asarray(get("training.seq_len"), f),
        np.asarray(get("training.grad_accum"), f), peak, mfu if c.hfu is None else terms.utilisation,
        np.asarray(get("cluster.scaling_efficiency"), f), t.recompute, c.mfu_end_to_end,
        flops_per_token=terms.rate_flops_per_token)
    flops, rate, tokens_per_step, steps = comp.flops, comp.sustained_flops, comp.tokens_per_step, comp.steps
    seconds, seconds_per_step = comp.seconds, comp.seconds_per_step
    wall = pipeline_mod.wall_seconds(seconds, p["busy"])

    # memory (SPEC §4)
    state = state_bytes_per_param(t.precision, t.optimizer)
    layers = get("model.layers") if "model.layers" in arrays else model.layers
    width = get("model.width") if "model.width" in arrays else model.width
    if width is not None and layers is not None:
        k = memory_mod.retained_tensors(np.asarray(get("training.saved_tensors_per_layer"), f), t.recompute,
                                        np.asarray(get("training.selective_keep"), f))
        activations = memory_mod.activation_bytes(
            np.asarray(get("training.micro_batch"), f), np.asarray(get("training.seq_len"), f),
            np.asarray(width, f), np.asarray(layers, f), bytes_per_element(t.precision), k)
    else:
        activations = np.zeros(1)
    buffers = np.asarray(get("cluster.runtime_buffers"), f)
    if not terms.activations_source.startswith("b S d L k"):
        activations = np.asarray(terms.activations, f)
    st, _, _ = model_terms.state_for(w, model, params, count)
    mem = memory_mod.memory_account_from_state(st.weights_bytes, st.grads_bytes, st.optimizer_bytes,
                                               st.gathered_bytes, params, state.weights, state.total, activations,
                                               buffers, np.asarray(get("cluster.headroom"), f), acc.memory)

    # network (SPEC §5)
    link_rate = np.asarray(get("cluster.interconnect") if get("cluster.interconnect") is not None
                           else acc.interconnect, f)
    net = network_mod.network_account(params, state.grads, count, link_rate, seconds_per_step,
                                      compute_mod.backward_share(t.recompute))

    # storage (SPEC §6)
    if d.kind == "video":
        per_token = p["decoded_bytes_per_token"] if d.access == "decoded" else p["stored_bytes_per_token"]
        data_bytes = np.asarray(get("data.hours"), f) * p["frames_per_hour"] * per_token * p["tokens_per_frame"]
    else:
        data_bytes = tokens / np.asarray(get("training.epochs"), f) * np.asarray(get("data.bytes_per_token"), f)
    with np.errstate(divide="ignore", invalid="ignore"):
        sto = storage_mod.storage_account(
            data_bytes, params, state.restart, np.asarray(get("storage.checkpoints_kept"), f), state.weights,
            np.asarray(get("storage.exports"), f), np.asarray(get("storage.copies"), f),
            np.asarray(get("storage.write_rate"), f), np.asarray(get("storage.save_every"), f), wall,
            np.asarray(get("training.epochs"), f))

    # bill (SPEC §9), per hour of data moved once
    bill = _bill_arrays(w, p, np.asarray(get("cluster.cores"), f), get, "prices.data_hour" in arrays)

    out: dict[str, Any] = {
        "compute.flops": flops, "compute.steps": steps, "compute.seconds": seconds,
        "compute.seconds_per_step": seconds_per_step, "compute.tokens_per_step": tokens_per_step,
        "compute.sustained_flops": rate, "compute.wall_seconds": wall,
        "memory.state_bytes": mem.state_bytes, "memory.weights_bytes": mem.weights_bytes,
        "memory.grads_bytes": mem.grads_bytes, "memory.optimizer_bytes": mem.optimizer_bytes,
        "memory.activation_bytes": mem.activation_bytes, "memory.runtime_buffers": mem.runtime_buffers,
        "memory.headroom_bytes": mem.headroom_bytes, "memory.per_device_bytes": mem.per_device_bytes,
        "memory.device_memory": np.asarray(acc.memory, f), "memory.fits": mem.fits,
        "memory.devices_to_run": mem.devices_to_run, "memory.devices_to_train": mem.devices_to_train,
        "network.gradient_bytes": net.gradient_bytes, "network.ring_bytes_per_step": net.ring_bytes_per_step,
        "network.link_rate": net.link_rate, "network.floor_seconds_per_step": net.floor_seconds_per_step,
        "network.backward_seconds_per_step": net.backward_seconds, "network.share_of_step": net.share_of_step,
        "network.verdict": net.verdict,
        "storage.data_bytes": sto.data_bytes, "storage.checkpoint_bytes": sto.checkpoint_bytes,
        "storage.checkpoints_bytes": sto.checkpoints_bytes, "storage.exports_bytes": sto.exports_bytes,
        "storage.retained_bytes": sto.retained_bytes, "storage.input_byte_rate": sto.input_byte_rate,
        "storage.save_seconds": sto.save_seconds, "storage.save_share": sto.save_share,
    }
    for name, value in p.items():
        if name == "bottleneck_index":
            out["pipeline.bottleneck"] = np.asarray(pipeline_mod.BOTTLENECKS)[np.asarray(value, int)]
        elif name.endswith("_tokens_per_second") and name.split("_", 1)[0] in pipeline_mod.STAGES:
            out[f"pipeline.stages.{name.split('_', 1)[0]}.tokens_per_second"] = value
        else:
            out[f"pipeline.{name}"] = value
    out["pipeline.cores"] = np.asarray(get("cluster.cores"), f)
    out.update(bill)
    return {k: np.broadcast_to(np.asarray(v), (length,)) for k, v in out.items()}


def _bill_arrays(w: Workload, p: dict[str, Any], cores: np.ndarray, get: Callable[[str], Any],
                 data_hour_varied: bool = False) -> dict[str, Any]:
    """plan._bill_for over arrays."""
    f = np.float64
    if w.data.kind == "video":
        frames_per_hour = p["frames_per_hour"]
        stored = p["decoded_bytes_per_hour"] if w.data.access == "decoded" else p["stored_bytes_per_hour"]
        read = p["read_bytes_per_token"] * p["tokens_per_hour"]
        demand = p["demand_fps"]
    else:
        frames_per_hour = p["demand_tokens_per_second"] * bill_mod.SECONDS_PER_HOUR
        stored = read = frames_per_hour * p["read_bytes_per_token"]
        demand = p["demand_tokens_per_second"]
    busy = p["busy"]
    account = bill_mod.bill_per_hour(
        frames_per_hour=frames_per_hour, demand_fps=demand, busy=busy, cores=cores,
        stored_bytes_per_hour=stored, read_bytes_per_hour=read,
        accelerator_hour=np.asarray(get("prices.accelerator_hour"), f), core_hour=np.asarray(get("prices.core_hour"), f),
        storage_gb_month=np.asarray(get("prices.storage_gb_month"), f),
        transfer_gb=np.asarray(get("prices.transfer_gb"), f), storage_months=np.asarray(get("prices.storage_months"), f))
    total = account.total
    out: dict[str, Any] = {
        "bill.total": total, "bill.bytes": account.bytes, "bill.storage": account.storage,
        "bill.transfer": account.transfer, "bill.cores": account.cores, "bill.idle_accelerator": account.idle_accelerator,
        "bill.accelerator_seconds_per_hour": account.accelerator_seconds,
        "bill.useful_seconds_per_hour": account.useful_seconds,
    }
    out.update({f"bill.shares.{term}": share for term, share in account.shares.items()})
    for e in (1, 10):
        out[f"bill.per_epochs.{e}"] = bill_mod.over_epochs(account, e)
    data_hour = np.asarray(get("prices.data_hour"), f)
    if w.prices.data_hour > 0 or data_hour_varied:
        with np.errstate(divide="ignore", invalid="ignore"):
            # NaN where the plan has no such figure (no price per hour of data)
            out["bill.transport_share"] = np.where(
                data_hour > 0, bill_mod.transport_share(total, np.where(data_hour > 0, data_hour, 1.0)), np.nan)
    if w.data.kind == "video":
        with np.errstate(divide="ignore", invalid="ignore"):
            hours = np.asarray(get("data.hours"), f)
            count = np.asarray(get("cluster.count"), f)
            out["bill.epoch_seconds"] = np.where(
                busy > 0, hours * p["frames_per_hour"] / (count * np.where(busy > 0, busy, 1.0) * p["demand_fps"]),
                np.inf)
    return out


# ---------------------------------------------------------------- the grid


@dataclass
class SweepResult:
    """Columns of equal length: the varied keys, then the figures by dotted name."""

    keys: list[str]
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def _mesh(axes: list[Axis], start: int, stop: int) -> dict[str, np.ndarray]:
    """Values of each axis at flat grid indices start..stop (last axis fastest)."""
    shape = tuple(len(a.values) for a in axes)
    idx = np.unravel_index(np.arange(start, stop), shape)
    return {a.key: np.asarray(a.values, float)[i] for a, i in zip(axes, idx)}


def _override(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def sweep(file: Any, sets: list[str], varies: list[str], calibration: Any = None,
          figures: list[str] | None = None, progress: bool | None = None) -> SweepResult:
    """Evaluate the report's figures at every point of the grid given by `varies`."""
    axes = [parse_vary(v) for v in varies]
    if not axes:
        raise UserError("--vary", "expected at least one KEY=START:STOP[:STEP]")
    names = [a.key for a in axes]
    if len(set(names)) != len(names):
        raise UserError("--vary", "each key may be varied once")
    base = load_workload(file, sets, calibration)
    looped = [a for a in axes if not _vectorizable(base, a, lambda extra: load_workload(file, list(sets) + [extra],
                                                                                        calibration))]
    vector = [a for a in axes if a not in looped]
    total = math.prod(len(a.values) for a in axes)
    if total > MAX_POINTS:
        raise UserError("--vary", f"{total:,} points; expected at most {MAX_POINTS:,}")
    per_combo = math.prod(len(a.values) for a in vector)
    _check_vector_values(base, vector)

    chunks: list[dict[str, np.ndarray]] = []
    show = progress if progress is not None else total > PROGRESS_POINTS
    with _progress(total, show) as advance:
        for combo in itertools.product(*(a.values for a in looped)):
            extra = [f"{a.key}={_override(v)}" for a, v in zip(looped, combo)]
            w = load_workload(file, list(sets) + extra, calibration) if extra else base
            for start in range(0, per_combo, CHUNK_POINTS):
                stop = min(per_combo, start + CHUNK_POINTS)
                arrays = _mesh(vector, start, stop) if vector else {}
                figs = evaluate(w, arrays)
                n = stop - start
                cols: dict[str, np.ndarray] = {}
                for a, v in zip(looped, combo):
                    cols[a.key] = np.full(n, v, dtype=float if a.numeric else object)
                cols.update({k: np.broadcast_to(v, (n,)) for k, v in arrays.items()})
                cols.update(figs)
                chunks.append(cols)
                advance(n)
    # rows in the order of the grid as written: the first --vary slowest
    keys = names
    columns = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    order = _grid_order(axes, looped, vector)
    if order is not None:
        columns = {k: v[order] for k, v in columns.items()}
    if figures:
        unknown = [f for f in figures if f not in columns]
        if unknown:
            raise UserError("--figures", f"unknown figure {unknown[0]!r}; expected one of {', '.join(columns)}")
        columns = {k: columns[k] for k in keys + [f for f in figures if f not in keys]}
    else:
        columns = {**{k: columns[k] for k in keys}, **{k: v for k, v in columns.items() if k not in keys}}
    return SweepResult(keys, columns)


def _grid_order(axes: list[Axis], looped: list[Axis], vector: list[Axis]) -> np.ndarray | None:
    """Permutation from evaluation order (looped axes outermost) to the order the axes were given."""
    evaluated = looped + vector
    if [a.key for a in evaluated] == [a.key for a in axes]:
        return None
    shape = tuple(len(a.values) for a in evaluated)
    perm = [evaluated.index(a) for a in axes]
    return np.arange(math.prod(shape)).reshape(shape).transpose(perm).ravel()


def _check_vector_values(w: Workload, vector: list[Axis]) -> None:
    """Cross-field rules of the workload that a single value cannot break (patch <= side)."""
    keys = {a.key: np.asarray(a.values) for a in vector}
    if w.data.kind == "video" and ("data.side" in keys or "data.patch" in keys):
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


def _to_arrow(result: SweepResult):  # noqa: ANN202 - pyarrow.Table
    import pyarrow as pa

    data = {}
    for k, v in result.columns.items():
        if v.dtype == object or v.dtype.kind in "US":
            data[k] = pa.array([str(x) for x in v])
        else:
            data[k] = pa.array(np.ascontiguousarray(v))
    return pa.table(data)


def to_csv(result: SweepResult) -> bytes:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    sink = pa.BufferOutputStream()
    pacsv.write_csv(_to_arrow(result), sink)
    return sink.getvalue().to_pybytes()


def to_parquet(result: SweepResult) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(_to_arrow(result), sink)
    return sink.getvalue().to_pybytes()


def to_json(result: SweepResult) -> str:
    import json

    cols = list(result.columns)
    rows = []
    for i in range(len(result)):
        row = {}
        for k in cols:
            v = result.columns[k][i]
            if isinstance(v, np.generic):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            row[k] = v
        rows.append(row)
    return json.dumps(rows, indent=1, allow_nan=False)


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
