"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests (a real HTTP socket).

It speaks the documented Chat Completions wire format (POST /v1/chat/completions returning a
`chat.completion` object with `choices[0].message` and `usage`; GET /v1/models), so clients
such as litellm and the openai SDK talk to it exactly as to vLLM or llama.cpp. The reply is
chosen by `reply(messages) -> str`; every request body is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[list[dict[str, Any]]], str]


class OpenAIStub:
    """Start with `with OpenAIStub(reply) as stub:`; `stub.base_url` ends in /v1."""

    def __init__(self, reply: Reply, model: str = "stub", known_only: bool = False):
        self.reply = reply
        self.model = model
        self.known_only = known_only  # another model name gets 404 model_not_found
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # of each chat request, as received
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.requests)

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        text = self.reply(messages)
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
        completion_tokens = len(text.split())
        return {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200, {"object": "list", "data": [{"id": stub.model, "object": "model"}]}
                    )
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                if stub.known_only and body.get("model") != stub.model:
                    error = {"message": f"The model `{body.get('model')}` does not exist",
                             "type": "invalid_request_error", "code": "model_not_found"}  # fmt: skip
                    self._send(404, {"error": error})
                    return
                with stub._lock:
                    stub.requests.append(body)
                    stub.headers.append(dict(self.headers.items()))
                self._send(200, stub._completion(body))

        return Handler
