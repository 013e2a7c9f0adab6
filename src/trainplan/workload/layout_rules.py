"""What a parallel layout must satisfy before it is planned: the degrees multiply to the device
count and divide what they split (issue 13). Checked once, at the boundary (workload/schema.py
and the layout search's starting point); the accounts trust a layout they are given."""

from __future__ import annotations

from trainplan.errors import UserError


def embedding_units(layers: int, pipeline: int, interleave: int = 1) -> int | None:
    """0 when p x v chunks divide the layers evenly; 1 when they divide the layers and the two embedding
    units (uneven stages: BLOOM's 70 layers on 12 stages, Llama 3 405B's 126 on 16); None when neither."""
    chunks = pipeline * interleave
    if layers % chunks == 0:
        return 0
    if pipeline > 1 and (layers + 2) % chunks == 0:
        return 1
    return None


def check_layout(count: int, tensor: int = 1, pipeline: int = 1, interleave: int = 1, context: int = 1,
                 expert: int = 1, data: int | None = None, schedule: str = "1f1b", sequence: bool = False,
                 heads: int | None = None, layers: int | None = None, experts: int | None = 1,
                 seq_len: int | None = None, micro_batches: int | None = None) -> int:
    """The data-parallel degree of a valid layout; UserError naming the key that breaks it."""
    model_split = tensor * pipeline * context
    if data is not None:
        if model_split * data != count:
            raise UserError("parallel.data", f"expected tensor x pipeline x context x data = cluster.count "
                            f"({count}), got {tensor} x {pipeline} x {context} x {data} = {model_split * data}")
    elif count % model_split:
        raise UserError("cluster.count", f"expected a multiple of parallel.tensor x pipeline x context "
                        f"({tensor} x {pipeline} x {context} = {model_split}), got {count}")
    d = data if data is not None else count // model_split
    if heads is not None and heads % tensor:
        raise UserError("parallel.tensor", f"expected a divisor of model.heads ({heads}), got {tensor}")
    if schedule == "interleaved" and interleave < 2:
        raise UserError("parallel.interleave", f"expected 2 or more virtual stages with schedule = 'interleaved', "
                        f"got {interleave}")
    if schedule != "interleaved" and interleave > 1:
        raise UserError("parallel.schedule", f"expected 'interleaved' with parallel.interleave = {interleave}, "
                        f"got {schedule!r}")
    if interleave > 1 and pipeline < 2:
        raise UserError("parallel.interleave", "expected 1 without pipeline parallelism (parallel.pipeline = 1)")
    if layers is not None and embedding_units(layers, pipeline, interleave) is None:
        key = "parallel.interleave" if interleave > 1 else "parallel.pipeline"
        raise UserError(key, f"expected parallel.pipeline x interleave ({pipeline} x {interleave}) to divide "
                        f"model.layers ({layers}) or model.layers + 2 (the embedding and the head as stages' "
                        f"partition units)")
    if expert > 1 and experts is not None and experts % expert:  # None: a config.json's, checked when counted
        raise UserError("parallel.expert", f"expected a divisor of model.experts ({experts}), got {expert}")
    if expert > 1 and (d * context) % expert:
        raise UserError("parallel.expert", f"expected a divisor of data x context ({d} x {context}): experts are "
                        f"spread over the data-parallel ranks, got {expert}")
    if seq_len is not None and seq_len % context:
        raise UserError("parallel.context", f"expected a divisor of training.seq_len ({seq_len}), got {context}")
    if schedule == "interleaved" and micro_batches is not None and micro_batches % pipeline:
        raise UserError("training.grad_accum", f"expected a multiple of parallel.pipeline ({pipeline}): the "
                        f"interleaved schedule runs micro-batches in groups of p, got {micro_batches}")
    if sequence and tensor < 2:
        raise UserError("parallel.sequence", "expected parallel.tensor > 1: sequence parallelism splits over the "
                        "tensor-parallel ranks")
    return d
