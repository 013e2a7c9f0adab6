import json

import pytest


def test_data_mix_epochs_by_hand(cli):
    res = cli("data", "mix", "--tokens", "15T", "--source", "web:10T:0.8", "--source", "code:1T:0.2")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["sources"]}
    assert rows["web"]["epochs"] == pytest.approx(0.8 * 15e12 / 10e12)
    assert rows["code"]["epochs"] == pytest.approx(0.2 * 15e12 / 1e12)


def test_data_demos_by_hand(cli):
    res = cli("data", "demos", "1000", "--task", "45s", "--reset", "15s", "--success", "0.8", "--operators", "2")
    out = json.loads(res.stdout)
    assert out["person_hours"] == pytest.approx(1000 / 0.8 * 60 / 3600)
    assert out["wall_hours"] == pytest.approx(out["person_hours"] / 2)


def test_data_bad_source(cli):
    res = cli("data", "mix", "--tokens", "15T", "--source", "web")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--source" in res.stderr


def _ids(tmp_path, n=5000):
    import numpy as np

    path = tmp_path / "good.bin"
    np.arange(n, dtype="<u2").tofile(path)
    return path


@pytest.mark.parametrize("args, named", [
    (("--dtype", "float99"), "--dtype"), (("--dtype", "float32"), "--dtype"),
    (("--eos", "-1"), "--eos"), (("--eos", "70000"), "--eos"), (("--eos", "256", "--dtype", "uint8"), "--eos"),
    (("--tokenizer", "nope.json"), "nope.json")])
def test_data_inspect_refuses_a_bad_token_option_whatever_the_input(cli, tmp_path, args, named):
    """One line naming the option (the tokenizer file), exit 2, even where .bin ids would not use it."""
    res = cli("data", "inspect", str(_ids(tmp_path)), *args)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and named in res.stderr, res.stderr
    assert "internal error" not in res.stderr


def test_data_inspect_takes_an_eos_its_dtype_holds(cli, tmp_path):
    # ids 0..4999: eos 65535 (the largest uint16) never occurs, and with an eos the ids are not chunked: 1 document
    res = cli("data", "inspect", str(_ids(tmp_path)), "--eos", "65535", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["aggregate"]["documents"] == 1
