"""A workload as a run reads it: the file (or the built-in default), its `[measured]` and
`[measured_interval]` tables, `--set` overrides, a calibration file's measured values, and the
model keys checked against a config.json beside them. The top of the workload layer: it
brings schema.py (the keys), calibration.py (the measured values) and model_source.py (the
config.json) together, so none of those imports another's loader."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from trainplan import units
from trainplan.errors import UserError
from trainplan.workload import calibration as calibration_module
from trainplan.workload.model_source import reconcile_params_with_config
from trainplan.workload.neighbours import check_neighbours
from trainplan.workload.schema import (INTERVAL_KEYS, Provenance, TrainingSection, Workload, _dotted, _provenance,
                                       leaf_keys, leaf_value,
                                       apply_override, build_workload, read_toml, set_path)


def load_workload(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    calibration: str | Path | None = None,
) -> Workload:
    """Read a workload file (or the built-in default), apply --set overrides and a calibration file."""
    doc: dict[str, Any] = read_toml(path) if path is not None else {}
    return workload_of_document(doc, overrides, calibration, path)


def workload_of_document(
    doc: dict[str, Any],
    overrides: list[str] | tuple[str, ...] = (),
    calibration: str | Path | None = None,
    path: str | Path | None = None,
    label: str | None = None,
) -> Workload:
    """A workload file's parsed document as `load_workload` reads the file (its [measured] and
    [measured_interval] tables, overrides, calibration, provenance); `label` names a document that came
    from no file (the page's upload) in its provenance, and the base folder is then the working one."""
    named = label if label is not None else path
    base = Path(path).resolve().parent if path is not None and label is None else Path.cwd()
    path = named
    inspected = _measured_table(doc, path)  # keys `trainplan data inspect` measured (issue 14)
    intervals = _interval_table(doc, path)  # and the intervals of those it measured on a sample (issue 26)
    from_file = {k for k, _, _ in _dotted(doc)}
    set_keys = {apply_override(doc, a) for a in overrides}
    measured: dict[str, tuple[Any, str]] = {}
    if calibration is not None:
        # a --set names what the user wants for this run: it wins over a measured value, which wins
        # over the workload file
        # a figure measured on another kind of machine or tier is left out, and the plan says so (issue 25)
        left = calibration_module.left_out(calibration, doc, _training_settings(doc))
        measured = {k: v for k, v in calibration_module.load(calibration).items() if k not in set_keys | set(left)}
        for key, (value, _source) in measured.items():
            set_path(doc, key.split("."), value, key)
    calibrated = set(measured)  # keys the calibration file set: a measured figure, not the sample's
    _check_measured_names(inspected, from_file | set_keys, path)
    measured = {**{k: (None, src) for k, src in inspected.items() if k in from_file and k not in set_keys},
                **measured}
    workload = build_workload(doc)
    workload._base_dir = base
    workload._provenance = _provenance(workload, from_file, set_keys, measured, path)
    workload._intervals = _checked_intervals(doc, intervals, path, keep=from_file - set_keys - calibrated)
    _check_intervals_hold(workload, path)
    if calibration is not None:
        workload._left_out = {k: why for k, why in left.items() if k not in set_keys}
        for key, why in left.items():
            if key in workload._provenance and key not in set_keys:
                was = workload._provenance[key]
                workload._provenance[key] = Provenance(was.kind, f"{was.source}; {why}")
    workload = reconcile_params_with_config(workload)  # model keys beside model.hf_config must agree
    check_neighbours(workload)  # and keys the user wrote beside each other (workload/neighbours.py)
    if calibration is not None:
        calibration_module.check_compatible(calibration, workload)
    return workload


def _training_settings(doc: dict[str, Any]) -> dict[str, str]:
    """The attention kernel, precision and recomputation the workload `doc` plans with (its values, else the
    defaults), as a `probe model` calibration records them: autocast is the autocast_fp32 recipe."""
    given = doc.get("training") if isinstance(doc.get("training"), dict) else {}
    fields = TrainingSection.model_fields

    def value(key: str) -> str:
        return str(given.get(key, fields[key].default))

    precision = "autocast" if value("state_recipe") == "autocast_fp32" else value("precision")
    return {"attention": value("attention"), "precision": precision, "recompute": value("recompute")}


def _measured_table(doc: dict[str, Any], path: Any) -> dict[str, str]:
    """Pop a workload file's `[measured]` table (dotted key -> where it was measured): those keys'
    values were measured on the data (`trainplan data inspect --output`), so their provenance is `measured`."""
    table = doc.pop("measured", {})
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise UserError(f"{path}: measured", "expected a table of dotted keys, each naming where it was measured")
    return table


def _interval_table(doc: dict[str, Any], path: Any) -> dict[str, Any]:
    """Pop a workload file's `[measured_interval]` table (dotted key -> [low, high])."""
    table = doc.pop("measured_interval", {})
    where = f"{path}: measured_interval" if path is not None else "measured_interval"
    if not isinstance(table, dict):
        raise UserError(where, "expected a table of dotted keys, each with its interval [low, high]")
    return table


def _check_measured_names(inspected: dict[str, str], written: set[str], path: Any) -> None:
    """A `[measured]` entry names a workload key whose value this document gives: one naming no key, or a key
    the file leaves to its default, would mark nothing measured while saying it did (issue 29)."""
    known = set(leaf_keys()) if inspected else set()
    for key in inspected:
        where = f"{path}: measured.{key}" if path is not None else f"measured.{key}"
        if key not in known:
            raise UserError(where, "expected a workload key (`trainplan keys` lists them)")
        if key not in written:
            raise UserError(where, f"expected the file to give {key} beside the entry that says it was measured; "
                            "add the measured value, or remove the entry")


def _check_intervals_hold(workload: Workload, path: Any) -> None:
    """Each `[measured_interval]` holds the key's own value: a sample's estimate lies inside its interval, so an
    interval beside a value outside it belongs to another estimate (issue 29)."""
    for key, (low, high) in workload.intervals.items():
        value = float(leaf_value(workload, key))
        if not low <= value <= high:
            where = f"{path}: measured_interval.{key}" if path is not None else f"measured_interval.{key}"
            raise UserError(where, f"expected an interval holding {key}'s value ({value:g}), got "
                            f"[{low:g}, {high:g}]")


def _checked_intervals(doc: dict[str, Any], table: dict[str, Any], path: Any,
                       keep: set[str]) -> dict[str, tuple[float, float]]:
    """The intervals of keys whose value is the file's (not a --set or a calibration's), each bound
    checked as the key itself is (the schema's constraint and plausible range), low <= high."""
    out: dict[str, tuple[float, float]] = {}
    for key, bounds in table.items():
        where = f"{path}: measured_interval.{key}" if path is not None else f"measured_interval.{key}"
        if key not in INTERVAL_KEYS:
            raise UserError(where, f"expected one of {', '.join(INTERVAL_KEYS)}")
        if (not isinstance(bounds, list) or len(bounds) != 2
                or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)
                or bounds[0] > bounds[1]):
            raise UserError(where, f"expected [low, high], two numbers with low <= high, got {units.shown(bounds)}")
        for bound in bounds:
            trial = copy.deepcopy(doc)
            set_path(trial, key.split("."), bound, key)
            try:
                build_workload(trial)
            except UserError as err:
                raise UserError(where, err.expected) from None  # as the key itself would be refused
        if key in keep:
            out[key] = (float(bounds[0]), float(bounds[1]))
    return out


def _same_value(first: str, second: str) -> bool:
    """Whether two --set values are one value as TOML reads them (8 and 8.0, "fr" and fr)."""
    from trainplan.workload.schema import parse_override_value

    a, b = parse_override_value(first), parse_override_value(second)
    return type(a) is not bool and type(b) is not bool and a == b or a is b


def check_each_key_once(overrides: list[str] | tuple[str, ...], flag: str = "--set") -> None:
    """UserError for a key the user's --set (or a request's "set") gives twice with different values: which
    one was meant is not ours to guess (the same value twice is one setting). Checked where the user's
    settings come in (the command line, the page), not in load_workload: solve, sweep and simulate add
    their own value of a key on top of the user's on purpose."""
    seen: dict[str, str] = {}
    for assignment in overrides:
        if "=" not in assignment:
            continue  # apply_override names that
        key, _, raw = assignment.partition("=")
        key, raw = key.strip(), raw.strip()
        if key in seen and seen[key] != raw and not _same_value(seen[key], raw):
            raise UserError(key, f"expected one value, got {seen[key]!r} and then {raw!r} from {flag}; give the key "
                                 "once")
        seen.setdefault(key, raw)


# The model of the built-in default workload (the reference workload, docs/pipeline-and-bill.md), used only when the
# workload names no model at all: a user's model.params or config.json must not inherit its shape.
