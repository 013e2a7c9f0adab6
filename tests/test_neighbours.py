"""Keys written beside each other that agree are planned as written (issue 29; the refusals are cases of
tests/test_bad_input.py): the checks of workload/neighbours.py refuse only a disagreement."""

from __future__ import annotations

import json

import pytest

from trainplan.errors import UserError
from trainplan.planning.evaluate import serving_mode
from trainplan.workload.load import load_workload

LLAMA_TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
              "tie_word_embeddings": False, "hidden_act": "silu"}


@pytest.mark.parametrize("sets", [
    ["training.zero=3", "training.sharding=fsdp", "cluster.count=4"],  # FSDP is ZeRO-3's sharding
    ["training.zero=2", "training.sharding=zero2", "cluster.count=4"],
    ["cluster.mfu=0.3", "cluster.hfu=0.4"],
    ["cluster.mfu=0.4", "cluster.hfu=0.4"],
    ["training.optimizer=sgd", "training.state_recipe=sgd_momentum"],
    ["training.precision=fp32", "training.state_recipe=autocast_fp32"],
    ["training.precision=bf16", "training.state_recipe=autocast_fp32"],  # HF Trainer's bf16=True
    ["training.attention=sdpa", "parallel.flash_attention=false"],
    ["training.attention=flash", "parallel.flash_attention=true"],
    ["training.attention=sdpa", "parallel.flash_kernel=flash1"],  # SDPA's flash backend is a flash kernel
    ["parallel.flash_attention=true", "parallel.flash_kernel=flash1"],
    ['cluster.cores="8 cores"', 'model.params="7B params"', 'training.tokens="2T tokens"'],
    ['model.params="7 billion parameters"', 'training.tokens="1.5T"'],
])
def test_agreeing_neighbours_are_planned(sets: list[str]) -> None:
    w = load_workload(None, sets)
    for s in sets:
        key = s.split("=", 1)[0]
        assert w.given(key)


def test_a_default_yields_to_the_key_written() -> None:
    # only sharding written: zero stays at its default 0 and the sharding is planned
    w = load_workload(None, ["training.sharding=zero3", "cluster.count=4"])
    assert w.training.sharding == "zero3" and not w.given("training.zero")
    # only hfu written, below the default mfu 0.4: time follows hfu, as documented
    assert load_workload(None, ["cluster.hfu=0.3"]).cluster.hfu == 0.3


def test_norm_precision_variant_beside_a_config_is_accepted(tmp_path) -> None:
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA_TINY))
    f = tmp_path / "w.toml"
    f.write_text('[model]\nhf_config = "cfg.json"\nnorm = "rmsnorm"\nmlp = "swiglu"\n')
    w = load_workload(f)
    assert (w.model.norm, w.model.mlp) == ("rmsnorm", "swiglu")


def test_tokens_of_exactly_one_batch_are_planned(tmp_path) -> None:
    from trainplan.planning.evaluate import build_report

    f = tmp_path / "w.toml"
    # 8 x 2,048 = 16,384 tokens: one step on one device
    f.write_text('[data]\nkind = "tokens"\n[model]\nparams = "1B"\n[training]\ntokens = 16384\n'
                 'micro_batch = 8\nseq_len = 2048\n')
    report = build_report(load_workload(f))
    assert report["compute"]["steps"] == 1
    f.write_text(f.read_text().replace("tokens = 16384", "tokens = 16383"))
    with pytest.raises(UserError, match="training.tokens"):
        build_report(load_workload(f))


def test_a_config_with_a_vocabulary_is_served_as_a_decoder(tmp_path) -> None:
    # the documented rule, "decode for a model with a vocabulary", holds where the vocabulary is the config's
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA_TINY))
    f = tmp_path / "w.toml"
    f.write_text('[model]\nhf_config = "cfg.json"\n')
    assert serving_mode(load_workload(f)) == "decode"
    assert serving_mode(load_workload(None, ["model.width=512", "model.layers=4"])) == "encode"  # a vision encoder


def test_a_context_too_long_is_blamed_on_the_context() -> None:
    from trainplan.accounts.serving import devices_to_fit

    with pytest.raises(UserError) as err:  # 10 GB of weights fit on one 80 GB card; 1 PB of cache does not
        devices_to_fit(10e9, 1e15, 80e9)
    assert err.value.where == "serving.context"
    with pytest.raises(UserError) as err:
        devices_to_fit(1e16, 0.0, 80e9)
    assert err.value.where == "cluster.accelerator.memory"
