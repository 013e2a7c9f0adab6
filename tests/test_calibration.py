"""The calibration file: written by probes, read by the plan, refused where it does not apply."""

from __future__ import annotations

import tomllib

import pytest

from trainplan.workload import calibration
from trainplan.errors import UserError

MACHINE = {"hostname": "bench-1", "cpu_model": "Test CPU 9000", "cpu_count": 8}


def decode_result(width: int = 1920, height: int = 1080, core_fps_1080p: float = 101.5) -> dict:
    """The shape of DecodeProbe.to_dict() (the fields calibration reads)."""
    seq = {"clip_frames": 60, "interpolation": "BILINEAR", "frames_per_cpu_second": core_fps_1080p}
    return {
        "frames_per_cpu_second": core_fps_1080p * 1920 * 1080 / (width * height),
        "frames_per_cpu_second_1080p": core_fps_1080p, "core_fps_1080p": core_fps_1080p,
        "access": "sequential", "width": width, "height": height, "fps": 30.0, "bitrate": 8e6, "gop": 30,
        "codec": "h264", "postprocess": "rgb_resize", "side": 224, "threads": 1, "preset": "veryfast",
        "sequential": seq, "random": None,
    }


def write_decode(path, **kw):
    d = decode_result(**kw)
    return calibration.write(path, "decode", settings=calibration.decode_settings(d), results=d,
                             values=calibration.decode_values(d), machine=MACHINE, date="2025-06-01T12:00:00+00:00")


def test_round_trip_and_source_text(tmp_path):
    cal = write_decode(tmp_path / "cal.toml")
    values = calibration.load(cal)
    assert set(values) == {"cluster.core_fps_1080p"}
    m = values["cluster.core_fps_1080p"]
    value, source = m  # unpacks as (value, source), as workload.load_workload reads it
    assert value == 101.5 and m[0] == 101.5 and m[1] == source
    assert "bench-1" in source and "Test CPU 9000" in source and "2025-06-01" in source
    assert "trainplan probe decode" in source and "1920x1080" in source
    doc = tomllib.loads(cal.read_text())
    assert doc["format"] == 1
    assert doc["probes"]["decode"]["settings"]["width"] == 1920
    assert doc["probes"]["decode"]["settings"]["codec"] == "h264"
    assert doc["machine"]["hostname"] == "bench-1"


def test_probes_merge_into_one_file(tmp_path):
    cal = write_decode(tmp_path / "cal.toml")
    read = {"path": "/data/x", "bytes": 64e6, "block_bytes": 4 * 2**20, "cold_bytes_per_second": 1.2e9,
            "warm_bytes_per_second": 9e9, "cold_method": "posix_fadvise", "created": True}
    calibration.write(cal, "read", settings={"path": "/data/x"}, results=read,
                      values=calibration.read_values(read), machine=MACHINE)
    ar = {"backend": "nccl", "world_size": 8, "bytes": 2**28, "launched_by": "torchrun",
          "bus_bytes_per_second": 180e9}
    calibration.write(cal, "allreduce", settings={}, results=ar, values=calibration.allreduce_values(ar),
                      machine=MACHINE)
    values = calibration.load(cal)
    assert values["cluster.link"].value == 1.2e9
    assert values["cluster.interconnect"].value == 180e9
    assert values["cluster.core_fps_1080p"].value == 101.5
    # a second decode run replaces the first value, not appends
    write_decode(cal, core_fps_1080p=88.0)
    doc = tomllib.loads(cal.read_text())
    assert [v["key"] for v in doc["values"]].count("cluster.core_fps_1080p") == 1
    assert calibration.load(cal)["cluster.core_fps_1080p"].value == 88.0


def test_mfu_is_marked_end_to_end(tmp_path):
    cal = tmp_path / "cal.toml"
    calibration.write(cal, "profile", settings={}, results={}, values=calibration.mfu_values(0.31, "a step"),
                      machine=MACHINE)
    values = calibration.load(cal)
    assert values["cluster.mfu"].value == 0.31
    assert values["cluster.mfu_end_to_end"].value is True
    assert "trainplan profile" in values["cluster.mfu"].source
    with pytest.raises(UserError, match="cluster.mfu"):
        calibration.mfu_values(1.7, "impossible")


def test_plan_takes_measured_values(tmp_path):
    from trainplan.workload.load import load_workload

    cal = write_decode(tmp_path / "cal.toml")
    w = load_workload(None, [], cal)
    assert w.cluster.core_fps_1080p == 101.5
    assert w.provenance["cluster.core_fps_1080p"].kind == "measured"
    assert "bench-1" in w.provenance["cluster.core_fps_1080p"].source
    assert w.provenance["cluster.link"].kind == "assumed"


def handover_result(per_frame: float = 2.5e-4, making: float = 5e-5) -> dict:
    """The shape of the hand-over probe's result (`trainplan probe handover`)."""
    return {"loader_cpu_per_frame": per_frame - making, "worker_cpu_per_frame": per_frame,
            "making_cpu_per_frame": making, "frames": 4096, "side": 224, "batch": 16}


def test_the_hand_over_is_measured_in_the_plan(tmp_path):
    from trainplan.accounts import pipeline as pl
    from trainplan.planning.evaluate import pipeline_inputs
    from trainplan.workload.load import load_workload

    d = handover_result()
    cal = calibration.write(tmp_path / "cal.toml", calibration.HANDOVER_PROBE, settings={"batch": 16}, results=d,
                            values=calibration.handover_values(d), machine=MACHINE)
    write_decode(cal)  # merged beside the decode rate
    w = load_workload(None, [], cal)
    assert w.data.loader_cpu_per_frame == pytest.approx(2e-4)
    prov = w.provenance["data.loader_cpu_per_frame"]
    assert prov.kind == "measured" and "DataLoader worker" in prov.source and "0.250 ms" in prov.source
    assert "`trainplan probe handover`" in prov.source
    # 8 cores at 101.5 frames/s of 1080p, 0.2 ms a frame on top: 8 / (1/101.5 + 0.0002)
    p = pl.pipeline_account(**pipeline_inputs(w))
    assert p.supply_fps == pytest.approx(8 / (1 / 101.5 + 2e-4))
    assert load_workload(None, [], None).provenance["data.loader_cpu_per_frame"].kind == "assumed"
    with pytest.raises(UserError, match="data.loader_cpu_per_frame"):
        calibration.handover_values(handover_result(per_frame=5e-5, making=6e-5))  # the clock did not see it


def test_refuses_another_resolution(tmp_path):
    cal = write_decode(tmp_path / "cal.toml", width=3840, height=2160)
    with pytest.raises(UserError) as err:
        calibration.check_compatible(cal, {"data": {"width": 1920, "height": 1080}})
    assert "data.width" in err.value.expected and "3840x2160" in err.value.expected
    # the same refusal through the workload loader
    from trainplan.workload.load import load_workload

    with pytest.raises(UserError, match="data.width"):
        load_workload(None, [], cal)
    # accepted on the format it was measured on, and where no decoder is used
    calibration.check_compatible(cal, {"data": {"width": 3840, "height": 2160}})
    calibration.check_compatible(cal, {"data": {"access": "decoded"}})
    calibration.check_compatible(cal, {"data": {"kind": "tokens"}})


def test_refuses_another_codec(tmp_path):
    cal = write_decode(tmp_path / "cal.toml")
    text = cal.read_text().replace('codec = "h264"', 'codec = "hevc"')
    cal.write_text(text)
    with pytest.raises(UserError, match="codec"):
        calibration.check_compatible(cal, {"data": {}})


def test_apply_sets_nested_keys(tmp_path):
    cal = write_decode(tmp_path / "cal.toml", width=1280, height=720)
    mm = {"library": "torch", "device": "cpu", "dtype": "float32", "n": 512, "threads": 1,
          "flops_per_second": 5e10}
    calibration.write(cal, "matmul", settings={}, results={}, values=calibration.matmul_peak_values(mm),
                      machine=MACHINE)
    doc = {"data": {"width": 1280, "height": 720}, "cluster": {"accelerator": "cpu-core"}}
    set_ = calibration.apply(doc, cal)
    assert doc["cluster"]["core_fps_1080p"] == 101.5
    assert doc["cluster"]["accelerator"] == {"name": "cpu-core", "peak_flops": 5e10}
    assert set(set_) == {"cluster.core_fps_1080p", "cluster.accelerator.peak_flops"}
    with pytest.raises(UserError):
        calibration.apply({"data": {}}, cal)  # 1080p workload, 720p calibration


@pytest.mark.parametrize("text, where", [
    ("format = 7\n", "format 1"),
    ("format = 1\n[[values]]\nkey = \"cluster.cores\"\nvalue = 8\n", "values[0].key"),
    ("format = 1\n[[values]]\nkey = \"cluster.link\"\nvalue = -3\n", "cluster.link"),
    ("format = 1\n[[values]]\nkey = \"cluster.link\"\nvalue = \"fast\"\n", "cluster.link"),
    ("format = 1\n[[values]]\nkey = \"cluster.mfu_end_to_end\"\nvalue = 1\n", "true or false"),
    ("format = [\n", "malformed"),
])
def test_bad_files(tmp_path, text, where):
    cal = tmp_path / "cal.toml"
    cal.write_text(text)
    with pytest.raises(UserError) as err:
        calibration.load(cal)
    assert where in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such calibration file"):
        calibration.load(tmp_path / "none.toml")


def test_unknown_key_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError):
        calibration.write(tmp_path / "c.toml", "decode", settings={}, results={},
                          values=[{"key": "cluster.cores", "value": 3}], machine=MACHINE)


# ---------------------------------------------------------------- issue 16: the file's schema

# The malformed shapes of issue 16, each refused with the file and the place named.
MALFORMED = [
    ('format = 1\nvalues = "abc"\n', "values"),
    ("format = 1\nvalues = [1, 2]\n", "values[0]"),
    ('format = 1\n[probes.decode]\nsettings = [1, 2]\n', "probes.decode.settings"),
    ('format = 1\n[probes.decode]\nresults = "x"\n', "probes.decode.results"),
    ("format = 1\nprobes = 3\n", "probes"),
    ('format = 1\nmachine = "m"\n', "machine"),
    ('format = 1\n[[values]]\nkey = 5\nvalue = 1.0\n', "values[0].key"),
    ('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = [1]\n', "cluster.link"),
    ('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 2e9\nhostname = { a = 1 }\n', "cluster.link"),
    ('format = 1\n[[values]]\nvalue = 3.0\n', "values[0].key"),
    ('format = 1\n[probes.decode]\nsettings = { width = "abc" }\n[[values]]\nkey = "cluster.core_fps_1080p"\n'
     'value = 100.0\n', None),  # a setting of another type: not the workload's format, so not applied
]


@pytest.mark.parametrize("text,where", MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_malformed_shapes_are_refused_with_the_place(tmp_path, text, where):
    from trainplan.workload.load import load_workload

    path = tmp_path / "cal.toml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_workload(None, [], path)
    assert "cal.toml" in info.value.where
    if where is not None:
        assert where in str(info.value), str(info.value)


def test_format_true_is_not_format_1(tmp_path):
    path = tmp_path / "cal.toml"
    path.write_text("format = true\n")
    with pytest.raises(UserError, match="format"):
        calibration.load(path)


@pytest.mark.parametrize("key,value", [("cluster.core_fps_1080p", 1e12), ("cluster.link", 1e15),
                                       ("cluster.accelerator.peak_flops", 1e3), ("cluster.mfu", 1e-9),
                                       ("data.loader_cpu_per_frame", 5.0)])
def test_absurd_measurements_are_refused(tmp_path, key, value):
    path = tmp_path / "cal.toml"
    path.write_text(f'format = 1\n[[values]]\nkey = "{key}"\nvalue = {value!r}\n')
    with pytest.raises(UserError, match="plausible range") as info:
        calibration.load(path)
    assert key in info.value.where


def test_text_from_the_file_is_sanitised(tmp_path):
    path = tmp_path / "cal.toml"
    path.write_text('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 2e9\nprobe = "read"\n'
                    'hostname = "\\u001b[31mbox\\u001b[0m"\nnote = "a\\u001b]0;title\\u0007b\\u202eevil"\n')
    m = calibration.load(path)["cluster.link"]
    assert m.value == 2e9
    assert "\x1b" not in m.source and "\x07" not in m.source and "\u202e" not in m.source
    assert "box" in m.source and m.hostname == "?box?"


def test_extra_fields_and_toml_dates_are_kept(tmp_path):
    """A schema layer over what is there: fields other probes add are not refused."""
    path = tmp_path / "cal.toml"
    path.write_text('format = 1\nupdated = 2025-06-01T12:00:00Z\nnew_section = { x = 1 }\n[[values]]\n'
                    'key = "cluster.link"\nvalue = 2e9\ndate = 2025-06-01T12:00:00Z\nspread = 0.1\n')
    m = calibration.load(path)["cluster.link"]
    assert m.date.startswith("2025-06-01T12:00:00")


def test_a_set_on_the_command_line_wins_over_the_calibration(tmp_path):
    """--set > calibration > workload file > default: a user planning a what-if against a measured
    value gets the value they typed, and its provenance says so."""
    from trainplan.workload import calibration
    from trainplan.workload.load import load_workload

    cal = tmp_path / "cal.toml"
    calibration.write(cal, calibration.HANDOVER_PROBE, settings={"side": 112, "batch": 16},
                      results={"loader_cpu_per_frame": 5e-5}, values=[{"key": "data.loader_cpu_per_frame",
                                                                       "value": 5e-5, "note": "probe"}],
                      machine={})
    measured = load_workload(None, [], calibration=cal)
    assert measured.data.loader_cpu_per_frame == 5e-5
    typed = load_workload(None, ["data.loader_cpu_per_frame=0"], calibration=cal)
    assert typed.data.loader_cpu_per_frame == 0.0
    assert typed._provenance["data.loader_cpu_per_frame"].kind == "assumed"


# ---------------------------------------------------------------- where a figure applies (issue 25)


def test_a_loopback_allreduce_never_stands_in_for_a_cluster_interconnect(tmp_path):
    from trainplan.workload import calibration
    from trainplan.workload.load import load_workload

    cal = tmp_path / "cal.toml"
    d = {"backend": "gloo", "world_size": 2, "launched_by": "local processes", "bytes": 16e6,
         "bus_bytes_per_second": 0.6e9}
    calibration.write(cal, "allreduce", settings={"backend": "gloo", "world_size": 2, "launched_by": "local processes"},
                      results=d, values=calibration.allreduce_values(d),
                      machine={"hostname": "laptop", "cpu_model": "a laptop CPU"})
    for accelerator in ("h100-sxm", "cpu-core"):
        w = load_workload(None, [f'cluster.accelerator="{accelerator}"'], calibration=cal)
        p = w.provenance["cluster.interconnect"]
        assert p.kind == "assumed" and "loopback" in p.source and "left out" in p.source
        assert w.cluster.interconnect != 0.6e9


def test_a_device_figure_applies_only_to_its_kind_of_accelerator(tmp_path):
    from trainplan.workload import calibration
    from trainplan.workload.load import load_workload

    cal = tmp_path / "cal.toml"
    calibration.write(cal, "transfer", settings={}, results={},
                      values=[{"key": "cluster.host_to_device", "value": 25e9, "note": "pinned"}],
                      machine={"hostname": "n", "cpu_model": "c", "gpu": "NVIDIA H200"})
    assert load_workload(None, ['cluster.accelerator="h200"'], calibration=cal).cluster.host_to_device == 25e9
    w = load_workload(None, [], calibration=cal)  # an H100-SXM plan
    assert w.provenance["cluster.host_to_device"].kind == "assumed"
    assert "gpu: NVIDIA H200" in w.provenance["cluster.host_to_device"].source


@pytest.mark.parametrize("key,value", [("cluster.accelerator.peak_flops", 5.7e9), ("cluster.mfu", 0.03)])
def test_a_cpu_measured_rate_does_not_stand_in_for_a_gpu(tmp_path, key, value):
    """A matmul peak (`probe matmul --as-peak`) or an MFU (`profile`) measured on a CPU is the CPU's: a
    cpu-core plan uses it, an H100 plan keeps its own figure and says what it left out (applied, a CPU's
    5.7 GFLOP/s made the default 3.9-day run 234,879 days)."""
    from trainplan.workload.load import load_workload

    cal = tmp_path / "cal.toml"
    calibration.write(cal, "matmul", settings={}, results={}, values=[{"key": key, "value": value, "note": "probe"}],
                      machine={"hostname": "laptop", "cpu_model": "a laptop CPU"})
    gpu = load_workload(None, [], calibration=cal)  # the default plan: an H100-SXM
    assert "cpu: a laptop CPU" in gpu.left_out[key] and "h100-sxm" in gpu.left_out[key]
    assert gpu.accelerator.peak_flops["bf16"] > 1e14 and gpu.cluster.mfu != 0.03
    cpu = load_workload(None, ['cluster.accelerator="cpu-core"'], calibration=cal)
    got = cpu.accelerator.peak_flops["fp32"] if key.endswith("peak_flops") else cpu.cluster.mfu
    assert got == value


# ---------------------------------------------------------------- a model's activations apply at their settings (issue 24)


def _model_calibration(path, recompute: str = "none", attention: str = "sdpa", precision: str = "bf16"):
    from trainplan.workload import calibration

    calibration.write(path, "model", settings={"micro_batch": 2, "seq_len": 512, "attention": attention,
                                               "precision": precision, "recompute": recompute},
                      results={}, values=[{"key": "training.activation_bytes_per_layer_token", "value": 1000.0},
                                          {"key": "training.activation_bytes_outside_token", "value": 50.0}],
                      machine={"hostname": "box", "cpu_model": "x"})
    return path


def test_a_model_calibration_applies_only_at_the_settings_it_was_measured_at(tmp_path):
    """`probe model` measured at sdpa, bf16, no recomputation: a plan at those settings uses its figures
    (b S (L k + outside) by hand, micro-batch 4, S 1024, 12 layers); a plan with full recomputation, eager
    attention or fp32 leaves them out and says which setting differs."""
    from trainplan.planning.evaluate import build_report
    from trainplan.workload.load import load_workload

    cal = _model_calibration(tmp_path / "cal.toml")
    shape = ["model.layers=12", "model.width=768", "model.heads=12", "training.micro_batch=4", "training.seq_len=1024"]
    w = load_workload(None, shape, calibration=cal)
    assert w.training.activation_bytes_per_layer_token == 1000.0 and w.left_out == {}
    memory = build_report(w)["memory"]
    assert memory["activation_bytes"] == pytest.approx(4 * 1024 * (12 * 1000.0 + 50.0), rel=1e-9)
    for setting, said in (("training.recompute=full", "recompute none measured, full planned"),
                          ('training.attention="eager"', "attention sdpa measured, eager planned"),
                          ('training.precision="fp32"', "precision bf16 measured, fp32 planned")):
        w = load_workload(None, [*shape, setting], calibration=cal)
        assert w.training.activation_bytes_per_layer_token is None
        assert said in w.left_out["training.activation_bytes_per_layer_token"]
        memory = build_report(w)["memory"]
        assert said in memory["activations_source"] and "left out" in memory["activations_source"]
        plain = build_report(load_workload(None, [*shape, setting]))["memory"]
        assert memory["activation_bytes"] == plain["activation_bytes"] != 4 * 1024 * (12 * 1000.0 + 50.0)
    # flash keeps what sdpa keeps, fp16 what bf16 keeps: the figures apply
    w = load_workload(None, [*shape, 'training.attention="flash"', 'training.precision="fp16"'], calibration=cal)
    assert w.training.activation_bytes_per_layer_token == 1000.0


def test_a_model_calibration_at_autocast_applies_to_the_autocast_recipe(tmp_path):
    from trainplan.workload.load import load_workload

    cal = _model_calibration(tmp_path / "cal.toml", precision="autocast")
    assert load_workload(None, [], calibration=cal).training.activation_bytes_per_layer_token is None
    w = load_workload(None, ['training.state_recipe="autocast_fp32"'], calibration=cal)
    assert w.training.activation_bytes_per_layer_token == 1000.0
