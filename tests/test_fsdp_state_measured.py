"""FSDP training state per device (training_state.sharded(..., "fsdp", ...)) against real PyTorch FSDP, measured.

Two CPU processes (gloo, world size 2) shard a small stack of MLP blocks with FSDP2
(torch.distributed.fsdp.fully_shard, one unit per block and the root) under
MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), run one forward, backward and
torch.optim.Adam step, and measure on each rank, from the tensors themselves:

    params   the local shards of the parameters (DTensor.to_local())
    grads    the local shards of their gradients
    moments  Adam's exp_avg and exp_avg_sq (their local shards; the scalar `step` left out)

Checked against the hand formula, P parameters over n devices: the fp32 shard is the master copy
(4 P / n), the gradient shard is fp32 (4 P / n), the two moments fp32 (8 P / n), 16 P / n in all;
and the total against trainplan's weights + grads + optimizer bytes for the default recipe
(mixed_fp32_master). The bf16 copy of a unit exists only while FSDP has it gathered: its bytes in
the forward are checked against trainplan's per-unit gathered bytes (weights x P_layer).

trainplan's split is checked too: its weights are FSDP's fp32 shard (the master), its gradients the
fp32 gradient shard, its optimizer bytes the two moments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch was built without torch.distributed", allow_module_level=True)
if not dist.is_gloo_available():
    pytest.skip("torch.distributed has no gloo backend (needed for FSDP on CPU)", allow_module_level=True)
try:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
except ImportError as missing:  # FSDP2 is public from torch 2.6
    pytest.skip(f"FSDP2 (torch.distributed.fsdp.fully_shard) is not in this torch: {missing}",
                allow_module_level=True)

import torch.multiprocessing as tmp  # noqa: E402

from trainplan.accounts import training_state as ts  # noqa: E402

WORLD = 2
WIDTH, HIDDEN, BLOCKS = 256, 512, 2  # every dim 0 even: FSDP2 shards on dim 0, so no padding over 2 ranks
DEADLINE_S = 300  # generous for a busy 2-core machine; the run itself takes a few seconds


def build_model():
    """A stack of pre-norm MLP blocks (LayerNorm, up, GELU, down), each the size of a small decoder block."""
    nn = torch.nn
    return nn.Sequential(*(nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, HIDDEN), nn.GELU(),
                                         nn.Linear(HIDDEN, WIDTH)) for _ in range(BLOCKS)))


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def _bytes(tensors) -> dict:
    """Element bytes, and storage bytes counted once per storage (FSDP2's gradient shards of one unit
    are views into one reduce-scatter output; summing each view's storage would count it again)."""
    storages = {}
    for t in tensors:
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
    return {"elements": sum(t.numel() * t.element_size() for t in tensors), "storage": sum(storages.values()),
            "numel": sum(t.numel() for t in tensors), "dtypes": sorted({str(t.dtype) for t in tensors})}


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """One rank: shard, step, measure, write rank<r>.json (or skip<r>.json if gloo cannot start)."""
    torch.set_num_threads(1)  # two ranks on a 2-core machine: no oversubscription
    if sys.platform.startswith("linux") and os.path.exists("/sys/class/net/lo"):
        # gloo picks its interface from the hostname otherwise, which a sandbox may not resolve
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    try:
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=120))
        dist.init_process_group("gloo", rank=rank, world_size=world, store=store, timeout=timedelta(seconds=120))
    except Exception as failed:
        Path(out_dir, f"skip{rank}.json").write_text(json.dumps(f"gloo process group did not start: {failed!r}"))
        raise
    try:
        torch.manual_seed(0)
        model = build_model()
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        gathered = []  # bytes of each unit's parameters as its forward sees them (the unsharded copy)
        for block in model:
            fully_shard(block, mp_policy=policy)
            block.register_forward_pre_hook(lambda m, args: gathered.append(
                {"bytes": sum(p.numel() * p.element_size() for p in m.parameters()),
                 "dtypes": sorted({str(p.dtype) for p in m.parameters()})}))
        fully_shard(model, mp_policy=policy)
        # the backward transient: when a unit's backward is done, FSDP copies its unsharded gradients into a
        # reduce-scatter input of the reduce dtype; both exist at that moment (measured at the copy-in itself)
        from torch.distributed.fsdp._fully_shard import _fsdp_collectives as collectives

        copy_in, copies = collectives.foreach_reduce_scatter_copy_in, []

        def measured_copy_in(unsharded_grads, reduce_scatter_input, world_size):
            copies.append({"grads": _bytes(list(unsharded_grads)), "input": _bytes([reduce_scatter_input])})
            return copy_in(unsharded_grads, reduce_scatter_input, world_size)

        collectives.foreach_reduce_scatter_copy_in = measured_copy_in
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        torch.manual_seed(1 + rank)  # each rank its own batch, as data parallelism has it
        out = model(torch.randn(8, WIDTH))
        out.float().pow(2).mean().backward()
        opt.step()

        params = list(model.parameters())
        moments = [_local(opt.state[p][k]) for p in params for k in ("exp_avg", "exp_avg_sq")]
        result = {"params": _bytes([_local(p) for p in params]),
                  "grads": _bytes([_local(p.grad) for p in params]),
                  "moments": _bytes(moments),
                  "global_numel": sum(p.numel() for p in params),
                  "sharded": all(hasattr(p, "to_local") for p in params),
                  "state_keys": sorted({k for p in params for k in opt.state[p]}),
                  "compute_dtype": str(out.dtype),
                  "gathered": gathered, "copies": copies}
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("fsdp_state")
    # the parent holds the rendezvous store on a port the OS picks (port 0): no race for a free port
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=120))
    ctx = tmp.start_processes(_worker, args=(WORLD, store.port, str(out_dir)), nprocs=WORLD, join=False,
                              start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                pytest.fail(f"the {WORLD} FSDP ranks did not finish within {DEADLINE_S} s")
    except (tmp.ProcessRaisedException, tmp.ProcessExitedException):
        skips = sorted(out_dir.glob("skip*.json"))
        if skips:
            pytest.skip(json.loads(skips[0].read_text()))
        raise
    finally:
        for proc in ctx.processes:  # a rank left waiting on a collective that will never come
            if proc.is_alive():
                proc.kill()
                proc.join(10)
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(WORLD)]


def total_params() -> int:
    return sum(p.numel() for p in build_model().parameters())


def block_params() -> int:
    return sum(p.numel() for p in build_model()[0].parameters())


def sharded_bytes(rank: dict) -> int:
    return rank["params"]["elements"] + rank["grads"]["elements"] + rank["moments"]["elements"]


def test_the_model_is_really_sharded(measured):
    """Every parameter a DTensor, each rank holding half of it: the shards cover the model once."""
    p = total_params()
    for rank in measured:
        assert rank["sharded"]
        assert rank["global_numel"] == p
        assert rank["params"]["numel"] * WORLD == p
        assert rank["grads"]["numel"] * WORLD == p
    assert sum(rank["params"]["numel"] for rank in measured) == p
    assert measured[0]["compute_dtype"] == "torch.bfloat16"  # the policy's param_dtype did take effect


def test_dtypes_of_the_sharded_state(measured):
    """The shard FSDP keeps is the fp32 master; gradients are reduced into fp32; Adam's moments fp32."""
    for rank in measured:
        assert rank["params"]["dtypes"] == ["torch.float32"]
        assert rank["grads"]["dtypes"] == ["torch.float32"]
        assert rank["moments"]["dtypes"] == ["torch.float32"]
        assert rank["state_keys"] == ["exp_avg", "exp_avg_sq", "step"]


def test_each_part_by_hand(measured):
    """fp32 shard 4 P / n, fp32 gradient shard 4 P / n, two fp32 moments 8 P / n; storages no larger
    than the elements they hold, beyond padding."""
    p = total_params()
    for rank in measured:
        for part, per_param in (("params", 4), ("grads", 4), ("moments", 8)):
            assert rank[part]["elements"] == per_param * p / WORLD, part
            assert rank[part]["elements"] <= rank[part]["storage"] <= rank[part]["elements"] * (1 + 1e-3), part


def test_sharded_total_is_16_bytes_per_parameter_over_n(measured):
    p = total_params()
    for rank in measured:
        assert sharded_bytes(rank) == pytest.approx(16 * p / WORLD, rel=1e-3)
        stored = rank["params"]["storage"] + rank["grads"]["storage"] + rank["moments"]["storage"]
        assert stored == pytest.approx(16 * p / WORLD, rel=1e-3)


def test_sharded_total_matches_trainplan(measured):
    p = total_params()
    account = ts.sharded(p, ts.recipe("mixed_fp32_master"), "fsdp", WORLD, block_params())
    planned = account.weights_bytes + account.grads_bytes + account.optimizer_bytes
    for rank in measured:
        assert sharded_bytes(rank) == pytest.approx(planned, rel=1e-3)
        assert rank["params"]["elements"] == pytest.approx(account.weights_bytes, rel=1e-3)
        assert rank["grads"]["elements"] == pytest.approx(account.grads_bytes, rel=1e-3)
        assert rank["moments"]["elements"] == pytest.approx(account.optimizer_bytes, rel=1e-3)


def test_gathered_unit_matches_trainplan_per_unit(measured):
    """While a unit runs, FSDP holds its bf16 copy whole: weights x P_layer, what trainplan books per unit
    in flight (its gathered bytes are that times the units in flight, which this does not measure)."""
    r = ts.recipe("mixed_fp32_master")
    account = ts.sharded(total_params(), r, "fsdp", WORLD, block_params())
    per_unit = (account.gathered_bytes - ts.fsdp_backward_transient_bytes(r) * block_params()) \
        / ts.table()["gathered"]["fsdp_units_in_flight"]
    for rank in measured:
        assert len(rank["gathered"]) == BLOCKS
        for unit in rank["gathered"]:
            assert unit["dtypes"] == ["torch.bfloat16"]
            assert unit["bytes"] == 2 * block_params()
            assert unit["bytes"] == pytest.approx(per_unit, rel=1e-3)


def test_backward_transient_matches_trainplan_per_unit(measured):
    """At each unit's reduce-scatter, FSDP holds its unsharded gradient in the parameters' dtype (bf16) and
    the reduce-scatter input in the reduce dtype (fp32) at once: 2 + 4 bytes a parameter of the unit, what
    trainplan books beside the gathered weights (its backward transient, recipe grads + reduce bytes)."""
    r = ts.recipe("mixed_fp32_master")
    unit = block_params()
    for rank in measured:
        blocks = [c for c in rank["copies"] if c["grads"]["numel"] == unit]
        assert len(blocks) == BLOCKS
        for c in blocks:
            assert c["grads"]["dtypes"] == ["torch.bfloat16"] and c["input"]["dtypes"] == ["torch.float32"]
            assert c["grads"]["elements"] == 2 * unit and c["input"]["elements"] == 4 * unit
            assert c["grads"]["elements"] + c["input"]["elements"] == pytest.approx(
                ts.fsdp_backward_transient_bytes(r) * unit, rel=1e-3)
