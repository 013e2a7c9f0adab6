"""`trainplan probe model [CONFIG.json] [--set key=value]`: measure a model's training footprint (issue 12).

Traces the model's own code on the meta device (no weights, no memory, no download), counts its
FLOPs there, runs one AdamW step per parameter dtype on CPU (and one training step on the GPU when
present), says what it measures before it starts, and prints beside each measured figure the
plan's own formula. With --output it
records the activation figures as training.activation_bytes_per_layer_token and
training.activation_bytes_outside_token, which `plan --calibration FILE` uses (provenance measured).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan.errors import UserError, comma_items


def formula_beside(config: dict[str, Any], probe: Any, attention: str) -> dict[str, Any]:
    """The plan's formula for each measured figure (activations only for the catalogue's families)."""
    from trainplan.accounts import activations as act
    from trainplan.accounts import compute
    from trainplan.accounts import training_state as ts
    from trainplan.workload.params import attention_width, count_from_hf_config, matmul_params

    out: dict[str, Any] = {}
    count = count_from_hf_config(config)
    out["params"] = count.total
    if config.get("model_type") in act.families() and probe.recompute == "none" and probe.precision != "autocast":
        a = 4.0 if probe.precision == "fp32" else 2.0
        shape = act.shape_from_hf_config(config)
        out["activation_bytes_per_layer_token"] = act.layer_bytes_per_token(shape, probe.seq_len, attention, a).total
        out["activation_bytes_outside_token"] = act.outside_bytes_per_token(shape, probe.micro_batch, a)
    n, head = matmul_params(count)
    out["flops_per_token"] = {s: compute.flops_per_token(n, count.layers, attention_width(count), int(s),
                                                         head_params=head).model
                              for s in probe.flops_per_token}
    # torch's AdamW keeps two moments in the parameters' dtype: the pure_bf16 recipe's in bf16,
    # autocast_fp32's over fp32 weights
    recipe = ts.recipe("pure_bf16" if probe.precision == "bf16" else "autocast_fp32")
    out["optimizer_state_bytes"] = recipe.moments * count.total
    return out


def _table(d: dict[str, Any]) -> str:
    m, f = d["measured"], d["formula"]

    def row(name: str, measured: float | None, formula: float | None, unit: str) -> str:
        if measured is None:
            return f"  {name:<34} {'-':>14}"
        diff = f"{(formula / measured - 1) * 100:+.1f} %" if formula and measured else "-"
        shown = f"{formula:,.0f}" if formula is not None else "-"
        return f"  {name:<34} {measured:>14,.0f} {shown:>14} {diff:>9}  {unit}"

    lines = [f"model probe: {m['model_type']}, {m['attention']}, {m['precision']}, recompute {m['recompute']}, "
             f"b={m['micro_batch']} S={m['seq_len']}, {m['layers']} layers, {m['params']:,} parameters "
             f"({m['measured_on']})",
             f"  {'figure':<34} {'measured':>14} {'formula':>14} {'diff':>9}",
             row("saved activations per layer-token", m["activation_bytes_per_layer_token"],
                 f.get("activation_bytes_per_layer_token"), "B"),
             row("saved activations outside, per token", m["activation_bytes_outside_token"],
                 f.get("activation_bytes_outside_token"), "B")]
    for s, v in m["flops_per_token"].items():
        lines.append(row(f"FLOPs per token at S={s}", v, f["flops_per_token"].get(s), "FLOP"))
    lines.append(row("AdamW state after one step", m["optimizer_state_bytes"], f.get("optimizer_state_bytes"), "B"))
    for g in m["cuda_devices"]:
        lines.append(f"  cuda max_memory_allocated (one step)  {g['max_memory_allocated']:,.0f} B")
    return "\n".join(lines)


#: Bytes per parameter of the probed model: bf16 weights and the gradients the backward pass makes.
PROBE_BYTES_PER_PARAM = 2 + 2
#: Bytes per eager attention score: the b x heads x S x S scores and their softmax, in bf16.
EAGER_SCORE_BYTES = 2 * 2


#: The most elements a tensor may hold: torch counts them in int64, and the S x S scores of a FLOP count
#: at a huge S overflow it ("Storage size calculation overflowed") even on the meta device.
MAX_TENSOR_ELEMENTS = 2**62
#: The measured micro-batch and sequence length when not given (--batch, --seq-len).
DEFAULT_BATCH = 2
DEFAULT_SEQ_LEN = 128


def _check_model_size(config: dict[str, Any], batch: int, seq_len: int, attention: str,
                      flop_seq_lens: tuple[int, ...] = (), sets_given: bool = False) -> None:
    """The model built and the activations one step saves, against the memory limit, before torch builds
    anything (issue 29): weights from the exact count, activations as the schema's default of saved
    width-sized tensors per layer and token (training.saved_tensors_per_layer) in bf16, and with eager
    attention the S x S scores."""
    from trainplan import limits
    from trainplan.workload.params import count_from_hf_config
    from trainplan.workload.schema import TrainingSection

    count = count_from_hf_config(config)  # refuses a bad shape (a layer count of true) before the banner
    for s in (seq_len, *flop_seq_lens):
        if max(count.heads, 1) * s * s >= MAX_TENSOR_ELEMENTS:
            raise UserError("--seq-len" if s == seq_len else "--flop-seq-lens",
                            f"expected a shorter sequence: {count.heads} heads x {s:,}^2 attention scores pass the "
                            f"2^62 elements a tensor may hold")
    tensors = float(TrainingSection.model_fields["saved_tensors_per_layer"].default)
    weights = PROBE_BYTES_PER_PARAM * count.total
    # the optimizer step is real, on CPU: a model too large for this machine is refused, pointing at the
    # layer count, since a few layers measure the same per-layer figures
    limits.check_allocation("--set" if sets_given else "CONFIG", weights,
                            f"a model of {count.total:,} parameters ({count.layers:,} layers of width {count.width:,})",
                            "measure fewer layers with --set num_hidden_layers=2 (the figures per layer are the same)")

    def needed(b: int, s: int) -> float:
        saved = b * s * count.width * count.layers * tensors * 2
        if attention == "eager":
            saved += b * count.heads * s * s * count.layers * EAGER_SCORE_BYTES
        return weights + saved

    # the bound is on batch x seq-len: name the option that passes it at the other's default, else both
    limit = limits.memory_limit()[0]
    outside = [key for key, over in (("--batch", needed(batch, min(seq_len, DEFAULT_SEQ_LEN)) > limit),
                                     ("--seq-len", needed(min(batch, DEFAULT_BATCH), seq_len) > limit)) if over]
    limits.check_allocation(outside[0] if len(outside) == 1 else "--batch/--seq-len", needed(batch, seq_len),
                            f"{batch:,} x {seq_len:,} tokens through {count.layers:,} layers of width {count.width:,}")


DEFAULT_FLOP_SEQ_LENS = "512,2048,8192"


def _within_positions(config: dict[str, Any], seq_len: int, lens: tuple[int, ...], seq_len_given: bool,
                      flop_lens_given: bool, attention: str = "sdpa") -> tuple[int, tuple[int, ...]]:
    """A model with a learned position table (GPT-2's n_positions) runs on no device at a longer sequence:
    a --seq-len or --flop-seq-lens given past it is refused; the defaults past it are cut to the table's
    length, so that the probe of a 77-position model still measures where it can run."""
    from trainplan.measure.model_probe import learned_position_rows

    rows = learned_position_rows(config, attention)  # a model not built with --attention is refused here
    if rows is None:
        return seq_len, lens
    if seq_len > rows and not seq_len_given:
        seq_len = rows
    elif seq_len > rows:
        raise UserError("--seq-len", f"expected at most {rows:,} tokens, the rows of this model's learned position "
                        f"embedding (max_position_embeddings); got {seq_len:,}")
    past = [s for s in lens if s > rows]
    if past and flop_lens_given:
        raise UserError("--flop-seq-lens", f"expected lengths of at most {rows:,} tokens, the rows of this model's "
                        f"learned position embedding (max_position_embeddings); got {past[0]:,}")
    return seq_len, tuple(dict.fromkeys(min(s, rows) for s in lens))


def register(probe_app: typer.Typer) -> None:
    @probe_app.command("model")
    def model_cmd(
        config: Annotated[Optional[Path], typer.Argument(help="a Hugging Face config.json (or its directory)")] = None,
        sets: Annotated[Optional[list[str]], typer.Option("--set", help="config key: KEY=VALUE (JSON values)")] = None,
        batch: Annotated[int, typer.Option("--batch", help="sequences in the measured micro-batch", min=1)]
        = DEFAULT_BATCH,
        seq_len_given: Annotated[Optional[int], typer.Option(
            "--seq-len", help=f"tokens per measured sequence  [default: {DEFAULT_SEQ_LEN}, or the rows of a "
            "learned position table if fewer]", min=2, show_default=False)] = None,
        attention: Annotated[str, typer.Option(help="sdpa or eager")] = "sdpa",
        precision: Annotated[str, typer.Option(help="bf16, fp32, or autocast (bf16 autocast over fp32 weights)")]
        = "bf16",
        recompute: Annotated[str, typer.Option(help="none, selective or full")] = "none",
        flop_seq_lens_given: Annotated[Optional[str], typer.Option(
            "--flop-seq-lens", help=f"comma-separated S for FLOP counts  [default: {DEFAULT_FLOP_SEQ_LENS}, each cut "
            "to the rows of a learned position table]", show_default=False)] = None,
        format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",  # noqa: A002
        output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write or update this calibration "
                                                       "TOML file")] = None,
    ) -> None:
        """Saved activations per layer and outside, FLOPs per token, optimizer state, GPU peak: measured beside the plan's formulas."""
        from trainplan.measure import model_probe

        # None: not given, so a learned position table may cut the default (a value given is refused past it)
        seq_len = DEFAULT_SEQ_LEN if seq_len_given is None else seq_len_given
        flop_seq_lens = DEFAULT_FLOP_SEQ_LENS if flop_seq_lens_given is None else flop_seq_lens_given
        if format not in ("table", "json"):
            from trainplan.interfaces.options import check_format
            check_format(format, ("table", "json"))
        if attention not in ("sdpa", "eager"):
            raise UserError("--attention", f"expected sdpa or eager, got {attention!r}")
        items = comma_items("--flop-seq-lens", flop_seq_lens, "whole numbers")
        try:
            if not flop_seq_lens.isascii():  # int() reads any script's digits
                raise ValueError
            lens = tuple(int(x) for x in items)
        except ValueError:
            raise UserError("--flop-seq-lens", f"comma-separated whole numbers, got {flop_seq_lens!r}") from None
        from trainplan import units

        for s in lens:
            units.number(s, "--flop-seq-lens", whole=True)
        if not lens or min(lens) < 2:
            raise UserError("--flop-seq-lens", f"comma-separated whole numbers of 2 or more, got {flop_seq_lens!r}")
        if precision not in ("bf16", "fp32", "autocast"):
            raise UserError("--precision", f"expected bf16, fp32 or autocast (bf16 autocast over fp32 weights), "
                            f"got {precision!r}")
        if recompute not in ("none", "selective", "full"):
            raise UserError("--recompute", f"expected none, selective or full, got {recompute!r}")
        cfg = model_probe.load_config(config, sets or [])
        _check_model_size(cfg, batch, seq_len, attention, lens, sets_given=bool(sets))
        seq_len, lens = _within_positions(cfg, seq_len, lens, seq_len_given=seq_len_given is not None,
                                          flop_lens_given=flop_seq_lens_given is not None, attention=attention)
        typer.echo(model_probe.announce(cfg, batch, seq_len, attention, precision, recompute, lens), err=True)
        measured = model_probe.probe_model(cfg, batch, seq_len, attention, lens, precision, recompute)
        d = {"measured": measured.as_dict(), "formula": formula_beside(cfg, measured, attention)}
        if output is not None:
            write_calibration(output, cfg, measured)
        if format == "json":
            from trainplan.planning.evaluate import clean

            typer.echo(json.dumps(clean(d), indent=2))
        else:
            typer.echo(_table(d))


def write_calibration(path: Path, config: dict[str, Any], measured: Any) -> None:
    from trainplan.measure import probe
    from trainplan.workload import calibration

    note = (f"saved tensors of {measured.model_type} ({measured.attention}, {measured.precision}, recompute "
            f"{measured.recompute}, b={measured.micro_batch}, S={measured.seq_len}), the real module traced on the "
            "meta device, deduplicated by storage")
    values = [{"key": "training.activation_bytes_per_layer_token", "value": measured.activation_bytes_per_layer_token,
               "note": note},
              {"key": "training.activation_bytes_outside_token", "value": measured.activation_bytes_outside_token,
               "note": note}]
    calibration.write(path, "model", settings={"config": config, "micro_batch": measured.micro_batch,
                                               "seq_len": measured.seq_len, "attention": measured.attention,
                                               "precision": measured.precision, "recompute": measured.recompute},
                      results=measured.as_dict(), values=values, machine=probe.machine())
