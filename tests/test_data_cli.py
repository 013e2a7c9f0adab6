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
