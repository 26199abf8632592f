"""Serve the dashboard: one page (``page.html``, no asset from elsewhere) and the JSON it polls.

Routes: ``/`` the page; ``/api/sessions`` a summary of every session found
(folders are searched again on each call, so a new session appears);
``/api/sessions/{id}`` one session in full. The page polls them every
``interval`` seconds. Every read of a session file runs in one worker
thread (SQLite connections belong to the thread that opened them), so the
event loop only waits.

Built on Starlette (routing, responses) and uvicorn (the ASGI server), the
``dashboard`` extra: ``pip install "activeeval[dashboard]"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

from activeeval.dashboard.data import Board
from activeeval.exceptions import ConfigurationError, option

__all__ = ["INSTALL_HINT", "bind", "create_app", "require", "serve"]

INSTALL_HINT = 'pip install "activeeval[dashboard]"'


def require() -> None:
    """ConfigurationError with the install command when Starlette or uvicorn is missing."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"the dashboard needs Starlette and uvicorn ({exc}); install them with: "
                                 f"{INSTALL_HINT}") from exc


def page(interval: float) -> str:
    """The page, with the polling interval filled in."""
    text = resources.files("activeeval.dashboard").joinpath("page.html").read_text(encoding="utf-8")
    return text.replace("__INTERVAL_MS__", str(int(round(interval * 1000))))


def create_app(paths: Sequence[str | os.PathLike[str]], interval: float = 2.0) -> Any:
    """The Starlette app showing the sessions under ``paths`` (files, or folders searched for ``*.aeval``)."""
    require()
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    board = Board(paths)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="activeeval-dashboard")
    html = page(interval)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(worker, fn, *args)

    def as_json(obj: Any) -> Response:
        return Response(json.dumps(obj, allow_nan=False), media_type="application/json",
                        headers={"Cache-Control": "no-store"})

    async def index(request: Any) -> Any:
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    async def sessions(request: Any) -> Any:
        return as_json({"paths": board.paths, "sessions": await run(board.sessions)})

    async def detail(request: Any) -> Any:
        found = await run(board.detail, request.path_params["sid"])
        if found is None:
            return JSONResponse({"error": "no such session (it was moved or removed)"}, status_code=404)
        return as_json(found)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        try:
            yield
        finally:
            await run(board.close)
            worker.shutdown(wait=True)

    return Starlette(routes=[Route("/", index), Route("/api/sessions", sessions),
                             Route("/api/sessions/{sid}", detail)], lifespan=lifespan)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port) (port 0: any free one); ConfigurationError naming --port/--host."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(f"port {port} on {host} is in use; choose another with {option('port', 'N')} "
                                     f"(or {option('port', '0')} for any free one)") from exc
        raise ConfigurationError(f"cannot listen on {host}:{port} ({exc.strerror}); check {option('host')} and "
                                 f"{option('port')}") from exc
    sock.listen(128)
    return sock


def serve(paths: Sequence[str | os.PathLike[str]], sock: socket.socket, interval: float = 2.0) -> None:
    """Serve the dashboard on a bound socket (see :func:`bind`) until Ctrl-C."""
    import uvicorn

    app = create_app(paths, interval)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
