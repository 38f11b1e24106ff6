"""A model that answers from a script: canned responses in order, or a callable. For tests."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from metaeval.errors import MetaevalError
from metaeval.models.provider_model import ProviderModel
from metaeval.models.retry import NO_RETRY
from metaeval.models.types import ModelRequest, ModelResult

Response = str | ModelResult | dict[str, Any]
Responder = Callable[[ModelRequest], ModelResult | str]


class ScriptedModel(ProviderModel):
    """Returns scripted responses one per call, or whatever `responses(request)` returns.

    A str becomes the result text; a dict holds ModelResult fields (text, tool_calls, usage,
    ...). Running out of responses raises MetaevalError. Costs come from the price table
    (`scripted/*` is 0.0). `native_tools` sets what `supports_native_tools()` reports.
    """

    provider = "scripted"
    default_retry = NO_RETRY

    def __init__(
        self,
        responses: list[Response] | Responder,
        *,
        name: str = "scripted/default",
        native_tools: bool = True,
        **common: Any,
    ):
        super().__init__(name, **common)
        self._native_tools = native_tools
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []  # every request seen, in order
        if callable(responses):
            self._responder: Responder | None = responses
            self._queue: deque[Response] = deque()
        else:
            self._responder = None
            self._queue = deque(responses)

    def supports_native_tools(self) -> bool:
        return self._native_tools

    @property
    def remaining(self) -> int:
        """How many scripted responses are left (0 for a callable script)."""
        with self._lock:
            return len(self._queue)

    def _complete_once(self, request: ModelRequest) -> ModelResult:
        with self._lock:
            self.requests.append(request)
            if self._responder is None:
                if not self._queue:
                    raise MetaevalError(
                        f"{self.name}: scripted model ran out of responses "
                        f"after {len(self.requests) - 1} call(s)"
                    )
                item: Response = self._queue.popleft()
        if self._responder is not None:
            item = self._responder(request)
        return self._to_result(item)

    def _to_result(self, item: Response) -> ModelResult:
        if isinstance(item, ModelResult):
            return item
        if isinstance(item, str):
            return ModelResult(model=self.name, text=item, finish_reason="stop")
        if isinstance(item, dict):
            return ModelResult.model_validate({"model": self.name, **item})
        raise MetaevalError(f"{self.name}: unsupported scripted response {type(item).__name__}")
