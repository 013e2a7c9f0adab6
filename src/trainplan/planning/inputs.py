"""Typed inputs of the evaluation, built from a Workload once.

`PlanInputs` holds the workload (for its switches and names), the resolved model, and the
value of every numeric key the formulas read, each a number, or an array where a sweep
varies it. The accounts are called from these values directly: there is no intermediate
kwargs dict copied field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from trainplan.planning import execution as execution_mod
from trainplan.planning import model_terms
from trainplan.planning.execution import micro_batch_is_chosen
from trainplan.planning.model import ModelFacts, resolve_model
from trainplan.workload.schema import KEY_ROLES, Provenance, Workload, leaf_value

# How a sweep varies each key, read from its declaration on its field (workload/schema.py, Q's
# `argument`, `sweep` and `execution`):
# numeric keys that enter the formulas as plain arithmetic (a sweep may make any an array), and the
# pipeline_arrays argument each one is (if any)
PIPELINE_ARGS: dict[str, str] = {k: r.argument for k, r in KEY_ROLES.items() if r.argument and k.count(".") == 1
                                 and not k.startswith("sources.")}
VECTOR_KEYS: frozenset[str] = frozenset(k for k, r in KEY_ROLES.items() if r.sweep == "array"
                                        and not k.startswith("sources."))
# shape keys: arrays only while the count is model.params and the shape sizes activations alone
SHAPE_KEYS: frozenset[str] = frozenset(k for k, r in KEY_ROLES.items() if r.sweep == "shape")
# the keys the execution model reads from the values (planning/execution.py run): where none of them
# varies, its account is one per workload, kept for the chunks of a sweep
EXECUTION_KEYS: frozenset[str] = frozenset(k for k, r in KEY_ROLES.items() if r.execution)
EXECUTION_CACHE = 8  # workloads whose execution is kept (a sweep's looped combinations come one at a time)
_EXECUTIONS: dict[int, tuple[Any, Any]] = {}


@dataclass(frozen=True)
class GridRows:
    """Rows `start` .. `start + length` of the product grid of `keys` (the last fastest), each key's values
    given: what lets a figure that reads only some of the keys be computed once per combination of
    theirs and taken to the rows."""

    keys: tuple[str, ...]
    values: tuple[np.ndarray, ...]
    start: int
    length: int

    def combinations(self, keys: frozenset[str]) -> int:
        """How many combinations of `keys`' values the whole grid has (a chunk has at most these)."""
        return int(np.prod([len(v) for k, v in zip(self.keys, self.values) if k in keys]))

    def compact(self, keys: frozenset[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The product grid of `keys` alone (each key a flat array over its combinations) and, for each
        row, the index of its combination."""
        picked = [i for i, k in enumerate(self.keys) if k in keys]
        sizes = [len(v) for v in self.values]
        strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
        shape = [sizes[i] for i in picked]
        mesh = np.meshgrid(*(np.asarray(self.values[i], np.float64) for i in picked), indexing="ij")
        compact = {self.keys[i]: m.reshape(-1) for i, m in zip(picked, mesh)}
        row = np.arange(self.start, self.start + self.length, dtype=np.int64)
        index: np.ndarray | None = None
        inner = 1
        for i, size in zip(reversed(picked), reversed(shape)):
            along = row // strides[i] if strides[i] > 1 else row.copy()
            np.remainder(along, size, out=along)  # this axis's position in each row
            if inner > 1:
                along *= inner
            index = along if index is None else np.add(index, along, out=index)
            inner *= size
        return compact, index if index is not None else np.zeros(self.length, np.int64)


class RowsOf:
    """An account evaluated per combination, read per row: each array over the combinations taken to the
    rows when first read (only the figures asked for are expanded); anything else as it is."""

    def __init__(self, account: Any, rows: np.ndarray, combinations: int, values: Mapping[str, Any]) -> None:
        self._account, self._rows, self._combinations = account, rows, combinations
        self.combination_values = values  # each workload key as the account saw it (over the combinations)

    @property
    def combined(self) -> Any:
        """The account over the combinations (not taken to the rows)."""
        return self._account

    def per_row(self, value: Any) -> Any:
        """An array over the combinations taken to the rows (anything else as it is)."""
        if isinstance(value, np.ndarray) and value.shape == (self._combinations,):
            return value[self._rows]
        return value

    def __getattr__(self, name: str) -> Any:
        value = self.per_row(getattr(self._account, name))
        setattr(self, name, value)  # read once
        return value


@dataclass(frozen=True)
class PlanInputs:
    """What `evaluate` reads: the workload, its resolved model, and each numeric key's value."""

    workload: Workload
    model: ModelFacts
    values: Mapping[str, Any]  # workload key -> number (or None where unset), or an array where varied
    varied: frozenset[str] = field(default_factory=frozenset)
    length: int = 1
    grid: GridRows | None = None  # where the arrays are rows of a product grid (a sweep's chunk)

    @classmethod
    def of(cls, w: Workload, arrays: Mapping[str, np.ndarray] | None = None,
           model: ModelFacts | None = None, choose: bool = True, grid: GridRows | None = None) -> PlanInputs:
        """Inputs of workload `w`, with the keys in `arrays` replaced by arrays of one length; a micro-batch
        the user did not give is chosen to fit (planning/execution.py choose_micro_batch) unless `choose`
        is off."""
        model = model or resolve_model(w)
        if choose and not (arrays and ("training.micro_batch" in arrays or "training.grad_accum" in arrays)):
            w = choose_micro_batch(w, model)
        arrays = dict(arrays or {})
        values: dict[str, Any] = {k: leaf_value(w, k) for k in VECTOR_KEYS | SHAPE_KEYS}
        # the model as planned (a count from a shape or a config.json), not only as written
        values["model.params"], values["model.layers"], values["model.width"] = model.params, model.layers, model.width
        values.update(arrays)
        length = len(next(iter(arrays.values()))) if arrays else 1
        return cls(w, model, values, frozenset(arrays), length, grid)

    def replace(self, **changes: Any) -> PlanInputs:
        """The same inputs with some keys given as KEY=value (dots written as '__')."""
        values = dict(self.values)
        values.update({k.replace("__", "."): v for k, v in changes.items()})
        return PlanInputs(self.workload, self.model, values, self.varied, self.length)  # no grid: any values

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @cached_property
    def cache(self) -> dict[str, float]:
        """The cache what-if's inputs (docs/measurement.md): cache and dataset sizes, both rates, the
        cached fraction and the mixed read rate R = 1 / (f / R_cache + (1 - f) / R_remote)."""
        from trainplan.accounts import pipeline as pipeline_mod

        w = self.workload
        d = w.data
        size = d.dataset_size
        if size is None:
            tokens = (w.training.tokens or 0.0) / w.training.epochs
            size = float(pipeline_mod.dataset_bytes(kind=d.kind, access=d.access, hours=d.hours, cameras=d.cameras,
                                                    fps=d.fps, width=d.width, height=d.height, bitrate=d.bitrate,
                                                    tokens=tokens, bytes_per_token=d.bytes_per_token))
        f = float(pipeline_mod.cached_fraction(w.storage.cache_size, size))
        hit = float(pipeline_mod.lru_hit_ratio(w.storage.cache_order, f))  # issue 25: the loader's order
        rate = (w.cluster.link if hit == 0
                else float(pipeline_mod.cached_read_rate(w.cluster.link, w.storage.cache_rate, hit)))
        return {"cache_size": w.storage.cache_size, "dataset_size": size, "cache_rate": w.storage.cache_rate,
                "remote_rate": w.cluster.link, "cached_fraction": f, "hit_ratio": hit, "read_rate": rate,
                "order": w.storage.cache_order}

    @cached_property
    def terms(self) -> Any:
        """The architecture's activations, training state and FLOPs (planning/model_terms.py): scalars of
        the workload, whose keys a sweep loops rather than varies as arrays when the architecture is known."""
        return model_terms.evaluate(self.workload, self.model)

    @cached_property
    def _execution(self) -> Any:
        varied = self.varied & EXECUTION_KEYS
        if varied and self.grid is not None and varied <= set(self.grid.keys) \
                and 2 * self.grid.combinations(varied) <= self.length:
            # the execution reads only its own keys: evaluated once per combination of their values (a
            # sweep's 10^6 rows over 10^3 micro-batches run 10^3 accounts), each figure taken to the rows
            compact, rows = self.grid.compact(varied)
            values = {k: v for k, v in self.values.items() if k not in self.varied} | compact
            account, ex, source = execution_mod.run(self.workload, self.model, self.terms, values, varied=self.varied)
            return RowsOf(account, rows, len(next(iter(compact.values()))), values), ex, source
        if varied:
            return execution_mod.run(self.workload, self.model, self.terms, self.values, varied=self.varied)
        # nothing the execution reads varies (a sweep of the pipeline's keys): one account a workload, not a chunk
        key = id(self.workload)
        hit = _EXECUTIONS.get(key)
        if hit is None or hit[0] is not self.workload:
            if len(_EXECUTIONS) >= EXECUTION_CACHE:
                _EXECUTIONS.clear()
            hit = (self.workload, execution_mod.run(self.workload, self.model, self.terms, self.values))
            _EXECUTIONS[key] = hit
        return hit[1]

    @property
    def execution(self) -> Any:
        """The one execution model's account (planning/execution.py): memory per device, step, tokens per step."""
        return self._execution[0]

    @property
    def execution_data(self) -> Any:
        """The data-parallel degree of the layout."""
        return self._execution[0].data

    @property
    def execution_source(self) -> str:
        return self._execution[2]

    def array(self, key: str) -> np.ndarray:
        return np.asarray(self.values[key], np.float64)

    @property
    def active_params(self) -> Any:
        """Parameters used per token; scales with model.params where that is varied."""
        return self._active_params(self.values)

    def _active_params(self, values: Mapping[str, Any]) -> Any:
        """Parameters used per token at `values` (this point's, or the execution's combinations)."""
        m = self.model
        if "model.params" in self.varied:
            return np.asarray(values["model.params"], np.float64) * (m.active_params / m.params)
        return m.active_params

    @property
    def peak_flops(self) -> float:
        return self.workload.accelerator.peak(self.workload.training.precision)

    @property
    def link_rate(self) -> Any:
        """Interconnect per device: cluster.interconnect when given, else the accelerator's."""
        given = self.values["cluster.interconnect"]
        return given if given is not None else self.workload.accelerator.interconnect

    def pipeline_args(self, **changes: Any) -> dict[str, Any]:
        """Arguments of accounts.pipeline.pipeline_arrays (`changes` by argument name override)."""
        w = self.workload
        args: dict[str, Any] = {arg: self.values[key] for key, arg in PIPELINE_ARGS.items()}
        args.update(
            kind=w.data.kind, access=w.data.access, params=self.active_params, peak_flops=self.peak_flops,
            nvdec=w.cluster.nvdec, video_decoders=w.accelerator.video_decoders,
            tokenize_online=w.data.tokenize_online, prefetch=w.cluster.prefetch)
        if w.storage.cache_size:  # the read stage mixes cached and remote rates (docs/measurement.md)
            args["link"] = self.cache["read_rate"]
        # the accelerator's demand: tokens per step over the step of the execution, per device, written as
        # the MFU of the whole step over the model FLOPs per token (attention included)
        e = self.execution
        per_param = float(np.mean(e.model_flops_per_token)) / float(self.model.active_params)
        args["flops_per_param_token"] = per_param
        # over the execution's combinations where it ran per combination (a sweep), then taken to the rows
        if isinstance(e, RowsOf):
            on, values, to_rows = e.combined, e.combination_values, e.per_row
        else:
            on, values, to_rows = e, self.values, (lambda v: v)
        with np.errstate(divide="ignore", invalid="ignore"):
            mfu = on.tokens_per_step * per_param * self._active_params(values) / (
                values["cluster.count"] * self.peak_flops * on.step_seconds)
        args["mfu"] = to_rows(mfu)
        args.update(changes)
        return args


# ---------------------------------------------------------------- the micro-batch chosen to fit

MICRO_BATCH_HALVINGS = 16  # 2^16 down to 1 at most


def choose_micro_batch(w: Workload, model: Any) -> Workload:
    """The workload with the largest micro-batch that fits, when the user gave none (docs/parallel.md).

    Only for a model the user gave with a shape: the default (training.micro_batch) is halved until
    the fullest device fits, and training.grad_accum doubled with it so the sequences per step stay
    the same; the report names the choice as derived. If none fits, 1 is kept and the plan says what
    else to change."""
    if not micro_batch_is_chosen(w, model):
        return w
    start = int(w.training.micro_batch)
    tried = []
    candidate = w
    for _ in range(MICRO_BATCH_HALVINGS + 1):
        b = int(candidate.training.micro_batch)
        tried.append(b)
        if bool(np.all(PlanInputs.of(candidate, model=model, choose=False).execution.fits)) or b == 1:
            break
        candidate = _with_micro_batch(w, b // 2, int(w.training.grad_accum) * (start // (b // 2)))
    if candidate is w:
        return w
    prov = dict(w.provenance)
    b = int(candidate.training.micro_batch)
    prov["training.micro_batch"] = Provenance(
        "derived", f"chosen: the largest of {', '.join(map(str, tried))} that fits" if b != 1 or bool(
            np.all(PlanInputs.of(candidate, model=model, choose=False).execution.fits))
        else f"chosen: 1, the smallest of {', '.join(map(str, tried))}; none fits")
    prov["training.grad_accum"] = Provenance(
        "derived", f"x {start // b} with the micro-batch, so a step keeps {start * int(w.training.grad_accum)} "
        "sequences per data-parallel rank")
    candidate._provenance = prov
    return candidate



def _with_micro_batch(w: Workload, micro_batch: int, grad_accum: int) -> Workload:
    training = w.training.model_copy(update={"micro_batch": micro_batch, "grad_accum": grad_accum})
    out = w.model_copy(update={"training": training})
    out._provenance = dict(w.provenance)
    out._base_dir = w.base_dir
    return out
