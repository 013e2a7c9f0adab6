"""Sizes bounded before anything is allocated (issue 29): a refusal names the key, what the size would
take and the limit (half the machine's memory, or TRAINPLAN_MEMORY_LIMIT)."""

from __future__ import annotations

import pytest

from trainplan.errors import UserError
from trainplan import limits


def _refused(res, key, *words):
    assert res.returncode == 2, (res.returncode, res.stdout[-300:], res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"trainplan: {key}:") and "Traceback" not in res.stderr, lines
    for word in words:
        assert word in lines[0], lines[0]


def test_the_limit_is_half_the_memory_or_the_override(monkeypatch):
    monkeypatch.delenv(limits.MEMORY_LIMIT_ENV, raising=False)
    monkeypatch.setattr(limits, "physical_memory", lambda: 64e9)
    assert limits.memory_limit()[0] == 32e9
    monkeypatch.setenv(limits.MEMORY_LIMIT_ENV, "8 GiB")
    assert limits.memory_limit() == (8 * 2**30, "TRAINPLAN_MEMORY_LIMIT=8 GiB")
    monkeypatch.setenv(limits.MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(UserError, match=limits.MEMORY_LIMIT_ENV):
        limits.memory_limit()


@pytest.fixture
def small_machine(monkeypatch):
    """A machine whose limit is 1 GB, whatever this one has."""
    monkeypatch.setenv(limits.MEMORY_LIMIT_ENV, "1 GB")


def test_matmul_n(cli, small_machine):
    # 20 bytes an element (three float32 matrices and a float64 sample): 20 x 8192^2 = 1.34 GB > 1 GB
    _refused(cli("probe", "matmul", "--n", "8192"), "--n", "1.34 GB", "1 GB", "TRAINPLAN_MEMORY_LIMIT=1 GB")
    _refused(cli("probe", "matmul", "--n", "1048576"), "--n", "22 TB")


def test_handover_side_batch_and_seconds(cli, small_machine):
    # 64 frames of 3 x 4000^2 bytes = 3.07 GB
    _refused(cli("probe", "handover", "--side", "4000"), "--side", "3.07 GB")
    # (64 + 4 x 100,000) x 3 x 224^2 = 60.2 GB
    _refused(cli("probe", "handover", "--batch", "100000"), "--batch", "60.2 GB")
    _refused(cli("probe", "handover", "--seconds", "inf"), "--seconds", "finite")
    _refused(cli("probe", "handover", "--seconds", "1e5"), "--seconds", "3600 s")


@pytest.mark.parametrize("flag", ["--width", "--height", "--fps", "--gop", "--side"])
def test_decode_flags_of_zero_are_refused_not_replaced(cli, flag):
    _refused(cli("probe", "decode", flag, "0"), flag, "above 0")


def test_decode_frames_and_seconds(cli):
    _refused(cli("probe", "decode", "--frames", "1000000000"), "--frames", "108,000")
    _refused(cli("probe", "decode", "--seconds", "inf"), "--seconds", "finite")
    # the default clip is two keyframe intervals: data.gop 100,000 makes 200,000 frames
    _refused(cli("probe", "decode", "--gop", "100000"), "--frames", "data.gop 100000")


def test_decode_height_past_memory(cli, small_machine):
    # 64 frames held by the encoder x 1.5 bytes x 8000 x 8000 px = 6.14 GB
    _refused(cli("probe", "decode", "--width", "8000", "--height", "8000"), "--height", "6.14 GB")


def test_model_probe_layers_and_seq_len(cli, small_machine):
    llama = ["--set", "model_type=llama", "--set", "hidden_size=64", "--set", "intermediate_size=128",
             "--set", "num_attention_heads=4", "--set", "vocab_size=100"]
    _refused(cli("probe", "model", *llama, "--set", "num_hidden_layers=100000"), "--set", "100,000 layers")
    # 2 x 10^7 tokens x 64 wide x 2 layers x 17 tensors x 2 bytes = 87 GB
    _refused(cli("probe", "model", *llama, "--set", "num_hidden_layers=2", "--seq-len", "10000000"),
             "--seq-len", "87 GB")


def test_model_probe_names_the_option_past_the_bound(cli, small_machine):
    tiny = ["--set", "model_type=llama", "--set", "hidden_size=64", "--set", "intermediate_size=128",
            "--set", "num_attention_heads=4", "--set", "vocab_size=100", "--set", "num_hidden_layers=2"]
    # 10^4 sequences x 128 tokens (the default) x 64 wide x 2 layers x 17 tensors x 2 bytes = 5.57 GB (the
    # 95,040 parameters' 4 bytes each add 0.4 MB): --batch passes the limit at the default --seq-len
    _refused(cli("probe", "model", *tiny, "--batch", "10000"), "--batch", "5.57 GB")
    # 1,000 x 1,000 tokens: 4.35 GB, while 1,000 x 128 (557 MB) and 2 x 1,000 (8.7 MB) fit: both named
    _refused(cli("probe", "model", *tiny, "--batch", "1000", "--seq-len", "1000"), "--batch/--seq-len", "4.35 GB")


def test_collective_sizes_are_refused_before_a_rank_is_spawned(cli, small_machine):
    # two ranks of 256 MiB (torch imported) each holding the 400 MB message:
    # 2 x (268,435,456 + 400,000,000) = 1.34 GB > 1 GB
    _refused(cli("probe", "allreduce", "--size", "400 MB", "--repeats", "1"), "--size", "1.34 GB", "1 GB")
    # all-to-all holds its input and its output: 2 x (268,435,456 + 2 x 200,000,000) = 1.34 GB
    _refused(cli("probe", "alltoall", "--size", "200 MB", "--repeats", "1"), "--size", "1.34 GB")
    # the audit's 1 PB: all-to-all's 2 PB a rank, on 2 ranks
    _refused(cli("probe", "collectives", "--size", "1 PB", "--repeats", "1"), "--size", "4 PB")
    _refused(cli("probe", "allreduce", "--size", "1 PB", "--repeats", "1"), "--size", "2 PB")


def test_local_rank_count_is_bounded(cli, small_machine):
    import os

    most = 4 * len(os.sched_getaffinity(0))  # 4 single-thread ranks per usable core
    _refused(cli("probe", "allreduce", "--processes", "5000", "--size", "1 kB", "--repeats", "1"), "--processes",
             f"at most {most:,} local processes", "5,000")
    _refused(cli("probe", "alltoall", "--processes", "5000", "--size", "1 MB"), "--processes", f"at most {most:,}")
    # 4 ranks of 256 MiB = 1,073,741,824 bytes = 1.07 GB > 1 GB, whatever the message
    _refused(cli("probe", "allreduce", "--processes", "4", "--size", "1 kB"), "--processes", "1.07 GB")


def test_bootstrap_resamples_are_capped():
    from trainplan.accounts import scaling

    with pytest.raises(UserError, match="2 to 100,000 resamples, got 1,000,000,000"):
        scaling.bootstrap_scaling_law(None, None, resamples=10**9)  # type: ignore[arg-type]


def test_read_size_past_the_free_space(cli, tmp_path):
    _refused(cli("probe", "read", str(tmp_path), "--size", "1 EB"), "--size", "bytes free")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size, shown", [("0", "got 0"), ("1.5 B", "got 1")])
def test_read_size_of_zero_is_refused_not_replaced(cli, tmp_path, size, shown):
    # 0 is below the 4096-byte smallest test file, as 1.5 B is; neither becomes the 64 MiB default
    _refused(cli("probe", "read", str(tmp_path), "--size", size), "--size", "at least 4096 bytes", shown)
    assert list(tmp_path.iterdir()) == []


def test_model_probe_numbers_and_flop_lengths(cli):
    llama = ["--set", "model_type=llama", "--set", "num_hidden_layers=2", "--set", "hidden_size=64", "--set",
             "intermediate_size=128", "--set", "num_attention_heads=4", "--set", "vocab_size=100"]
    # 4 heads x (2^31)^2 = 2^64 elements: past the 2^62 torch counts in int64
    _refused(cli("probe", "model", *llama, "--flop-seq-lens", str(2**31)), "--flop-seq-lens", "2^62")
    _refused(cli("probe", "model", "--set", "model_type=llama", "--set", f"hidden_size={10**30}"), "--set",
             "hidden_size")


def test_buffers_and_law_lists(cli):
    _refused(cli("simulate", "--buffers", "1,,2", "--frames", "2000"), "--buffers", "empty item")
    _refused(cli("scaling", "loss", "--params", "7B", "--tokens", "1T", "--law", "1,2,3,5e-324,0.3"), "--law",
             "subnormal")
