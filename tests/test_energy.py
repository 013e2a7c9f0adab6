"""Energy and emissions: kWh = W x h x PUE, kg CO2 = kWh x g/kWh / 1000, derived by hand."""

from __future__ import annotations

import builtins
import re

import pytest

from trainplan.accounts import energy
from trainplan.errors import UserError


def test_energy_by_hand() -> None:
    e = energy.energy_estimate(watts=8 * 700, hours=24, pue=1.2, grid_g_per_kwh=381)
    assert e.facility_watts == pytest.approx(6720)
    assert e.kwh == pytest.approx(8 * 700 * 24 * 1.2 / 1000)  # 161.28 kWh
    assert e.joules == pytest.approx(161.28 * 3.6e6)
    assert e.kg_co2 == pytest.approx(161.28 * 381 / 1000)  # 61.45 kg


def test_training_energy_uses_the_table() -> None:
    e = energy.training_energy(700, 8, 24, 1.2, grid_g_per_kwh=None, region="de")
    assert e.grid_g_per_kwh == 381 and "Ember" in e.grid_source
    given = energy.training_energy(700, 8, 24, 1.2, grid_g_per_kwh=100, region="world")
    assert given.kg_co2 == pytest.approx(161.28 * 100 / 1000)
    assert given.grid_source == "energy.grid_intensity"


def test_table_rows_are_dated_and_sourced() -> None:
    table = energy.grid_intensity_table()
    assert {"world", "us", "gb", "fr", "de", "in", "cn"} <= set(table)
    for row in table.values():
        assert 0 < row.g_per_kwh < 1500
        assert 2015 <= row.year <= 2030
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.retrieved)
        assert row.scope in ("lifecycle", "combustion")
        assert len(row.source) > 20
    assert table["world"].g_per_kwh == 481
    assert table["fr"].g_per_kwh < table["de"].g_per_kwh < table["in"].g_per_kwh


def test_region_lookup() -> None:
    assert energy.grid_intensity("UK").region == "gb"
    assert energy.grid_intensity(" World ").g_per_kwh == 481
    with pytest.raises(UserError, match="energy.region") as err:
        energy.grid_intensity("atlantis")
    assert "known:" in err.value.expected


def test_bad_input() -> None:
    with pytest.raises(UserError, match="energy.pue"):
        energy.energy_estimate(700, 1, 0.9, 400)
    with pytest.raises(UserError, match="energy.watts"):
        energy.energy_estimate(-1, 1, 1.2, 400)
    with pytest.raises(UserError, match="cluster.count"):
        energy.training_energy(700, 0, 1, 1.2, grid_g_per_kwh=None, region="world")


def test_measured_mode_without_codecarbon_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_codecarbon(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("codecarbon"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_codecarbon)
    with pytest.raises(UserError, match="codecarbon"):
        energy.measure_emissions(lambda: None)


def test_measured_mode_with_codecarbon() -> None:
    pytest.importorskip("codecarbon")
    m = energy.measure_emissions(lambda: sum(range(100_000)))
    assert m.result == sum(range(100_000))
    assert m.seconds > 0 and m.kg_co2 >= 0
    assert "codecarbon" in m.source
