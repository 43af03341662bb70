"""A git remote over smart HTTP on 127.0.0.1 that asks for a token, as GitHub does:
`git http-backend` (git's own server side) behind Basic authentication.

A push without credentials gets 401 and `WWW-Authenticate`, so git must ask its
credential helper; the right token (any user name) lets it through. Every
Authorization header it received is kept (`authorizations`), so a test can show
the token really travelled, and where it did not.

    pytest_plugins = ("tests.fakegithttp",)    # then the `git_http` fixture

PYTEST_DONT_REWRITE: test modules import its names before pytest loads it.
"""

from __future__ import annotations

import base64
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest


@dataclass
class GitHttp:
    root: Path
    """Holds the bare repositories; `url(name)` is the address of one."""
    token: str
    authorizations: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def url(self, name: str) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def allowed(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        user_password = base64.b64decode(header[6:]).decode()
        return user_password.split(":", 1)[-1] == self.token


def _handler(remote: GitHttp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            header = self.headers.get("authorization")
            if header:
                remote.authorizations.append(header)
            if not remote.allowed(header):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("content-length", "0")
                self.end_headers()
                return
            length = int(self.headers.get("content-length") or 0)
            data = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            env = {
                "GIT_PROJECT_ROOT": str(remote.root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": split.path,
                "QUERY_STRING": split.query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("content-type", ""),
                "CONTENT_LENGTH": str(len(data)),
                "REMOTE_USER": "soda",
                "REMOTE_ADDR": "127.0.0.1",
                "PATH": "/usr/bin:/bin:/usr/local/bin",
            }
            done = subprocess.run(
                ["git", "http-backend"], input=data, env=env, capture_output=True, timeout=60
            )
            out = done.stdout  # CGI: headers, a blank line, the body
            crlf = out.find(b"\r\n\r\n")
            cut, skip = (crlf, 4) if crlf >= 0 else (out.find(b"\n\n"), 2)
            head, body = out[:cut], out[cut + skip :]
            status, headers = 200, []
            for line in head.decode().splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _serve

    return Handler


@pytest.fixture
def git_http(tmp_path: Path) -> Iterator[GitHttp]:
    """A token-guarded smart-HTTP remote serving the bare repositories in its `root`."""
    from tests.fakeforge import TOKEN

    remote = GitHttp(tmp_path / "http-remotes", TOKEN)
    remote.root.mkdir()
    remote.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(remote))
    thread = threading.Thread(target=remote.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield remote
    finally:
        remote.server.shutdown()
        remote.server.server_close()
