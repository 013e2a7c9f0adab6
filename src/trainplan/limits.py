"""Limits on every file trainplan reads: only regular files, a size cap, a nesting cap (issue 16).

Every input file (the workload TOML, a calibration file, an empirical sample of decode
times, a Hugging Face config.json) goes through `read_text`, so that

- a path that is not a regular file (a directory, a FIFO that would block, /dev/zero that
  never ends, a socket) is refused with one line before anything is opened for reading;
- a file larger than its kind's cap is refused (read at most cap + 1 bytes, so a file that
  grows while it is read is still caught);
- every OS error (missing, permission denied, a name too long, a loop of links) is one line
  naming the path, never a traceback;
- the file is remembered as an input of this run, so that `--output` can refuse to
  overwrite it (trainplan.outputs).

`loads_toml` and `loads_json` parse with a nesting cap: a document nested deeper than
MAX_NESTING levels (tables, arrays, objects, dotted keys all count) is refused with one
line, as is one deep enough to exhaust Python's parser (RecursionError).

`printable` strips terminal control sequences from text read from a file before it can
reach a terminal.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import math
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Final, Iterable, Iterator

from trainplan.errors import UserError, printable  # noqa: F401 (printable: re-exported)

#: Size caps by kind of file, in bytes. Chosen far above any real file of the kind (a workload
#: or calibration file is a few kB; a config.json of the largest published models is < 10 kB; an
#: empirical sample of one decode time per frame for 10^6 frames is ~ 20 MB as text) and far
#: below what would exhaust memory.
MAX_BYTES: Final[dict[str, int]] = {
    "workload": 1 * 2**20,
    "calibration": 4 * 2**20,
    "empirical": 64 * 2**20,
    "hf_config": 4 * 2**20,
    # a tokenizer.json: Llama 3's is 9 MB, the largest published ones about 30 MB
    "tokenizer": 64 * 2**20,
    # a CSV of training runs (`scaling fit`): the Chinchilla replication's 245 runs are 10 kB
    "runs": 16 * 2**20,
    # a training script run by `trainplan profile` (read to remember it as an input, then run)
    "script": 16 * 2**20,
}

#: Deepest nesting accepted in a TOML or JSON input: a workload is 3 levels deep
#: (cluster.accelerator.peak_flops), a calibration file 4 (probes.decode.settings.x), a
#: config.json rarely more than 4 (rope_scaling, quantization_config).
MAX_NESTING: Final[int] = 32

#: The most digits an integer in an input may have: Python's own cap on converting text to int
#: (sys.get_int_max_str_digits(), 4,300 by default); no quantity has more than 400.
MAX_DIGITS: Final[int] = 4300

_WHAT: Final[dict[str, str]] = {
    "workload": "workload file",
    "calibration": "calibration file",
    "empirical": "file of per-frame decode seconds",
    "hf_config": "Hugging Face config.json",
    "tokenizer": "tokenizer.json",
    "runs": "runs file",
    "script": "training script",
}

# Identities (device, inode) of the files read in this process, each with the kind it was read as
# (MAX_BYTES' keys): --output refuses to replace one.
_inputs: dict[tuple[int, int], str] = {}


def input_identities(kind: str | None = None) -> frozenset[tuple[int, int]]:
    """(st_dev, st_ino) of every file read through `read_text` since `forget_inputs`; with `kind`,
    of those read as another kind (a calibration writer may update the calibration file it read)."""
    return frozenset(ident for ident, read_as in _inputs.items() if read_as != kind)


def forget_inputs() -> None:
    """Start a new run (the CLI calls this first): no file has been read yet."""
    _inputs.clear()


def os_error_text(err: OSError) -> str:
    """An OSError in words, without the path (the caller names it)."""
    if err.errno == errno.ENAMETOOLONG:
        return "the name is too long for the file system"
    return err.strerror.lower() if err.strerror else type(err).__name__


# The files a web request may cause to be read (None: any file). `trainplan ui` sets it to the
# files given on its command line, so that a request naming a path reads nothing.
_allowed_files: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "trainplan_allowed_files", default=None)


@contextlib.contextmanager
def only_files(paths: Iterable[str | Path]) -> Iterator[None]:
    """Within the block, `read_text` reads only these files (and refuses any other path before
    looking at it, so that not even its existence is revealed)."""
    token = _allowed_files.set(frozenset(os.path.realpath(p) for p in paths))
    try:
        yield
    finally:
        _allowed_files.reset(token)


def read_text(path: str | Path, kind: str, remember: bool = True) -> str:
    """The UTF-8 text of the regular file `path`, at most MAX_BYTES[kind]; else UserError naming it.
    `remember`: count it as an input of this run, which --output may not replace."""
    where = printable(str(path))
    what = _WHAT[kind]
    cap = MAX_BYTES[kind]
    if str(path) == "":
        raise UserError(what, "expected a file name, got an empty one")
    if "\x00" in str(path):
        raise UserError(where, f"expected a {what} name without a NUL character")
    allowed = _allowed_files.get()
    if allowed is not None and os.path.realpath(path) not in allowed:
        raise UserError(what, "the page reads no file named in a request: upload its content, or give "
                        "the file on the command line of `trainplan ui`")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UserError(where, f"no such {what}") from None
    except OSError as err:
        raise UserError(where, f"cannot read the {what}: {os_error_text(err)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(where, f"expected a {what}, got a directory")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(where, f"expected a regular {what}, got a device, pipe or socket")
    if info.st_size > cap:
        raise UserError(where, f"expected a {what} of at most {cap // 2**20} MiB, got {info.st_size / 2**20:.1f} MiB")
    try:
        # O_NONBLOCK: were the path swapped for a FIFO after the stat, open would not hang
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UserError(where, f"expected a regular {what}, got a device, pipe or socket")
            data = fh.read(cap + 1)
            opened = os.fstat(fh.fileno())
    except OSError as err:
        raise UserError(where, f"cannot read the {what}: {os_error_text(err)}") from None
    if len(data) > cap:
        raise UserError(where, f"expected a {what} of at most {cap // 2**20} MiB")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Excel's CSV, Notepad's TOML) is not the first key
    except UnicodeDecodeError:
        raise UserError(where, f"expected a UTF-8 text {what}") from None
    if remember:
        _inputs.setdefault((opened.st_dev, opened.st_ino), kind)
    return text


def nesting_depth(obj: Any) -> int:
    """How deeply dicts and lists nest in `obj` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            return depth
        stack.extend((child, depth) for child in children)
    return deepest


BYTE_ORDER_MARK = "\ufeff"


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _FloatRange(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _float_in_range(text: str) -> float:
    """A float literal of a TOML or JSON document, refused where it is past float range: 1e400 would read as
    inf, and the key it sets would then be refused as 'inf', which nobody wrote. A literal inf or nan (TOML's
    own words) is passed on for the key's own check."""
    value = float(text)
    if math.isinf(value) and text.strip().lstrip("+-").lower() not in ("inf", "infinity"):
        raise _FloatRange(text)
    return value


def _float_range_error(where: str, text: str) -> UserError:
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
    return UserError(printable(where), f"expected numbers within float range (about 1.8e308), got {shown}")


def _too_deep(where: str) -> UserError:
    return UserError(where, f"expected tables and arrays nested at most {MAX_NESTING} levels deep")


def check_nesting(obj: Any, where: str) -> None:
    """UserError when `obj` nests deeper than MAX_NESTING."""
    if nesting_depth(obj) > MAX_NESTING:
        raise _too_deep(printable(where))


def loads_toml(text: str, where: str, what: str = "TOML") -> dict[str, Any]:
    """tomllib.loads with the nesting cap; malformed TOML is one line naming `where`. A leading UTF-8 byte-order
    mark (Windows editors write one) is not part of the document and is dropped."""
    try:
        doc = tomllib.loads(text.removeprefix(BYTE_ORDER_MARK), parse_float=_float_in_range)
    except _FloatRange as err:
        raise _float_range_error(where, err.text) from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(printable(where), f"malformed {what} ({printable(str(err))})") from None
    except RecursionError:
        raise _too_deep(printable(where)) from None
    except ValueError:  # an integer of more digits than Python converts (4,300): no quantity has them
        raise UserError(printable(where), f"expected numbers of at most {MAX_DIGITS:,} digits in the {what}") from None
    check_nesting(doc, where)
    return doc


def loads_json(text: str, where: str) -> Any:
    """json.loads with the nesting cap; NaN and Infinity are refused (they are not JSON), and so is a key
    written twice in one object (json keeps the last silently: a config.json with two `hidden_size` would
    plan whichever came second). A leading byte-order mark is dropped."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise _DuplicateKey(key)
            out[key] = value
        return out

    try:
        doc = json.loads(text.removeprefix(BYTE_ORDER_MARK), parse_constant=no_constant, object_pairs_hook=once_each,
                         parse_float=_float_in_range)
    except _FloatRange as err:
        raise _float_range_error(where, err.text) from None
    except _DuplicateKey as err:
        raise UserError(printable(where), f"each key once in an object, got {printable(repr(err.key))} twice") from None
    except RecursionError:
        raise _too_deep(printable(where)) from None
    except json.JSONDecodeError as err:
        raise UserError(printable(where), f"valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    except ValueError as err:
        if "digits" in str(err):  # int() past sys.get_int_max_str_digits()
            raise UserError(printable(where), f"expected numbers of at most {MAX_DIGITS:,} digits") from None
        raise UserError(printable(where), f"valid JSON ({err})") from None
    check_nesting(doc, where)
    return doc


def check_numbers(obj: Any, where: str, largest: int) -> None:
    """UserError naming the first number in `obj` (a parsed JSON or TOML document) that is an integer
    past `largest` in size, or a float that is not finite: the dotted path of keys names it."""
    from trainplan import units

    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and abs(node) > largest:
            raise UserError(f"{printable(where)}: {printable(path or 'value')}",
                            f"expected a whole number of at most {largest:.3g}, got {units.shown(node)}")
        elif isinstance(node, float):
            units.number(node, f"{printable(where)}: {printable(path or 'value')}")


# printable (text made safe for a terminal) lives with the one-line messages it serves (errors.py)


# ---------------------------------------------------------------- sizes before allocating (issue 29)
# A size a person types (a matrix side, a batch, a clip's frames) becomes memory: each is checked
# against a limit derived from this machine's memory before anything is allocated, and refused
# naming the key, what it would take and the limit. TRAINPLAN_MEMORY_LIMIT overrides the limit
# ("8 GB", "512 GiB") for a run that is meant to be large.

#: Share of the machine's physical memory one run's allocations may take by default: half, which
#: leaves the rest to the operating system, the page cache and whatever else the machine runs.
MEMORY_SHARE: Final[float] = 0.5
#: The environment variable that overrides the limit: a size with its unit.
MEMORY_LIMIT_ENV: Final[str] = "TRAINPLAN_MEMORY_LIMIT"
#: Used when the system does not say how much memory it has (sysconf missing): 8 GiB, a laptop's.
FALLBACK_MEMORY: Final[float] = 8 * 2**30
#: The longest a probe may measure, in seconds (`--seconds`): an hour; a steady figure takes seconds.
MAX_PROBE_SECONDS: Final[float] = 3600.0


def physical_memory() -> float:
    """Bytes of physical memory of this machine (FALLBACK_MEMORY when the system does not say)."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return FALLBACK_MEMORY


def memory_limit() -> tuple[float, str]:
    """(bytes one run may allocate, where that limit comes from)."""
    from trainplan import units

    given = os.environ.get(MEMORY_LIMIT_ENV)
    if given is not None and given.strip():
        limit = units.parse_size(given, MEMORY_LIMIT_ENV)
        if not limit > 0:
            raise UserError(MEMORY_LIMIT_ENV, f"expected a size above 0 such as 8 GB, got {given!r}")
        return limit, f"{MEMORY_LIMIT_ENV}={printable(given, one_line=True)}"
    total = physical_memory()
    return MEMORY_SHARE * total, (f"{MEMORY_SHARE:.0%} of this machine's {units.format_quantity(total, 'bytes')}; "
                                  f"set {MEMORY_LIMIT_ENV} to change it")


def check_allocation(key: str, needed_bytes: float, what: str, hint: str = "") -> None:
    """UserError naming `key` when `what` would take more than memory_limit(); `hint`: what to do instead."""
    from trainplan import units

    limit, source = memory_limit()
    if not needed_bytes <= limit:
        raise UserError(key, f"expected a smaller value: {what} would take "
                        f"{units.format_quantity(needed_bytes, 'bytes')}, above the limit of "
                        f"{units.format_quantity(limit, 'bytes')} ({source}){'; ' + hint if hint else ''}")


def check_seconds(key: str, seconds: float, low: float = 0.0, low_included: bool = True) -> None:
    """UserError unless `seconds` is finite, at least `low` and at most MAX_PROBE_SECONDS."""
    if not (math.isfinite(seconds) and (seconds >= low if low_included else seconds > low)
            and seconds <= MAX_PROBE_SECONDS):
        raise UserError(key, f"expected {'at least' if low_included else 'more than'} {low:g} s and at most "
                        f"{MAX_PROBE_SECONDS:g} s (an hour), got {seconds!r}")
