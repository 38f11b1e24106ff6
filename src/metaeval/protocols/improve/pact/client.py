"""A PACT client over http.client: typed calls, classified errors, a deadline on every call.

Every failure raises `PactError(kind, detail)`:
  "unreachable"  the connection was refused or reset, or the server closed it without an
                 answer: the server is not there (any more) or died while handling the call;
  "timeout"      no complete answer within the call's timeout;
  "protocol"     a non-200 status other than 500 (400 bad request, 404, 409 unknown episode,
                 ...), a body cut short, or a body that is not the expected JSON shape;
  "policy"       status 500: the server's policy raised (detail carries its message).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from metaeval.errors import MetaevalError
from metaeval.protocols.improve.pact.protocol import (
    ActRequest,
    ActResponse,
    Describe,
    Health,
    ResetRequest,
    ResetResponse,
)

ErrorKind = Literal["unreachable", "timeout", "protocol", "policy"]
T = TypeVar("T", bound=BaseModel)

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class PactError(MetaevalError):
    """A failed PACT call. `kind` is unreachable | timeout | protocol | policy; `status` is
    the HTTP status when one was received; `error` the server's error kind, if it sent one."""

    def __init__(
        self, kind: ErrorKind, detail: str, *, status: int | None = None, error: str | None = None
    ):
        self.kind = kind
        self.detail = detail
        self.status = status
        self.error = error
        super().__init__(f"PACT {kind}: {detail}")


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (a server in a network-less sandbox, published by its relay)."""

    def __init__(self, path: str, timeout: float, host: str = "localhost", port: int = 80):
        super().__init__(host, port, timeout=timeout)  # the Host the server sees: its own
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class PactClient:
    """Talks to one PACT server at `base_url` (http://host:port[/prefix]).

    `timeout_s` bounds every call end to end (connect, send, wait, read) unless a call
    passes its own; `health_timeout_s` bounds `health()`. One connection per call. With
    `unix_socket`, every call goes over that socket instead of TCP (`base_url` then names the
    server's address inside its sandbox, for messages).
    """

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 300.0,
        *,
        health_timeout_s: float = 5.0,
        unix_socket: str | None = None,
        token: str | None = None,
    ):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"PACT base_url must be http(s)://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self.health_timeout_s = health_timeout_s
        self.unix_socket = unix_socket
        self.token = token  # sent as `Authorization: Bearer` (metaeval's server checks it)

    def __repr__(self) -> str:
        return f"PactClient({self.base_url!r})"

    # -- typed calls ---------------------------------------------------------------------------

    def health(self, path: str = "/health", timeout_s: float | None = None) -> bool:
        """True when the server answers 200 with {"status": "ok"}; never raises."""
        try:
            status, data = self._call("GET", path, None, timeout_s or self.health_timeout_s)
        except PactError:
            return False
        if status != 200:
            return False
        try:
            Health.model_validate(data)
        except ValidationError:
            return False
        return True

    def describe(self, path: str = "/describe", timeout_s: float | None = None) -> Describe:
        return self._typed("GET", path, None, Describe, timeout_s)

    def reset(self, request: ResetRequest, timeout_s: float | None = None) -> ResetResponse:
        return self._typed("POST", "/reset", request, ResetResponse, timeout_s)

    def act(self, request: ActRequest, timeout_s: float | None = None) -> ActResponse:
        response = self._typed("POST", "/act", request, ActResponse, timeout_s)
        if response.episode_id != request.episode_id:
            raise PactError(
                "protocol",
                f"/act answered for episode {response.episode_id!r}, "
                f"asked for {request.episode_id!r}",
            )
        return response

    # -- plumbing ------------------------------------------------------------------------------

    def _typed(
        self,
        method: str,
        path: str,
        body: BaseModel | None,
        model: type[T],
        timeout_s: float | None,
    ) -> T:
        payload = body.model_dump(mode="json") if body is not None else None
        status, data = self._call(method, path, payload, timeout_s or self.timeout_s)
        if status != 200:
            error, detail = _error_fields(data)
            where = f"{method} {path}"
            if status == 500:
                raise PactError("policy", f"{where}: {detail}", status=status, error=error)
            raise PactError(
                "protocol", f"{where}: HTTP {status}: {detail}", status=status, error=error
            )
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise PactError(
                "protocol", f"{method} {path}: response is not a {model.__name__}: {exc}"
            ) from None

    def _call(self, method: str, path: str, payload: Any, timeout_s: float) -> tuple[int, Any]:
        """One request; (status, parsed JSON or None). Raises PactError on transport faults."""
        deadline = time.monotonic() + timeout_s
        where = f"{method} {self.base_url}{path}"
        conn: http.client.HTTPConnection
        if self.unix_socket is not None:
            conn = _UnixHTTPConnection(self.unix_socket, timeout_s, self._host, self._port)
        elif self._scheme == "https":
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout_s)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {"Accept": "application/json", "Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                _set_remaining(conn, deadline)
                response = conn.getresponse()
                status = response.status
                raw = _read_body(conn, response, deadline)
            except TimeoutError as exc:
                raise PactError("timeout", f"{where}: no answer within {timeout_s:g}s") from exc
            except http.client.IncompleteRead as exc:
                raise PactError("protocol", f"{where}: response cut short ({exc})") from exc
            except (ConnectionError, http.client.RemoteDisconnected) as exc:
                # refused, reset, or closed without a status line: the server is gone
                raise PactError("unreachable", f"{where}: {type(exc).__name__}: {exc}") from exc
            except http.client.HTTPException as exc:
                raise PactError("protocol", f"{where}: {type(exc).__name__}: {exc}") from exc
            except OSError as exc:  # unresolvable host, no route, ...
                raise PactError("unreachable", f"{where}: {type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            if status != 200:
                return status, {"detail": raw[:500].decode("utf-8", "replace")}
            raise PactError("protocol", f"{where}: response body is not JSON") from None


def _set_remaining(conn: http.client.HTTPConnection, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    if conn.sock is not None:
        conn.sock.settimeout(remaining)


def _read_body(
    conn: http.client.HTTPConnection, response: http.client.HTTPResponse, deadline: float
) -> bytes:
    """Read the body in chunks, keeping the whole read within the deadline."""
    chunks: list[bytes] = []
    size = 0
    while True:
        _set_remaining(conn, deadline)
        chunk = response.read1(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise http.client.HTTPException(f"response larger than {MAX_RESPONSE_BYTES} bytes")
    length = response.getheader("Content-Length")
    if length is not None and length.isdigit() and int(length) != size:
        raise http.client.IncompleteRead(b"".join(chunks), int(length) - size)
    return b"".join(chunks)


def _error_fields(data: Any) -> tuple[str | None, str]:
    if isinstance(data, dict):
        error = data.get("error")
        detail = data.get("detail")
        if isinstance(error, str) or detail is not None:
            return (error if isinstance(error, str) else None), str(detail or error)
        return None, json.dumps(data)[:500]
    return None, "no error body" if data is None else str(data)[:500]
