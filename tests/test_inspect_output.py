"""`data inspect --output` writes through the safe writer, and every command checks its --output before
its work (issue 29); the inspection's own files: empty .bin, non-UTF-8 text, a FIFO tokenizer."""

from __future__ import annotations

import os
import stat
import time

import numpy as np
import pytest


@pytest.fixture
def corpus(tmp_path):
    np.arange(5000, dtype=np.uint16).tofile(tmp_path / "a.bin")  # 5,000 uint16 ids: 2 bytes a token
    return tmp_path


def _refused(res, *words):
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainplan: --output") and "Traceback" not in res.stderr, lines
    for word in words:
        assert word in lines[0], lines[0]


def _inspect(cli, corpus, target):
    return cli("data", "inspect", str(corpus / "a.bin"), "--output", str(target), "--format", "json")


def test_keeps_the_mode_and_the_link(cli, corpus):
    w = corpus / "w.toml"
    w.write_text("[cluster]\ncount = 2\n")
    w.chmod(0o600)
    link = corpus / "link.toml"
    link.symlink_to("w.toml")
    res = _inspect(cli, corpus, link)
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and os.readlink(link) == "w.toml"
    assert stat.S_IMODE(w.stat().st_mode) == 0o600
    text = w.read_text()
    assert "count = 2" in text and "bytes_per_token = 2" in text  # the other sections kept; uint16 is 2 B
    assert sorted(p.name for p in corpus.iterdir()) == ["a.bin", "link.toml", "w.toml"]  # no temporary left


def test_writes_through_no_tmp_link(cli, corpus):
    victim = corpus / "victim"
    victim.write_text("keep")
    (corpus / "w.toml.tmp").symlink_to(victim)  # the old writer wrote through NAME.tmp
    assert _inspect(cli, corpus, corpus / "w.toml").returncode == 0
    assert victim.read_text() == "keep"


@pytest.mark.parametrize("make,words", [
    (lambda d: (d / "dangling.toml").symlink_to(d / "nowhere") or d / "dangling.toml", ("link to nothing",)),
    (lambda d: os.mkfifo(d / "fifo.toml") or d / "fifo.toml", ("pipe",)),
    (lambda d: d / "a.bin", ("inspected",)),
    (lambda d: __import__("pathlib").Path("/dev/null"), ("device",)),
])
def test_refused_targets(cli, corpus, make, words):
    target = make(corpus)
    before = {p.name: p.lstat().st_mtime_ns for p in corpus.iterdir()}
    _refused(_inspect(cli, corpus, target), *words)
    assert {p.name: p.lstat().st_mtime_ns for p in corpus.iterdir()} == before


def test_a_read_only_file_is_left(cli, corpus):
    """Refused by its mode bits, so also for root, who may write any file."""
    ro = corpus / "ro.toml"
    ro.write_text("x = 1\n")
    ro.chmod(0o444)
    _refused(_inspect(cli, corpus, ro), "read-only")
    assert ro.read_text() == "x = 1\n"


def test_a_full_disk_leaves_no_temporary(cli, corpus, monkeypatch):
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    res = _inspect(cli, corpus, corpus / "w.toml")
    _refused(res, "no space left")
    assert sorted(p.name for p in corpus.iterdir()) == ["a.bin"]


def test_a_bad_output_is_found_before_the_work(cli, corpus, monkeypatch):
    from trainplan.measure import inspect as insp

    def never(*args, **kwargs):  # pragma: no cover - the point is that it is not reached
        raise AssertionError("the inspection ran before --output was checked")

    monkeypatch.setattr(insp, "inspect_paths", never)
    os.mkfifo(corpus / "fifo.toml")
    _refused(_inspect(cli, corpus, corpus / "fifo.toml"), "pipe")


@pytest.mark.parametrize("args", [
    ["sweep", "--vary", "cluster.cores=1:4"],
    ["probe", "read", "."],
    ["simulate", "--frames", "2000"],
    ["layout"],
    ["probe", "matmul"],
])
def test_every_command_checks_output_first(cli, tmp_path, args):
    os.mkfifo(tmp_path / "fifo")
    started = time.monotonic()
    res = cli(*args, "--output", str(tmp_path / "fifo"), cwd=tmp_path)
    assert res.returncode == 2 and "pipe" in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]
    assert time.monotonic() - started < 60  # generous: the point is that nothing ran, nor blocked


def test_inspected_files_that_cannot_be_read(cli, tmp_path):
    (tmp_path / "empty.bin").write_bytes(b"")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe hello\n")
    res = cli("data", "inspect", str(tmp_path / "empty.bin"))
    assert res.returncode == 2 and "empty.bin: expected token ids, got an empty file" in res.stderr
    res = cli("data", "inspect", str(tmp_path / "bad.txt"))
    assert res.returncode == 2 and "bad.txt: expected UTF-8 text, got byte 0xff at offset 0" in res.stderr


def test_a_fifo_tokenizer_is_refused_without_blocking(cli, tmp_path):
    pytest.importorskip("tokenizers")
    (tmp_path / "t.txt").write_text("hello world\n")
    os.mkfifo(tmp_path / "tok.json")
    res = cli("data", "inspect", str(tmp_path / "t.txt"), "--tokenizer", str(tmp_path / "tok.json"))
    assert res.returncode == 2 and "tok.json" in res.stderr and "pipe" in res.stderr, res.stderr
