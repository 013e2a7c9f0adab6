"""The calibration file: what probes measured on a machine, as workload keys (issue 6).

A probe run with `--output FILE` writes (or updates) one TOML file; `trainplan plan
--calibration FILE` reads it and every value in it replaces the workload's assumption,
reported with provenance `measured` and a source naming the probe, the date and the
machine. The file keeps the probe's settings and raw results next to the values, so a
reader can tell what was measured, and so a figure is refused where it does not apply:
a decode rate measured on 1080p H.264 is not applied to a 4K or a non-H.264 workload.

Layout (format 1):

    format = 1
    updated = "2025-06-01T12:00:00+00:00"
    [machine]             hostname, cpu_model, cpu_count, versions (of the last probe)
    [probes.decode]       date, hostname, settings = {...}, results = {...}
    [probes.read] ...
    [[values]]            one per workload key:
    key = "cluster.core_fps_1080p"
    value = 101.5
    unit = "frames/s"
    probe = "decode"
    date = "..."
    hostname = "..."
    note = "what was measured, in words"

Keys probes set: `cluster.core_fps_1080p` (decode), `cluster.link` (read, cold),
`cluster.interconnect` (allreduce, bus bytes/s), `cluster.host_to_device` (transfer,
pinned), `cluster.accelerator.peak_flops` (matmul, only when asked: it is the achieved
rate of one matmul, a ceiling, not a datasheet peak), `cluster.mfu` with
`cluster.mfu_end_to_end = true` (from `trainplan profile`: a measured training step is
end-to-end, so scaling efficiency must not be applied on top of it, docs/accounts.md), and
`data.loader_cpu_per_frame` (`trainplan probe handover`: a loader
worker's CPU per frame used besides decoding it, docs/pipeline-and-bill.md).

`load(path)` returns `{dotted_key: Measured}`; a `Measured` unpacks as `(value, source)`.
`check_compatible(path, workload)` raises UserError when the recorded format disagrees.
"""

from __future__ import annotations

import datetime as _dt
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import tomli_w
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from trainplan import units
from trainplan.errors import UserError, expected_wording
from trainplan.workload.codecs import FRAME_KINDS

FORMAT_VERSION = 1
# The probe name of the hand-over measurement (`trainplan probe handover`), its key data.loader_cpu_per_frame.
HANDOVER_PROBE = "handover"

# The workload keys a calibration may set, with the unit the value is stored in (SI).
KNOWN_KEYS: dict[str, str] = {
    "cluster.core_fps_1080p": "frames/s",
    "cluster.link": "B/s",
    "cluster.interconnect": "B/s",
    "cluster.node_link": "B/s",
    "cluster.host_to_device": "B/s",
    "cluster.accelerator.peak_flops": "FLOP/s",
    "cluster.mfu": "fraction",
    "cluster.mfu_end_to_end": "bool",
    # `probe model` (issue 12): saved-activation bytes per token of one layer, and outside the layers
    "training.activation_bytes_per_layer_token": "B",
    "training.activation_bytes_outside_token": "B",
    "storage.cache_rate": "B/s",  # read probe, warm: the page cache's rate (issue 14's cache what-if)
    "data.loader_cpu_per_frame": "s",  # the hand-over probe: a loader worker's CPU per frame besides decoding
}

# The dimension of each stored unit, for an entry that writes its value in another unit of it ("kB/s").
UNIT_DIMENSIONS: dict[str, units.Dimension] = {"frames/s": "frequency", "B/s": "byte_rate", "FLOP/s": "flop_rate",
                                               "fraction": "fraction", "B": "bytes", "s": "time"}


def _in_stored_unit(entry: CalibrationValue, path: str | Path, i: int) -> CalibrationValue:
    """The entry with its value in the key's stored unit (KNOWN_KEYS): an entry's `unit` is the unit its
    value is written in, converted here ("100000" with unit "kB/s" is 1e8 B/s), never read as the stored
    one; a unit of another dimension, or none known, is refused (issue 29)."""
    stored = KNOWN_KEYS[entry.key]
    if not entry.unit or entry.unit.strip() == stored or stored == "bool" or isinstance(entry.value, bool):
        return entry
    try:
        value = units.parse(f"{entry.value!r} {entry.unit.strip()}", UNIT_DIMENSIONS[stored])
    except UserError:
        raise UserError(f"{path}: values[{i}].unit", f"expected a unit of {entry.key} such as {stored!r}, got "
                        f"{entry.unit!r}") from None
    return entry.model_copy(update={"value": float(value), "unit": stored})


# Settings of the decode probe that must agree with the workload it is applied to.
# The 1080p-equivalent rate is normalised by pixels (docs/pipeline-and-bill.md), but that scaling is an
# approximation (small frames cost more per pixel, the bit rate matters too), so a
# figure is applied only at the resolution and codec it was measured on.
FORMAT_KEYS = ("width", "height", "codec")
WORKLOAD_CODEC = "h264"  # the default of data.codec (workload/schema.py): a workload that names none is H.264


@dataclass(frozen=True)
class Measured:
    """One measured value of a workload key. Unpacks as `(value, source)`."""

    key: str
    value: Any
    source: str
    unit: str = ""
    probe: str = ""
    date: str = ""
    hostname: str = ""

    def __iter__(self) -> Iterator[Any]:
        return iter((self.value, self.source))

    def __getitem__(self, index: int) -> Any:
        return (self.value, self.source)[index]

    def __len__(self) -> int:
        return 2


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _clean(obj: Any) -> Any:
    """TOML has no null and no nested None; drop them, and non-finite floats become strings."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj if v is not None]
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


def read_file(path: str | Path, *, as_input: bool = True) -> dict[str, Any]:
    """The raw document of a calibration file; UserError when it is missing or malformed.
    `as_input=False` when the file is read only to be updated (then --output may replace it)."""
    from trainplan import limits  # regular files only, size and nesting caps (issue 16)

    if not Path(path).exists():
        raise UserError(str(path), "no such calibration file (write one with `trainplan probe decode --output FILE`)")
    doc = limits.loads_toml(limits.read_text(path, "calibration", remember=as_input), str(path), "calibration TOML")
    fmt = doc.get("format")
    if fmt is None and any(k in doc for k in ("model", "training", "cluster", "data", "measured")):
        raise UserError(str(path), "expected a calibration file written by `trainplan probe`; this is a workload "
                                   "file (give it as the WORKLOAD argument, not --calibration)")
    if isinstance(fmt, bool) or fmt != FORMAT_VERSION:  # `format = true` equals 1 in Python: refused
        got = "no format key" if fmt is None else f"format {fmt!r}"
        raise UserError(f"{path}: format", f"expected a calibration file of format {FORMAT_VERSION}, got {got}")
    return doc


# ---------------------------------------------------------------- the file's schema (issue 16)

# Plausible ranges of the measured values (inclusive low, inclusive high), SI units. A probe
# that reports beyond them measured something else (a cached read, a clock that did not move).
# Keys without a range here are checked by the workload schema once applied.
MEASURED_RANGES: dict[str, tuple[float, float]] = {
    # one core decoding 1080p H.264: ~100-1000 frames/s in practice (docs/pipeline-and-bill.md: 120)
    "cluster.core_fps_1080p": (1e-3, 1e5),
    # storage, network and PCIe links: 1 kB/s to 10 TB/s
    "cluster.link": (1e3, 1e13),
    "cluster.interconnect": (1e3, 1e13),
    "cluster.host_to_device": (1e3, 1e13),
    # an achieved matmul: 1 GFLOP/s (an old CPU core) to 1e17 (50x a B200's dense fp8)
    "cluster.accelerator.peak_flops": (1e9, 1e17),
    "cluster.mfu": (1e-4, 1.0),  # the workload key's own plausible floor (schema.py)
    # a loader worker's CPU per frame besides decoding: ~0.2 ms measured (docs/measurement.md); below a
    # nanosecond the clock did not move, above a second it timed something else (the schema's own bound)
    "data.loader_cpu_per_frame": (1e-9, 1.0),
}


def _printable(value: Any) -> Any:
    from trainplan.limits import printable

    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    return printable(value) if isinstance(value, str) else value


class _Record(BaseModel):
    # other probes (and later versions) may record more fields: kept, not refused
    # defer_build: a plan without --calibration never validates one, so it does not build them at import
    model_config = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _clean_text(cls, value: Any) -> Any:
        """Text from a file is shown on a terminal: no escape sequences; TOML dates as text."""
        return _printable(value)


class CalibrationValue(_Record):
    """One `[[values]]` entry: a measured value of a workload key."""

    key: str
    value: bool | float
    unit: str = ""
    probe: str = ""
    date: str = ""
    hostname: str = ""
    cpu_model: str = ""
    note: str = ""


class ProbeRecord(_Record):
    """One `[probes.NAME]` table: when and where a probe ran, its settings and raw results."""

    date: str = ""
    hostname: str = ""
    cpu_model: str = ""
    settings: dict[str, Any] = {}
    results: dict[str, Any] = {}


class CalibrationFile(_Record):
    """The whole file (format 1)."""

    format: int
    updated: str = ""
    machine: dict[str, Any] = {}
    probes: dict[str, ProbeRecord] = {}
    values: list[CalibrationValue] = []


def parse(doc: dict[str, Any], path: str | Path) -> CalibrationFile:
    """The validated calibration document: shapes, types and plausible ranges; UserError naming
    the file and the first bad entry."""
    try:
        cal = CalibrationFile.model_validate(doc)
    except ValidationError as err:
        e = err.errors()[0]
        loc = [str(p) for p in e["loc"] if str(p) not in ("bool", "float", "str", "int")]
        where = ".".join(f"[{p}]" if p.isdigit() else p for p in loc).replace(".[", "[") or "calibration"
        value = e.get("input")
        got = f", got {value!r}" if not isinstance(value, (dict, list)) else f", got a {type(value).__name__}"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
            got = f", got an integer of {len(str(abs(value)))} digits"
        msg = e["msg"]
        msg = expected_wording(msg)
        if e["type"] == "missing":
            msg, got = "required key is missing", ""
        if len(loc) == 3 and loc[0] == "values" and loc[2] == "value":
            # `bool | float`: pydantic reports the union's last member ("a valid boolean") for a string or an
            # integer past float range; what the entry wants is its measured number
            msg = "expected a number (a float, in the key's unit) or true/false"
        text = f"{msg[0].lower()}{msg[1:]}{got[:200]}"
        entries = doc.get("values")
        if len(loc) > 2 and loc[0] == "values" and loc[1].isdigit() and isinstance(entries, list):
            key = entries[int(loc[1])].get("key") if isinstance(entries[int(loc[1])], dict) else None
            if isinstance(key, str):  # name the workload key the entry measures
                raise UserError(f"{path}: {key}", f"{where}: {text}") from None
        raise UserError(f"{path}: {where}", text) from None
    seen: dict[str, int] = {}
    converted = []
    for i, entry in enumerate(cal.values):
        if entry.key not in KNOWN_KEYS:
            raise UserError(f"{path}: values[{i}].key", f"expected one of {', '.join(KNOWN_KEYS)}, got {entry.key!r}")
        entry = _in_stored_unit(entry, path, i)
        converted.append(entry)
        if entry.key in seen:  # `probe` writes a key once (a new value replaces the old): two are a hand edit,
            #                    and which one the plan should trust is not ours to guess
            raise UserError(f"{path}: values[{i}].key", f"each key once, got {entry.key!r} again "
                            f"(values[{seen[entry.key]}] measures it too); keep one")
        seen[entry.key] = i
        value = entry.value
        if KNOWN_KEYS[entry.key] == "bool":
            if not isinstance(value, bool):
                raise UserError(f"{path}: {entry.key}", f"expected true or false, got {value!r}")
            continue
        if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise UserError(f"{path}: {entry.key}",
                            f"expected a positive number in {KNOWN_KEYS[entry.key]}, got {value!r}")
        low, high = MEASURED_RANGES.get(entry.key, (0.0, math.inf))
        if not low <= value <= high:
            raise UserError(f"{path}: {entry.key}", f"expected a measured value from {low:g} to {high:g} "
                            f"{KNOWN_KEYS[entry.key]} (a plausible range), got {value:g}")
    return cal.model_copy(update={"values": converted})


def write(path: str | Path, probe: str, *, settings: dict[str, Any], results: dict[str, Any],
          values: list[dict[str, Any]], machine: dict[str, Any], date: str | None = None,
          merge: bool = True) -> Path:
    """Record one probe's run in the calibration file at `path` (created, or updated when `merge`).

    `values` are dicts with `key`, `value` and `note` (and optionally `unit`); each
    replaces an earlier value of the same key. The probe's section replaces the earlier
    one of the same probe.
    """
    p = Path(path)
    date = date or now()
    from trainplan.outputs import check_output_path, write_output

    # a directory, a device, a missing parent or another input of the run (the workload, the profiled script, the
    # runs read) is refused before reading; the calibration file the run read may be updated
    check_output_path(p, may_replace_input="calibration")
    doc: dict[str, Any] = read_file(p, as_input=False) if merge and p.is_file() else {"format": FORMAT_VERSION}
    doc["format"] = FORMAT_VERSION
    doc["updated"] = date
    doc["machine"] = machine
    doc.setdefault("probes", {})[probe] = {
        "date": date,
        "hostname": machine.get("hostname", ""),
        "cpu_model": machine.get("cpu_model", ""),
        "settings": settings,
        "results": results,
    }
    new_keys = set()
    entries = []
    for v in values:
        key = v["key"]
        if key not in KNOWN_KEYS:
            raise ValueError(f"calibration: {key!r} is not a key a probe sets ({', '.join(KNOWN_KEYS)})")
        new_keys.add(key)
        entries.append({
            "key": key,
            "value": v["value"],
            "unit": v.get("unit", KNOWN_KEYS[key]),
            "probe": probe,
            "date": date,
            "hostname": machine.get("hostname", ""),
            "cpu_model": machine.get("cpu_model", ""),
            "machine_kind": machine_kind(machine),
            **({"tier": v["tier"]} if "tier" in v else {}),
            "note": v.get("note", ""),
        })
    kept = [e for e in doc.get("values", []) if e.get("key") not in new_keys]
    doc["values"] = kept + entries
    text = "# trainplan calibration: measured on a real machine by `trainplan probe`/`trainplan profile`.\n" \
           "# Read by `trainplan plan --calibration FILE`; measured values replace the assumptions.\n" \
           + tomli_w.dumps(_clean(doc))
    write_output(text, p, may_replace_input="calibration")  # regular files only, atomically, permissions kept (issue 16)
    return p


# ---------------------------------------------------------------- where a figure applies (issue 25)

# Figures of the machine's accelerator and its links: applied only to a plan of the same kind of accelerator,
# and the network ones only at the tier they were measured on (never from a loopback between local processes).
NETWORK_TIER = {"cluster.interconnect": "intra", "cluster.node_link": "inter"}
#: Figures of the machine that measured them: applied only to a plan of that kind of accelerator (left_out).
#: The accelerator's own rates too: a CPU's matmul peak (`probe matmul --as-peak`) or the MFU `profile`
#: measured on a CPU, applied to an H100 plan, made a 4-day run 234,879 days.
DEVICE_KEYS = frozenset(NETWORK_TIER) | {"cluster.host_to_device", "cluster.accelerator.peak_flops", "cluster.mfu",
                                         "cluster.hfu", "cluster.mfu_end_to_end"}
LOOPBACK = "loopback"


def machine_kind(machine: dict[str, Any]) -> str:
    """What kind of machine measured: its GPU (the first torch sees), or its CPU where it has none."""
    gpu = machine.get("gpu")
    return f"gpu: {gpu}" if gpu else f"cpu: {machine.get('cpu_model') or 'unknown'}"


def value_tier(key: str, probe: ProbeRecord | None, entry: CalibrationValue) -> str | None:
    """The tier a network figure was measured on: loopback (ranks as processes of one host, over its
    loopback), intra (ranks in one node, the accelerators' own links) or inter (one rank a node)."""
    if key not in NETWORK_TIER:
        return None
    recorded = getattr(entry, "tier", None)
    if isinstance(recorded, str):
        return recorded
    settings = probe.settings if probe is not None else {}
    if settings.get("launched_by") == "local processes":
        return LOOPBACK
    return str(settings.get("tier", "intra"))


def _accelerator_family(workload_doc: dict[str, Any]) -> str:
    acc = workload_doc.get("cluster", {}).get("accelerator", "h100-sxm") if isinstance(
        workload_doc.get("cluster", {}), dict) else "h100-sxm"
    if isinstance(acc, dict):  # a catalogue accelerator with figures overridden keeps its name
        name = acc.get("name")
        return str(name).strip().lower() if isinstance(name, str) and name else "custom"
    return str(acc).strip().lower()


def _same_kind(kind: str, accelerator: str) -> bool:
    """Whether a machine of `kind` (machine_kind) is the workload's accelerator: a CPU machine is a
    cpu-core plan's; a GPU is the catalogue accelerator whose family (h100, a100, mi300x, ...) its name holds."""
    if accelerator == "custom":
        return False
    family = accelerator.split("-")[0]
    if kind.startswith("cpu:"):
        return family == "cpu"
    return family != "cpu" and family in kind.lower()


#: Settings a calibration was measured at, which a plan must share to use it (calibration_matches).
CALIBRATION_SETTINGS = ("attention", "precision", "recompute", "micro_batch", "seq_len")


def calibration_matches(settings: dict[str, Any], attention: str, precision: str, recompute: str) -> list[str]:
    """The settings a plan differs from the calibration's in, in words ([] when it may use it).
    Attention: flash keeps what sdpa keeps; precision: fp16 keeps what bf16 keeps. The micro-batch
    and the sequence length need not match: the figures are per token, exact in S."""
    def kind(a: str) -> str:
        return "sdpa" if a == "flash" else a

    def width(p: str) -> str:
        return "bf16" if p in ("bf16", "fp16") else p

    out = []
    if "attention" in settings and kind(str(settings["attention"])) != kind(attention):
        out.append(f"attention {settings['attention']} measured, {attention} planned")
    if "precision" in settings and width(str(settings["precision"])) != width(precision):
        out.append(f"precision {settings['precision']} measured, {precision} planned")
    if "recompute" in settings and settings["recompute"] != recompute:
        out.append(f"recompute {settings['recompute']} measured, {recompute} planned")
    return out


#: Figures `probe model` measured at an attention kernel, precision and recomputation (issue 24).
MODEL_KEYS = frozenset({"training.activation_bytes_per_layer_token", "training.activation_bytes_outside_token"})


def left_out(path: str | Path, workload_doc: dict[str, Any],
             training: dict[str, str] | None = None) -> dict[str, str]:
    """The measured values of `path` that do not apply to the workload `workload_doc` (a nested dict), each
    with the reason in words: a device or network figure measured on another kind of machine, or a
    network figure measured at another tier (a loopback all-reduce stands for no cluster link); a
    model's activations measured at another attention kernel, precision or recomputation than
    `training` (the plan's `attention`, `precision` and `recompute`, as calibration_matches
    reads them)."""
    cal = parse(read_file(path), path)
    accelerator = _accelerator_family(workload_doc)
    out: dict[str, str] = {}
    for entry in cal.values:
        if entry.key in MODEL_KEYS and training is not None:
            probe = cal.probes.get(entry.probe)
            differs = calibration_matches(dict(probe.settings) if probe is not None else {}, **training)
            if differs:
                out[entry.key] = (f"left out the calibration's {entry.value:.4g} {entry.unit}: {'; '.join(differs)} "
                                  "(run `trainplan probe model` at the plan's settings)")
            continue
        if entry.key not in DEVICE_KEYS:
            continue
        probe = cal.probes.get(entry.probe)
        kind = getattr(entry, "machine_kind", None) or machine_kind(cal.machine if not probe else
                                                                    {"cpu_model": probe.cpu_model, **cal.machine})
        tier = value_tier(entry.key, probe, entry)
        value = f"{entry.value:.3g} {entry.unit}".strip()
        if tier == LOOPBACK:
            out[entry.key] = (f"left out the calibration's {value}: a loopback measurement (local processes on "
                              f"{entry.hostname or 'one host'}) stands for no cluster link")
        elif tier is not None and tier != NETWORK_TIER[entry.key]:
            out[entry.key] = f"left out the calibration's {value}: measured at the {tier}-node tier"
        elif not _same_kind(kind, accelerator):
            out[entry.key] = (f"left out the calibration's {value}: measured on {kind}, the plan is for "
                              f"{accelerator}")
    return out


def _source_text(entry: dict[str, Any], path: str | Path | None = None) -> str:
    """Where a measured value came from, saying only what the entry records: an entry that names no
    probe is "given in" the file, not "measured by `trainplan probe`" (issue 29)."""
    from trainplan.limits import printable

    host, cpu, date, probe = (entry.get(k) or "" for k in ("hostname", "cpu_model", "date", "probe"))
    machine = f"{host} ({cpu})" if host and cpu else (host or (f"a machine with {cpu}" if cpu else ""))
    if probe:
        text = f"measured by {_command(probe)} on {machine or 'a machine it does not name'}, {date or 'undated'}"
    else:
        recorded = ", ".join(x for x in (f"on {machine}" if machine else "", date) if x)
        shown = f" {printable(str(path), one_line=True)}" if path is not None else ""
        text = f"given in calibration file{shown}" + (f" ({recorded}; no probe recorded)" if recorded else
                                                      " (no probe, machine or date recorded)")
    note = entry.get("note")
    return f"{text}: {note}" if note else text


# Probes that are not `trainplan probe NAME`: what ran them.
COMMANDS = {"profile": "`trainplan profile`"}


def _command(probe: str) -> str:
    return COMMANDS.get(probe, f"`trainplan probe {probe}`")


def load(path: str | Path) -> dict[str, Measured]:
    """`{dotted_key: Measured}` of a calibration file; each unpacks as `(value, source_text)`."""
    cal = parse(read_file(path), path)
    out: dict[str, Measured] = {}
    for entry in cal.values:
        fields = entry.model_dump()
        out[entry.key] = Measured(key=entry.key, value=entry.value, source=_source_text(fields, path), unit=entry.unit,
                                  probe=entry.probe, date=entry.date, hostname=entry.hostname)
    return out


def recorded_format(path: str | Path) -> dict[str, Any] | None:
    """The clip format the decode probe of this file ran on, or None when it has no decode probe."""
    cal = parse(read_file(path), path)
    decode = cal.probes.get("decode")
    if not decode:
        return None
    return dict(decode.settings)


def check_compatible(path: str | Path, workload: Any) -> None:
    """Refuse a calibration whose decode probe ran on another resolution or codec than the workload's.

    `workload` is a `trainplan.workload.schema.Workload` or a plain nested dict of the workload
    file (only `data.width`, `data.height` and `data.kind` are read; missing ones are
    the defaults of docs/pipeline-and-bill.md, 1920x1080).
    """
    measured = load(path)
    if "cluster.core_fps_1080p" not in measured:
        return
    fmt = recorded_format(path)
    if fmt is None:
        return
    data = _data_of(workload)
    if data.get("kind", "video") not in FRAME_KINDS or data.get("access") == "decoded":
        return  # no decoder in the pipeline: the decode rate is not used
    want = {"width": int(data.get("width", 1920)), "height": int(data.get("height", 1080)),
            "codec": _codec_name(str(data.get("codec", WORKLOAD_CODEC)))}
    for key in FORMAT_KEYS:
        got = fmt.get(key)
        if key == "codec" and got is not None:
            got = _codec_name(str(got))  # a probe written before codec names were the codec's (libdav1d: av1)
        if got is not None and got != want[key]:
            where = f"data.{key}"
            raise UserError(
                str(path),
                f"its decode rate was measured on {fmt.get('width')}x{fmt.get('height')} {fmt.get('codec')}, "
                f"but the workload's {where} is {want[key]}; run `trainplan probe decode` on the workload "
                f"({want['width']}x{want['height']} {want['codec']}) with --output to measure it")


def _av_version() -> str:
    try:
        import av
    except ImportError:  # pragma: no cover - av is a core dependency
        return "(unknown version)"
    return str(av.__version__)


def _codec_name(name: str) -> str:
    from trainplan.workload.codecs import CODEC_ALIASES

    return CODEC_ALIASES.get(name.strip().lower(), name.strip().lower())


def _data_of(workload: Any) -> dict[str, Any]:
    if isinstance(workload, dict):
        return dict(workload.get("data", {}))
    data = getattr(workload, "data", None)
    if data is None:
        return {}
    return {k: getattr(data, k) for k in ("kind", "width", "height", "access", "codec") if hasattr(data, k)}


def apply(doc: dict[str, Any], path: str | Path) -> dict[str, Measured]:
    """Set the measured values of `path` in the nested workload dict `doc` (in place) after
    checking the format; return what was set. For callers that build the dict themselves."""
    check_compatible(path, doc)
    measured = load(path)
    for key, m in measured.items():
        node = doc
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if isinstance(child, str):
                child = {"name": child}
            node[part] = child = child if isinstance(child, dict) else {}
            node = child
        node[parts[-1]] = m.value
    return measured


# ---------------------------------------------------------------- what each probe sets


def decode_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    """From `DecodeProbe.to_dict()`: cluster.core_fps_1080p (the access pattern's headline figure)."""
    note = (f"{result['access']} access, {result['width']}x{result['height']} H.264 at "
            f"{result['bitrate'] / 1e6:g} Mbit/s, keyframe every {result['gop']}, one thread, "
            f"{result['postprocess']} to {result['side']} px"
            + {"shared_memory": f", batches of {result.get('batch')} handed off through shared memory",
               "dataloader": f", through a DataLoader worker in batches of {result.get('batch')} "
                             "(collate and hand-over included)"}.get(result.get("handoff", "none"), "")
            + f"; {result['frames_per_cpu_second']:.1f} frames "
            f"per CPU-second at that size, scaled by pixels to 1080p-equivalent")
    return [{"key": "cluster.core_fps_1080p", "value": float(result["core_fps_1080p"]), "note": note}]


def decode_files_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    """From `probe.decode_user_files`: cluster.core_fps_1080p at the contended rate (issue 14)."""
    note = (f"{result['access']} access on {len(result['files'])} of the user's files ({result['codec']} "
            f"{result['width']}x{result['height']}, keyframe every {result['gop']:g}), "
            f"{result.get('decoder', 'PyAV')} one thread, "
            f"{result['postprocess']} to {result['side']} px, with {result['contention_decoders']} decoder(s) "
            f"at once ({result['contention_ratio'] * 100:.0f} % of one alone); "
            f"{result['frames_per_cpu_second']:.1f} frames per CPU-second at that size, scaled by pixels to 1080p")
    return [{"key": "cluster.core_fps_1080p", "value": float(result["core_fps_1080p"]), "note": note}]


def decode_settings(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("width", "height", "fps", "bitrate", "gop", "codec", "access", "postprocess", "side", "threads",
            "preset", "handoff", "batch")
    settings = {k: result[k] for k in keys if k in result}
    settings.setdefault("decoder", f"PyAV {_av_version()}")  # which decoder the rate is of (issue 25)
    settings["clip_frames"] = result["sequential"]["clip_frames"]
    settings["interpolation"] = result["sequential"]["interpolation"]
    return settings


def read_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    note = (f"cold read of {units.format_quantity(result['bytes'], 'bytes')} from {result['path']} in "
            f"{result['block_bytes'] // 2**20} MiB blocks ({result['cold_method']}); warm "
            f"{result['warm_bytes_per_second'] / 1e9:.2f} GB/s")
    warm = (f"warm read (the file's pages in the page cache) of {units.format_quantity(result['bytes'], 'bytes')} from "
            f"{result['path']}: the rate of cached bytes in the cache what-if")
    return [{"key": "cluster.link", "value": float(result["cold_bytes_per_second"]), "note": note},
            {"key": "storage.cache_rate", "value": float(result["warm_bytes_per_second"]), "note": warm}]


def location_read_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`probe read URL` (issue 26): cluster.link is the best total rate over the connection counts tried,
    at the location measured (named in the note; the settings keep it too)."""
    note = (f"read from {result['location']} ({result['object_bytes'] / 1e6:.3g} MB object): "
            f"{result['best_connections']} concurrent requests, whole objects; one connection "
            f"{result['per_connection_bytes_per_second'] / 1e6:.3g} MB/s, time to first byte "
            f"{result['first_byte_seconds'] * 1e3:.3g} ms")
    return [{"key": "cluster.link", "value": float(result["link_bytes_per_second"]), "note": note}]


def allreduce_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    note = (f"ring all-reduce bus bytes/s, 2(N-1)/N M / t, {result['backend']} over {result['world_size']} "
            f"{result['launched_by']}, M = {units.format_quantity(result['bytes'], 'bytes')}")
    tier = LOOPBACK if result.get("launched_by") == "local processes" else "intra"
    return [{"key": "cluster.interconnect", "value": float(result["bus_bytes_per_second"]), "note": note,
             "tier": tier}]


def transfer_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    note = f"pinned host-to-device copies of {units.format_quantity(result['bytes'], 'bytes')} to {result['device']}"
    return [{"key": "cluster.host_to_device", "value": float(result["pinned_bytes_per_second"]), "note": note}]


def matmul_peak_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    """From one `MatmulResult.to_dict()`: the achieved rate as the accelerator's peak (a ceiling)."""
    threads = f", {result['threads']} thread(s)" if result.get("threads") else ""
    note = (f"achieved {result['library']} matmul {result['n']}x{result['n']} {result['dtype']} on "
            f"{result['device']}{threads}: a practical ceiling, lower than a datasheet peak")
    return [{"key": "cluster.accelerator.peak_flops", "value": float(result["flops_per_second"]), "note": note}]


def mfu_values(mfu: float, note: str) -> list[dict[str, Any]]:
    """A measured training step's MFU is end-to-end: docs/accounts.md says never apply scaling on top."""
    if not (0 < mfu <= 1):
        raise UserError("cluster.mfu", f"expected a measured MFU in (0, 1], got {mfu:.3g}; check the "
                        "workload's model size and accelerator peak")
    return [{"key": "cluster.mfu", "value": float(mfu), "note": note},
            {"key": "cluster.mfu_end_to_end", "value": True, "note": "set with the measured, end-to-end MFU"}]


def handover_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    """From the hand-over probe (`trainplan probe handover`): data.loader_cpu_per_frame, the loader
    worker's CPU-seconds per frame yielded, less what making the frames cost."""
    value = float(result["loader_cpu_per_frame"])
    if not (math.isfinite(value) and value > 0):
        raise UserError("data.loader_cpu_per_frame", f"expected a measured CPU time per frame above 0 s, got "
                        f"{value!r}; the run was too short for the worker's clock, run it longer")
    note = (f"a DataLoader worker yielding ready {result['side']} px uint8 frames in batches of {result['batch']}: "
            f"{result['worker_cpu_per_frame'] * 1e3:.3f} ms of CPU a frame, less "
            f"{result['making_cpu_per_frame'] * 1e3:.3f} ms making the frame, over {result['frames']} frames")
    return [{"key": "data.loader_cpu_per_frame", "value": value, "note": note}]
