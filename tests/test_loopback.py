"""The loopback HTTP kit (`metaeval.loopback`) on a real server process on 127.0.0.1
(tests/loopback_app.py): each rule the gateway, the PACT server and the viewer share is tested
here once, over real sockets: Host, web pages, token, media type, body size and framing, and
slow clients. The servers' own tests check that each one applies the rules."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time
import zlib
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

from metaeval.loopback import access

sys.path.insert(0, str(Path(__file__).parent))
from raw_http import MiB, bomb, exchange, open_for, started, status_of  # noqa: E402

APP = Path(__file__).resolve().parent / "loopback_app.py"
TOKEN = "kit-" + "t" * 40
BODY = b'{"messages": ["hi"]}'


class App:
    """A running tests/loopback_app.py with a 1-s request deadline and a 1 MiB body cap."""

    def __init__(self, timeout_s: float = 1.0, limit: int = MiB):
        self.proc, self.port = started(APP, TOKEN, str(timeout_s), str(limit))

    def head(self, *lines: str, method: str = "POST", host: str | None = None) -> bytes:
        """An authorized JSON request's head with extra header `lines`."""
        first = [f"{method} /echo HTTP/1.1", f"Host: {host or f'127.0.0.1:{self.port}'}"]
        first += ["Content-Type: application/json", f"Authorization: Bearer {TOKEN}"]
        return ("\r\n".join([*first, *lines]) + "\r\n\r\n").encode()

    def post(self, *lines: str, body: bytes = BODY, host: str | None = None) -> bytes:
        data = self.head(*lines, f"Content-Length: {len(body)}", "Connection: close", host=host)
        return exchange(self.port, data + body)

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    server = App()
    try:
        yield server
    finally:
        server.stop()


def served(response: bytes, body: bytes = BODY) -> bool:
    """Whether the app answered 200 with the length and hash of `body`."""
    if status_of(response) != 200:
        return False
    answer = json.loads(response.split(b"\r\n\r\n", 1)[1])
    return answer == {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}


# ---------------------------------------------------------------------------------------------
# Who may talk to it


def test_only_its_own_loopback_host_is_served(app):
    """DNS rebinding: a page whose name now resolves to 127.0.0.1 still sends its own name."""
    for host in (
        "evil.example",
        f"evil.example:{app.port}",
        f"127.0.0.1:{app.port + 1}",  # another port's name
        f"127.0.0.1.evil.example:{app.port}",
        f"localhost:{app.port}x",
        f"[::1]x:{app.port}",
    ):
        response = app.post(host=host)
        assert status_of(response) == 421 and b"loopback only" in response, host
    nameless = f"POST /echo HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
    assert status_of(exchange(app.port, nameless)) == 421  # no Host at all on TCP
    two = app.head("Host: evil.example", "Content-Length: 0")
    assert status_of(exchange(app.port, two)) == 400  # a second Host header
    for host in (f"127.0.0.1:{app.port}", f"localhost:{app.port}", f"[::1]:{app.port}"):
        assert served(app.post(host=host)), host


def test_host_names_on_a_unix_socket_and_port_80():
    assert access.host_allowed(None, None) and access.host_allowed("localhost:9999", None)
    assert not access.host_allowed(None, 8080) and not access.host_allowed("evil", None)
    assert access.host_allowed("127.0.0.1", 80) and not access.host_allowed("127.0.0.1", 8080)


def test_only_the_token_holder_is_served(app):
    wrong = TOKEN[:-1] + "u"
    for auth in ("", f"Authorization: Bearer {wrong}", "Authorization: Bearer ", "x-api-key: x"):
        data = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\n{auth}\r\n\r\n".encode()
        response = exchange(app.port, data.replace(b"\r\n\r\n\r\n", b"\r\n\r\n"))
        assert status_of(response) == 401 and b"WWW-Authenticate: Bearer" in response, auth
    ok = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\nAuthorization: bearer {TOKEN}\r\n"
    response = exchange(app.port, (ok + "Connection: close\r\n\r\n").encode())
    assert status_of(response) == 200 and response.endswith(b"ok")
    assert access.token_matches(["x", TOKEN, "y"], TOKEN)
    assert not access.token_matches(["\udcff", TOKEN[:-1]], TOKEN)


def test_requests_from_web_pages_are_refused_even_with_the_token(app):
    for line in (
        f"Origin: http://127.0.0.1:{app.port + 1}",
        "Origin: null",  # sandboxed frames, file: pages
        "Sec-Fetch-Site: same-site",  # another 127.0.0.1 port
        "Sec-Fetch-Site: cross-site",
    ):
        assert status_of(app.post(line)) == 403, line
    assert served(app.post("Sec-Fetch-Site: none"))  # typed by the user
    assert served(app.post("Sec-Fetch-Site: same-origin"))


def test_a_write_from_the_servers_own_page_passes_the_same_origin_rule():
    def headers(**values: str) -> Message:
        message = Message()
        message["Host"] = "127.0.0.1:7575"
        for name, value in values.items():
            message[name.replace("_", "-")] = value
        return message

    access.check_same_origin(headers())  # not a browser
    access.check_same_origin(headers(Origin="http://127.0.0.1:7575"))
    access.check_same_origin(headers(Origin="null", Sec_Fetch_Site="same-origin"))
    for refused in (
        headers(Origin="http://evil.example"),
        headers(Origin="http://127.0.0.1:7576"),
        headers(Origin="null"),  # hidden, and nothing vouches for it
        headers(Origin="null", Sec_Fetch_Site="same-site"),
        headers(Sec_Fetch_Site="cross-site"),
    ):
        with pytest.raises(access.Refused) as info:
            access.check_same_origin(refused)
        assert info.value.status == 403


def test_a_body_of_another_type_is_415(app):
    for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        data = app.head("Content-Length: 2").replace(b"application/json", media.encode()) + b"{}"
        assert status_of(exchange(app.port, data)) == 415, media
    charset = app.head("Content-Length: 2", "Connection: close").replace(
        b"application/json", b"application/json; charset=utf-8"
    )
    assert served(exchange(app.port, charset + b"{}"), b"{}")
    vendor = app.head("Content-Length: 2", "Connection: close").replace(
        b"application/json", b"application/vnd.api+json"
    )
    assert served(exchange(app.port, vendor + b"{}"), b"{}")


# ---------------------------------------------------------------------------------------------
# Size and framing


@pytest.mark.parametrize("value", ["-1", "-99999999", "abc", "1e3", "+5", "0x10", " "])
def test_a_bad_content_length_is_400_at_once(app, value):
    """A negative length once meant "read to EOF": the answer comes while the connection is
    still open (`exchange` never closes first; a server waiting for more would drop it at
    the deadline with no 400)."""
    response = exchange(app.port, app.head(f"Content-Length: {value}"))
    assert status_of(response) == 400 and b"Content-Length" in response


def test_conflicting_unknown_or_oversized_framing_is_refused(app):
    cases = [
        (["Content-Length: 5", "Content-Length: 6"], 400, b"conflicting"),
        (["Content-Length: 5", "Transfer-Encoding: chunked"], 400, b"both"),
        (["Transfer-Encoding: gzip, chunked"], 501, b"Transfer-Encoding"),
        ([f"Content-Length: {MiB + 1}"], 413, b"over"),  # answered before a byte of it is sent
        (["Content-Length: 2", "Content-Encoding: br"], 415, b"Content-Encoding"),
    ]
    for lines, status, words in cases:
        data = app.head(*lines) + (b"{}" if status == 415 else b"")
        response = exchange(app.port, data)
        assert status_of(response) == status and words in response, response
    assert served(app.post(body=b" " * MiB), b" " * MiB)  # the limit itself is fine


def test_a_large_refused_body_is_drained_so_the_client_reads_its_answer():
    """Closing on unread input resets the connection: the client would see a broken pipe,
    not the 401 (up to the body limit is drained; 16 MiB is more than socket buffers hold)."""
    large = App(limit=32 * MiB)
    try:
        data = f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{large.port}\r\n"
        data += f"Content-Length: {16 * MiB}\r\n\r\n"
        response = exchange(large.port, data.encode() + bytes(16 * MiB))
        assert status_of(response) == 401
    finally:
        large.stop()


def test_a_chunk_larger_than_the_budget_is_refused_before_it_is_read(app):
    response = exchange(app.port, app.head("Transfer-Encoding: chunked") + b"40000000\r\n")
    assert status_of(response) == 413  # a 1 GiB chunk was announced; not a byte of it sent
    # many chunks within the size, over the budget together: refused at the one that crosses
    piece = b"%x\r\n%s\r\n" % (256 * 1024, b" " * 256 * 1024)
    response = exchange(app.port, app.head("Transfer-Encoding: chunked") + piece * 5)
    assert status_of(response) == 413 and b"chunked request body is over" in response


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"zz\r\n{}\r\n0\r\n\r\n", b"malformed chunk size"),
        (b"-5\r\n{}\r\n0\r\n\r\n", b"malformed chunk size"),
        (b"\r\n", b"malformed chunk size"),
        (b"1" * 17 + b"\r\n", b"malformed chunk size"),
        (b"2\r\n{}XX0\r\n\r\n", b"not followed by CRLF"),
        (b"10\r\n{}", b"ended 14 bytes early"),  # cut off: the client closed its side
        (b"2\r\n{}\r\n0\r\n" + b"x: y\r\n" * 65 + b"\r\n", b"trailer"),
    ],
)
def test_malformed_chunked_framing_is_400(app, body, words):
    response = exchange(app.port, app.head("Transfer-Encoding: chunked") + body, shut=True)
    assert status_of(response) == 400 and words in response, response


def gzip_of(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def test_a_well_formed_chunked_and_compressed_body_is_decoded(app):
    chunked = b"".join(b"%x\r\n%s\r\n" % (1, BODY[i : i + 1]) for i in range(len(BODY)))
    head = app.head("Transfer-Encoding: chunked", "Connection: close")
    assert served(exchange(app.port, head + chunked + b"0\r\n\r\n"))
    members = gzip_of(BODY[:10]) + gzip_of(BODY[10:])  # two gzip members, as gzip allows
    for encoding, data in (("gzip", members), ("deflate", zlib.compress(BODY))):
        assert served(app.post(f"Content-Encoding: {encoding}", body=data)), encoding
    broken = gzip_of(BODY)[:-12]
    response = app.post("Content-Encoding: gzip", body=broken)
    assert status_of(response) == 400 and b"cut off" in response


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compression_bomb_is_cut_at_the_limit(app, encoding):
    data = bomb(encoding)
    assert len(data) < 500 * 1024
    lines = (f"Content-Encoding: {encoding}", f"Content-Length: {len(data)}")
    response = exchange(app.port, app.head(*lines) + data)
    assert status_of(response) == 413 and b"inflates past 1048576 bytes" in response


# ---------------------------------------------------------------------------------------------
# Slow clients


def half_sent(app: App) -> list[tuple[socket.socket, bytes, float]]:
    """24 connections that never finish their request: a half head, a half body, or silence;
    each with the time its first byte went out."""
    half_head = f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\n".encode()
    half_body = app.head("Content-Length: 100") + b'{"messages"'
    socks = []
    for _ in range(8):
        for data in (half_head, half_body, b""):  # b"": connected and silent
            sock = socket.create_connection(("127.0.0.1", app.port), timeout=5)
            sent = time.monotonic()
            sock.sendall(data)
            socks.append((sock, data, sent))
    return socks


def test_half_sent_requests_do_not_block_others():
    """A server whose request deadline is far away still answers a whole request while 24
    half-sent ones wait (no clock is read: only the order of events matters)."""
    slow = App(timeout_s=120.0)
    try:
        socks = half_sent(slow)
        try:
            assert served(slow.post())
            assert all(open_for(sock, time.monotonic() + 0.01) is None for sock, _, _ in socks)
        finally:
            for sock, _, _ in socks:
                sock.close()
    finally:
        slow.stop()


def test_half_sent_requests_are_dropped_at_their_deadline(app):
    """Each half-sent request is closed (408 or a bare close) once its 1-s deadline passes,
    never before it. Only lower bounds are read from the clock, so a busy machine can delay
    the drop but not fail the test."""
    socks = half_sent(app)
    try:
        first, _, first_sent = socks[0]
        answer = open_for(first, time.monotonic() + 60)
        assert answer is not None, "still open after 60 s"
        assert time.monotonic() - first_sent >= 0.9  # not dropped before its deadline
        for sock, data, _ in socks:
            answer = open_for(sock, time.monotonic() + 60)
            assert answer is not None, f"still open after 60 s: {data[:60]!r}"
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer
            if data.endswith(b'"messages"'):
                assert b"request not received within 1s" in answer
    finally:
        for sock, _, _ in socks:
            sock.close()
    assert served(app.post())  # and it still serves


def test_a_request_trickling_in_is_dropped_at_its_deadline(app):
    """One byte every 0.2 s: every single wait is short, the request as a whole is not."""
    data = app.head("Content-Length: 2") + b"{}"
    sent, closed = 0, False
    with socket.create_connection(("127.0.0.1", app.port), timeout=5) as sock:
        while sent < len(data) and not closed:
            try:
                sock.sendall(data[sent : sent + 1])
            except OSError:
                closed = True
                break
            sent += 1
            closed = open_for(sock, time.monotonic() + 0.2) is not None  # answered or closed
    assert closed and sent < len(data), sent  # all of it would take 30 s
