"""Run a command in a network-less sandbox with loopback ports joined to host Unix sockets.

Usage (inside the sandbox)::

    python3 relay.py [PORT SOCKET]... [--publish SOCKET PORT]... -- COMMAND...

The sandbox has its own network namespace holding only a loopback interface, so nothing
outside is reachable, not even the host's loopback. For each `PORT SOCKET` pair this script
listens on 127.0.0.1:PORT in that namespace and copies each connection to the Unix socket
SOCKET, bound into the sandbox as a file (how a sandboxed agent reaches the gateway). For each
`--publish SOCKET PORT` it does the reverse: it listens on the Unix socket SOCKET (in a
directory bound writable, which the host sees) and copies each connection to 127.0.0.1:PORT
inside (how the harness reaches a server running in the sandbox, without any TCP port on the
host). It then runs COMMAND and exits with its status (128+N when killed by signal N).
Standard library only: it runs under the system interpreter with ``-I``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

BUFFER = 65536


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(BUFFER)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


def serve_connections(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        if client.family == socket.AF_INET:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            upstream = connect()
        except OSError:
            client.close()
            continue
        threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()


def to_unix(path: str) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            upstream.close()
            raise
        return upstream

    return connect


def to_port(port: int) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        upstream = socket.create_connection(("127.0.0.1", port))
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return upstream

    return connect


def parse(argv: list[str]) -> tuple[list[tuple[int, str]], list[tuple[str, int]], list[str]]:
    """(services, published, command) of the command line; ValueError when malformed."""
    if "--" not in argv:
        raise ValueError("no -- before the command")
    split = argv.index("--")
    head, command = argv[:split], argv[split + 1 :]
    services: list[tuple[int, str]] = []
    published: list[tuple[str, int]] = []
    index = 0
    while index < len(head):
        if head[index] == "--publish":
            published.append((head[index + 1], int(head[index + 2])))
            index += 3
        else:
            services.append((int(head[index]), head[index + 1]))
            index += 2
    if not command or not (services or published):
        raise ValueError("nothing to relay or no command")
    return services, published, command


def main(argv: list[str]) -> int:
    try:
        services, published, command = parse(argv)
    except (ValueError, IndexError):
        print(
            "usage: relay.py [PORT SOCKET]... [--publish SOCKET PORT]... -- COMMAND...",
            file=sys.stderr,
        )
        return 2
    for port, socket_path in services:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        threading.Thread(
            target=serve_connections, args=(listener, to_unix(socket_path)), daemon=True
        ).start()
    for socket_path, port in published:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(socket_path)
        listener.listen(64)
        threading.Thread(
            target=serve_connections, args=(listener, to_port(port)), daemon=True
        ).start()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"relay: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
