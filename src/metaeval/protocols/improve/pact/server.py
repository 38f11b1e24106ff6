"""A PACT server over the standard library's ThreadingHTTPServer, driving one Policy.

Endpoints: GET /health, GET /describe, POST /reset, POST /act (JSON in, JSON out; see
protocol.py and docs/pact.md). Errors are JSON objects {"error": KIND, "detail": TEXT} with
status 400 (malformed body), 404 (unknown path), 405 (wrong method), 408 (a request not
received within `timeout_s`), 409 (act for an episode that is not the active one, or that
already submitted), 413 (a body over `MAX_BODY_BYTES`), 500 (the policy raised).

Who may call it (the rules of the loopback kit, `metaeval.loopback`): a request naming a
``Host`` other than loopback with the server's port is refused (421: DNS rebinding; a server
bound to a non-loopback address skips this), one from a web page (an ``Origin`` header, a
cross-site ``Sec-Fetch-Site``) too (403); with a token (``token=``, or ``METAEVAL_PACT_TOKEN``
in the process's environment, which `launcher.launch` sets and the server removes before a
policy loads) every endpoint but /health needs ``Authorization: Bearer TOKEN`` (401). Other
PACT servers ignore the variable; `PactClient` sends the header when given the token.

One episode is active per server: /reset replaces whatever episode was running, and /reset
and /act calls are serialized by a lock, so policies need not be thread-safe. /health never
waits for the policy, so a server busy with a long model call still reports healthy.

Run as a process:
    python -m metaeval.protocols.improve.pact.server --policy module:factory --port 8000
    python -m metaeval.protocols.improve.pact.server --model local/smollm2 --port 0
It prints `PACT listening on http://HOST:PORT` once bound and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.loopback import access
from metaeval.loopback.framing import DEFAULT_TIMEOUT_S, FramingError
from metaeval.loopback.server import BoundedHandler, LoopbackServer
from metaeval.protocols.improve.pact.policies import Policy, as_step
from metaeval.protocols.improve.pact.protocol import (
    TOKEN_ENV,
    ActRequest,
    ActResponse,
    Describe,
    Health,
    ResetRequest,
    ResetResponse,
    SubmitAction,
)

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024


class _HttpError(Exception):
    def __init__(self, status: int, kind: str, detail: str):
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail


class _Episode:
    def __init__(self, episode_id: str):
        self.episode_id = episode_id
        self.steps = 0
        self.done = False


class PactServer:
    """Serve `policy` over PACT on host:port (port 0: the OS picks; see `port`, `url`).

    The socket is bound in the constructor. Use `serve_forever()` in the calling thread, or
    `start_in_thread()` (tests); `close()` stops serving and releases the socket. Also a
    context manager (closing on exit). `log_requests=True` logs each request to stderr.
    """

    def __init__(
        self,
        policy: Policy,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_requests: bool = False,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ):
        self.policy = policy
        self.log_requests = log_requests
        self.token = token or None
        self._episode: _Episode | None = None
        self._lock = threading.Lock()  # serializes /reset and /act
        self._thread: threading.Thread | None = None
        self._httpd = LoopbackServer((host, port), _make_handler(self, timeout_s))
        self.loopback = access.is_loopback(self.host)  # else no Host check (see the module doc)

    # -- addresses -----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def active_episode(self) -> str | None:
        """The id of the active episode, if any."""
        episode = self._episode
        return episode.episode_id if episode else None

    # -- lifecycle -----------------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.2) -> None:
        self._httpd.serve_forever(poll_interval=poll_interval)

    def start_in_thread(self) -> threading.Thread:
        """Serve in a daemon thread; returns it. Stop with `close()`."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self.serve_forever, name=f"pact-server-{self.port}", daemon=True
            )
            self._thread.start()
        return self._thread

    def close(self) -> None:
        """Stop serving (when started in a thread) and close the listening socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> PactServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- endpoint logic (no HTTP here) ---------------------------------------------------------

    def handle_health(self) -> Health:
        return Health()

    def handle_describe(self) -> Describe:
        try:
            return Describe.model_validate(self.policy.describe())
        except Exception as exc:
            raise _policy_error("describe", exc) from exc

    def handle_reset(self, request: ResetRequest) -> ResetResponse:
        with self._lock:
            self._episode = None
            try:
                self.policy.reset(request)
            except Exception as exc:
                raise _policy_error("reset", exc) from exc
            self._episode = _Episode(request.episode_id)
            return ResetResponse(episode_id=request.episode_id)

    def handle_act(self, request: ActRequest) -> ActResponse:
        with self._lock:
            episode = self._episode
            if episode is None or episode.episode_id != request.episode_id:
                active = episode.episode_id if episode else None
                raise _HttpError(
                    409,
                    "unknown_episode",
                    f"episode {request.episode_id!r} is not active (active: {active!r}); "
                    "POST /reset first",
                )
            if episode.done:
                raise _HttpError(
                    409, "episode_finished", f"episode {request.episode_id!r} already submitted"
                )
            try:
                step = as_step(self.policy.act(request.observation))
            except Exception as exc:
                raise _policy_error("act", exc) from exc
            episode.steps += 1
            if isinstance(step.action, SubmitAction):
                episode.done = True
            if step.note:
                log.warning("episode %s step %d: %s", episode.episode_id, episode.steps, step.note)
            return ActResponse(episode_id=episode.episode_id, action=step.action, usage=step.usage)


def _policy_error(where: str, exc: Exception) -> _HttpError:
    log.error("policy %s failed:\n%s", where, traceback.format_exc())
    return _HttpError(500, "policy_error", f"policy {where} failed: {type(exc).__name__}: {exc}")


_ROUTES = {"/health": "GET", "/describe": "GET", "/reset": "POST", "/act": "POST"}


def _answer(
    server: PactServer,
    raw_path: str,
    method: str,
    read: Callable[[type[BaseModel]], Any],
) -> BaseModel:
    """The server's answer to `method raw_path`; `read(model)` parses the request body."""
    path = raw_path.split("?", 1)[0].rstrip("/") or "/"
    if path not in _ROUTES:
        raise _HttpError(404, "not_found", f"no endpoint {path}")
    if _ROUTES[path] != method:
        raise _HttpError(405, "method_not_allowed", f"{path} takes {_ROUTES[path]}, not {method}")
    if path == "/health":
        return server.handle_health()
    if path == "/describe":
        return server.handle_describe()
    if path == "/reset":
        return server.handle_reset(read(ResetRequest))
    return server.handle_act(read(ActRequest))


def _admit(server: PactServer, handler: BoundedHandler) -> None:
    """Raise `access.Refused` unless the request may go on (see the module doc)."""
    if server.loopback:
        access.check_host(handler.headers, server.port, "PACT server")
    else:
        access.the_host(handler.headers)
    access.refuse_web_pages(handler.headers)
    if server.token is not None and handler.path.partition("?")[0].rstrip("/") != "/health":
        hint = "missing or wrong PACT token (Authorization: Bearer TOKEN)"
        access.check_token(access.bearer(handler.headers), server.token, hint)


def _parse(body: bytes | bytearray, model: type[BaseModel]) -> Any:
    """A JSON request body validated against `model`; _HttpError 400 when it is not."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _HttpError(400, "bad_request", f"body is not JSON: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise _HttpError(400, "bad_request", f"invalid {model.__name__}: {errors}") from None


class _Handler(BoundedHandler):
    server_version = "metaeval-pact/1"
    error_content_type = "application/json"
    max_body_bytes = MAX_BODY_BYTES
    pact: PactServer
    problem = "bad_request"  # the error KIND of a refused request's answer
    body_read = False

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.pact.log_requests:
            sys.stderr.write(f"pact {self.address_string()} {format % args}\n")

    def _send(self, status: int, payload: BaseModel | dict[str, str]) -> None:
        body = payload.model_dump_json() if isinstance(payload, BaseModel) else json.dumps(payload)
        self.send_body(status, body.encode(), "application/json")

    def send_problem(self, status: int, message: str, extra: dict[str, str]) -> None:
        body = json.dumps({"error": self.problem, "detail": message}).encode()
        self.send_body(status, body, "application/json", extra)

    def _read(self, model: type[BaseModel]) -> Any:
        self.body_read = True
        return _parse(self.body(), model)

    def _route(self, method: str) -> None:
        self.body_read = False
        result: BaseModel | dict[str, str]
        try:
            _admit(self.pact, self)
            result = _answer(self.pact, self.path, method, self._read)
        except access.Refused as exc:
            self.problem = "refused"
            self.refuse(exc)
            return
        except FramingError as exc:
            self.refuse(exc)
            return
        except _HttpError as err:
            result, status = {"error": err.kind, "detail": err.detail}, err.status
        except Exception as exc:  # a bug here must still answer, not drop the connection
            log.error("internal error:\n%s", traceback.format_exc())
            detail = f"{type(exc).__name__}: {exc}"
            result, status = {"error": "internal_error", "detail": detail}, 500
        else:
            status = 200
        if not self.body_read:
            self.end_of_head()
        self._send(status, result)

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._route("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")


def _make_handler(server: PactServer, timeout_s: float) -> type[_Handler]:
    return type("Handler", (_Handler,), {"pact": server, "timeout_s": timeout_s})


# ---------------------------------------------------------------------------------------------
# Entry point


class _Terminate(BaseException):
    """SIGTERM. Not an Exception: socketserver reports and swallows an Exception raised while
    it starts a request's thread, and the server would serve on."""


def _raise_terminate(signum: int, frame: Any) -> None:
    raise _Terminate(signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m metaeval.protocols.improve.pact.server",
        description="Serve a policy over PACT until SIGTERM.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--policy", help="policy factory as package.module:factory")
    which.add_argument("--model", help="serve a ModelPolicy over this model, e.g. local/smollm2")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--max-tokens", type=int, default=1024, help="ModelPolicy max_tokens")
    parser.add_argument("--system-prompt-file", help="ModelPolicy system prompt (a text file)")
    parser.add_argument("--log-requests", action="store_true", help="log each request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    from metaeval.errors import MetaevalError
    from metaeval.protocols.improve.pact.policies import ModelPolicy, load_policy

    token = os.environ.pop(TOKEN_ENV, None)  # gone before any policy code is imported
    try:
        if args.policy:
            policy: Policy = load_policy(args.policy)
        else:
            prompt = None
            if args.system_prompt_file:
                with open(args.system_prompt_file, encoding="utf-8") as f:
                    prompt = f.read()
            policy = ModelPolicy(args.model, prompt, max_tokens=args.max_tokens)
        server = PactServer(
            policy, args.host, args.port, log_requests=args.log_requests, token=token
        )
    except (MetaevalError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2

    signal.signal(signal.SIGTERM, _raise_terminate)
    print(f"PACT listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except (_Terminate, KeyboardInterrupt):
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
