"""The openai provider against a local HTTP server returning Chat Completions bodies.

Covers what the llama.cpp server test cannot: native tool calls, unparsable arguments,
cached/reasoning usage, 429 handling, and that the key never reaches the raw exchange.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from metaeval.models.openai_provider import OpenAIModel
from metaeval.models.registry import get_model
from metaeval.models.retry import ModelCallError, RetryPolicy
from metaeval.models.types import Message, ModelRequest, ToolCall, ToolSpec

API_KEY = "sk-test-secret-not-real"
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01, jitter=False)


def send_json(
    handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str]
) -> None:
    """Write `body` as a JSON answer with `status` and extra `headers` from a test server."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data)


class LoopbackServer:
    """A test HTTP server on 127.0.0.1 serving from a daemon thread; `url` ends in /v1."""

    def serve(self, httpd: ThreadingHTTPServer) -> None:
        self.httpd = httpd
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeChatServer(LoopbackServer):
    """Serves queued (status, body, headers) replies; records each request's path and body."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, Any], dict[str, str]]] = []
        self.received: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("content-length") or 0)
                outer.received.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": json.loads(self.rfile.read(length) or b"{}"),
                    }
                )
                status, reply, headers = outer.replies.pop(0) if outer.replies else (500, {}, {})
                send_json(self, status, reply, headers)

            def log_message(self, *args: Any) -> None:
                pass

        self.serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler))


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    srv = FakeChatServer()
    yield srv
    srv.close()


@pytest.fixture
def fresh(server: FakeChatServer) -> FakeChatServer:
    server.replies.clear()
    server.received.clear()
    return server


def completion(message: dict[str, Any], usage: dict[str, Any], finish: str = "stop") -> dict:
    """A Chat Completions response body in the documented shape."""
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


GREP = ToolSpec(
    name="grep",
    description="Search the workspace.",
    parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
)


def test_tool_calls_usage_cost_and_no_secret(fresh: FakeChatServer) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"pattern": "TODO"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "grep", "arguments": "{bad"}},
        ],
    }
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 400},
        "completion_tokens_details": {"reasoning_tokens": 200},
    }
    fresh.replies.append((200, completion(message, usage, "tool_calls"), {}))
    model = get_model("openai/gpt-4o", base_url=fresh.url, api_key=API_KEY, retry=FAST_RETRY)
    request = ModelRequest(
        model="openai/gpt-4o",
        messages=[
            Message(role="system", content="Be careful."),
            Message(role="user", content="Find TODOs"),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c0", name="grep", arguments={"pattern": "x"})],
            ),
            Message(role="tool", tool_call_id="c0", content="no matches"),
        ],
        tools=[GREP],
        seed=7,
    )
    result = model.complete(request)

    assert result.text == ""
    assert result.tool_calls == [
        ToolCall(
            id="call_1",
            name="grep",
            arguments={"pattern": "TODO"},
            arguments_json='{"pattern": "TODO"}',
        ),
        ToolCall(id="call_2", name="grep", arguments={}, arguments_json="{bad"),
    ]
    assert result.finish_reason == "tool_calls"
    assert result.usage.input_tokens == 1000
    assert result.usage.output_tokens == 500
    assert result.usage.cache_read_tokens == 400
    assert result.usage.reasoning_tokens == 200
    # gpt-4o: $2.50 input, $1.25 cached input, $10 output per million; cached is a subset.
    assert result.cost_usd == pytest.approx((600 * 2.50 + 400 * 1.25 + 500 * 10.00) / 1e6)

    [seen] = fresh.received
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["authorization"] == f"Bearer {API_KEY}"
    body = seen["body"]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "grep",
                "description": "Search the workspace.",
                "parameters": GREP.parameters,
            },
        }
    ]
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "grep",
        "arguments": '{"pattern": "x"}',
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c0", "content": "no matches"}
    assert body["seed"] == 7
    assert body == result.raw_request
    assert API_KEY not in json.dumps(result.raw_request) + json.dumps(result.raw_response)


def test_json_mode_defaults_by_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request = ModelRequest(
        model="m", messages=[Message(role="user", content="x")], json_schema=schema
    )

    official = OpenAIModel("openai/gpt-4o", "gpt-4o", api_key=API_KEY)
    body = official.request_body(request)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": False},
    }
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body

    local = OpenAIModel("openai/m", "m", base_url="http://127.0.0.1:8080/v1")
    body = local.request_body(request)
    assert body["response_format"] == {"type": "json_object", "schema": schema}
    assert body["max_tokens"] == 512

    forced = OpenAIModel(
        "openai/m", "m", base_url="http://127.0.0.1:8080/v1", json_mode="json_schema"
    )
    assert forced.request_body(request)["response_format"]["type"] == "json_schema"


def test_rate_limit_with_retry_after_is_retried(fresh: FakeChatServer) -> None:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}}
    ok = completion(
        {"role": "assistant", "content": "fine"}, {"prompt_tokens": 3, "completion_tokens": 1}
    )
    fresh.replies += [(429, error, {"retry-after-ms": "5"}), (200, ok, {})]
    model = get_model("openai/gpt-4o-mini", base_url=fresh.url, api_key=API_KEY, retry=FAST_RETRY)
    slept: list[float] = []
    model.sleep = slept.append
    result = model.complete(ModelRequest(model="m", messages=[Message(role="user", content="hi")]))
    assert (result.text, result.attempts, len(fresh.received)) == ("fine", 2, 2)
    assert slept == [0.005]  # the server's retry-after-ms, under the 0.01 s cap


def test_auth_error_is_fatal(fresh: FakeChatServer) -> None:
    error = {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}
    fresh.replies += [(401, error, {}), (401, error, {})]
    model = get_model("openai/gpt-4o-mini", base_url=fresh.url, api_key=API_KEY, retry=FAST_RETRY)
    with pytest.raises(ModelCallError) as info:
        model.complete(ModelRequest(model="m", messages=[Message(role="user", content="hi")]))
    assert (info.value.kind, info.value.attempts, len(fresh.received)) == ("fatal", 1, 1)
    assert API_KEY not in str(info.value)


def test_base_url_without_key_uses_placeholder(
    fresh: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ok = completion(
        {"role": "assistant", "content": "hi"}, {"prompt_tokens": 1, "completion_tokens": 1}
    )
    fresh.replies.append((200, ok, {}))
    model = get_model("openai/anything", base_url=fresh.url)
    result = model.complete(ModelRequest(model="m", messages=[Message(role="user", content="x")]))
    assert result.text == "hi"
    assert fresh.received[0]["headers"]["authorization"] == "Bearer sk-no-key"
    # Not in the price table: the cost is unknown, not zero.
    assert result.cost_usd is None
    assert result.price_table_version == "2026-11-01"
