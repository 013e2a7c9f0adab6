"""trainplan sweep: the vectorized grid agrees with plan.build_report point by point."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from trainplan.planning import sweep
from trainplan.errors import UserError
from trainplan.planning.evaluate import build_report
from trainplan.planning.figures import FIGURES
from trainplan.present.render import flatten
from trainplan.workload.load import load_workload


def _same(got, want) -> bool:
    if want is None:  # the report writes inf/nan as null
        return isinstance(got, (float, np.floating)) and not math.isfinite(got)
    if isinstance(want, bool):
        return bool(got) == want
    if isinstance(want, str):
        return str(got) == want
    return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)


def _check_agrees(sets: list[str], varies: list[str]) -> int:
    result = sweep.sweep(None, sets, varies)
    checked = 0
    for row in sweep.rows(result):
        point = sets + [f"{k}={sweep._override(row[k])}" for k in result.keys]
        report = flatten(build_report(load_workload(None, point)))
        for column, value in row.items():
            if column in result.keys:
                continue
            if column not in report:  # a figure the plan leaves out at this point is NaN in the sweep
                assert value is None or np.isnan(value), f"{column} is not a figure of the report at {point}"
                continue
            assert _same(value, report[column]), f"{column} at {point}: sweep {value!r}, plan {report[column]!r}"
            checked += 1
    return checked


def test_video_grid_agrees_with_build_report_for_every_column():
    # cores 0 starves the accelerator (busy 0, wall time infinite); count 4 applies scaling efficiency;
    # the access pattern is looped, the rest vectorized.
    n = _check_agrees(["cluster.mfu=0.35"], [
        "cluster.cores=0:24:12", "cluster.count=1,4", "training.micro_batch=4:64:x4",
        "data.access=sequential,random,decoded", "data.bitrate=4Mbit/s:8Mbit/s:4Mbit/s",
    ])
    assert n > 70 * 3 * 2 * 3 * 3 * 2


def test_hand_over_grid_agrees_with_build_report_and_by_hand():
    """data.loader_cpu_per_frame varies as an array like any numeric key; in order on CPU cores alone
    the supply is cores / (1/120 + o) frames/s (docs/pipeline-and-bill.md)."""
    _check_agrees(["cluster.nvdec=true"], [
        "data.loader_cpu_per_frame=0,0.2ms,5ms", "cluster.cores=0:16:8", "data.access=sequential,random,decoded",
    ])
    result = sweep.sweep(None, [], ["data.loader_cpu_per_frame=0:1ms:0.25ms", "cluster.cores=8,16"],
                         figures=["pipeline.supply_fps"])
    rows = list(sweep.rows(result))
    assert len(rows) == 10
    for row in rows:
        o, cores = row["data.loader_cpu_per_frame"], row["cluster.cores"]
        assert row["pipeline.supply_fps"] == pytest.approx(cores / (1 / 120 + o), rel=1e-12)


def test_token_grid_agrees_with_build_report_for_every_column():
    sets = ["data.kind=tokens", "training.tokens=2e9", "model.layers=16", "model.width=2048",
            "cluster.accelerator=a100-sxm-80gb", "data.tokenize_online=true"]
    _check_agrees(sets, [
        "model.params=1e8:1e10:x10", "training.zero=0,3", "cluster.count=1:8:7", "cluster.link=1GB/s:2GB/s:1GB/s",
        "training.recompute=none,full", "storage.checkpoints_kept=1,3", "prices.data_hour=0,10",
    ])


def test_shape_and_tokens_keys_are_looped_and_agree():
    # a model with a shape feeds the execution model (activations per stage, attention FLOPs, a step
    # predicted from them): its model keys are planned one workload per value, never as arrays
    sets = ["training.recompute=selective", "model.params=93e6", "model.layers=12", "model.width=768"]
    base = load_workload(None, sets)
    assert not any(sweep._vectorizable(base, sweep.parse_vary(v), lambda e: load_workload(None, sets + [e]))
                   for v in ("model.width=512,1024", "model.layers=6,12", "model.params=1e8,2e8",
                             "training.seq_len=1024,2048"))
    # its micro-batch is chosen to fit, so what changes the fit is looped too; given, it is an array
    assert not sweep._vectorizable(base, sweep.parse_vary("cluster.count=1,2"),
                                   lambda e: load_workload(None, sets + [e]))
    given = load_workload(None, sets + ["training.micro_batch=8"])
    assert sweep._vectorizable(given, sweep.parse_vary("cluster.count=1,2"),
                               lambda e: load_workload(None, sets + ["training.micro_batch=8", e]))
    # on the default workload, naming model.params alone names a new model (no shape): looped
    default = load_workload(None, [])
    assert not sweep._vectorizable(default, sweep.parse_vary("model.params=1e8,2e8"),
                                   lambda e: load_workload(None, [e]))
    _check_agrees(sets, [
        "model.params=1e8:2e8:1e8",
        "model.width=512:1024:512", "model.layers=6:12:6", "data.hours=10,1000", "training.epochs=1,3",
        "cluster.headroom=0,0.2", "storage.write_rate=1GB/s,2GB/s", "prices.storage_months=1,2",
    ])


def test_grid_syntax():
    assert sweep.parse_vary("cluster.cores=8:12").values == (8, 9, 10, 11, 12)  # STOP included, STEP 1
    assert sweep.parse_vary("cluster.cores=8:20:4").values == (8, 12, 16, 20)
    assert sweep.parse_vary("cluster.cores=8:20:5").values == (8, 13, 18)
    assert sweep.parse_vary("cluster.mfu=0.1:0.3:0.1").values == pytest.approx((0.1, 0.2, 0.3))
    assert sweep.parse_vary("cluster.link=1GB/s:4GB/s:1GB/s").values == (1e9, 2e9, 3e9, 4e9)
    assert sweep.parse_vary("training.micro_batch=1:64:x2").values == (1, 2, 4, 8, 16, 32, 64)
    assert sweep.parse_vary("model.params=1e8:1e10:x10").values == pytest.approx((1e8, 1e9, 1e10))
    assert sweep.parse_vary("data.bitrate=4 Mbit/s,8 Mbit/s").values == (4e6, 8e6)
    axis = sweep.parse_vary("cluster.accelerator=h100-sxm,a100-sxm-80gb")
    assert axis.values == ("h100-sxm", "a100-sxm-80gb") and not axis.numeric


@pytest.mark.parametrize("spec", [
    "cluster.cores", "cluster.corez=1:2", "cluster.cores=4:2", "cluster.cores=1:4:0", "cluster.mfu=0.5:1.5:0.5",
    "training.micro_batch=1:4:0.5", "cluster.cores=1:8:x1", "data.access=1:3", "cluster.link=1:2:3:4",
])
def test_bad_grids_are_user_errors(spec):
    with pytest.raises(UserError):
        sweep.parse_vary(spec)


def test_rows_follow_the_order_of_the_varies():
    r = sweep.sweep(None, [], ["data.access=sequential,random", "cluster.cores=8,16"])
    assert list(r.columns["data.access"]) == ["sequential", "sequential", "random", "random"]
    assert list(r.columns["cluster.cores"]) == [8, 16, 8, 16]


def test_cli_csv_columns(cli):
    res = cli("sweep", "--vary", "cluster.cores=8:24:8", "--format", "csv")
    assert res.returncode == 0, res.stderr
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [float(r["cluster.cores"]) for r in table] == [8, 16, 24]
    # busy = min(1, cores x 120 / 2770.78 demand) (reference workload)
    demand = 0.4 * 989.5e12 / (6 * 93e6 * 256)
    for r in table:
        assert float(r["pipeline.busy"]) == pytest.approx(min(1.0, float(r["cluster.cores"]) * 120 / demand))
    assert "compute.seconds" in table[0] and "bill.total" in table[0]


def test_cli_parquet_and_plot(cli, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "s.parquet"
    res = cli("sweep", "--vary", "cluster.cores=1:32", "--vary", "data.access=sequential,random",
              "--format", "parquet", "--output", str(out))
    assert res.returncode == 0, res.stderr
    table = pq.read_table(out)
    assert table.num_rows == 64 and "pipeline.busy" in table.column_names
    svg = tmp_path / "busy.svg"
    res = cli("sweep", "--vary", "cluster.cores=1:32", "--vary", "data.access=sequential,random",
              "--plot", "pipeline.busy", "--against", "cluster.cores", "--output", str(svg))
    assert res.returncode == 0, res.stderr
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()


def test_cli_bad_vary_exits_2(cli):
    res = cli("sweep", "--vary", "cluster.mfu=0.5:2:0.5")
    assert res.returncode == 2
    assert "cluster.mfu" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("figures", [",", "", " ", "pipeline.busy,", "pipeline.busy,,bill.total"])
def test_an_empty_figure_list_or_item_is_refused_not_every_figure(cli, tmp_path, figures):
    out = tmp_path / "rows.csv"
    res = cli("sweep", "--vary", "cluster.cores=8,16", "--figures", figures, "--output", str(out))
    assert res.returncode == 2 and res.stdout == "" and not out.exists()
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("trainplan: --figures: expected figure names")
    assert "no empty item" in res.stderr
    assert "Traceback" not in res.stderr


def test_an_unknown_figure_names_the_nearest_figure_not_the_varied_keys(cli):
    res = cli("sweep", "--vary", "cluster.cores=8,16", "--figures", "pipeline.bsy")
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert res.stderr.startswith("trainplan: --figures: unknown figure 'pipeline.bsy' (did you mean 'pipeline.busy'?)")
    assert "expected one of cluster.cores" not in res.stderr
    # the figures a sweep writes, counted from the declaration: its header without --figures
    assert f"one of the {sum(1 for f in FIGURES.values() if f.sweep)} figures" in res.stderr


@pytest.mark.parametrize("vary, key", [("data.kind=video,audio", "data.kind"), ("cluster.nvdec=true,1", "cluster.nvdec"),
                                       ("data.access=sequential,sideways", "data.access")])
def test_a_value_the_key_never_takes_is_refused_not_a_row_without_a_plan(cli, vary, key):
    # a layout that does not divide is a row marked "no plan"; a value no workload takes is a user error
    res = cli("sweep", "--vary", vary)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and key in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("order", ["tokens,video", "video,tokens"])
def test_a_kind_sweep_blanks_the_figures_one_kind_has_not(order):
    # the token run has no video bill, the video run has one: every row agrees with its own plan, and the
    # figures one kind lacks are blank (NaN/None), in either order
    assert _check_agrees(["training.tokens=1e9"], [f"data.kind={order}"]) > 50


def test_progress_bar_chunks_agree():
    """A grid of more than one chunk, each point against the hand formula of the default workload: busy =
    min(1, cores x 120 frames/s / demand), demand = 0.4 x 989.5e12 / (6 x 93e6 x 256) frames/s
    (docs/pipeline-and-bill.md), whatever the micro-batch; points taken from every chunk."""
    big = sweep.sweep(None, [], ["cluster.cores=1:600", "training.micro_batch=1:500"], progress=False)
    assert len(big) == 300_000 > sweep.CHUNK_POINTS  # two chunks at least
    demand = 0.4 * 989.5e12 / (6 * 93e6 * 256)
    points = np.arange(0, len(big), 7_919)  # a prime stride: every chunk, both axes at many values
    cores = big.columns["cluster.cores"][points]
    assert np.array_equal(cores, 1 + points // 500)
    assert np.array_equal(big.columns["training.micro_batch"][points], 1 + points % 500)
    np.testing.assert_allclose(big.columns["pipeline.busy"][points], np.minimum(1.0, cores * 120 / demand), rtol=1e-12)


# ---------------------------------------------------------------- sweep at one point == plan, every figure

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

VECTOR_AXES = ["cluster.mfu", "cluster.cores", "cluster.count", "training.micro_batch", "data.bitrate",
               "prices.core_hour", "storage.copies", "data.hours", "data.loader_cpu_per_frame"]


@st.composite
def point_workloads(draw: st.DrawFn) -> list[str]:
    """--set overrides of a random valid workload: video or tokens, any access, any accelerator."""
    kind = draw(st.sampled_from(["video", "tokens"]))
    sets = [f"data.kind={kind}",
            f"cluster.accelerator={draw(st.sampled_from(['h100-sxm', 'a100-sxm-80gb', 'b200', 'mi300x', 'h200']))}",
            f"cluster.mfu={draw(st.floats(0.05, 0.7)):.4f}", f"cluster.cores={draw(st.integers(0, 96))}",
            f"cluster.count={draw(st.sampled_from([1, 2, 8, 64]))}",
            f"training.micro_batch={draw(st.integers(1, 64))}", f"training.seq_len={draw(st.integers(64, 8192))}",
            f"training.zero={draw(st.sampled_from([0, 1, 2, 3]))}",
            f"training.recompute={draw(st.sampled_from(['none', 'selective', 'full']))}",
            f"model.params={draw(st.floats(6, 11)).__rpow__(10):.6g}",
            f"prices.data_hour={draw(st.sampled_from([0, 2.5]))}",
            f"storage.copies={draw(st.integers(1, 3))}", f"data.hours={draw(st.floats(1, 1e4)):.3f}"]
    if kind == "video":
        sets += [f"data.access={draw(st.sampled_from(['sequential', 'random', 'decoded']))}",
                 f"cluster.nvdec={draw(st.booleans())}".lower(),
                 f"data.bitrate={draw(st.floats(1e5, 5e7)):.0f}"]
    else:
        sets += [f"training.tokens={draw(st.floats(1e8, 1e13)):.6g}", "model.layers=24", "model.width=2048",
                 f"data.tokenize_online={draw(st.booleans())}".lower()]
    return sets


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(point_workloads(), st.sampled_from(VECTOR_AXES))
def test_sweep_at_a_single_point_equals_plan_for_every_figure(sets, axis):
    """Varying one key over the single value it already has gives the plan's figures, every one."""
    w = load_workload(None, sets)
    value = sweep._override(float(getattr(getattr(w, axis.split(".")[0]), axis.split(".")[1])))
    result = sweep.sweep(None, sets, [f"{axis}={value}"])
    assert len(result) == 1
    report = flatten(build_report(w))
    for column, got in result.columns.items():
        if column == axis:
            continue
        want = report.get(column)
        if column not in report:
            assert np.isnan(got[0]), column
            continue
        assert _same(got[0], want), f"{column}: sweep {got[0]!r}, plan {want!r}"
    declared = {f for f, spec in FIGURES.items() if spec.sweep}
    assert {k for k in report if k in declared} <= set(result.columns)


def test_requested_figures_alone_agree_with_the_full_sweep():
    varies = ["cluster.cores=0:40:8", "data.access=sequential,random", "training.micro_batch=8,32"]
    full = sweep.sweep(None, [], varies)
    some = sweep.sweep(None, [], varies, figures=["pipeline.busy", "memory.fits", "bill.total"])
    assert list(some.columns) == full.keys + ["pipeline.busy", "memory.fits", "bill.total"]
    for k, v in some.columns.items():
        assert np.array_equal(v, full.columns[k], equal_nan=v.dtype.kind == "f"), k
    with pytest.raises(UserError, match="unknown figure"):
        sweep.sweep(None, [], varies, figures=["pipeline.bussy"])


def test_csv_without_pyarrow_reads_back_the_same_rows(monkeypatch):
    result = sweep.sweep(None, [], ["cluster.cores=0,8.5,24", "data.access=sequential,random"],
                         figures=["pipeline.busy", "pipeline.bottleneck", "memory.fits", "compute.wall_seconds"])
    numpy_rows = list(csv.DictReader(io.StringIO(sweep._csv_numpy(result).decode())))
    assert len(numpy_rows) == 6
    for row, i in zip(numpy_rows, range(6)):
        for k, v in result.columns.items():
            want = v[i]
            if isinstance(want, (bool, np.bool_)):
                assert row[k] == ("true" if want else "false")
            elif isinstance(want, str):
                assert row[k] == want
            else:
                # a non-finite figure is an empty field, as JSON writes null (issue 28: no inf in a CSV)
                assert (row[k] == "" and not math.isfinite(float(want))) or float(row[k]) == float(want)
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    assert sweep.to_csv(result) == sweep._csv_numpy(result)
    with pytest.raises(UserError, match="trainplan\\[parquet\\]"):
        sweep.to_parquet(result)


def test_csv_in_batches_is_arrow_s_own_csv(monkeypatch):
    # the CSV is written a batch of rows a call (so a signal is answered between calls): byte for byte what
    # pyarrow's write_csv gives for the whole table in one call, across batch boundaries
    pa = pytest.importorskip("pyarrow")
    pacsv = pytest.importorskip("pyarrow.csv")
    monkeypatch.setattr(sweep, "ROWS_PER_PIECE", 7)
    result = sweep.sweep(None, [], ["cluster.cores=1:50"])
    assert len(result) == 50
    sink = pa.BufferOutputStream()
    pacsv.write_csv(sweep._to_arrow(result, finite_only=True), sink)
    assert sweep.to_csv(result) == sink.getvalue().to_pybytes()


# ---------------------------------------------------------------- one figure, computed alone (issue 17)


def test_grid_columns_are_the_cartesian_product_in_the_order_given(monkeypatch):
    """Key columns against numpy's own product (np.repeat/np.tile of each axis), with a looped axis
    between vector axes and chunks that straddle the looped combinations."""
    monkeypatch.setattr(sweep, "CHUNK_POINTS", 7)
    cores, access, batch = [0.0, 8.0, 16.0], ["sequential", "random"], [1.0, 4.0, 16.0, 64.0]
    r = sweep.sweep(None, [], ["cluster.cores=0:16:8", "data.access=sequential,random",
                               "training.micro_batch=1:64:x4"], figures=["pipeline.busy"])
    n = len(cores) * len(access) * len(batch)
    assert len(r) == n
    assert np.array_equal(r.columns["cluster.cores"], np.repeat(cores, n // len(cores)))
    assert list(r.columns["data.access"]) == list(np.tile(np.repeat(access, len(batch)), len(cores)))
    assert np.array_equal(r.columns["training.micro_batch"], np.tile(batch, n // len(batch)))


def test_one_figure_equals_the_full_sweep_and_the_hand_formula(monkeypatch):
    """pipeline.busy alone, over several chunks, is the full sweep's column bit for bit and
    min(1, cores x 120 / demand) on the reference workload; micro_batch does not move it."""
    monkeypatch.setattr(sweep, "CHUNK_POINTS", 1000)
    varies = ["cluster.cores=0:60", "training.micro_batch=1:50"]
    one = sweep.sweep(None, [], varies, figures=["pipeline.busy"])
    full = sweep.sweep(None, [], varies)
    assert list(one.columns) == ["cluster.cores", "training.micro_batch", "pipeline.busy"]
    assert np.array_equal(one.columns["pipeline.busy"], full.columns["pipeline.busy"])
    demand = 0.4 * 989.5e12 / (6 * 93e6 * 256)
    cores = np.repeat(np.arange(0.0, 61.0), 50)
    assert one.columns["pipeline.busy"] == pytest.approx(np.minimum(1.0, cores * 120.0 / demand), rel=1e-12)
    # and at a few points, the report of that one workload (a scalar evaluation)
    for i in (0, 1234, 3049):
        point = [f"cluster.cores={sweep._override(one.columns['cluster.cores'][i])}",
                 f"training.micro_batch={sweep._override(one.columns['training.micro_batch'][i])}"]
        assert one.columns["pipeline.busy"][i] == build_report(load_workload(None, point))["pipeline"]["busy"]


def test_requested_figures_alone_are_computed(monkeypatch):
    """evaluate(inputs, ["pipeline.busy"]) reads busy from the pipeline account and leaves the
    figures it does not need uncomputed."""
    from trainplan.accounts import pipeline as pipeline_mod
    from trainplan.planning import evaluate as plan_mod
    from trainplan.planning.inputs import PlanInputs

    made = []
    real = pipeline_mod.pipeline_arrays
    monkeypatch.setattr(pipeline_mod, "pipeline_arrays", lambda **kw: made.append(real(**kw)) or made[-1])
    w = load_workload(None, [])
    out = plan_mod.evaluate(PlanInputs.of(w, {"cluster.cores": np.arange(0.0, 8.0)}), ["pipeline.busy"])
    assert list(out) == ["pipeline.busy"] and len(made) == 1
    computed = {k for k in made[0].__dict__ if k in pipeline_mod.FIGURES}
    assert "busy" in computed and "bottleneck_index" not in computed
    assert not computed & {"cores_needed", "threshold_params", "decoded_bytes_per_hour", "pixels_per_token"}


def test_the_execution_per_combination_equals_it_per_row():
    """A grid whose execution keys (micro-batch, device count, gradient accumulation) sit at the slow, the
    middle and the fast axis, beside a pipeline key: each chunk's execution runs once per combination of
    those keys (PlanInputs.grid) and is taken to the rows. Every figure equals the same rows evaluated
    row by row, and the plan's own report at a sample of points (figures a sweep writes)."""
    from trainplan.planning.evaluate import build_report
    from trainplan.planning.inputs import GridRows, PlanInputs, RowsOf
    from trainplan.workload.load import load_workload

    vary = ["training.micro_batch=1,2,4", "cluster.cores=2:40:2", "cluster.count=1,2", "training.grad_accum=1,3"]
    axes = [sweep.parse_vary(v) for v in vary]
    w = load_workload(None, [])
    shape = [len(a.values) for a in axes]
    grid_arrays = np.meshgrid(*(np.asarray(a.values, float) for a in axes), indexing="ij")
    arrays = {a.key: g.reshape(-1) for a, g in zip(axes, grid_arrays)}
    n = int(np.prod(shape))
    start, length = 7, n - 11  # a chunk that starts and ends inside the grid
    chunk = {k: v[start:start + length] for k, v in arrays.items()}
    grid = GridRows(tuple(a.key for a in axes), tuple(np.asarray(a.values, float) for a in axes), start, length)
    inputs = PlanInputs.of(w, chunk, grid=grid)
    assert isinstance(inputs.execution, RowsOf)  # 12 combinations for 449 rows: per combination
    by_combination = sweep.evaluate(w, chunk, None, grid)
    by_row = sweep.evaluate(w, chunk, None)
    assert set(by_combination) == set(by_row)
    for key in by_row:
        got, want = np.asarray(by_combination[key]), np.asarray(by_row[key])
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True, err_msg=key)
        else:
            assert np.array_equal(got, want), key
    for i in (0, 100, length - 1):
        sets = [f"{k}={int(v[i]) if float(v[i]).is_integer() else v[i]}" for k, v in chunk.items()]
        report = build_report(load_workload(None, sets))
        assert by_combination["pipeline.busy"][i] == pytest.approx(report["pipeline"]["busy"], rel=1e-12)
        assert by_combination["compute.seconds_per_step"][i] == pytest.approx(
            report["compute"]["seconds_per_step"], rel=1e-12)
