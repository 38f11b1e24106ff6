"""Reading a request off the wire within bounds: time, size, and well-formed framing.

* Time: `DeadlineReader` is the raw reader under a connection's buffered input. A request
  must arrive whole (head and body) within `limit_s` of its first byte, however slowly it
  trickles; an idle keep-alive connection is dropped after `limit_s` without a byte. So a
  half-sent request frees its thread instead of holding it forever.
* Size: `read_body` never holds more than `limit` bytes of a body, in every form: a
  ``Content-Length`` over the limit is refused before reading, a chunk larger than what is
  left of the budget is refused before it is read, and a gzip/deflate body is inflated in
  bounded steps that stop one byte past the limit. Bodies are read in pieces, so a client
  that announces a large body and sends nothing costs no memory.
* Framing: a negative, non-numeric or repeated ``Content-Length``, a bad chunk size, a
  body cut short, or an unknown coding is a `FramingError` with a 4xx status, never a 500.
"""

from __future__ import annotations

import contextlib
import io
import select
import socket
import time
import zlib
from email.message import Message

DEFAULT_TIMEOUT_S = 30.0
LINGER_S = 2.0  # how long unread input is drained before closing (see `discard_input`)
READ_PIECE = 1 << 20
MAX_LINE = 4096  # a chunk-size or trailer line
MAX_TRAILERS = 64
HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class FramingError(Exception):
    """A request body a server will not read: `status` is the HTTP answer (400, 413, ...)."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


class DeadlineReader(io.RawIOBase):
    """Raw input of one connection: each wait for bytes is bounded by the request's deadline
    (armed by its first byte) or, between requests, by `limit_s`."""

    def __init__(self, sock: socket.socket, limit_s: float):
        self._sock = sock
        self.limit_s = limit_s
        self._deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        now = time.monotonic()
        if self._deadline is None:
            wait = self.limit_s
        else:
            wait = self._deadline - now
            if wait <= 0:
                raise TimeoutError(f"request not received within {self.limit_s:g}s")
        self._sock.settimeout(wait)
        try:
            n = self._sock.recv_into(buffer)
        except TimeoutError as exc:
            what = "no request" if self._deadline is None else "request not received"
            raise TimeoutError(f"{what} within {self.limit_s:g}s") from exc
        if n and self._deadline is None:
            self._deadline = now + self.limit_s
        return n

    def request_read(self) -> None:
        """The request is in: the next one gets its own deadline; writes wait `limit_s`."""
        self._deadline = None
        self._sock.settimeout(self.limit_s)


def discard_input(sock: socket.socket, limit: int, seconds: float = LINGER_S) -> None:
    """Close our side, then read and drop what the client still sends (at most `limit`
    bytes, for at most `seconds`): closing on unread input would reset the connection, and
    the client might lose the answer already sent (a 401 becomes "connection reset")."""
    buffer = bytearray(64 * 1024)
    deadline = time.monotonic() + seconds
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        while limit > 0:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return
            sock.settimeout(wait)
            n = sock.recv_into(buffer)
            if not n:
                return
            limit -= n


def read_body(rfile: io.BufferedIOBase, headers: Message, limit: int) -> bytes | bytearray:
    """The decoded body of a request whose head `headers` was read from `rfile`."""
    codings = [
        c.strip().lower() for v in headers.get_all("Transfer-Encoding") or [] for c in v.split(",")
    ]
    lengths = headers.get_all("Content-Length") or []
    if codings:
        if lengths:
            raise FramingError(400, "both Transfer-Encoding and Content-Length are set")
        if codings != ["chunked"]:
            raise FramingError(501, f"unsupported Transfer-Encoding {', '.join(codings)!r}")
        data = _read_chunked(rfile, limit)
    else:
        length = content_length(lengths)
        if length > limit:
            raise FramingError(413, f"request body of {length} bytes is over {limit} bytes")
        data = bytearray()
        _read_into(rfile, data, length)
    return decode(data, headers.get("Content-Encoding", ""), limit)


def content_length(values: list[str]) -> int:
    """The length a request's ``Content-Length`` header(s) state (0 when absent)."""
    if not values:
        return 0
    if len(set(values)) != 1:
        raise FramingError(400, f"conflicting Content-Length headers {values!r}")
    text = values[0].strip()
    if not (text.isascii() and text.isdigit()):
        raise FramingError(400, f"Content-Length must be a non-negative integer, not {text!r}")
    return int(text)


def _read_into(rfile: io.BufferedIOBase, data: bytearray, n: int) -> None:
    """Append exactly `n` bytes, a piece at a time (memory grows only as bytes arrive)."""
    while n > 0:
        piece = rfile.read(min(n, READ_PIECE))
        if not piece:
            raise FramingError(400, f"request body ended {n} bytes early")
        data += piece
        n -= len(piece)


def _line(rfile: io.BufferedIOBase, what: str) -> bytes:
    line = rfile.readline(MAX_LINE + 1)
    if not line.endswith(b"\n"):
        raise FramingError(400, f"{what} cut off or longer than {MAX_LINE} bytes")
    return line


def _read_chunked(rfile: io.BufferedIOBase, limit: int) -> bytearray:
    data = bytearray()
    while True:
        size_text = _line(rfile, "chunk size line").split(b";", 1)[0].strip()
        if not size_text or len(size_text) > 16 or not set(size_text) <= HEX_DIGITS:
            shown = size_text[:40].decode("latin-1")
            raise FramingError(400, f"malformed chunk size {shown!r}")
        size = int(size_text, 16)
        if size == 0:
            break
        if size > limit - len(data):
            raise FramingError(413, f"chunked request body is over {limit} bytes")
        _read_into(rfile, data, size)
        if _line(rfile, "chunk end") not in (b"\r\n", b"\n"):
            raise FramingError(400, "chunk data not followed by CRLF")
    for _ in range(MAX_TRAILERS):
        if _line(rfile, "trailer") in (b"\r\n", b"\n"):
            return data
    raise FramingError(400, f"more than {MAX_TRAILERS} trailer lines")


def decode(data: bytes | bytearray, encoding: str, limit: int) -> bytes | bytearray:
    """`data` undone from its ``Content-Encoding``, never inflating past `limit` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return data
    wbits = CODINGS.get(encoding)
    if wbits is None:
        raise FramingError(415, f"unsupported Content-Encoding {encoding!r}")
    out = bytearray()
    inflater = zlib.decompressobj(wbits)
    pending: bytes | bytearray = data
    try:
        while True:
            before = len(pending)
            piece = inflater.decompress(pending, min(READ_PIECE, limit + 1 - len(out)))
            out += piece
            if len(out) > limit:
                raise FramingError(413, f"{encoding} request body inflates past {limit} bytes")
            if inflater.eof:
                pending = inflater.unused_data
                if not pending:
                    return out
                if wbits != CODINGS["gzip"]:
                    raise FramingError(400, f"data after the end of the {encoding} stream")
                inflater = zlib.decompressobj(wbits)  # gzip: another member follows
                continue
            pending = inflater.unconsumed_tail
            if not piece and len(pending) == before:
                raise FramingError(400, f"{encoding} request body is cut off")
    except zlib.error as exc:
        raise FramingError(400, f"malformed {encoding} request body ({exc})") from exc


def peer_closed(sock: socket.socket) -> bool:
    """True when the client has closed its end (a read would return end of file now). Never
    waits: the socket's own timeout would make a plain peek block."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, InterruptedError, TimeoutError):
        return False
    except OSError:
        return True
