"""One gateway request: admission (token, loopback host), routing to an API module, the model
call and the JSON or SSE answer (see `metaeval.gateway.server` for the listeners)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from metaeval.gateway import access, anthropic_api, chat_api, gemini_api, responses_api
from metaeval.gateway.actions import (
    count_tokens,
    request_text,
)
from metaeval.gateway.keepalive import HEARTBEATS, Background, stream_error
from metaeval.gateway.wire import WireError, dumps
from metaeval.loopback.access import Refused
from metaeval.loopback.framing import FramingError, peer_closed
from metaeval.loopback.server import BoundedHandler

if TYPE_CHECKING:
    from metaeval.gateway.server import Gateway
    from metaeval.models.types import ModelResult, Usage

    Completed = tuple[ModelResult, Usage, str, float]  # what `Gateway.complete` returns

STREAM_FLUSH_BYTES = 64 * 1024
MODEL_TIME_HEADER = "X-Metaeval-Model-Seconds"  # the model's share of a response's latency

HEALTH_PATHS = ("", "/health")  # with HEAD: the probes that need no token

APIS: dict[str, Any] = {
    "anthropic": anthropic_api,
    "responses": responses_api,
    "chat": chat_api,
    "gemini": gemini_api,
}


def handler_for(gateway: Gateway, tag: str | None, token: str, port: int | None) -> type[_Handler]:
    """A handler class for one listener: its client tag, token and port (None: Unix)."""

    class Handler(_Handler):
        pass

    Handler.gateway = gateway
    Handler.timeout_s = gateway.timeout_s
    Handler.max_body_bytes = gateway.max_body_bytes
    Handler.tag = tag
    Handler.token = token
    Handler.port = port
    return Handler


class _Handler(BoundedHandler):
    protocol_version = "HTTP/1.1"
    server_version = "metaeval-gateway"
    sys_version = ""
    challenge = 'Bearer realm="metaeval-gateway"'
    gateway: Gateway
    tag: str | None = None
    token: str
    port: int | None = None
    api_module: Any = None  # the API whose error shape an answer takes (None: OpenAI chat)

    def address_string(self) -> str:
        return str(self.client_address[0]) if self.client_address else "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # every exchange is in the gateway's log instead

    # -- plumbing --------------------------------------------------------------------------

    def _admit(self, needs_token: bool, module: Any = None) -> bool:
        """Check the request (see `metaeval.gateway.access`) before its body is read; a
        refused one is answered, counted in `Gateway.refused`, and its connection closed."""
        query = self.path.partition("?")[2]
        try:
            access.check(
                self.headers,
                query,
                token=self.token,
                port=self.port,
                needs_token=needs_token,
                json_body=self.command == "POST",
            )
        except Refused as exc:
            with self.gateway._refused_lock:
                self.gateway.refused[exc.status] += 1
            self.api_module = module
            self.refuse(exc)
            return False
        return True

    def send_problem(self, status: int, message: str, extra: dict[str, str]) -> None:
        self._send_json(status, (self.api_module or chat_api).error_body(status, message), extra)

    def handle_expect_100(self) -> bool:
        """Promise to read a body only to a client that may send one."""
        path = self.path.partition("?")[0]
        if not self._admit(True, APIS.get(_route(path)[0] or "")):
            return False
        return super().handle_expect_100()

    def _json_body(self) -> dict[str, Any]:
        raw = self.body()
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise WireError(f"request body is not JSON ({exc})") from exc
        except RecursionError as exc:
            raise WireError("request body is JSON nested too deep") from exc
        if not isinstance(body, dict):
            raise WireError("request body must be a JSON object")
        return body

    def _send_json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> int:
        data = dumps(obj).encode()
        head = [f"HTTP/1.1 {status} {_reason(status)}", "Content-Type: application/json"]
        head += [f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in (extra or {}).items())]
        if self.close_connection:
            head.append("Connection: close")
        if self.command == "HEAD":  # the answer to HEAD has no body
            data = b""
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        return len(data)

    def _send_stream(
        self, chunks: Iterator[bytes], content_type: str, extra: dict[str, str] | None = None
    ) -> int:
        head = [
            "HTTP/1.1 200 OK",
            f"Content-Type: {content_type}",
            "Cache-Control: no-cache",
            "Transfer-Encoding: chunked",
            *(f"{k}: {v}" for k, v in (extra or {}).items()),
        ]
        # Events that exist together go out in one write (one chunk each in the body); the
        # generator yields an event as soon as it is produced, so nothing waits for later ones.
        sent = 0
        pending = bytearray(("\r\n".join(head) + "\r\n\r\n").encode())
        for chunk in chunks:
            pending += b"%x\r\n%s\r\n" % (len(chunk), chunk)
            sent += len(chunk)
            if len(pending) >= STREAM_FLUSH_BYTES:
                self.wfile.write(pending)
                pending.clear()
        self.wfile.write(bytes(pending) + b"0\r\n\r\n")
        return sent

    # -- verbs -----------------------------------------------------------------------------

    def do_HEAD(self) -> None:  # noqa: N802
        if not self._admit(needs_token=False):
            return
        self.end_of_head()
        close = b"Connection: close\r\n" if self.close_connection else b""
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + close + b"\r\n")

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        if not self._admit(needs_token=path not in HEALTH_PATHS):
            return
        self.end_of_head()
        names = self.gateway.served_names
        if path in HEALTH_PATHS:
            self._send_json(200, {"status": "ok", "model": self.gateway.model.name})
        elif path in ("/v1/models", "/models"):
            if self.headers.get("anthropic-version"):
                self._send_json(200, anthropic_api.models_list(names))
            else:
                self._send_json(200, chat_api.models_list(names))
        elif path in ("/v1beta/models", "/v1/models"):
            self._send_json(200, gemini_api.models_list(names))
        else:
            self._send_json(404, {"error": {"message": f"no route GET {path}"}})

    def do_POST(self) -> None:  # noqa: N802
        started = time.perf_counter()
        path, _, query = self.path.partition("?")
        api, action = _route(path)
        module = APIS.get(api or "")
        if not self._admit(True, module):
            return
        record: dict[str, Any] = {"api": api, "path": path, "time": time.time()}
        if self.tag is not None:
            record["client"] = self.tag
        record["kind"] = "pending"
        self.gateway.exchanges.begin(record)
        try:
            if module is None or api is None:
                raise _NoRoute(f"no route POST {path}")
            body = self._json_body()
            if action == "count":
                self._count(api, body, record, path)
            else:
                self._generate(module, api, body, path, query, record)
        except _NoRoute as exc:
            self.close_connection = self.unread_input = True  # the body was not read
            record.update(kind="error", status=404, error=str(exc))
            self._send_json(404, {"error": {"message": str(exc)}})
        except FramingError as exc:  # where the next request would start is unknown
            record.update(kind="error", status=exc.status, error=str(exc))
            self.api_module = module
            self.refuse(exc)
        except WireError as exc:
            record.update(kind="error", status=400, error=str(exc))
            self._send_json(400, (module or chat_api).error_body(400, str(exc)))
        except (BrokenPipeError, ConnectionResetError) as exc:
            record.update(kind="error", status=499, error=f"client went away: {exc}")
        except Exception as exc:  # the model failed: tell the client, do not retry
            message = f"{type(exc).__name__}: {exc}"
            record.update(kind="error", status=500, error=message)
            with contextlib.suppress(OSError):
                err = (module or chat_api).error_body(500, message)
                self._send_json(500, err, {"x-should-retry": "false"})
        record["gateway_s"] = time.perf_counter() - started
        if "model_s" in record:
            record["overhead_s"] = record["gateway_s"] - record["model_s"]
        self.gateway.exchanges.finish(record)

    def _count(self, api: str, body: dict[str, Any], record: dict[str, Any], path: str) -> None:
        model = self.gateway.model
        if api == "anthropic":
            request = anthropic_api.parse({**body, "max_tokens": 1}, model.name).request
        else:
            request = gemini_api.count_request(body, model.name)
        tokens, method = count_tokens(model, request_text(request))
        record.update(kind="count_tokens", status=200, input_tokens=tokens, method=method)
        if api == "anthropic":
            self._send_json(200, {"input_tokens": tokens})
        else:
            self._send_json(200, {"totalTokens": tokens})

    def _generate(
        self,
        module: Any,
        api: str,
        body: dict[str, Any],
        path: str,
        query: str,
        record: dict[str, Any],
    ) -> None:
        gateway = self.gateway
        if api == "gemini":
            requested = path.rsplit("/", 1)[-1].split(":", 1)[0]
            streaming = path.endswith(":streamGenerateContent")
            call = gemini_api.parse(body, gateway.model.name, requested, streaming)
        else:
            call = module.parse(body, gateway.model.name)
        record.update(
            kind="completion",
            requested_model=call.requested_model,
            model=gateway.model.name,
            stream=call.stream,
            request=call.request,  # a ModelRequest; dumped when written to the file
        )
        asked = requested_reasoning(body)
        if asked:
            record["reasoning"] = asked
        sse = call.stream and not (api == "gemini" and "alt=sse" not in query)
        if not sse:
            outcome = gateway.complete(call)
        else:  # headers held back only so long (see `metaeval.gateway.keepalive`)
            pending = Background(lambda: gateway.complete(call))
            if not pending.wait(gateway.stream_commit_s):
                self._stream_late(module, api, call, record, pending)
                return
            outcome = pending.result()
        result, usage, _, model_s = outcome
        self._record_result(record, call, outcome)
        if peer_closed(self.connection):  # nobody to answer: say so, not 200
            record.update(kind="error", status=499, error="client went away before the answer")
            self.close_connection = True
            return
        timing = {MODEL_TIME_HEADER: f"{model_s:.6f}"}
        if not call.stream:
            record["bytes"] = self._send_json(200, module.render(call, result, usage), timing)
        elif not sse:
            chunks = [json.loads(c[len(b"data: ") :]) for c in module.stream(call, result, usage)]
            record["bytes"] = self._send_json(200, chunks, timing)
        else:
            record["bytes"] = self._send_stream(
                module.stream(call, result, usage), "text/event-stream", timing
            )

    def _record_result(self, record: dict[str, Any], call: Any, outcome: Completed) -> None:
        result, usage, source, model_s = outcome
        record.update(
            model_s=model_s,
            usage=usage.model_dump(),
            usage_source=source,
            response={
                "text": result.text,
                "tool_calls": [c.model_dump(mode="json") for c in result.tool_calls],
                "finish_reason": result.finish_reason,
            },
            cost_usd=result.cost_usd,
            status=200,
        )
        if "fitted" in call.extra:
            record["fitted"] = call.extra["fitted"]

    def _stream_late(
        self,
        module: Any,
        api: str,
        call: Any,
        record: dict[str, Any],
        pending: Background[Completed],
    ) -> None:
        """The model is slow: headers now, a heartbeat while it works, then its answer (or its
        error, inside the stream)."""
        head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache"]
        head.append("Transfer-Encoding: chunked")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
        record["headers_early"] = True
        beat = HEARTBEATS[api]
        while not pending.wait(self.gateway.heartbeat_s):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(beat), beat))
        try:
            outcome = pending.result()
        except Exception as exc:  # the model failed after the 200 went out
            message = f"{type(exc).__name__}: {exc}"
            record.update(kind="error", status=500, error=message)
            error = stream_error(api, message)
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(error), error))
            return
        self._record_result(record, call, outcome)
        result, usage, _, _ = outcome
        sent = 0
        for chunk in module.stream(call, result, usage):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        self.wfile.write(b"0\r\n\r\n")
        record["bytes"] = sent


REASONING_KEYS = ("reasoning", "reasoning_effort", "thinking", "output_config")


def requested_reasoning(body: dict[str, Any]) -> dict[str, Any]:
    """The reasoning settings a client sent (OpenAI `reasoning`/`reasoning_effort`, Anthropic
    `thinking`/`output_config`, Gemini `generationConfig.thinkingConfig`), kept in the exchange
    record so a test or a reader can see which effort the agent ran at; the model ignores them."""
    asked = {k: body[k] for k in REASONING_KEYS if k in body}
    config = body.get("generationConfig")
    if isinstance(config, dict) and "thinkingConfig" in config:
        asked["thinkingConfig"] = config["thinkingConfig"]
    return asked


class _NoRoute(Exception):
    """A POST to a path the gateway does not serve (404; a model's KeyError stays a 500)."""


def _route(path: str) -> tuple[str | None, str]:
    """(api, action) of a POST path; action is 'generate' or 'count'."""
    path = path.rstrip("/")
    if path.startswith("/v1beta/models/") or (path.startswith("/v1/models/") and ":" in path):
        verb = path.rsplit(":", 1)[-1] if ":" in path else ""
        if verb in ("generateContent", "streamGenerateContent"):
            return "gemini", "generate"
        if verb == "countTokens":
            return "gemini", "count"
        return None, ""
    if path in ("/v1/messages", "/messages"):
        return "anthropic", "generate"
    if path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
        return "anthropic", "count"
    if path in ("/v1/responses", "/responses"):
        return "responses", "generate"
    if path in ("/v1/chat/completions", "/chat/completions"):
        return "chat", "generate"
    return None, ""


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"
