"""--output writes only regular files, atomically, keeping the target's permissions (issue 16).

In process (trainplan.outputs.write_output, the one writer every command uses) for
the file-system cases, and through the command line for what a user sees: exit 2, one line
naming --output, nothing written, no temporary file left.
"""

from __future__ import annotations

import os
import stat
import threading

import pytest

from trainplan.errors import UserError
from trainplan.outputs import TEMP_PREFIX, write_output


def _no_temporary(folder) -> None:
    assert not [p for p in os.listdir(folder) if p.startswith(TEMP_PREFIX)]


def test_writes_a_new_file_with_umask_permissions(tmp_path):
    target = tmp_path / "r.json"
    umask = os.umask(0o022)
    try:
        write_output("{}", target)
    finally:
        os.umask(umask)
    assert target.read_text() == "{}\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # 0666 less the umask 022
    _no_temporary(tmp_path)


def test_replacing_keeps_the_permissions(tmp_path):
    target = tmp_path / "r.txt"
    target.write_text("old")
    target.chmod(0o640)
    write_output("new", target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    _no_temporary(tmp_path)


def test_a_link_to_a_file_stays_a_link(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_output("new", link)
    assert link.is_symlink() and real.read_text() == "new\n"


def test_bytes_are_written_as_they_are(tmp_path):
    target = tmp_path / "p.png"
    write_output(b"\x89PNG\x00", target)
    assert target.read_bytes() == b"\x89PNG\x00"


def test_dash_means_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_output("hello", "-")
    assert capsys.readouterr().out == "hello\n"
    assert not (tmp_path / "-").exists()


def _refused(path, *expected: str) -> None:
    with pytest.raises(UserError) as info:
        write_output("report", path)
    assert info.value.where == "--output"
    for text in expected:
        assert text in info.value.expected, info.value.expected


def test_refuses_a_directory(tmp_path):
    _refused(tmp_path, "directory")
    _no_temporary(tmp_path)


def test_refuses_a_character_device():
    before = os.stat("/dev/null")
    _refused("/dev/null", "device")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def attempt() -> None:
        try:
            _refused(fifo, "pipe")
        finally:
            done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(10), "write_output blocked on a FIFO"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_refuses_a_missing_parent_and_a_file_as_parent(tmp_path):
    _refused(tmp_path / "no" / "r.json", "no such directory")
    assert not (tmp_path / "no").exists()
    (tmp_path / "f").write_text("x")
    _refused(tmp_path / "f" / "r.json", "not a directory")
    assert (tmp_path / "f").read_text() == "x"


def test_refuses_a_link_to_nothing(tmp_path):
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    _refused(link, "link to nothing")
    assert not (tmp_path / "nowhere").exists()


def test_refuses_a_read_only_file_and_leaves_it(tmp_path):
    target = tmp_path / "ro.txt"
    target.write_text("keep")
    target.chmod(0o444)
    _refused(target, "read-only")
    assert target.read_text() == "keep" and stat.S_IMODE(target.stat().st_mode) == 0o444


def test_refuses_empty_nul_and_too_long_names(tmp_path):
    _refused("", "empty")
    _refused(str(tmp_path / "a\x00b"), "NUL")
    _refused(str(tmp_path / ("a" * 300)), "too long")
    _no_temporary(tmp_path)


# ---------------------------------------------------------------- through the command line


def _one_line(res, *expected: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stdout == "" and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainplan: --output"), res.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_plan_refuses_to_overwrite_its_own_workload(tmp_path, cli):
    workload = tmp_path / "x.toml"
    workload.write_text("[cluster]\ncores = 4\n")
    _one_line(cli("plan", str(workload), "--output", str(workload)), "input")
    assert workload.read_text() == "[cluster]\ncores = 4\n"
    _no_temporary(tmp_path)


def test_plan_refuses_to_overwrite_its_calibration_through_a_link(tmp_path, cli):
    cal = tmp_path / "cal.toml"
    cal.write_text('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 2e9\n')
    link = tmp_path / "out.json"
    link.symlink_to(cal)
    _one_line(cli("plan", "--calibration", str(cal), "--output", str(link)), "input")
    assert cal.read_text().startswith("format = 1")


@pytest.mark.parametrize("command", [["plan"], ["simulate", "--frames", "2000"], ["solve", "cluster.cores", "--for",
                                                                                  "pipeline.busy>=0.5"]])
def test_every_writing_command_refuses_a_directory(tmp_path, cli, command):
    _one_line(cli(*command, "--output", str(tmp_path)), "directory")


def test_a_trailing_slash_names_a_directory(tmp_path, cli):
    _one_line(cli("plan", "--output", str(tmp_path / "newdir") + "/"), "directory name")
    _one_line(cli("plan", f"--output={tmp_path / 'newdir'}/"), "directory name")
    assert not (tmp_path / "newdir").exists()


def test_dash_is_stdout_on_the_command_line(tmp_path, cli):
    res = cli("plan", "--format", "json", "--output", "-", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.lstrip().startswith("{")
    assert not (tmp_path / "-").exists()


def test_permission_denied_is_one_line(tmp_path, monkeypatch):
    """As root no folder refuses a file, so the refusal the system would give is injected."""
    import errno
    import tempfile

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    _refused(tmp_path / "r.json", "permission denied")
    assert not (tmp_path / "r.json").exists()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    import errno

    target = tmp_path / "r.txt"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    _refused(target, "no space left on device")
    assert target.read_text() == "old"
    _no_temporary(tmp_path)


RUNS_CSV = "params,tokens,loss\n1e8,2e9,3.1\n1e9,2e10,2.6\n4e9,8e10,2.3\n"
WORKLOAD = "[cluster]\ncores = 4\n"
CONFIG = ('{"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 100, '
          '"n_positions": 32}')
SCRIPT = "from trainplan.measure import profiler\nfor _ in profiler.current().wrap(range(20)):\n    pass\n"


@pytest.mark.parametrize("name,text,command", [
    ("runs.csv", RUNS_CSV, ["scaling", "fit", "{f}", "--grid", "small", "--bootstrap", "2"]),
    ("config.json", CONFIG, ["params", "{f}"]),
    ("w.toml", WORKLOAD, ["validate", "{f}"]),
    ("w.toml", WORKLOAD, ["sweep", "{f}", "--vary", "cluster.cores=8,16"]),
    ("w.toml", WORKLOAD, ["solve", "cluster.cores", "{f}", "--for", "pipeline.busy>=0.5"]),
    ("w.toml", WORKLOAD, ["layout", "{f}"]),
    ("w.toml", WORKLOAD, ["serve", "{f}"]),
    ("train.py", SCRIPT, ["profile", "{f}", "--set", "model.params=1e5"]),
    ("w.toml", WORKLOAD, ["profile", "train.py", "--workload", "{f}"]),
])
def test_every_command_refuses_to_overwrite_its_input(tmp_path, cli, name, text, command):
    # the one check (limits remembers every file read, check_output_path refuses one): exit 2, one line, untouched
    (tmp_path / "train.py").write_text(SCRIPT)
    given = tmp_path / name
    given.write_text(text)
    res = cli(*[a.replace("{f}", str(given)) for a in command], "--output", str(given), cwd=tmp_path)
    assert res.returncode == 2
    _one_line(res, "expected a file other than an input of this run", f"{given} was read as input")
    assert given.read_text() == text
    _no_temporary(tmp_path)


def test_profile_still_updates_the_calibration_it_reads(tmp_path, cli):
    # the calibration writer may replace the calibration file given as --calibration, and no other input
    (tmp_path / "train.py").write_text(SCRIPT)
    cal = tmp_path / "cal.toml"
    cal.write_text('format = 1\n[[values]]\nkey = "cluster.link"\nvalue = 2e9\n')
    res = cli("profile", "train.py", "--set", "model.params=1e5", "--calibration", str(cal), "--output", str(cal),
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    keys = {line for line in cal.read_text().splitlines() if line.startswith("key = ")}
    assert {'key = "cluster.link"', 'key = "cluster.mfu"'} <= keys, cal.read_text()  # kept, and added


def test_a_probe_refuses_an_output_that_is_not_a_calibration_before_measuring(tmp_path, cli, monkeypatch):
    # `probe ... --output FILE` updates a calibration file: a workload (or any other file) given there is
    # refused before the probe runs (the measurement here fails the test if it is reached), and left as it was
    from trainplan.measure import handover

    def measured(**_: object) -> None:
        raise AssertionError("the probe ran before its --output was checked")

    monkeypatch.setattr(handover, "handover", measured)
    workload = tmp_path / "w.toml"
    workload.write_text('[model]\nparams = "7B"\n')
    before = workload.read_bytes()
    res = cli("probe", "handover", "--seconds", "30", "--output", str(workload))
    assert res.returncode == 2 and res.stdout == ""
    line, = res.stderr.strip().splitlines()
    assert line.startswith("trainplan: --output: expected a calibration file to update or a new file"), line
    assert workload.read_bytes() == before
