"""Any backend litellm supports: `litellm/BACKEND_MODEL` (optional extra, imported lazily).

A thin wrapper: OpenAI-shaped messages in, OpenAI-shaped response out. litellm reads each
backend's credentials from its usual environment variables; its own retries are disabled.
"""

from __future__ import annotations

from typing import Any

from metaeval.models.base import import_sdk
from metaeval.models.openai_provider import (
    json_response_format,
    parse_chat_response,
    to_openai_messages,
    to_openai_tools,
)
from metaeval.models.provider_model import ProviderModel
from metaeval.models.retry import RetryPolicy
from metaeval.models.types import ModelRequest, ModelResult

INSTALL_HINT = "pip install 'metaeval[litellm]'"


class LiteLLMModel(ProviderModel):
    """A model reached through `litellm.completion`. Extra options go to every call."""

    provider = "litellm"

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        max_connections: int | None = None,
        max_concurrency: int | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy | dict[str, Any] | None = None,
        prices: Any = None,
        **completion_options: Any,
    ):
        super().__init__(
            name,
            max_connections=max_connections,
            max_concurrency=max_concurrency,
            timeout_s=timeout_s,
            retry=retry,
            prices=prices,
        )
        self._litellm = import_sdk("litellm", f"{name}: litellm", INSTALL_HINT)
        self.model_id = model_id
        self.completion_options = completion_options  # e.g. api_base; never logged

    def endpoint(self) -> str:
        """The api_base calls go to, when one is set (rate limits are shared per endpoint)."""
        return str(self.completion_options.get("api_base") or "")

    def _complete_once(self, request: ModelRequest) -> ModelResult:
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": to_openai_messages(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        if request.json_schema is not None:
            body["response_format"] = json_response_format(request.json_schema, "json_schema")
        if self.timeout_s is not None:
            body["timeout"] = self.timeout_s
        response = self._litellm.completion(**body, **self.completion_options, num_retries=0)
        return parse_chat_response(self.name, response.model_dump(mode="json"), body)
