"""Writing results: to stdout, or to a file replaced atomically so a failure leaves nothing behind."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from trainplan.errors import UserError


def write_output(text: str | bytes, path: str | Path | None) -> None:
    """Print `text`, or write it to `path` through a temporary file renamed into place."""
    if path is None:
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    target = Path(path)
    if not target.parent.exists():
        raise UserError("--output", f"no such directory {str(target.parent)!r}")
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; a report is an ordinary file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
