"""Raw HTTP over a socket for the hostile-client tests (tests/test_loopback.py and
tests/test_gateway_hostile.py): exactly the bytes a test writes, nothing a client library adds;
and `started`, a test server script run as its own process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import zlib
from functools import cache
from pathlib import Path

MiB = 1 << 20


def started(script: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    """Run `script` with `args` as a process that prints ``PORT N`` once it listens on
    127.0.0.1; (the process, N)."""
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"{script.name} did not start: {line!r}")
    return proc, int(line.split()[1])


def exchange(port: int, data: bytes, shut: bool = False) -> bytes:
    """Send `data` (then our EOF when `shut`) and read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(data)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while piece := sock.recv(65536):
            chunks.append(piece)
    return b"".join(chunks)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def open_for(sock: socket.socket, until: float) -> bytes | None:
    """What the server sent before closing `sock`, or None if still open at `until`."""
    chunks = []
    try:
        while True:
            sock.settimeout(max(until - time.monotonic(), 0.001))
            piece = sock.recv(65536)
            if not piece:
                return b"".join(chunks)
            chunks.append(piece)
    except TimeoutError:
        return None
    except ConnectionResetError:
        return b"".join(chunks)


@cache
def bomb(encoding: str, size: int = 400 * MiB) -> bytes:
    """`size` zero bytes, compressed (about 1/1000 of it)."""
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(MiB)
    return b"".join([*(packer.compress(block) for _ in range(size // MiB)), packer.flush()])
