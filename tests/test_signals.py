"""Signals and exit statuses (issue 29): Ctrl-C exits 130 and SIGTERM 143 (128 + the signal's number,
as a shell reports them), typer's own status is kept, `probe read` removes its test file whatever
stops it, `simulate --vary -j 2` stops its workers, and a profiled script's failure is its own.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_typer_status_is_kept(cli):
    # a usage error is click's own status 2; --version is a clean 0
    assert cli("plan", "--frames", "12").returncode == 2
    assert cli("--version").returncode == 0


def _interrupt_probe_read(monkeypatch, what):
    from trainplan.measure import read

    def stop(path):  # the moment after the test file is written, before it is read
        assert Path(path).is_file()
        if what == "sigint":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)  # cli.main's handler raises it here
        time.sleep(5)  # pragma: no cover - the handler has already raised

    monkeypatch.setattr(read, "_drop_from_cache", stop)


@pytest.mark.parametrize("what,status,word", [("sigint", 130, "interrupted"), ("sigterm", 143, "terminated")])
def test_probe_read_removes_its_test_file_when_stopped(cli, tmp_path, monkeypatch, what, status, word):
    if what == "sigterm" and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("the test runner handles SIGTERM itself")
    _interrupt_probe_read(monkeypatch, what)
    res = cli("probe", "read", str(tmp_path), "--size", "1 MiB")
    assert res.returncode == status and res.stderr.strip() == f"trainplan: {word}", res.stderr
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # main put the default action back


def test_probe_read_on_a_full_disk(cli, tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    res = cli("probe", "read", str(tmp_path), "--size", "1 MiB")
    assert res.returncode == 2 and "no space left on device" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and str(tmp_path) in res.stderr
    assert list(tmp_path.iterdir()) == []


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers and /proc: Linux")
@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_simulate_vary_stops_its_workers(tmp_path, sig, status):
    """Generous bounds for a busy 2-core machine: up to 120 s for the workers to start, 60 s to stop."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "trainplan", "simulate", "--vary", "buffer=1:64", "--frames",
                             "2000000", "-j", "2", "--engine", "python"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            time.sleep(0.2)
            workers = _children(proc.pid)
        assert len(workers) >= 2, "the pool's workers did not start"
        time.sleep(1.0)  # the workers are inside their first chunk
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C reaches the whole foreground group
        else:
            os.kill(proc.pid, sig)  # `kill PID` reaches the parent only
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # pragma: no cover - a failure above
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == status, err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers), "a worker outlived the command"


# ---------------------------------------------------------------- the profiled script's failure


def test_a_script_exit_status_is_the_command_status(cli, tmp_path):
    (tmp_path / "three.py").write_text("import sys\nsys.exit(3)\n")
    res = cli("profile", str(tmp_path / "three.py"), cwd=tmp_path)
    assert res.returncode == 3 and "status 3" in res.stderr and "internal error" not in res.stderr


@pytest.mark.parametrize("text,error", [
    ('def f():\n    raise ValueError("boom")\n\nf()\n', "ValueError: boom"),
    ('import helper\n', "SyntaxError"),  # raised while it runs: a module it imports does not compile
])
def test_a_script_error_is_reported_as_the_script_s(cli, tmp_path, text, error):
    script = tmp_path / "train.py"
    script.write_text(text)
    (tmp_path / "helper.py").write_text("x = (\n")
    res = cli("profile", str(script), "--set", "model.params=1e8", "--output", str(tmp_path / "cal.toml"),
              cwd=tmp_path)
    assert res.returncode == 1, res.stderr  # what `python train.py` exits with
    assert "internal error" not in res.stderr and error in res.stderr
    assert f'File "{script}", line 1' in res.stderr or f'File "{script}", line 4' in res.stderr
    assert "trainplan/" not in res.stderr.split("trainplan: ")[0]  # no frame of trainplan's or runpy's
    assert res.stderr.strip().splitlines()[-1].startswith(f"trainplan: {script}: the script failed")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".pyc" and p.name != "__pycache__") == \
        ["helper.py", "train.py"]  # no partial profile written


@pytest.mark.parametrize("text,line,message", [
    ("def (:\n", 1, "invalid syntax"),
    ("import os\n\nx = (\n", 3, "'(' was never closed"),
])
@pytest.mark.parametrize("stalls", [[], ["--stalls"]])
def test_a_script_that_does_not_compile_is_bad_input(cli, tmp_path, text, line, message, stalls):
    # the user's script is the user's input: one line naming it, its line and Python's message, exit 2
    script = tmp_path / "s.py"
    script.write_text(text)
    res = cli("profile", "s.py", "--set", "model.params=1e8", "--output", "cal.toml", *stalls, cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"trainplan: profile: s.py line {line}: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.py"]  # no partial profile written



@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="os.mkfifo")
@pytest.mark.parametrize("stalls", [[], ["--stalls"]])
def test_a_fifo_or_a_folder_as_the_script_is_named_as_such(cli, tmp_path, stalls):
    # not 'no such script', and the FIFO is not opened (nothing writes to it: opening it would hang)
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "folder.py").mkdir()
    res = cli("profile", "pipe.py", *stalls, cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == "trainplan: pipe.py: expected a regular training script, got a device, pipe or socket\n"
    res = cli("profile", "folder.py", *stalls, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "trainplan: folder.py: expected a training script, got a directory\n"

LOOP = ("import time\nfrom trainplan.measure import profiler\n"
        "for _ in profiler.current().wrap(range(20)):\n    time.sleep(0.002)\n")


def test_a_script_s_exit_message_is_printed_as_python_prints_it(cli, tmp_path):
    # `sys.exit("message")`: Python prints the message to stderr and exits 1; then trainplan's one line
    (tmp_path / "train.py").write_text(LOOP + 'import sys\nsys.exit("no GPU here")\n')
    res = cli("profile", "train.py", "--set", "model.params=1e8", "--output", "cal.toml", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == "no GPU here\ntrainplan: train.py: the script exited with status 1; cal.toml not written\n"
    assert not (tmp_path / "cal.toml").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
@pytest.mark.parametrize("child_end,child_status", [("", 0), ("    sys.exit(5)\n", 5)])
def test_a_process_the_script_forks_reports_nothing(cli_subprocess, tmp_path, child_end, child_status):
    # the child returns from (or exits) the script: it ends there with its status, and only the parent
    # reports and writes the calibration file
    (tmp_path / "train.py").write_text(
        LOOP + "import os, sys\npid = os.fork()\nif pid == 0:\n    print('in the child', flush=True)\n"
        + child_end + "else:\n    print('child status', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    res = cli_subprocess("profile", "train.py", "--set", "model.params=1e8", "--output", "cal.toml", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.count("profile (wall timing)") == 1
    assert res.stdout.count("in the child") == 1 and f"child status {child_status}\n" in res.stdout
    assert (tmp_path / "cal.toml").is_file()


def test_a_script_that_closes_stdout_is_still_reported(cli_subprocess, tmp_path):
    # trainplan's streams are kept before the script runs and reopened after: the report is written
    (tmp_path / "train.py").write_text(LOOP + "import sys\nprint('from the script')\nsys.stdout.close()\n")
    res = cli_subprocess("profile", "train.py", "--set", "model.params=1e8", "--output", "cal.toml", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.startswith("from the script\nprofile (wall timing): 15 steps after 5 warm-up")
    assert (tmp_path / "cal.toml").is_file()
