"""Runs inside the jail, first: the forwarder on the jail's loopback, then the CLI.

The jail has no network; soda's egress proxy listens on a unix socket bound into
it. This program listens on 127.0.0.1 (a free port of the jail's own loopback),
pumps every connection to that socket byte for byte, points the CLI at the port
(`@SODA_PORT@` in its arguments and in each `NAME=template` environment
variable becomes the port), makes the CLI's private home, and runs the CLI with stdin closed,
its output going straight to soda. Its exit code is the CLI's. When the CLI
ends, so does this program and with it the jail (everything in it dies).

Standard library only: soda copies this file into the jail's runtime directory
and runs it with the interpreter soda runs on (`python -I launcher.py SOCKET
NAME=template ... -- argv`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading

CHUNK = 65536
PORT = "@SODA_PORT@"
"""Stands for the forwarded port in the CLI's arguments and environment."""


def pump(source: socket.socket, target: socket.socket) -> None:
    """Copy until `source` ends, then tell `target` nothing more comes."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


def forward(client: socket.socket, path: str) -> None:
    """One connection from the CLI, joined to the proxy's unix socket."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=forward, args=(client, path), daemon=True).start()


def main(args: list[str]) -> int:
    split = args.index("--")
    path, templates, argv = args[0], args[1:split], args[split + 1 :]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    env = dict(os.environ)
    for template in templates:
        name, _, value = template.partition("=")
        env[name] = value.replace(PORT, str(port))
    argv = [word.replace(PORT, str(port)) for word in argv]
    for name in ("HOME", "CODEX_HOME"):
        if name in env:
            os.makedirs(env[name], mode=0o700, exist_ok=True)
    try:
        child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"soda launcher: cannot start {argv[0]}: {exc}", file=sys.stderr)
        return 127
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
