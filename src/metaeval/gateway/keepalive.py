"""Keeping a slow streamed answer alive: early headers, heartbeats, and errors in the stream.

Agent CLIs wait only so long for a response's headers (Gemini CLI sets undici's
`headersTimeout` to 60 s) and for the next body bytes. A local model on a loaded machine can
take longer than that before its first token, and the CLI then fails with a transport error
("fetch failed sending request") that says nothing about the agent. So a streamed (SSE)
answer that is not ready within `Gateway.stream_commit_s` gets its 200 headers at once and a
heartbeat every `Gateway.heartbeat_s` until the model answers. Each API gets a heartbeat its
own clients skip:

* OpenAI chat and Responses: an SSE comment line (`: keep-alive`), which SSE parsers ignore;
* Anthropic: the `ping` event its streams already carry;
* Gemini: a bare newline, which the Gemini SDK's event pattern (`^\\s*data: ...`) skips.

Once the headers are out the status cannot change, so a model that then fails is reported
inside the stream, in the form each API uses for a mid-stream error, and the stream ends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from metaeval.gateway import anthropic_api, chat_api, gemini_api, responses_api

T = TypeVar("T")

STREAM_COMMIT_S = 10.0
"""How long a streamed answer may keep its headers back before they are sent."""
HEARTBEAT_S = 10.0
"""Interval between heartbeats while the model works after the headers are out."""

HEARTBEATS: dict[str, bytes] = {
    "chat": b": keep-alive\n\n",
    "responses": b": keep-alive\n\n",
    "anthropic": b'event: ping\ndata: {"type": "ping"}\n\n',
    "gemini": b"\n",
}


def stream_error(api: str, message: str) -> bytes:
    """A model failure as the stream of `api` reports one after its headers were sent."""
    if api == "anthropic":
        body = json.dumps(anthropic_api.error_body(500, message))
        return f"event: error\ndata: {body}\n\n".encode()
    if api == "gemini":  # a bare JSON error chunk, as the Gemini API sends one
        return json.dumps(gemini_api.error_body(500, message)).encode()
    if api == "responses":
        error = responses_api.error_body(500, message)["error"]
        body = json.dumps({"type": "error", "code": "server_error", **error})
        return f"event: error\ndata: {body}\n\n".encode()
    return f"data: {json.dumps(chat_api.error_body(500, message))}\n\n".encode()


class Background(Generic[T]):
    """`work()` on a thread of its own; `wait` for it in slices, `result` re-raises its error.

    A daemon thread: when the client goes away meanwhile, the model call still runs to its end
    (it cannot be interrupted) and its result is dropped."""

    def __init__(self, work: Callable[[], T]):
        self._work = work
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, name="gateway-model-call", daemon=True).start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # handed to the handler's thread by `result`
            self._error = exc
        finally:
            self._done.set()

    def wait(self, seconds: float) -> bool:
        """True once the work has finished (within `seconds` from now)."""
        return self._done.wait(seconds)

    def result(self) -> T:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value
