"""`trainplan ui [--port P] [--no-browser]`: the interactive page on 127.0.0.1 (docs/index.md)."""

from __future__ import annotations

import errno
import socket
import threading
import time
import webbrowser
from pathlib import Path
from typing import Optional

import typer

from trainplan.errors import UserError

#: The page is served on loopback only: it is a local tool, not a service.
HOST = "127.0.0.1"
#: The default port of `trainplan ui`.
DEFAULT_PORT = 8765
#: How long to wait for the server to listen before opening the browser anyway (seconds).
BROWSER_WAIT_SECONDS = 10.0


def _check_port(port: int) -> None:
    """Refuse a port that cannot be bound, with one line naming it (uvicorn would exit 1)."""
    if not 0 < port < 65536:
        raise UserError("--port", f"expected a port number 1-65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as err:
            why = "in use" if err.errno == errno.EADDRINUSE else (err.strerror or str(err))
            raise UserError("--port", f"expected a free port on {HOST}; {port} is {why} "
                            "(try another with --port)") from None


def _open_when_listening(server: object, url: str) -> None:
    deadline = time.monotonic() + BROWSER_WAIT_SECONDS
    while not getattr(server, "started", False) and time.monotonic() < deadline:
        time.sleep(0.05)
    webbrowser.open(url)


def ui_command(
    files: Optional[list[Path]] = typer.Argument(
        None, help="workload TOML files the page may start from (the only files it reads)"),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="port on 127.0.0.1 to serve the page on"),
    no_browser: bool = typer.Option(False, "--no-browser", help="do not open a web browser"),
) -> None:
    """An interactive page: sliders for the workload, the pipeline and the bill recomputed on every change."""
    if not 0 < port < 65536:
        raise UserError("--port", f"expected a port number 1-65535, got {port}")
    try:
        import uvicorn

        from trainplan.interfaces.web import create_app

        app = create_app(port, files or [])  # the workload files are checked before the port
    except ImportError as err:
        raise UserError("ui", f"needs fastapi and uvicorn ({err.name} is missing): "
                        "pip install 'trainplan[ui]'") from None
    _check_port(port)
    url = f"http://{HOST}:{port}/"
    from trainplan.interfaces.web import http_protocol

    # h11 with the security headers on the server's own 400s and a read deadline (issue 29)
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", http=http_protocol())
    server = uvicorn.Server(config)
    typer.echo(f"trainplan ui: serving on {url} (Ctrl+C to stop)")
    if not no_browser:
        threading.Thread(target=_open_when_listening, args=(server, url), daemon=True).start()
    server.run()


def register(app: typer.Typer) -> None:
    """Add `ui` to the trainplan app (called by cli.py's command discovery)."""
    app.command("ui")(ui_command)
