"""The gateway server: one metaeval model behind the Anthropic, OpenAI and Gemini HTTP APIs.

Built on the standard library's ``http.server`` (threaded, HTTP/1.1 keep-alive, chunked SSE):
it needs no dependency, keeps the per-request path to a parse, a model call and a few writes
(well under the 2 ms budget; see bench/gateway_overhead.py), and lets every SSE event be
written to the socket the moment it exists. It listens on 127.0.0.1 only, and optionally on a
Unix socket, which is how sandboxed CLIs reach it (see `metaeval.gateway.relay`).

Routes: ``HEAD|GET /``; ``GET /v1/models`` (Anthropic shape when an ``anthropic-version``
header is sent, else OpenAI); ``POST /v1/messages``, ``/v1/messages/count_tokens``;
``POST /v1/responses``; ``POST /v1/chat/completions``; ``GET /v1beta/models``;
``POST /v1beta/models/M:generateContent|streamGenerateContent|countTokens``. The ``/v1``
prefix is optional for the OpenAI routes.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import queue
import socket
import socketserver
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from metaeval.gateway import anthropic_api, chat_api, gemini_api, responses_api
from metaeval.gateway.actions import (
    count_tokens,
    fit_to_context,
    from_json_action,
    request_text,
    settled_usage,
    wants_json_actions,
    with_json_actions,
)
from metaeval.gateway.wire import Call, WireError, dumps
from metaeval.models.base import Model
from metaeval.models.types import ModelRequest, ModelResult, Usage

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
MAX_BODY_BYTES = 64 * 1024 * 1024
STREAM_FLUSH_BYTES = 64 * 1024
MODEL_TIME_HEADER = "X-Metaeval-Model-Seconds"  # the model's share of a response's latency

APIS: dict[str, Any] = {
    "anthropic": anthropic_api,
    "responses": responses_api,
    "chat": chat_api,
    "gemini": gemini_api,
}


class ExchangeLog:
    """Every exchange, in memory and (when a path is given) appended to a redacted JSONL file.

    File writes happen on a background thread, so fsync never sits on a request's path.
    """

    def __init__(self, path: Path | None = None):
        self.path = path
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        if path is not None:
            from metaeval.records.jsonl import JsonlWriter

            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._writer = JsonlWriter(path)
            self._thread = threading.Thread(target=self._drain, name="gateway-log", daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            request = item.get("request")
            if isinstance(request, ModelRequest):
                item = {**item, "request": request.model_dump(mode="json", exclude_defaults=True)}
            self._writer.append(item)

    def begin(self, record: dict[str, Any]) -> None:
        """List a record now (it is filled in as the exchange goes on), so that whoever got
        the response can already find it."""
        with self._lock:
            record["seq"] = len(self.records) + 1
            self.records.append(record)

    def finish(self, record: dict[str, Any]) -> None:
        """The exchange is over: write its record to the file."""
        if self._thread is not None:
            self._queue.put(record)

    def add(self, record: dict[str, Any]) -> None:
        self.begin(record)
        self.finish(record)

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._writer.close()
            self._thread = None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.records)

    def for_client(self, tag: str) -> list[dict[str, Any]]:
        """The records of one client (one run's socket)."""
        return [r for r in self.snapshot() if r.get("client") == tag]

    def usage(self, client: str | None = None) -> Usage:
        """Total usage the gateway reported over completions (of one client, if given)."""
        total = Usage()
        records = self.snapshot() if client is None else self.for_client(client)
        for record in records:
            if record.get("kind") == "completion" and record.get("usage"):
                total = total + Usage(**record["usage"])
        return total


class Gateway:
    """Serves `model` on 127.0.0.1 (`port` 0 picks a free one) and optionally a Unix socket.

    Use as a context manager, or `start()` / `stop()`. `exchanges` is the log of every call.
    """

    def __init__(
        self,
        model: Model,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        unix_socket: Path | None = None,
        record_path: Path | None = None,
        served_names: list[str] | None = None,
    ):
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the gateway listens on loopback only, not {host!r}")
        self.model = model
        self.host = host
        self.port = port
        self.unix_socket = Path(unix_socket) if unix_socket else None
        self.exchanges = ExchangeLog(record_path)
        self.served_names = served_names or [model.name]
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._clients: dict[str, tuple[socketserver.BaseServer, threading.Thread]] = {}
        self._clients_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Gateway:
        handler = _handler_for(self)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        tcp = _TCPServer((self.host, self.port), handler, family)
        self.port = tcp.server_address[1]
        self._servers.append(tcp)
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_socket.unlink()
            self._servers.append(_UnixServer(str(self.unix_socket), handler))
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def open_socket(self, tag: str, path: Path | None) -> str:
        """A listener whose exchanges are recorded with ``client = tag``: a Unix socket at
        `path`, or (None) a fresh TCP port on the gateway's host. Returns its address."""
        handler = _handler_for(self, tag)
        server: socketserver.BaseServer
        if path is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            server = _TCPServer((self.host, 0), handler, family)
            address = f"http://{self.host}:{server.server_address[1]}"
        else:
            server = _UnixServer(str(path), handler)
            address = str(path)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        thread.start()
        with self._clients_lock:
            self._clients[tag] = (server, thread)
        return address

    def close_socket(self, tag: str) -> None:
        with self._clients_lock:
            entry = self._clients.pop(tag, None)
        if entry is not None:
            server, thread = entry
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

    def stop(self) -> None:
        for tag in list(self._clients):
            self.close_socket(tag)
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_socket.unlink()
        self.exchanges.close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- completions -----------------------------------------------------------------------

    def complete(self, call: Call) -> tuple[ModelResult, Usage, str, float]:
        """(result, usage reported, usage source, model seconds) for a parsed call."""
        request = call.request
        native = not wants_json_actions(self.model, request)
        guide = 0
        if not native:  # room for the action guide added to the system text after fitting
            bare = with_json_actions(request.model_copy(update={"messages": []}))
            guide = count_tokens(self.model, bare.messages[0].content)[0]
        sent, fitted = fit_to_context(self.model, request, guide)
        if fitted is not None:
            call.extra["fitted"] = fitted
        if not native:
            sent = with_json_actions(sent)
        started = time.perf_counter()
        result = self.model.complete(sent)
        model_s = time.perf_counter() - started
        if not native:
            result = from_json_action(result)
        usage, source = settled_usage(self.model, sent, result)
        return result, usage, source, model_s


class _TCPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, family: int):
        self.address_family = family
        super().__init__(address, handler)


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _handler_for(gateway: Gateway, tag: str | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.gateway = gateway
    Handler.tag = tag
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "metaeval-gateway"
    sys_version = ""
    gateway: Gateway
    tag: str | None = None

    def setup(self) -> None:
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def address_string(self) -> str:
        return str(self.client_address[0]) if self.client_address else "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # every exchange is in the gateway's log instead

    # -- plumbing --------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data: bytes | bytearray = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY_BYTES:
                    raise WireError("request body too large")
        else:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                raise WireError("request body too large")
            data = self.rfile.read(length) if length else b""
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "deflate":
            data = zlib.decompress(data)
        elif encoding not in ("", "identity"):
            raise WireError(f"unsupported Content-Encoding {encoding!r}")
        return bytes(data)

    def _json_body(self) -> dict[str, Any]:
        raw = self._body()
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise WireError(f"request body is not JSON ({exc})") from exc
        if not isinstance(body, dict):
            raise WireError("request body must be a JSON object")
        return body

    def _send_json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> int:
        data = dumps(obj).encode()
        head = [f"HTTP/1.1 {status} {_reason(status)}", "Content-Type: application/json"]
        head += [f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in (extra or {}).items())]
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
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        names = self.gateway.served_names
        if path in ("", "/health"):
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
        record: dict[str, Any] = {"api": api, "path": path, "time": time.time()}
        if self.tag is not None:
            record["client"] = self.tag
        record["kind"] = "pending"
        self.gateway.exchanges.begin(record)
        try:
            if module is None or api is None:
                raise LookupError(f"no route POST {path}")
            body = self._json_body()
            if action == "count":
                self._count(api, body, record, path)
            else:
                self._generate(module, api, body, path, query, record)
        except LookupError as exc:
            self.close_connection = True  # the body was not read
            record.update(kind="error", status=404, error=str(exc))
            self._send_json(404, {"error": {"message": str(exc)}})
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
        result, usage, source, model_s = gateway.complete(call)
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
        timing = {MODEL_TIME_HEADER: f"{model_s:.6f}"}
        if not call.stream:
            record["bytes"] = self._send_json(200, module.render(call, result, usage), timing)
        elif api == "gemini" and "alt=sse" not in query:
            chunks = [json.loads(c[len(b"data: ") :]) for c in module.stream(call, result, usage)]
            record["bytes"] = self._send_json(200, chunks, timing)
        else:
            record["bytes"] = self._send_stream(
                module.stream(call, result, usage), "text/event-stream", timing
            )


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
    return {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}.get(
        status, "Status"
    )


def serve_forever(gateway: Gateway, on_ready: Callable[[Gateway], None] | None = None) -> None:
    """Run `gateway` until interrupted (Ctrl-C / SIGTERM)."""
    import signal

    gateway.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if on_ready is not None:
        on_ready(gateway)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        gateway.stop()
