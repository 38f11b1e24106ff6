"""The openai provider's two transports: plain HTTP (default) and the official SDK.

Both talk to real servers on 127.0.0.1. They must send the same body and read the same
answer; the HTTP one must survive a server that drops kept-alive connections, and sort
errors the way the retry classifier expects.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from metaeval.errors import ConfigError
from metaeval.models.registry import get_model
from metaeval.models.retry import ModelCallError
from metaeval.models.types import Message, ModelRequest
from test_models_openai import (
    API_KEY,
    FAST_RETRY,
    GREP,
    FakeChatServer,
    LoopbackServer,
    completion,
    send_json,
)

REPLY = completion(
    {
        "role": "assistant",
        "content": "looking",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"pattern": "x"}'},
            }
        ],
    },
    {"prompt_tokens": 12, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}},
    finish="tool_calls",
)
REQUEST = ModelRequest(
    model="m",
    messages=[Message(role="system", content="be brief"), Message(role="user", content="find x")],
    tools=[GREP],
    max_tokens=64,
    seed=3,
)


@pytest.fixture
def server() -> FakeChatServer:
    srv = FakeChatServer()
    yield srv
    srv.close()


def test_http_and_sdk_send_the_same_body_and_read_the_same_answer(server: FakeChatServer) -> None:
    seen = {}
    for transport in ("http", "sdk"):
        server.replies.append((200, REPLY, {}))
        model = get_model(
            "openai/gpt-x",
            base_url=server.url,
            api_key=API_KEY,
            transport=transport,
            retry=FAST_RETRY,
        )
        assert model.transport == transport
        result = model.complete(REQUEST)
        seen[transport] = (
            result.text,
            [(c.id, c.name, c.arguments) for c in result.tool_calls],
            result.usage.model_dump(),
            result.finish_reason,
        )
    http_req, sdk_req = server.received
    assert http_req["path"] == sdk_req["path"] == "/v1/chat/completions"
    assert http_req["body"] == sdk_req["body"]
    assert http_req["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert seen["http"] == seen["sdk"]
    assert seen["http"][1] == [("c1", "grep", {"pattern": "x"})]
    assert seen["http"][2]["cache_read_tokens"] == 4


def test_auto_uses_the_sdk_only_behind_a_proxy(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert get_model("openai/a", base_url=server.url, api_key=API_KEY).transport == "http"
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert get_model("openai/b", base_url=server.url, api_key=API_KEY).transport == "sdk"
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert get_model("openai/c", base_url=server.url, api_key=API_KEY).transport == "http"


def test_an_unknown_transport_names_the_option() -> None:
    with pytest.raises(ConfigError) as info:
        get_model("openai/m", base_url="http://127.0.0.1:1/v1", transport="carrier-pigeon")
    assert info.value.field == "transport"


def test_account_headers_follow_the_environment(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-9")
    server.replies.append((200, REPLY, {}))
    get_model("openai/h", base_url=server.url, api_key=API_KEY, transport="http").complete(REQUEST)
    headers = server.received[0]["headers"]
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-123", "proj-9")


class DroppingServer:
    """Answers each request with HTTP/1.1 keep-alive and then silently closes the socket,
    as servers do with idle connections; counts connections and requests."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.connections = 0
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests += 1
                body = json.dumps(
                    completion({"role": "assistant", "content": f"answer {self.requests}"}, {})
                ).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def close(self) -> None:
        self.sock.close()


def test_a_dropped_keepalive_connection_is_replaced_without_a_duplicate_request() -> None:
    srv = DroppingServer()
    try:
        model = get_model(
            "openai/k", base_url=srv.url, api_key=API_KEY, transport="http", retry=FAST_RETRY
        )
        ask = ModelRequest(model="m", messages=[Message(role="user", content="hi")])
        texts = [model.complete(ask).text for _ in range(3)]
        assert texts == ["answer 1", "answer 2", "answer 3"]
        assert all(r == 1 for r in [model.complete(ask).attempts])  # no retry was spent
        assert (srv.requests, srv.connections) == (4, 4)
    finally:
        srv.close()


def test_errors_sort_like_the_sdks(server: FakeChatServer) -> None:
    error: dict[str, Any] = {"error": {"message": "overloaded"}}
    server.replies += [(503, error, {}), (200, REPLY, {})]
    model = get_model(
        "openai/e", base_url=server.url, api_key=API_KEY, transport="http", retry=FAST_RETRY
    )
    model.sleep = lambda s: None
    assert model.complete(REQUEST).attempts == 2  # 5xx: transient, retried

    server.replies += [(400, {"error": {"message": "bad request"}}, {})]
    with pytest.raises(ModelCallError) as info:
        model.complete(REQUEST)
    assert info.value.kind == "fatal" and "bad request" in str(info.value)

    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: connection refused
    refused = get_model(
        "openai/r",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=API_KEY,
        transport="http",
        retry=FAST_RETRY,
    )
    refused.sleep = lambda s: None
    with pytest.raises(ModelCallError) as info:
        refused.complete(REQUEST)
    assert info.value.kind != "fatal" and info.value.attempts == FAST_RETRY.max_attempts


class CountingServer(LoopbackServer):
    """A real HTTP/1.1 server on 127.0.0.1 that counts the connections it accepts; each
    answer waits `hold_s` (calls overlap) and says `connection: close` when `close` is set."""

    def __init__(self, hold_s: float = 0.0, close: bool = False) -> None:
        self.connections = 0
        self.requests = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with outer.lock:
                    outer.requests += 1
                    n = outer.requests
                time.sleep(hold_s)
                reply = completion({"role": "assistant", "content": f"answer {n}"}, {})
                send_json(self, 200, reply, {"connection": "close"} if close else {})

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def process_request(self, request: Any, client_address: Any) -> None:
                with outer.lock:
                    outer.connections += 1
                super().process_request(request, client_address)

        self.serve(Server(("127.0.0.1", 0), Handler))


def test_threads_share_connections_so_a_run_opens_no_more_than_its_calls_in_flight() -> None:
    # as in a run: twice as many threads as call slots (cells prepared ahead), each sending
    # once it holds a slot; a connection per thread would open 8
    srv = CountingServer(hold_s=0.05)
    try:
        model = get_model("openai/p", base_url=srv.url, api_key=API_KEY, transport="http")
        slots = threading.BoundedSemaphore(4)
        texts: list[str] = []

        def cell() -> None:
            ask = ModelRequest(model="m", messages=[Message(role="user", content="hi")])
            with slots:
                texts.append(model.complete(ask).text)

        for _ in range(2):  # a second wave reuses the first wave's connections
            threads = [threading.Thread(target=cell) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert sorted(texts, key=lambda t: int(t.split()[1])) == [
            f"answer {i}" for i in range(1, 17)
        ]
        assert srv.requests == 16
        assert 1 <= srv.connections <= 4
        assert model._http.idle_connections() == srv.connections
    finally:
        srv.close()


def test_a_connection_the_server_closes_is_not_given_back() -> None:
    srv = CountingServer(close=True)
    try:
        model = get_model("openai/c", base_url=srv.url, api_key=API_KEY, transport="http")
        ask = ModelRequest(model="m", messages=[Message(role="user", content="hi")])
        texts = [model.complete(ask).text for _ in range(3)]
        assert texts == ["answer 1", "answer 2", "answer 3"]
        assert (srv.requests, srv.connections) == (3, 3)
        assert model._http.idle_connections() == 0
    finally:
        srv.close()
