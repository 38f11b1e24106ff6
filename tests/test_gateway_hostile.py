"""Hostile clients against a live gateway on 127.0.0.1: no or a wrong token where each API puts
its key, a foreign Host, a web page in a real browser (headless Chromium), oversized bodies and
stalled requests. Every attack goes over a real socket; the scripted model counts what reached
it, and `Gateway.refused` what was turned away before its body was read. The loopback kit's
rules themselves (Host names, framing, limits, deadlines) are tested in tests/test_loopback.py."""

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from metaeval.gateway import Gateway
from metaeval.gateway.attach import open_link, shared_gateway, stop_shared_gateways
from metaeval.models.scripted import ScriptedModel

sys.path.insert(0, str(Path(__file__).parent))
from raw_http import MiB, bomb, exchange, open_for, status_of  # noqa: E402

CHAT = "/v1/chat/completions"
HI = {"messages": [{"role": "user", "content": "hi"}]}
REQUIRED = os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1"


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


def test_a_client_that_asks_to_continue_is_refused_before_sending_its_body(served):
    gw, model = served
    request = (
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    response = exchange(gw.port, request)
    assert response.startswith(b"HTTP/1.1 401 ") and b"100 Continue" not in response
    assert model.requests == []


def test_a_foreign_host_name_or_a_web_page_is_refused_and_counted(served):
    """The gateway applies the loopback kit's Host and web-page rules (each tested in
    tests/test_loopback.py), to the health probe too, and counts what it turned away."""
    gw, model = served
    key = json_key(gw.token)
    assert chat(gw, key, host=f"evil.example:{gw.port}") == 421  # DNS rebinding
    assert call(gw.port, "GET", "/", host="evil.example")[0] == 421  # the probe too
    assert chat(gw, {**key, "Origin": f"http://127.0.0.1:{gw.port + 1}"}) == 403
    assert chat(gw, {**key, "Sec-Fetch-Site": "same-site"}) == 403  # another 127.0.0.1 port
    assert chat(gw, {**key, "Content-Type": "text/plain"}) == 415  # what a page sends unasked
    assert model.requests == [] and gw.refused == {421: 2, 403: 2, 415: 1}
    assert chat(gw, key, host=f"localhost:{gw.port}") == 200
    assert len(model.requests) == 1


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


def test_a_body_over_the_budget_is_refused_and_recorded(served):
    """The kit refuses it before reading it (tests/test_loopback.py); the gateway's exchange
    log records the refusal."""
    gw, model = served
    response = exchange(gw.port, head(gw, "Transfer-Encoding: chunked") + b"40000000\r\n")
    assert status_of(response) == 413  # a 1 GiB chunk was announced; not a byte of it sent
    assert b'"error"' in response  # in the API's own error shape
    assert model.requests == []
    errors = [r for r in gw.exchanges.snapshot() if r["kind"] == "error"]
    assert [r["status"] for r in errors] == [413]


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


def test_half_sent_requests_are_recorded_as_408_and_their_threads_freed(served):
    """The kit drops a half-sent request at its deadline (tests/test_loopback.py); the
    gateway records each as a 408 exchange, its handler threads end, and it serves on."""
    gw, model = served
    baseline = threading.active_count()
    socks = []
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
        sock.sendall(head(gw, "Content-Length: 100") + b'{"messages"')
        socks.append(sock)
    try:
        for sock in socks:
            answer = open_for(sock, time.monotonic() + 60)
            assert answer is not None, "still open after 60 s"
            assert answer.startswith(b"HTTP/1.1 408 "), answer
    finally:
        for sock in socks:
            sock.close()
    deadline = time.monotonic() + 60
    while threading.active_count() > baseline + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= baseline + 1  # the threads are free again
    timed_out = [r for r in gw.exchanges.snapshot() if r.get("status") == 408]
    assert len(timed_out) == 4 and "within 1s" in timed_out[0]["error"]
    assert chat(gw, json_key(gw.token)) == 200  # and the gateway still serves
    assert len(model.requests) == 1
