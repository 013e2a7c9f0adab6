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
rate of one matmul, a ceiling, not a datasheet peak), and `cluster.mfu` with
`cluster.mfu_end_to_end = true` (from `trainplan profile`: a measured training step is
end-to-end, so scaling efficiency must not be applied on top of it, SPEC §3).

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

from trainplan.errors import UserError

FORMAT_VERSION = 1

# The workload keys a calibration may set, with the unit the value is stored in (SI).
KNOWN_KEYS: dict[str, str] = {
    "cluster.core_fps_1080p": "frames/s",
    "cluster.link": "B/s",
    "cluster.interconnect": "B/s",
    "cluster.host_to_device": "B/s",
    "cluster.accelerator.peak_flops": "FLOP/s",
    "cluster.mfu": "fraction",
    "cluster.mfu_end_to_end": "bool",
    "storage.cache_rate": "B/s",  # read probe, warm: the page cache's rate (issue 14's cache what-if)
}

# Settings of the decode probe that must agree with the workload it is applied to.
# The 1080p-equivalent rate is normalised by pixels (SPEC §7), but that scaling is an
# approximation (small frames cost more per pixel, the bit rate matters too), so a
# figure is applied only at the resolution and codec it was measured on.
FORMAT_KEYS = ("width", "height", "codec")
WORKLOAD_CODEC = "h264"  # SPEC §7: the workload's video is H.264 (there is no data.codec key)


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


def read_file(path: str | Path) -> dict[str, Any]:
    """The raw document of a calibration file; UserError when it is missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise UserError(str(path), "no such calibration file (write one with `trainplan probe decode --output FILE`)")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise UserError(str(path), f"malformed calibration TOML ({err})") from None
    except UnicodeDecodeError:
        raise UserError(str(path), "expected a UTF-8 text TOML calibration file") from None
    fmt = doc.get("format")
    if fmt != FORMAT_VERSION:
        raise UserError(str(path), f"expected a calibration file of format {FORMAT_VERSION}, got format {fmt!r}")
    return doc


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
    doc: dict[str, Any] = read_file(p) if merge and p.is_file() else {"format": FORMAT_VERSION}
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
            "note": v.get("note", ""),
        })
    kept = [e for e in doc.get("values", []) if e.get("key") not in new_keys]
    doc["values"] = kept + entries
    p.parent.mkdir(parents=True, exist_ok=True)
    text = "# trainplan calibration: measured on a real machine by `trainplan probe`/`trainplan profile`.\n" \
           "# Read by `trainplan plan --calibration FILE`; measured values replace the assumptions.\n" \
           + tomli_w.dumps(_clean(doc))
    p.write_text(text, encoding="utf-8")
    return p


def _source_text(entry: dict[str, Any]) -> str:
    where = entry.get("hostname") or "an unnamed machine"
    cpu = entry.get("cpu_model")
    machine = f"{where} ({cpu})" if cpu else where
    note = entry.get("note")
    text = f"measured by `trainplan {_command(entry.get('probe', ''))}` on {machine}, {entry.get('date', 'undated')}"
    return f"{text}: {note}" if note else text


def _command(probe: str) -> str:
    return "profile" if probe == "profile" else f"probe {probe}"


def load(path: str | Path) -> dict[str, Measured]:
    """`{dotted_key: Measured}` of a calibration file; each unpacks as `(value, source_text)`."""
    doc = read_file(path)
    out: dict[str, Measured] = {}
    for i, entry in enumerate(doc.get("values", [])):
        key = entry.get("key")
        if key not in KNOWN_KEYS:
            raise UserError(f"{path}: values[{i}].key", f"expected one of {', '.join(KNOWN_KEYS)}, got {key!r}")
        if "value" not in entry:
            raise UserError(f"{path}: values[{i}]", f"expected a value for {key}")
        value = entry["value"]
        if KNOWN_KEYS[key] == "bool":
            if not isinstance(value, bool):
                raise UserError(f"{path}: {key}", f"expected true or false, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise UserError(f"{path}: {key}", f"expected a positive number in {KNOWN_KEYS[key]}, got {value!r}")
        out[key] = Measured(key=key, value=value, source=_source_text(entry), unit=str(entry.get("unit", "")),
                            probe=str(entry.get("probe", "")), date=str(entry.get("date", "")),
                            hostname=str(entry.get("hostname", "")))
    return out


def recorded_format(path: str | Path) -> dict[str, Any] | None:
    """The clip format the decode probe of this file ran on, or None when it has no decode probe."""
    doc = read_file(path)
    decode = doc.get("probes", {}).get("decode")
    if not decode:
        return None
    return dict(decode.get("settings", {}))


def check_compatible(path: str | Path, workload: Any) -> None:
    """Refuse a calibration whose decode probe ran on another resolution or codec than the workload's.

    `workload` is a `trainplan.workload.schema.Workload` or a plain nested dict of the workload
    file (only `data.width`, `data.height` and `data.kind` are read; missing ones are
    the defaults of SPEC §7, 1920x1080).
    """
    measured = load(path)
    if "cluster.core_fps_1080p" not in measured:
        return
    fmt = recorded_format(path)
    if fmt is None:
        return
    data = _data_of(workload)
    if data.get("kind", "video") != "video" or data.get("access") == "decoded":
        return  # no decoder in the pipeline: the decode rate is not used
    want = {"width": int(data.get("width", 1920)), "height": int(data.get("height", 1080)),
            "codec": WORKLOAD_CODEC}
    for key in FORMAT_KEYS:
        got = fmt.get(key)
        if got is not None and got != want[key]:
            where = f"data.{key}" if key != "codec" else "codec"
            raise UserError(
                str(path),
                f"its decode rate was measured on {fmt.get('width')}x{fmt.get('height')} {fmt.get('codec')}, "
                f"but the workload's {where} is {want[key]}; run `trainplan probe decode` on the workload "
                f"({want['width']}x{want['height']} {want['codec']}) with --output to measure it")


def _data_of(workload: Any) -> dict[str, Any]:
    if isinstance(workload, dict):
        return dict(workload.get("data", {}))
    data = getattr(workload, "data", None)
    if data is None:
        return {}
    return {k: getattr(data, k) for k in ("kind", "width", "height", "access") if hasattr(data, k)}


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
            f"{result['width']}x{result['height']}, keyframe every {result['gop']:g}), PyAV one thread, "
            f"{result['postprocess']} to {result['side']} px, with {result['contention_decoders']} decoder(s) "
            f"at once ({result['contention_ratio'] * 100:.0f} % of one alone); "
            f"{result['frames_per_cpu_second']:.1f} frames per CPU-second at that size, scaled by pixels to 1080p")
    return [{"key": "cluster.core_fps_1080p", "value": float(result["core_fps_1080p"]), "note": note}]


def decode_settings(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("width", "height", "fps", "bitrate", "gop", "codec", "access", "postprocess", "side", "threads",
            "preset", "handoff", "batch")
    settings = {k: result[k] for k in keys if k in result}
    settings["clip_frames"] = result["sequential"]["clip_frames"]
    settings["interpolation"] = result["sequential"]["interpolation"]
    return settings


def read_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    note = (f"cold read of {result['bytes'] / 1e6:.0f} MB from {result['path']} in "
            f"{result['block_bytes'] // 2**20} MiB blocks ({result['cold_method']}); warm "
            f"{result['warm_bytes_per_second'] / 1e9:.2f} GB/s")
    warm = (f"warm read (the file's pages in the page cache) of {result['bytes'] / 1e6:.0f} MB from "
            f"{result['path']}: the rate of cached bytes in the cache what-if")
    return [{"key": "cluster.link", "value": float(result["cold_bytes_per_second"]), "note": note},
            {"key": "storage.cache_rate", "value": float(result["warm_bytes_per_second"]), "note": warm}]


def allreduce_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    note = (f"ring all-reduce bus bytes/s, 2(N-1)/N M / t, {result['backend']} over {result['world_size']} "
            f"{result['launched_by']}, M = {result['bytes'] / 1e6:.1f} MB")
    return [{"key": "cluster.interconnect", "value": float(result["bus_bytes_per_second"]), "note": note}]


def transfer_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    note = f"pinned host-to-device copies of {result['bytes'] / 1e6:.0f} MB to {result['device']}"
    return [{"key": "cluster.host_to_device", "value": float(result["pinned_bytes_per_second"]), "note": note}]


def matmul_peak_values(result: dict[str, Any]) -> list[dict[str, Any]]:
    """From one `MatmulResult.to_dict()`: the achieved rate as the accelerator's peak (a ceiling)."""
    threads = f", {result['threads']} thread(s)" if result.get("threads") else ""
    note = (f"achieved {result['library']} matmul {result['n']}x{result['n']} {result['dtype']} on "
            f"{result['device']}{threads}: a practical ceiling, lower than a datasheet peak")
    return [{"key": "cluster.accelerator.peak_flops", "value": float(result["flops_per_second"]), "note": note}]


def mfu_values(mfu: float, note: str) -> list[dict[str, Any]]:
    """A measured training step's MFU is end-to-end: SPEC §3 says never apply scaling on top."""
    if not (0 < mfu <= 1):
        raise UserError("cluster.mfu", f"expected a measured MFU in (0, 1], got {mfu:.3g}; check the "
                        "workload's model size and accelerator peak")
    return [{"key": "cluster.mfu", "value": float(mfu), "note": note},
            {"key": "cluster.mfu_end_to_end", "value": True, "note": "set with the measured, end-to-end MFU"}]
