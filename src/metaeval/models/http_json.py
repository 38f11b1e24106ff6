"""JSON over HTTP on a shared pool of kept-alive connections (standard library only).

The OpenAI-compatible provider posts Chat Completions bodies through this instead of the
openai SDK when it can: importing the SDK costs about a second per process and each call
spends milliseconds of CPU in its request transforms, which at high concurrency is the
harness's own ceiling. Errors keep the shape the retry classifier reads: an HTTP error
status is an `HTTPStatusError` with `status_code` and `headers`; a lost connection or a
timeout is the standard library's ConnectionError / TimeoutError.

Connections are shared by all calling threads, not owned by one: a run prepares up to twice
`--concurrency` cells on their own threads, but at most `--concurrency` calls are out at once,
so a pool needs half the connections (and TLS handshakes) a connection per thread would, and a
cell prepared ahead sends on the connection a finished call just gave back.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.request
from typing import Any
from urllib.parse import urlsplit

ERROR_BODY_LIMIT = 2000


class HTTPStatusError(Exception):
    """The server answered with an error status (4xx/5xx)."""

    def __init__(self, status_code: int, message: str, headers: dict[str, str], body: Any):
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers
        self.body = body


def uses_proxy(url: str) -> bool:
    """True when the environment routes `url` through a proxy (the SDK path handles those)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


class JsonHTTPClient:
    """POSTs JSON to `base_url` + path over a pool of persistent connections: a call takes
    the most recently returned idle connection (or opens one) and gives it back after a
    complete answer; a connection in doubt is closed, never returned."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout_s: float | None):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self.headers.update(headers)
        self.timeout_s = timeout_s
        self._idle: list[http.client.HTTPConnection] = []
        self._idle_lock = threading.Lock()
        self._ssl = ssl.create_default_context() if self.scheme == "https" else None

    def _connect(self) -> http.client.HTTPConnection:
        if self._ssl is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout_s, context=self._ssl
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection (True: it served a call before) or a new one (False)."""
        with self._idle_lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(), False

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._idle_lock:
            self._idle.append(conn)

    def idle_connections(self) -> int:
        """Connections waiting in the pool for the next call."""
        with self._idle_lock:
            return len(self._idle)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The decoded JSON answer to POST `path`; HTTPStatusError on an error status."""
        payload = json.dumps(body).encode()
        conn, reused = self._take()
        try:
            status, headers, data = self._exchange(conn, path, payload)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            conn.close()
            if not reused:
                raise
            # the server closed a kept-alive connection while it sat idle: one fresh try
            conn = self._connect()
            try:
                status, headers, data = self._exchange(conn, path, payload)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            conn.close()
            raise
        if conn.sock is not None:  # the server kept it open: the next call may use it
            self._give_back(conn)
        text = data.decode("utf-8", "replace")
        if status >= 400:
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                parsed = text[:ERROR_BODY_LIMIT]
            raise HTTPStatusError(
                status, f"HTTP {status} from {path}: {text[:ERROR_BODY_LIMIT]}", headers, parsed
            )
        try:
            answer = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: the answer is not JSON: {text[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise ValueError(f"{path}: the answer is not a JSON object: {text[:200]!r}")
        return answer

    def _exchange(
        self, conn: http.client.HTTPConnection, path: str, payload: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        conn.request("POST", self.prefix + path, body=payload, headers=self.headers)
        response = conn.getresponse()
        data = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        if response.will_close:
            conn.close()
        return response.status, headers, data
