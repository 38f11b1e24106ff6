"""Hostile clients against a live gateway on 127.0.0.1: no or a wrong token, a foreign Host, a
web page in a real browser (headless Chromium), and broken, oversized, compressed or stalled
request framing. Every attack goes over a real socket; the scripted model counts what reached
it, and `Gateway.refused` what was turned away before its body was read."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from metaeval.gateway import Gateway
from metaeval.gateway.attach import open_link, shared_gateway, stop_shared_gateways
from metaeval.models.scripted import ScriptedModel

CHAT = "/v1/chat/completions"
HI = {"messages": [{"role": "user", "content": "hi"}]}
REQUIRED = os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1"
MiB = 1 << 20


@pytest.fixture
def served():
    """A gateway with a 1-s request deadline and a 1 MiB body cap, and its model."""
    model = ScriptedModel(lambda request: "ok", name="scripted/hostile")
    with Gateway(model, timeout_s=1.0, max_body_bytes=MiB) as gw:
        yield gw, model


def call(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    host: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (Host too); (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host != "":
            conn.putheader("Host", host or f"127.0.0.1:{port}")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def chat(gw: Gateway, headers: dict[str, str], host: str | None = None) -> int:
    return call(gw.port, "POST", CHAT, json.dumps(HI).encode(), headers, host)[0]


def json_key(token: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}


def head(gw: Gateway, *lines: str, path: str = CHAT) -> bytes:
    """The head of an authorized JSON POST, with extra header `lines`."""
    first = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{gw.port}"]
    first += ["Content-Type: application/json", f"Authorization: Bearer {gw.token}"]
    return ("\r\n".join([*first, *lines]) + "\r\n\r\n").encode()


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


# ---------------------------------------------------------------------------------------------
# Token, Host, web pages


def test_only_the_token_holder_is_served(served):
    gw, model = served
    wrong = gw.token[:-1] + ("A" if gw.token[-1] != "A" else "B")
    assert chat(gw, {"Content-Type": "application/json"}) == 401
    assert chat(gw, json_key(wrong)) == 401
    assert chat(gw, json_key("")) == 401
    status, headers, body = call(
        gw.port, "POST", CHAT, json.dumps(HI).encode(), {"Content-Type": "application/json"}
    )
    assert status == 401 and "Bearer" in headers["WWW-Authenticate"]
    assert "token" in json.loads(body)["error"]["message"]
    assert model.requests == []  # nothing reached the model
    assert chat(gw, json_key(gw.token)) == 200
    # the key where each API's clients put it
    anthropic = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    headers = {"Content-Type": "application/json", "x-api-key": gw.token}
    assert call(gw.port, "POST", "/v1/messages", json.dumps(anthropic).encode(), headers)[0] == 200
    gemini = json.dumps({"contents": [{"role": "user", "parts": [{"text": "x"}]}]}).encode()
    path = "/v1beta/models/g:generateContent"
    headers = {"Content-Type": "application/json", "x-goog-api-key": gw.token}
    assert call(gw.port, "POST", path, gemini, headers)[0] == 200
    plain = {"Content-Type": "application/json"}
    assert call(gw.port, "POST", f"{path}?key={gw.token}", gemini, plain)[0] == 200
    assert call(gw.port, "POST", f"{path}?key={wrong}", gemini, plain)[0] == 401
    assert len(model.requests) == 4
    # listings need the token, the health probes do not
    assert call(gw.port, "GET", "/v1/models")[0] == 401
    assert call(gw.port, "GET", "/v1/models", None, {"x-api-key": gw.token})[0] == 200
    assert call(gw.port, "GET", "/")[0] == 200 and call(gw.port, "HEAD", "/")[0] == 200
    assert gw.refused[401] == 6


def test_a_large_body_with_a_wrong_key_still_gets_its_401():
    """The refused body is drained, unread, before the connection closes: closing on unread
    input resets the connection, and the client would see a broken pipe, not the 401."""
    with Gateway(ScriptedModel(lambda request: "ok", name="scripted/big")) as gw:
        big = json.dumps({**HI, "pad": "x" * (16 * MiB)}).encode()
        assert call(gw.port, "POST", CHAT, big, json_key("mgw-" + "x" * 43))[0] == 401
        assert gw.refused[401] == 1


def test_a_client_that_asks_to_continue_is_refused_before_sending_its_body(served):
    gw, model = served
    request = (
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    response = exchange(gw.port, request)
    assert response.startswith(b"HTTP/1.1 401 ") and b"100 Continue" not in response
    assert model.requests == []


def test_a_foreign_host_name_is_refused(served):
    """DNS rebinding: a page whose name now resolves to 127.0.0.1 still sends its own name."""
    gw, model = served
    key = json_key(gw.token)
    assert chat(gw, key, host=f"evil.example:{gw.port}") == 421
    assert chat(gw, key, host="evil.example") == 421
    assert chat(gw, key, host=f"127.0.0.1:{gw.port + 1}") == 421  # another port's name
    assert chat(gw, key, host=f"127.0.0.1.evil.example:{gw.port}") == 421
    assert chat(gw, key, host="") == 421  # no Host at all
    assert call(gw.port, "GET", "/", host="evil.example")[0] == 421  # the probe too
    assert model.requests == [] and gw.refused[421] == 6
    assert chat(gw, key, host=f"localhost:{gw.port}") == 200
    assert chat(gw, key, host=f"[::1]:{gw.port}") == 200
    assert len(model.requests) == 2


def test_requests_from_web_pages_are_refused_even_with_the_token(served):
    gw, model = served
    key = json_key(gw.token)
    assert chat(gw, {**key, "Origin": f"http://127.0.0.1:{gw.port + 1}"}) == 403
    assert chat(gw, {**key, "Origin": "null"}) == 403  # sandboxed frames, file: pages
    assert chat(gw, {**key, "Sec-Fetch-Site": "same-site"}) == 403  # another 127.0.0.1 port
    assert chat(gw, {**key, "Sec-Fetch-Site": "cross-site"}) == 403
    for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        assert chat(gw, {**key, "Content-Type": media}) == 415  # what a page sends unasked
    assert model.requests == [] and gw.refused[403] == 4 and gw.refused[415] == 3
    assert chat(gw, {**key, "Sec-Fetch-Site": "none"}) == 200  # typed by the user
    assert chat(gw, {**key, "Content-Type": "application/json; charset=utf-8"}) == 200


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


PAGE = """<!doctype html><html><body><div id="out">page</div>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="{url}">
<input type="hidden" name='{{"messages":[{{"role":"user","content":"hi"}}],"x":"' value='"}}'>
</form>
<script>
const out = document.getElementById("out");
const note = (text) => {{ out.textContent += " " + text; }};
const body = JSON.stringify({{messages: [{{role: "user", content: "spend the key"}}]}});
fetch("{url}", {{method: "POST", mode: "no-cors", body}})
  .then(() => note("no-cors-sent"), (e) => note("no-cors-error"));
fetch("{url}", {{method: "POST", headers: {{"Content-Type": "application/json",
  "Authorization": "Bearer guess"}}, body}})
  .then((r) => note("cors-status-" + r.status), () => note("cors-blocked"));
document.getElementById("f").submit();
note("form-submitted");
</script></body></html>"""


def test_a_web_page_on_another_loopback_port_cannot_spend_the_key(served, tmp_path):
    """A real cross-origin attack from headless Chromium: a page served from another 127.0.0.1
    port posts to the gateway by a no-cors fetch (text/plain JSON), a preflighted fetch with a
    guessed key, and a text/plain form whose body is valid JSON. None reaches the model."""
    binary = chromium()
    if binary is None:
        if REQUIRED:
            pytest.fail("chromium not installed (scripts/install-system-deps.sh installs it)")
        pytest.skip("chromium not installed")
    gw, model = served
    page = PAGE.format(url=f"http://127.0.0.1:{gw.port}{CHAT}").encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            code = 200 if self.path == "/" else 404
            self.send_response(code)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page) if code == 200 else 0))
            self.end_headers()
            if code == 200:
                self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        done = subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--proxy-server=http://127.0.0.1:9",  # nothing but loopback is reachable
                f"--user-data-dir={tmp_path / 'profile'}",
                "--virtual-time-budget=5000",
                "--dump-dom",
                f"http://127.0.0.1:{site.server_address[1]}/",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        site.shutdown()
        site.server_close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "form-submitted" in done.stdout and "no-cors-sent" in done.stdout, done.stdout
    assert "cors-blocked" in done.stdout  # the preflight found no CORS grant
    assert gw.refused[403] >= 2, gw.refused  # the fetch and the form reached it, with Origin
    assert model.requests == []
    assert not any(r.get("kind") == "completion" for r in gw.exchanges.snapshot())


def test_each_runs_listener_takes_its_own_token_and_shared_gateways_open_no_port():
    model = ScriptedModel(lambda request: "ok", name="scripted/runs")
    with Gateway(model, port=None) as gw:
        with pytest.raises(RuntimeError, match="no TCP listener"):
            _ = gw.url
        one, two = open_link(gw, "run-1", False), open_link(gw, "run-2", False)
        try:
            port = int(one.address.rsplit(":", 1)[1])
            assert len({one.token, two.token, gw.token}) == 3
            for token, expected in ((two.token, 401), (gw.token, 401), (one.token, 200)):
                status = call(port, "POST", CHAT, json.dumps(HI).encode(), json_key(token))[0]
                assert status == expected
        finally:
            one.close()
            two.close()
        assert len(gw.exchanges.for_client("run-1")) == 1 and len(model.requests) == 1
    try:
        assert shared_gateway("scripted/shared-probe").port is None
    finally:
        stop_shared_gateways()


# ---------------------------------------------------------------------------------------------
# Framing


@pytest.mark.parametrize("value", ["-1", "-99999999", "abc", "1e3", "+5", "0x10", " "])
def test_a_bad_content_length_is_400_at_once(served, value):
    """A negative length once meant "read to EOF": the answer now comes while the connection
    is still open (`exchange` reads until the server closes; it never closes first; a server
    waiting for more would drop it at the deadline with no 400)."""
    gw, model = served
    response = exchange(gw.port, head(gw, f"Content-Length: {value}"))
    assert status_of(response) == 400 and b"Content-Length" in response
    assert model.requests == []


def test_conflicting_or_unknown_framing_is_refused(served):
    gw, model = served
    cases = [
        (["Content-Length: 5", "Content-Length: 6"], 400, b"conflicting"),
        (["Content-Length: 5", "Transfer-Encoding: chunked"], 400, b"both"),
        (["Transfer-Encoding: gzip, chunked"], 501, b"Transfer-Encoding"),
        ([f"Content-Length: {MiB + 1}"], 413, b"over"),
        (["Content-Length: 2", "Content-Encoding: br"], 415, b"Content-Encoding"),
    ]
    for lines, status, words in cases:
        data = head(gw, *lines) + (b"{}" if status == 415 else b"")
        response = exchange(gw.port, data)
        assert status_of(response) == status and words in response, response
    assert model.requests == []


def test_a_chunk_larger_than_the_budget_is_refused_before_it_is_read(served):
    gw, model = served
    response = exchange(gw.port, head(gw, "Transfer-Encoding: chunked") + b"40000000\r\n")
    assert status_of(response) == 413  # a 1 GiB chunk was announced; not a byte of it sent
    # many chunks within the size, over the budget together: refused at the one that crosses
    piece = b"%x\r\n%s\r\n" % (256 * 1024, b" " * 256 * 1024)
    response = exchange(gw.port, head(gw, "Transfer-Encoding: chunked") + piece * 5)
    assert status_of(response) == 413 and b"chunked request body is over" in response
    assert model.requests == []
    errors = [r for r in gw.exchanges.snapshot() if r["kind"] == "error"]
    assert [r["status"] for r in errors] == [413, 413]


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
def test_malformed_chunked_framing_is_400(served, body, words):
    gw, model = served
    response = exchange(gw.port, head(gw, "Transfer-Encoding: chunked") + body, shut=True)
    assert status_of(response) == 400 and words in response, response
    assert model.requests == []


def test_a_well_formed_chunked_and_compressed_body_is_served(served):
    gw, model = served
    body = json.dumps(HI).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (1, body[i : i + 1]) for i in range(len(body)))
    response = exchange(
        gw.port,
        head(gw, "Transfer-Encoding: chunked", "Connection: close") + chunked + b"0\r\n\r\n",
    )
    assert status_of(response) == 200
    members = gzip_of(body[:10]) + gzip_of(body[10:])  # two gzip members, as gzip allows
    for encoding, data in (("gzip", members), ("deflate", zlib.compress(body))):
        lines = (
            f"Content-Encoding: {encoding}",
            f"Content-Length: {len(data)}",
            "Connection: close",
        )
        assert status_of(exchange(gw.port, head(gw, *lines) + data)) == 200
    broken = gzip_of(body)[:-12]
    lines = ("Content-Encoding: gzip", f"Content-Length: {len(broken)}")
    response = exchange(gw.port, head(gw, *lines) + broken)
    assert status_of(response) == 400 and b"cut off" in response
    assert len(model.requests) == 3


def gzip_of(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@cache
def bomb(encoding: str, size: int = 400 * MiB) -> bytes:
    """`size` zero bytes, compressed (about 1/1000 of it)."""
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(MiB)
    return b"".join([*(packer.compress(block) for _ in range(size // MiB)), packer.flush()])


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compression_bomb_is_cut_at_the_limit(served, encoding):
    gw, model = served
    data = bomb(encoding)
    assert len(data) < 500 * 1024
    lines = (f"Content-Encoding: {encoding}", f"Content-Length: {len(data)}")
    response = exchange(gw.port, head(gw, *lines) + data)
    assert status_of(response) == 413 and b"inflates past 1048576 bytes" in response
    assert model.requests == []


def memory_kib(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(v) for k, v in re.findall(r"^(VmHWM|VmRSS):\s+(\d+) kB", status, re.M)}


def test_memory_of_a_served_gateway_stays_flat_under_bombs_and_huge_chunks():
    """`metaeval serve` in its own process, default limits (32 MiB bodies): a 400 MiB gzip
    bomb, a 1 GiB chunk and a negative length; its peak memory grows by less than 64 MiB."""
    token = "mgw-memory-test-token-0123456789"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "serve", "scripted/x", "--timeout", "5"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "METAEVAL_GATEWAY_TOKEN": token},
    )
    try:
        port = int(re.search(r"127\.0\.0\.1:(\d+)", proc.stdout.readline()).group(1))
        gw = Gateway.__new__(Gateway)  # only what `head` reads
        gw.port, gw.token = port, token
        count = json.dumps({"messages": [{"role": "user", "content": "warm up"}]}).encode()
        for _ in range(3):  # imports and buffers of an ordinary request first
            lines = (f"Content-Length: {len(count)}", "Connection: close")
            data = head(gw, *lines, path="/v1/messages/count_tokens") + count
            assert status_of(exchange(port, data)) == 200
        before = memory_kib(proc.pid)
        data = bomb("gzip")
        lines = ("Content-Encoding: gzip", f"Content-Length: {len(data)}")
        response = exchange(port, head(gw, *lines) + data)
        assert status_of(response) == 413, response
        after_bomb = memory_kib(proc.pid)
        response = exchange(port, head(gw, "Transfer-Encoding: chunked") + b"40000000\r\n")
        assert status_of(response) == 413
        assert status_of(exchange(port, head(gw, "Content-Length: -1"))) == 400
        after = memory_kib(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    growth_mib = (after["VmHWM"] - before["VmHWM"]) / 1024
    print(
        f"\ngateway memory: VmHWM {before['VmHWM'] / 1024:.1f} -> {after_bomb['VmHWM'] / 1024:.1f}"
        f" MiB after the bomb, {after['VmHWM'] / 1024:.1f} MiB at the end (+{growth_mib:.1f}); "
        f"VmRSS {before['VmRSS'] / 1024:.1f} -> {after['VmRSS'] / 1024:.1f} MiB"
    )
    assert growth_mib < 64


# ---------------------------------------------------------------------------------------------
# Slow clients


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


def half_sent(gw: Gateway) -> list[tuple[socket.socket, bytes, float]]:
    """24 connections that never finish their request: a half head, a half body, or silence;
    each with the time its first byte went out."""
    half_head = f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\n".encode()
    half_body = head(gw, "Content-Length: 100") + b'{"messages"'
    socks = []
    for _ in range(8):
        for data in (half_head, half_body, b""):  # b"": connected and silent
            sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            sent = time.monotonic()
            sock.sendall(data)
            socks.append((sock, data, sent))
    return socks


def test_half_sent_requests_do_not_block_others():
    """A gateway whose request deadline is far away still answers a whole request while 24
    half-sent ones wait: a server that read them one at a time would stall past the client's
    30-s timeout. (No clock is read: only the order of events matters.)"""
    model = ScriptedModel(lambda request: "ok", name="scripted/hostile")
    with Gateway(model, timeout_s=120.0, max_body_bytes=MiB) as gw:
        socks = half_sent(gw)
        try:
            status = call(gw.port, "POST", CHAT, json.dumps(HI).encode(), json_key(gw.token))[0]
            assert status == 200
            assert all(open_for(sock, time.monotonic() + 0.01) is None for sock, _, _ in socks)
        finally:
            for sock, _, _ in socks:
                sock.close()
    assert len(model.requests) == 1


def test_half_sent_requests_are_dropped_at_their_deadline_and_their_threads_freed(served):
    """Each half-sent request is closed (408 or a bare close) once its 1-s deadline passes, never
    before it; afterwards the handler threads are gone. Only lower bounds are read from the
    clock, so a busy machine can delay the drop but not fail the test."""
    gw, model = served
    baseline = threading.active_count()
    socks = half_sent(gw)
    try:
        first, _, first_sent = socks[0]
        answer = open_for(first, time.monotonic() + 60)
        assert answer is not None, "still open after 60 s"
        assert time.monotonic() - first_sent >= 0.9  # not dropped before its deadline
        for sock, data, _ in socks:
            answer = open_for(sock, time.monotonic() + 60)
            assert answer is not None, f"still open after 60 s: {data[:60]!r}"
            assert answer in (b"",) or answer.startswith(b"HTTP/1.1 408 "), answer
    finally:
        for sock, _, _ in socks:
            sock.close()
    deadline = time.monotonic() + 60
    while threading.active_count() > baseline + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= baseline + 1  # the threads are free again
    timed_out = [r for r in gw.exchanges.snapshot() if r.get("status") == 408]
    assert len(timed_out) == 8 and "within 1s" in timed_out[0]["error"]
    assert chat(gw, json_key(gw.token)) == 200  # and the gateway still serves
    assert len(model.requests) == 1


def test_a_request_trickling_in_is_dropped_at_its_deadline(served):
    """One byte every 0.2 s: every single wait is short, the request as a whole is not."""
    gw, model = served
    data = head(gw, "Content-Length: 2") + b"{}"
    sent = 0
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as sock:
        started = time.monotonic()
        while sent < len(data) and time.monotonic() - started < 20:
            try:
                sock.sendall(data[sent : sent + 1])
            except OSError:
                break
            sent += 1
            if open_for(sock, time.monotonic() + 0.2) is not None:
                break  # answered or closed
        elapsed = time.monotonic() - started
    assert sent < len(data) and elapsed < 15, (sent, elapsed)  # all of it would take 40 s
    assert model.requests == []
