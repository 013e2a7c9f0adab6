"""Issue 29: the sweep's sizes bounded before anything is allocated, its lists checked, and solve's targets
on text figures refused; each refusal one line naming the key and the limit."""

from __future__ import annotations

import pytest

from trainplan.errors import UserError
from trainplan.planning import sweep


def test_a_list_with_an_empty_item_is_refused():
    for text in ("cluster.cores=1,,2", "cluster.cores=1,2,", "cluster.accelerator=h100-sxm,,a100-sxm"):
        with pytest.raises(UserError) as err:
            sweep.parse_vary(text)
        assert err.value.where == "--vary" and "empty item" in err.value.expected, text
    assert sweep.parse_vary("cluster.cores=1, 2").values == (1.0, 2.0)  # spaces are not items


def test_a_range_is_counted_before_its_values_are_built():
    # (2 - 1) / 1e-300 values: refused from the count, with the key and the limit
    for grid in ("cluster.cores=1:2:1e-300", "cluster.cores=1:1000000:0.00001"):
        with pytest.raises(UserError) as err:
            sweep.parse_vary(grid)
        assert "cluster.cores" in err.value.expected and f"{sweep.MAX_POINTS:,}" in err.value.expected, grid


def test_the_cap_is_derived_from_the_machines_memory(monkeypatch):
    # budget = half of TRAINPLAN_MEMORY_BYTES; 3 columns (two keys, one figure) at 64 B a cell:
    # 2 x 64 x 3 x 1000 bytes available -> exactly 1,000 points
    monkeypatch.setenv("TRAINPLAN_MEMORY_BYTES", str(2 * sweep.BYTES_PER_CELL * 3 * 1000))
    assert sweep.max_points(3) == 1000
    ok = sweep.sweep(None, [], ["cluster.cores=1:10", "training.micro_batch=1:100"], figures=["pipeline.busy"])
    assert len(ok) == 1000
    with pytest.raises(UserError) as err:
        sweep.sweep(None, [], ["cluster.cores=1:10", "training.micro_batch=1:101"], figures=["pipeline.busy"])
    # the key with the most values is named, with the grid's shape and the limit
    assert err.value.expected.startswith("training.micro_batch: 10 x 101 = 1,010 points of 3 columns")
    assert "at most 1,000" in err.value.expected and "TRAINPLAN_MEMORY_BYTES" in err.value.expected


def test_cli_refuses_a_sweep_too_big_for_memory_in_one_line(cli, tmp_path, monkeypatch):
    out = tmp_path / "rows.csv"
    out.write_text("kept\n")
    monkeypatch.setenv("TRAINPLAN_MEMORY_BYTES", "100000")
    res = cli("sweep", "--vary", "cluster.cores=1:2:0.001", "-o", str(out))  # 1,001 points of every figure
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "cluster.cores: 1,001 = 1,001 points" in res.stderr
    assert out.read_text() == "kept\n"  # no file replaced


def test_cli_memory_override_must_be_a_number(cli, monkeypatch):
    monkeypatch.setenv("TRAINPLAN_MEMORY_BYTES", "lots")
    res = cli("sweep", "--vary", "cluster.cores=1:4")
    assert res.returncode == 2 and "TRAINPLAN_MEMORY_BYTES" in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize("target", ["pipeline.bottleneck>=1", "pipeline.bottleneck", "pipeline.bottleneck<=0"])
def test_solve_refuses_a_target_on_a_text_figure(cli, target):
    res = cli("solve", "cluster.cores", "--for", target)
    assert res.returncode == 2, res.stdout
    assert res.stderr.count("\n") == 1 and "--for" in res.stderr and "pipeline.bottleneck" in res.stderr
    assert "text figure" in res.stderr and "internal error" not in res.stderr


def test_writers_build_their_text_a_piece_of_rows_at_a_time(monkeypatch):
    """30 rows in pieces of 7: the JSON array and the CSV hold every row once, in the grid's order, and
    busy is min(1, cores x 120 frames/s / demand) with the default workload's demand of
    0.4 x 989.5e12 / (6 x 93e6 x 256) frames/s (docs/pipeline-and-bill.md)."""
    import csv
    import io
    import json

    monkeypatch.setattr(sweep, "ROWS_PER_PIECE", 7)
    result = sweep.sweep(None, [], ["cluster.cores=1:10", "training.micro_batch=1:3"], figures=["pipeline.busy"])
    demand = 0.4 * 989.5e12 / (6 * 93e6 * 256)
    want = [(c, b, min(1.0, c * 120.0 / demand)) for c in range(1, 11) for b in range(1, 4)]
    text = sweep.to_json(result)
    assert text.endswith(b"]\n")
    rows = json.loads(text)
    assert [(r["cluster.cores"], r["training.micro_batch"]) for r in rows] == [(c, b) for c, b, _ in want]
    assert [r["pipeline.busy"] for r in rows] == pytest.approx([x for _, _, x in want], rel=1e-12)
    table = list(csv.DictReader(io.StringIO(sweep._csv_numpy(result).decode())))
    assert [(float(r["cluster.cores"]), float(r["training.micro_batch"])) for r in table] == [(c, b) for c, b, _ in want]
    assert [float(r["pipeline.busy"]) for r in table] == pytest.approx([x for _, _, x in want], rel=1e-12)


def test_rows_placed_in_the_given_order_without_a_reordering_copy(monkeypatch):
    """A looped axis (data.access) between vector axes, chunks of 3 straddling its values: each row's busy
    is its own cores' and access's, min(1, cores x 120 / g / demand) with g = 1 decoded frame a used one
    (sequential) or (G + 1) / 2 (random, G = data.gop = 30 by default)."""
    monkeypatch.setattr(sweep, "CHUNK_POINTS", 3)
    r = sweep.sweep(None, [], ["cluster.cores=8:40:8", "data.access=sequential,random", "training.micro_batch=1,2"],
                    figures=["pipeline.busy"])
    demand = 0.4 * 989.5e12 / (6 * 93e6 * 256)
    want = [(c, a, b, min(1.0, c * 120.0 / (1.0 if a == "sequential" else 15.5) / demand))
            for c in (8, 16, 24, 32, 40) for a in ("sequential", "random") for b in (1, 2)]
    got = list(zip(r.columns["cluster.cores"], r.columns["data.access"], r.columns["training.micro_batch"],
                   r.columns["pipeline.busy"]))
    assert [g[:3] for g in got] == [w[:3] for w in want]
    assert [g[3] for g in got] == pytest.approx([w[3] for w in want], rel=1e-12)
    assert list(r.columns) == ["cluster.cores", "data.access", "training.micro_batch", "pipeline.busy"]
