import math

import pytest

from trainplan.errors import UserError
from trainplan.units import format_quantity, parse


@pytest.mark.parametrize("text,dim,expected", [
    ("8 Mbit/s", "bit_rate", 8e6),
    ("32 GB", "bytes", 32e9),
    ("80 GiB", "bytes", 80 * 2**30),
    ("81559 MiB", "bytes", 81559 * 2**20),
    ("1.5 GB/s", "byte_rate", 1.5e9),
    ("700 W", "power", 700.0),
    ("1.2 kW", "power", 1200.0),
    ("200 TFLOPS", "flop_rate", 200e12),
    ("989.5 TFLOP/s", "flop_rate", 989.5e12),
    ("1 h", "time", 3600.0),
    ("30 min", "time", 1800.0),
    ("7B", "count", 7e9),
    ("93M", "count", 93e6),
    ("1e9", "count", 1e9),
    ("25 %", "fraction", 0.25),
    ("$2.50", "dollars", 2.5),
    (3, "bytes", 3.0),
])
def test_parse(text, dim, expected):
    assert parse(text, dim) == pytest.approx(expected, rel=1e-12)


def test_decimal_is_not_binary():
    # GB = 1e9, GiB = 2^30: the 7.4 % that tools which mix them lose
    assert parse("1 GiB", "bytes") / parse("1 GB", "bytes") == pytest.approx(1.073741824)


@pytest.mark.parametrize("text,dim", [("8 furlongs", "bytes"), ("32 GB/s", "bytes"), ("fast", "count"),
                                      ("nan", "count"), ("inf GB", "bytes"), (True, "count"), ("8 Mbit", "bit_rate")])
def test_bad_units_name_the_key(text, dim):
    with pytest.raises(UserError) as err:
        parse(text, dim, key="data.bitrate")
    assert err.value.where == "data.bitrate"


@pytest.mark.parametrize("value,dim", [(32e9, "bytes"), (1.5e9, "byte_rate"), (8e6, "bit_rate"),
                                       (989.5e12, "flop_rate"), (700.0, "power"), (5400.0, "time"), (93e6, "count")])
def test_format_round_trips(value, dim):
    assert parse(format_quantity(value, dim, digits=6), dim) == pytest.approx(value, rel=1e-5)
    assert math.isfinite(parse(format_quantity(value, dim), dim))


def test_one_of_a_counted_unit_is_singular():
    from trainplan.units import format_figure

    assert format_figure(1, "epochs") == "1 epoch" and format_figure(2, "epochs") == "2 epochs"
    assert format_figure(1, "months") == "1 month" and format_figure(1.5, "months") == "1.5 months"


def test_percent_is_written_as_the_reports_write_it():
    from trainplan.units import percent

    assert percent(0.346) == "34.6 %" and percent(-0.131, signed=True) == "-13.1 %"
    assert percent(0.131, signed=True) == "+13.1 %" and percent(0.64, digits=0) == "64 %"
    assert percent(-0.0001, signed=True) == "0.0 %"  # no signed zero


RANGE = "expected a number below 1.8e+308 (float range)"


@pytest.mark.parametrize("text,got", [
    ("1" + "0" * 400, "an integer of about 401 digits"),  # 10^400 written as text: as the integer 10**400 is
    ("1" * 5000, "an integer of about 5,000 digits"),  # past the 4,300 digits int() reads
    ("1e400", "'1e400'"),  # float() reads it as inf: the range is named, not 'inf'
])
def test_a_number_written_as_text_past_float_range_names_the_range(text, got):
    from trainplan.units import number

    with pytest.raises(UserError) as err:
        number(text, "cluster.cores")
    assert str(err.value) == f"cluster.cores: {RANGE}, got {got}"


def test_an_integer_past_float_range_reads_the_same_quoted_or_not():
    from trainplan.units import number

    messages = []
    for value in (10**400, "1" + "0" * 400):
        with pytest.raises(UserError) as err:
            number(value, "k")
        messages.append(str(err.value))
    assert messages == [f"k: {RANGE}, got an integer of about 401 digits"] * 2


@pytest.mark.parametrize("assignment,got", [
    ("cluster.cores=1e400", "'1e400'"),  # TOML reads 1e400 as inf
    ('cluster.cores="1e400"', "'1e400'"),
    ('cluster.cores="1' + "0" * 400 + '"', "an integer of about 401 digits"),
    ("data.bitrate=1e400", "'1e400'"),
])
def test_set_past_float_range_never_says_inf(cli, assignment, got):
    res = cli("plan", "--set", assignment)
    key = assignment.split("=")[0]
    assert res.returncode == 2 and res.stderr == f"trainplan: {key}: {RANGE}, got {got}\n"
