"""``activeeval dashboard``: watch sessions live in the browser.

Thin layer over :mod:`activeeval.dashboard` (imported when the command runs,
so the other commands never load a web server).
"""

from __future__ import annotations

from pathlib import Path

import typer

from activeeval.cli.common import app, cli_errors
from activeeval.exceptions import ConfigurationError


@app.command("dashboard")
@cli_errors
def dashboard(
    paths: list[Path] | None = typer.Argument(
        None, help="Session files, or folders searched (recursively) for *.aeval files. [default: .]"),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on; 127.0.0.1 keeps the page on this machine."),
    port: int = typer.Option(8700, "--port", help="Port to listen on (0: any free port)."),
    interval: float = typer.Option(2.0, "--interval", help="Seconds between the page's updates."),
) -> None:
    """Serve a local page showing every session found, updated live while `run` or `rank` writes them.

    For each session: the estimate and its interval band over the items scored, the stopping conditions against
    their thresholds, the items and their scores, the notes on when to doubt the estimate; per target for a
    session of several targets; the ranking, pairwise confidences and ties for a ranking. Sessions are opened
    read-only: the dashboard never writes, and never holds a writer up.
    """
    import sys

    from activeeval.dashboard.data import find_sessions
    from activeeval.dashboard.server import bind, require, serve

    if not interval > 0:
        raise ConfigurationError(f"--interval must be a positive number of seconds, got {interval:g}")
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port must be between 0 and 65535, got {port}")
    given = [Path(".")] if not paths else list(paths)
    missing = [str(p) for p in given if not p.exists()]
    if missing:
        raise ConfigurationError(f"no such file or folder: {', '.join(missing)}; give session files or folders "
                                 "holding them")
    require()
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/"
    n = len(find_sessions(given))
    typer.echo(f"activeeval dashboard: {url} ({n} session{'s' if n != 1 else ''} found under "
               f"{', '.join(map(str, given))}; new ones appear as they are created; read-only; Ctrl-C to stop)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"note: --host {host} lets other machines see these sessions (there is no login)", err=True)
    sys.stdout.flush()  # the address, before the server runs (a script may be waiting for it)
    serve(given, sock, interval)
