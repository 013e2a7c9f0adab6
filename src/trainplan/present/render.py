"""Renderings of a report: a rich table, JSON and Markdown (HTML lives in html.py)."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from trainplan.units import format_quantity

# The dimension of each figure, by dotted name, for formatting. Figures not named here are
# printed as plain numbers.
DIMENSIONS: dict[str, str] = {
    "compute.flops": "flops", "compute.seconds": "time", "compute.seconds_per_step": "time",
    "compute.tokens_per_step": "count", "compute.steps": "count", "compute.sustained_flops": "flop_rate",
    "compute.wall_seconds": "time",
    # issue 12: the architecture's terms
    "compute.flops_per_token_model": "flops", "compute.flops_per_token_executed": "flops",
    "compute.matmul_params": "count", "compute.mfu": "fraction", "compute.hfu": "fraction",
    "memory.activations_layers": "bytes", "memory.activations_outside_layers": "bytes",
    "memory.activations_logits": "bytes", "memory.activations_per_layer_token": "bytes",
    "memory.activations_kept_per_layer_token": "bytes", "memory.activations_formula": "bytes",
    "memory.activations_measured": "bytes", "memory.gathered_bytes": "bytes", "memory.trainable_params": "count",
    "memory.frozen_params": "count",
    "memory.state_bytes": "bytes", "memory.weights_bytes": "bytes", "memory.grads_bytes": "bytes",
    "memory.optimizer_bytes": "bytes", "memory.activation_bytes": "bytes", "memory.runtime_buffers": "bytes",
    "memory.headroom_bytes": "bytes", "memory.per_device_bytes": "bytes", "memory.device_memory": "bytes",
    "network.gradient_bytes": "bytes", "network.ring_bytes_per_step": "bytes", "network.link_rate": "byte_rate",
    "network.floor_seconds_per_step": "time", "network.backward_seconds_per_step": "time",
    "network.share_of_step": "fraction",
    "storage.data_bytes": "bytes", "storage.checkpoint_bytes": "bytes", "storage.checkpoints_bytes": "bytes",
    "storage.exports_bytes": "bytes", "storage.retained_bytes": "bytes", "storage.input_byte_rate": "byte_rate",
    "storage.save_seconds": "time", "storage.save_share": "fraction",
    "pipeline.demand_fps": "frequency", "pipeline.supply_fps": "frequency", "pipeline.decoder_fps": "frequency",
    "pipeline.core_fps": "frequency", "pipeline.busy": "fraction", "pipeline.threshold_params": "count",
    "pipeline.demand_tokens_per_second": "frequency", "pipeline.supply_tokens_per_second": "frequency",
    "pipeline.stored_bytes_per_hour": "bytes", "pipeline.decoded_bytes_per_hour": "bytes",
    "pipeline.frames_per_hour": "count", "pipeline.tokens_per_hour": "count",
    "bill.total": "dollars", "bill.bytes": "dollars", "bill.storage": "dollars", "bill.transfer": "dollars",
    "bill.cores": "dollars", "bill.idle_accelerator": "dollars", "bill.transport_share": "fraction",
    "bill.accelerator_seconds_per_hour": "time", "bill.useful_seconds_per_hour": "time",
    "bill.epoch_seconds": "time", "bill.epoch_seconds_at_cores_needed": "time",
    "simulation.busy": "fraction", "simulation.formula_busy": "fraction", "simulation.pipeline_busy": "fraction",
    "simulation.difference": "fraction", "simulation.throughput_fps": "frequency",
    "simulation.demand_fps": "frequency",
}

ACCOUNTS = ("compute", "memory", "network", "storage", "pipeline", "bill", "energy", "training_cost", "serving",
            "simulation")


def flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists are kept whole."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def format_value(key: str, value: Any) -> str:
    if value is None:
        return "∞ / n.a."
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        dim = DIMENSIONS.get(key)
        if dim == "frequency" and ("tokens" in key):
            return f"{value:,.0f} tokens/s"
        if dim == "frequency":
            return f"{value:,.1f} frames/s"
        if dim is not None:
            return format_quantity(float(value), dim)  # type: ignore[arg-type]
        if isinstance(value, int) or float(value).is_integer():
            return f"{value:,.0f}"
        return f"{value:,.4g}"
    if isinstance(value, list):
        return f"{len(value)} rows"
    return str(value)


def _rows(report: dict[str, Any], account: str) -> list[tuple[str, str]]:
    flat = flatten(report[account], f"{account}.")
    return [(k.split(".", 1)[1], format_value(k, v)) for k, v in flat.items() if not isinstance(v, list)]


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, allow_nan=False, default=str)


def to_table(report: dict[str, Any], width: int = 110) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    console.print(f"[bold]{report['verdict']}[/bold]")
    for account in ACCOUNTS:
        if account not in report:
            continue
        table = Table(title=account, title_justify="left", show_header=True)
        table.add_column("figure")
        table.add_column("value", justify="right")
        table.add_column("provenance")
        for name, text in _rows(report, account):
            table.add_row(name, text, "derived")
        console.print(table)
    table = Table(title="assumptions", title_justify="left")
    table.add_column("key")
    table.add_column("value", justify="right")
    table.add_column("provenance")
    table.add_column("source", overflow="fold")
    for key, a in report["assumptions"].items():
        value = a["value"]
        table.add_row(key, "" if value is None else str(value), a["provenance"], a["source"])
    console.print(table)
    return buf.getvalue()


def to_markdown(report: dict[str, Any]) -> str:
    lines = ["# trainplan", "", f"**{report['verdict']}**", ""]
    for account in ACCOUNTS:
        if account not in report:
            continue
        lines += [f"## {account}", "", "| figure | value | provenance |", "|---|---:|---|"]
        lines += [f"| {name} | {text} | derived |" for name, text in _rows(report, account)]
        lines.append("")
    lines += ["## assumptions", "", "| key | value | provenance | source |", "|---|---:|---|---|"]
    for key, a in report["assumptions"].items():
        value = "" if a["value"] is None else str(a["value"]).replace("|", "\\|")
        lines.append(f"| {key} | {value} | {a['provenance']} | {a['source'].replace('|', '/')} |")
    return "\n".join(lines) + "\n"
