"""The gateway server: one metaeval model behind the Anthropic, OpenAI and Gemini HTTP APIs.

Built on the standard library's ``http.server`` (threaded, HTTP/1.1 keep-alive, chunked SSE):
it needs no dependency, keeps the per-request path to a parse, a model call and a few writes
(well under the 2 ms budget; see bench/gateway_overhead.py), and lets every SSE event be
written to the socket the moment it exists. It listens on 127.0.0.1 only, and optionally on a
Unix socket, which is how sandboxed CLIs reach it (see `metaeval.gateway.relay`).

Every listener needs a token (`metaeval.gateway.access`: loopback ``Host``, no web pages,
the token as the API key, JSON bodies) and reads requests within bounds of time and size
(the loopback kit, `metaeval.loopback`). The gateway's own listeners take `Gateway.token`; each
listener `open_socket` adds for one run has a token of its own.

Routes: ``HEAD|GET /``; ``GET /v1/models`` (Anthropic shape when an ``anthropic-version``
header is sent, else OpenAI); ``POST /v1/messages``, ``/v1/messages/count_tokens``;
``POST /v1/responses``; ``POST /v1/chat/completions``; ``GET /v1beta/models``;
``POST /v1beta/models/M:generateContent|streamGenerateContent|countTokens``. The ``/v1``
prefix is optional for the OpenAI routes.
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from metaeval.gateway.actions import (
    count_tokens,
    fit_to_context,
    from_json_action,
    settled_usage,
    wants_json_actions,
    with_json_actions,
)
from metaeval.gateway.exchange_log import ExchangeLog
from metaeval.gateway.handler import handler_for
from metaeval.gateway.keepalive import HEARTBEAT_S, STREAM_COMMIT_S
from metaeval.gateway.wire import Call
from metaeval.loopback.access import LOOPBACK_HOSTS, MIN_TOKEN_CHARS, new_token
from metaeval.loopback.framing import DEFAULT_TIMEOUT_S
from metaeval.loopback.server import LISTEN_BACKLOG, LoopbackServer
from metaeval.models.base import Model
from metaeval.models.types import ModelResult, Usage
from metaeval.records.redact import add_secret

MAX_BODY_BYTES = 32 * 1024 * 1024  # after decoding; the Anthropic Messages API's own limit


class Gateway:
    """Serves `model` on 127.0.0.1 (`port` 0 picks a free one, None opens no TCP listener)
    and optionally a Unix socket, to holders of `token` (default: a fresh random one).

    Use as a context manager, or `start()` / `stop()`. `exchanges` is the log of every call;
    `refused` counts the requests turned away before their body was read, by status.
    `timeout_s` bounds how long a request may take to arrive (and an idle connection may
    wait); `max_body_bytes` how large its decoded body may be. A streamed answer not ready
    within `stream_commit_s` gets its headers then and a heartbeat every `heartbeat_s`
    (`metaeval.gateway.keepalive`).
    """

    def __init__(
        self,
        model: Model,
        *,
        host: str = "127.0.0.1",
        port: int | None = 0,
        unix_socket: Path | None = None,
        record_path: Path | None = None,
        served_names: list[str] | None = None,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        stream_commit_s: float = STREAM_COMMIT_S,
        heartbeat_s: float = HEARTBEAT_S,
    ):
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the gateway listens on loopback only, not {host!r}")
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"a gateway token needs {MIN_TOKEN_CHARS} characters or more")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s!r}")
        self.model = model
        self.host = host
        self.port = port
        self.token = token or new_token()
        add_secret(self.token)  # its encoded forms are scrubbed too, not only its shape
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        self.stream_commit_s = stream_commit_s
        self.heartbeat_s = heartbeat_s
        self.refused: Counter[int] = Counter()
        self._refused_lock = threading.Lock()
        self.unix_socket = Path(unix_socket) if unix_socket else None
        self.exchanges = ExchangeLog(record_path)
        self.served_names = served_names or [model.name]
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._clients: dict[str, tuple[socketserver.BaseServer, threading.Thread]] = {}
        self._clients_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Gateway:
        if self.port is not None:
            tcp = self._tcp_server(self.port, self.token)
            self.port = tcp.server_address[1]
            self._servers.append(tcp)
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_socket.unlink()
            handler = handler_for(self, None, self.token, None)
            self._servers.append(_UnixServer(str(self.unix_socket), handler))
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _tcp_server(self, port: int, token: str, tag: str | None = None) -> LoopbackServer:
        handler = handler_for(self, tag, token, port)
        server = LoopbackServer((self.host, port), handler)
        handler.port = server.server_address[1]  # the one port 0 picked
        return server

    def open_socket(self, tag: str, path: Path | None) -> tuple[str, str]:
        """A listener whose exchanges are recorded with ``client = tag``: a Unix socket at
        `path`, or (None) a fresh TCP port on the gateway's host. Returns its address and
        the fresh token it takes."""
        token = new_token()
        server: socketserver.BaseServer
        if path is None:
            server = self._tcp_server(0, token, tag)
            host = f"[{self.host}]" if ":" in self.host else self.host
            address = f"http://{host}:{server.server_address[1]}"
        else:
            server = _UnixServer(str(path), handler_for(self, tag, token, None))
            address = str(path)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        thread.start()
        with self._clients_lock:
            self._clients[tag] = (server, thread)
        return address, token

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
        if self.port is None:
            raise RuntimeError("this gateway has no TCP listener (port=None)")
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


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG


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
