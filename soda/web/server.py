"""The dashboard's process: `soda web` (and `soda start --web`, which runs it
beside the daemon and ends it with the daemon). Binds before it says where it
serves, so a taken port is one line (exit 2), never a traceback."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from sqlite_utils import Database

from soda.config import Config
from soda.errors import InputError
from soda.web.app import build_app
from soda.web.security import WILDCARD_HOSTS, Guard, is_loopback
from soda.web.site import Reports, Site

FOLLOW_SECONDS = 0.5
"""How often a server started with the daemon looks whether the daemon lives."""
TOKEN_ENV = "SODA_WEB_TOKEN"
"""Where a remote server's access token may come from (else one is made)."""


@dataclass(frozen=True)
class Serving:
    """How `soda web` was asked to serve."""

    host: str = "127.0.0.1"
    port: int = 8765
    remote: bool = False
    """Serve behind an access token (`--remote`): needed for a host off loopback."""
    names: tuple[str, ...] = ()
    """More host names the server may be reached by (a remote server's)."""
    open_browser: bool = False
    follow_pid: int | None = None
    """Stop when this process (the daemon) is gone."""


def access_token(serving: Serving) -> str | None:
    """The token a remote server (`--remote`) asks for; None otherwise.
    InputError when an address off loopback was given without `--remote`."""
    if serving.remote:
        return os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)
    if not is_loopback(serving.host):
        raise InputError(
            f"--host {serving.host} is not loopback: other machines could reach the dashboard;"
            " add --remote to serve it there behind an access token"
        )
    return None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port` (0: any free port), or InputError."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InputError(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}; choose another --port"
        ) from None
    sock.set_inheritable(True)
    return sock


def serve(
    serving: Serving,
    config: Config,
    db: Database,
    milestone: str,
    reports: Reports,
    say: Callable[[str], None],
) -> int:
    """Serve the dashboard until Ctrl-C, SIGTERM or (with `follow_pid`) the
    daemon's end; returns the exit code."""
    token = access_token(serving)
    sock = bind(serving.host, serving.port)
    port = int(sock.getsockname()[1])
    guard = Guard.create(serving.host, port, token, serving.names)
    site = Site(config=config, db=db, milestone=milestone, reports=reports, guard=guard)
    shown = "127.0.0.1" if serving.host in WILDCARD_HOSTS else serving.host
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(site),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
    )
    say(f"soda web: serving {url} (Ctrl-C stops it)")
    if serving.follow_pid is not None:
        _follow(server, serving.follow_pid)
    if serving.open_browser:
        threading.Thread(target=_open_when_started, args=(server, url), daemon=True).start()
    with contextlib.closing(sock):
        server.run(sockets=[sock])
    return 0


def _follow(server: uvicorn.Server, pid: int) -> None:
    def watch() -> None:
        while not server.should_exit:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                server.should_exit = True
                return
            except PermissionError:
                pass  # alive, another user's
            threading.Event().wait(FOLLOW_SECONDS)

    threading.Thread(target=watch, name="soda-web-follow", daemon=True).start()


def _open_when_started(server: uvicorn.Server, url: str) -> None:
    for _ in range(200):  # up to 10 s
        if server.started:
            webbrowser.open(url)
            return
        threading.Event().wait(0.05)
