"""OpenAI Chat Completions: `openai/MODEL`, the official API or any compatible base_url.

Options: base_url, api_key, json_mode ("json_schema" | "json_object"), max_tokens_param
("max_tokens" | "max_completion_tokens"), transport ("auto" | "http" | "sdk"), plus the
common ones (max_connections, timeout_s (default 120), retry, prices). The api key is never
written into raw_request or raw_response.

Transport: "http" posts the JSON body with the standard library (`http_json`), which is how
the call is made by default; "sdk" goes through the official openai SDK (about a second to
import, and milliseconds of CPU per call). "auto" picks the SDK only when the environment
sends the endpoint through a proxy, which the SDK's HTTP stack honours. Both send the same
body and read the same answer; their errors sort the same way (see `models.retry.classify`).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Literal
from urllib.parse import urlparse

from metaeval.errors import ConfigError
from metaeval.models.base import import_sdk, require_sdk
from metaeval.models.http_json import JsonHTTPClient, uses_proxy
from metaeval.models.provider_model import ProviderModel, resolve_credentials
from metaeval.models.types import Message, ModelRequest, ModelResult, ToolCall, ToolSpec, Usage

OFFICIAL_HOST = "api.openai.com"
NO_KEY = "sk-no-key"  # placeholder for local servers that ignore the key

JsonMode = Literal["json_schema", "json_object"]
Transport = Literal["auto", "http", "sdk"]
OFFICIAL_BASE_URL = "https://api.openai.com/v1"
# headers the SDK sends from OPENAI_ORG_ID / OPENAI_PROJECT_ID; the http transport does too
_ACCOUNT_HEADERS = (
    ("OPENAI_ORG_ID", "OpenAI-Organization"),
    ("OPENAI_PROJECT_ID", "OpenAI-Project"),
)

# --- OpenAI-shaped payloads (shared with the litellm provider) --------------------------------


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Chat Completions messages (tool calls and tool results included)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
            continue
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.name:
            item["name"] = m.name
        if m.role == "assistant" and m.tool_calls:
            item["content"] = m.content or None
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments_json or json.dumps(c.arguments),
                    },
                }
                for c in m.tool_calls
            ]
        out.append(item)
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def json_response_format(schema: dict[str, Any], mode: JsonMode) -> dict[str, Any]:
    """`response_format` for a JSON-schema answer in the given dialect."""
    if mode == "json_object":  # llama.cpp's server and similar: schema-constrained JSON object
        return {"type": "json_object", "schema": schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": False},
    }


def parse_tool_call(raw: dict[str, Any], index: int) -> ToolCall:
    """One tool call; unparsable (or non-object) arguments give {} and keep the raw text."""
    function = raw.get("function") or {}
    arguments_json = function.get("arguments") or ""
    if not isinstance(arguments_json, str):
        arguments_json = json.dumps(arguments_json)
    try:
        arguments = json.loads(arguments_json) if arguments_json else {}
    except json.JSONDecodeError:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {}
    return ToolCall(
        id=raw.get("id") or f"call_{index}",
        name=function.get("name") or "",
        arguments=arguments,
        arguments_json=arguments_json,
    )


def parse_usage(raw: dict[str, Any] | None) -> Usage:
    """Chat Completions usage. Cached tokens stay inside input, reasoning inside output."""
    raw = raw or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=prompt_details.get("cached_tokens") or 0,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


def parse_chat_response(
    name: str, body: dict[str, Any], raw_request: dict[str, Any]
) -> ModelResult:
    """A ModelResult from a Chat Completions response body (a plain dict)."""
    choices = body.get("choices") or []
    if not choices:
        raise ValueError(f"{name}: response has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    return ModelResult(
        model=name,
        text=message.get("content") or "",
        tool_calls=[parse_tool_call(c, i) for i, c in enumerate(message.get("tool_calls") or [])],
        usage=parse_usage(body.get("usage")),
        finish_reason=choice.get("finish_reason"),
        raw_request=raw_request,
        raw_response=body,
    )


# --- the provider -----------------------------------------------------------------------------


def is_official(base_url: str | None) -> bool:
    """True when requests go to api.openai.com (no base_url means the official API)."""
    return base_url is None or urlparse(base_url).hostname == OFFICIAL_HOST


class OpenAIModel(ProviderModel):
    """A Chat Completions model (plain HTTP by default, or the openai SDK; no SDK retries)."""

    provider = "openai"
    default_timeout_s = 120.0

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        json_mode: JsonMode | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        transport: Transport = "auto",
        **common: Any,
    ):
        super().__init__(name, **common)
        self.model_id = model_id
        api_key, base_url = resolve_credentials(
            name,
            api_key,
            base_url,
            key_env="OPENAI_API_KEY",
            url_env="OPENAI_BASE_URL",
            host=OFFICIAL_HOST,
            placeholder=NO_KEY,
        )
        official = is_official(base_url)
        if json_mode is None:
            json_mode = "json_schema" if official else "json_object"
        if json_mode not in ("json_schema", "json_object"):
            raise ConfigError(
                f"must be json_schema or json_object, got {json_mode!r}", field="json_mode"
            )
        self.json_mode: JsonMode = json_mode
        self.max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if official else "max_tokens"
        )
        self.base_url = base_url
        self._api_key = api_key
        self._client_once = threading.Lock()
        self._client_obj: Any = None
        if transport not in ("auto", "http", "sdk"):
            raise ConfigError(f"must be auto, http or sdk, got {transport!r}", field="transport")
        url = base_url or OFFICIAL_BASE_URL
        if transport == "auto":
            transport = "sdk" if uses_proxy(url) else "http"
        self.transport: Transport = transport
        self._http: JsonHTTPClient | None = None
        if transport == "sdk":
            require_sdk("openai", "the openai SDK", "pip install 'metaeval[openai]'")
        else:
            headers = {"Authorization": f"Bearer {api_key}"}
            for env, header in _ACCOUNT_HEADERS:
                if os.environ.get(env):
                    headers[header] = os.environ[env]
            try:
                self._http = JsonHTTPClient(url, headers, self.timeout_s)
            except ValueError as exc:
                raise ConfigError(str(exc), field="base_url") from exc

    @property
    def _client(self) -> Any:
        """The SDK client, made on first use: the SDK import (about a second) overlaps the
        run's planning when `prefetch_sdks` started it."""
        with self._client_once:
            if self._client_obj is None:
                openai = import_sdk("openai", "the openai SDK", "pip install 'metaeval[openai]'")
                self._client_obj = openai.OpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.timeout_s,
                )
            return self._client_obj

    def endpoint(self) -> str:
        """The base URL calls go to (rate limits are shared per endpoint)."""
        return self.base_url or ""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent to /chat/completions for `request`."""
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": to_openai_messages(request.messages),
            "temperature": request.temperature,
            self.max_tokens_param: request.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        if request.json_schema is not None:
            body["response_format"] = json_response_format(request.json_schema, self.json_mode)
        return body

    def _complete_once(self, request: ModelRequest) -> ModelResult:
        body = self.request_body(request)
        if self._http is not None:
            return parse_chat_response(self.name, self._http.post("/chat/completions", body), body)
        response = self._client.chat.completions.create(**body)
        return parse_chat_response(self.name, response.model_dump(mode="json"), body)
