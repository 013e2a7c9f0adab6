"""Writing results: to stdout, or to a regular file replaced atomically (issue 16).

`write_output(text, path)` is the one way a command writes what it made:

- no path, or `-`: standard output;
- otherwise only a regular file is written. Refused, one line naming the option and
  exit 2: a target that exists and is not a regular file (a directory, a device such as
  /dev/full, a FIFO, a socket, a link to nothing), a file this run read as input (the
  workload, a calibration file ...: `plan x.toml --output x.toml` would destroy it), a
  read-only file, a missing parent directory or one that is a file, an empty name or a
  name with a NUL character, and every OS error while writing (permission denied, name
  too long, disk full, read-only file system);
- the text goes to a temporary file in the target's directory, which is then renamed
  over the target: a failure leaves the old file (or none) and no temporary file. An
  existing target keeps its permission bits (and its owner where the process may set
  it); a new file gets 0666 less the umask, as any file a program creates. A symbolic
  link to a regular file stays a link: the file it points to is replaced.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from trainplan.errors import UserError

#: What `--output` means by standard output.
STDOUT_NAME = "-"
#: Prefix of the temporary file (short, so that a long target name still fits NAME_MAX).
TEMP_PREFIX = ".trainplan-"


def _print(text: str | bytes) -> None:
    if isinstance(text, bytes):
        sys.stdout.flush()
        sys.stdout.buffer.write(text)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _why(err: OSError) -> str:
    from trainplan.limits import os_error_text

    return os_error_text(err)


def check_output_path(path: str | Path, option: str = "--output",
                      may_replace_input: bool | str = False) -> tuple[str, os.stat_result | None]:
    """The file to write for `path` (a link's target) and its stat when it exists; UserError when
    `path` may not be written. Called before the work, so a bad --output fails fast.
    `may_replace_input`: the file is updated in place on purpose; a kind of input (limits.MAX_BYTES'
    keys, "calibration"): only a file read as that kind may be, never another input of the run."""
    from trainplan.limits import input_identities, printable

    raw = os.fspath(path)
    shown = printable(raw, one_line=True)
    if raw == "":
        raise UserError(option, "expected a file name, got an empty one")
    if "\x00" in raw:
        raise UserError(option, "expected a file name without a NUL character")
    if raw.endswith(os.sep) or raw.endswith("/."):
        raise UserError(option, f"expected a file name, got a directory name ({shown})")
    try:
        if os.path.lexists(raw) and not os.path.exists(raw):
            raise UserError(option, f"expected a regular file, got a link to nothing ({shown})")
        target = os.path.realpath(raw)
        info = os.stat(target) if os.path.exists(target) else None
    except OSError as err:
        raise UserError(option, f"cannot write {shown}: {_why(err)}") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise UserError(option, f"expected a file name, got the directory {shown}")
        if not stat.S_ISREG(info.st_mode):
            raise UserError(option, f"expected a regular file, got a device, pipe or socket ({shown})")
        kept = may_replace_input if isinstance(may_replace_input, str) else None
        if may_replace_input is not True and (info.st_dev, info.st_ino) in input_identities(kept):
            raise UserError(option, f"expected a file other than an input of this run; {shown} was read as input")
        if not (info.st_mode & 0o222) or not os.access(target, os.W_OK):
            raise UserError(option, f"expected a writable file; {shown} is read-only")
    parent = os.path.dirname(target) or "."
    try:
        parent_info = os.stat(parent)
    except FileNotFoundError:
        raise UserError(option, f"no such directory {printable(os.path.dirname(raw) or '.', one_line=True)!r}") from None
    except OSError as err:
        raise UserError(option, f"cannot write {shown}: {_why(err)}") from None
    if not stat.S_ISDIR(parent_info.st_mode):
        raise UserError(option, f"expected a file in a directory; {printable(parent, one_line=True)} is not a directory")
    return target, info


def refuse_inspected(path: str | Path, inputs: list[Path], option: str = "--output",
                     read: Any = None) -> None:
    """UserError when `path` may not be written (check_output_path) or is one of the files `inputs`
    names (a folder: every file under it that `read(file)` says the command reads; all without it):
    a command that reads data files and writes a workload must not replace the data it measured."""
    from trainplan.limits import printable

    _target, info = check_output_path(path, option)
    if info is None:
        return
    for given in inputs:
        try:
            found = [given] if not given.is_dir() else (f for f in given.rglob("*"))
            for f in found:
                if read is not None and given.is_dir() and not read(f):
                    continue  # a file the inspection does not read (a workload written beside the data)
                st = os.stat(f)
                if (st.st_dev, st.st_ino) == (info.st_dev, info.st_ino):
                    raise UserError(option, f"expected a file other than the inspected "
                                    f"{printable(os.fspath(f), one_line=True)}")
        except OSError:
            continue  # an input that cannot be read is the inspection's to refuse


def check_output_arguments(argv: list[str]) -> None:
    """A file option whose value ends in '/' names a directory; the command line's Path type drops
    the slash, so it is checked on the raw arguments (called by cli.main before parsing)."""
    for i, arg in enumerate(argv):
        option, sep, value = arg.partition("=")
        if option in FILE_OPTIONS and not sep and i + 1 < len(argv):
            value = argv[i + 1]
        elif not (option in FILE_OPTIONS and sep):
            continue
        if value.endswith("/") and value != STDOUT_NAME:
            raise UserError("--output" if option in ("-o", "--output") else option,
                            f"expected a file name, got a directory name ({value})")


#: The options that name a file to write.
FILE_OPTIONS = ("--output", "-o", "--plot")


def write_output(text: str | bytes, path: str | Path | None, option: str = "--output",
                 may_replace_input: bool | str = False) -> None:
    """Print `text` (no path, or `-`), or write it to the regular file `path` atomically."""
    if path is None or os.fspath(path) == STDOUT_NAME:
        _print(text)
        return
    from trainplan.limits import printable

    target, info = check_output_path(path, option, may_replace_input)
    shown = printable(os.fspath(path), one_line=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    if isinstance(text, str) and not text.endswith("\n"):
        data += b"\n"
    directory = os.path.dirname(target) or "."
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=".tmp")
    except OSError as err:
        raise UserError(option, f"cannot write {shown}: {_why(err)}") from None
    try:
        if info is not None:
            os.fchmod(fd, stat.S_IMODE(info.st_mode))
            try:
                os.fchown(fd, info.st_uid, info.st_gid)
            except OSError:
                pass  # only root may give a file away; the owner is then the writer
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; a report is an ordinary file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as err:
        _remove(tmp)
        raise UserError(option, f"cannot write {shown}: {_why(err)}") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass
