"""The listener and the request handler base every loopback server shares.

`LoopbackServer` is a threaded HTTP server (daemon threads, a backlog that takes a burst of
connections, IPv6 when the address is one). `BoundedHandler` reads each request within the
bounds of `metaeval.loopback.framing`: a request must arrive whole within `timeout_s` (an idle
connection is dropped after as long), its decoded body may hold `max_body_bytes`, and a
refused request's unread body is drained before the connection closes. Subclasses answer
errors in their own format through `send_problem`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from metaeval.loopback.access import Refused
from metaeval.loopback.framing import (
    DEFAULT_TIMEOUT_S,
    DeadlineReader,
    FramingError,
    discard_input,
    read_body,
)

LISTEN_BACKLOG = 128  # socketserver's 5 drops connections opened in a burst
DRAIN_FLOOR = 1 << 20  # a refused body is drained up to its limit, and at least this much
READ_BUFFER = 64 * 1024

log = logging.getLogger(__name__)


class LoopbackServer(ThreadingHTTPServer):
    """A threaded HTTP listener on `address` ((host, port); port 0 picks a free one)."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]):
        host = address[0].strip("[]")
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, address[1]), handler)


class BoundedHandler(BaseHTTPRequestHandler):
    """One connection's requests, read within time and size bounds (see the module doc)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_body_bytes: int = 32 * 1024 * 1024
    challenge = 'Bearer realm="metaeval"'  # sent with a 401
    unread_input = False  # the request's body was not read: drain it before closing

    def setup(self) -> None:
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile.close()  # replaced by a reader that bounds how long a request may take
        self.reader = DeadlineReader(self.connection, self.timeout_s)
        self.rfile = io.BufferedReader(self.reader, READ_BUFFER)

    def finish(self) -> None:
        super().finish()
        if self.unread_input:
            discard_input(self.connection, max(self.max_body_bytes, DRAIN_FLOOR))

    def end_of_head(self) -> None:
        """The request is answered without reading a body: one that carries a body anyway is
        not read, and its connection closes after the answer."""
        if self.headers.get("Transfer-Encoding") or self.headers.get("Content-Length", "0") != "0":
            self.close_connection = self.unread_input = True
        self.reader.request_read()

    def body(self) -> bytes | bytearray:
        """The request's decoded body (`FramingError` 4xx: too large, malformed, too slow)."""
        try:
            raw = read_body(self.rfile, self.headers, self.max_body_bytes)
        except TimeoutError as exc:
            raise FramingError(408, str(exc) or "request body not received in time") from exc
        self.reader.request_read()
        return raw

    def refuse(self, refused: Refused | FramingError) -> None:
        """Answer a request that will not be served and close its connection (a stalled
        client, 408, is not waited for; any other's unread body is drained)."""
        self.close_connection = True
        self.unread_input = refused.status != 408
        extra = {"WWW-Authenticate": self.challenge} if refused.status == 401 else {}
        with contextlib.suppress(OSError):  # the client is gone
            self.send_problem(refused.status, str(refused), extra)

    def send_problem(self, status: int, message: str, extra: dict[str, str]) -> None:
        """Send an error answer in the server's format (plain text unless overridden)."""
        self.send_body(status, (message + "\n").encode(), "text/plain; charset=utf-8", extra)

    def send_body(
        self, status: int, data: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        """One whole answer (its body left out for HEAD); a client gone meanwhile is logged."""
        try:
            self.send_response(status)
            for name, value in {"Content-Type": ctype, **(extra or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            self.close_connection = True
            log.warning("client went away before the %s answer to %s", status, self.path)
