"""Serving the viewer: run folders named, a socket bound (localhost by default), the URL printed, uvicorn run."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from ..store import RunPaths

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def named_runs(folders: list[Path]) -> dict[str, Path]:
    """Each run folder under a URL name: its folder's name, with ``-2``, ``-3``… where two share one."""
    names: dict[str, Path] = {}
    for folder in folders:
        if not RunPaths(folder).db.exists():
            raise ConfigError(f"{folder}: not a run folder (no results.sqlite)")
        base = folder.resolve().name or "run"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names[name] = folder
    return names


def runs_under(folder: Path) -> list[Path]:
    """The run folders directly under ``folder`` (each holds a results.sqlite), by name."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and RunPaths(p).db.exists()) if folder.is_dir() else []


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"view: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"


def serve(runs: dict[str, Path], host: str, port: int, say: Callable[[str], None]) -> None:
    """Serve ``runs`` until Ctrl-C."""
    import uvicorn

    from .app import make_app

    sock = bind(host, port)
    if host not in LOOPBACK:
        say(f"warning: listening on {host}: anyone who reaches it reads these runs (their trials' files included)")
    app = make_app(runs, hosts=[host] if host not in LOOPBACK else None)
    say(f"trialbox view: {url_of(sock)}  ({len(runs)} run(s); Ctrl-C stops)")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])
