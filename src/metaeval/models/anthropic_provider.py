"""Anthropic Messages API through the official SDK: `anthropic/MODEL`.

System messages go to the top-level `system` field; tool calls are `tool_use` blocks and tool
results `tool_result` blocks in a user turn. A JSON-schema request becomes one forced tool
whose `input_schema` is the schema; its input is returned as the result text (JSON).
Options: base_url, api_key, send_temperature, plus max_connections, timeout_s (default 120),
retry, prices.

The current SDK has no `temperature` parameter (recent models do not take one), so
`request.temperature` is sent only with `send_temperature=True` (as an extra body field, for
older models or compatible servers that honour it).
"""

from __future__ import annotations

import json
from typing import Any

from metaeval.models.base import import_sdk
from metaeval.models.provider_model import ProviderModel, resolve_credentials
from metaeval.models.types import Message, ModelRequest, ModelResult, ToolCall, Usage

OUTPUT_TOOL = "output"
NO_KEY = "sk-ant-no-key"  # placeholder for compatible servers that ignore the key
_WRAP_KEY = "value"


def to_anthropic_messages(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Split out the system prompt and convert the rest to Messages API turns.

    Consecutive messages that map to the same role are merged into one turn, so the results
    of parallel tool calls land in a single user turn as the API requires.
    """
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system_parts.append(m.content)
            continue
        blocks: list[dict[str, Any]]
        if m.role == "tool":
            role = "user"
            blocks = [
                {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}
            ]
        else:
            role = m.role
            blocks = [{"type": "text", "text": m.content}] if m.content else []
            if m.role == "assistant":
                blocks += [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in m.tool_calls
                ]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    system = "\n\n".join(p for p in system_parts if p) or None
    return system, turns


def _output_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Tool input schemas must be objects: wrap any other schema as {"value": ...}."""
    if schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY]}, True


def parse_usage(raw: dict[str, Any] | None) -> Usage:
    """Messages API usage, normalised: input_tokens counts cache reads and writes too."""
    raw = raw or {}
    cache_read = raw.get("cache_read_input_tokens") or 0
    cache_write = raw.get("cache_creation_input_tokens") or 0
    return Usage(
        input_tokens=(raw.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=raw.get("output_tokens") or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


class AnthropicModel(ProviderModel):
    """A Claude model behind the official anthropic SDK (SDK retries are disabled)."""

    provider = "anthropic"
    default_timeout_s = 120.0

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        send_temperature: bool = False,
        **common: Any,
    ):
        super().__init__(name, **common)
        anthropic = import_sdk(
            "anthropic", "the anthropic SDK", "pip install 'metaeval[anthropic]'"
        )
        self.model_id = model_id
        api_key, base_url = resolve_credentials(
            name,
            api_key,
            base_url,
            key_env="ANTHROPIC_API_KEY",
            url_env="ANTHROPIC_BASE_URL",
            host="api.anthropic.com",
            placeholder=NO_KEY,
        )
        self.base_url = base_url
        self.send_temperature = send_temperature
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=self.timeout_s
        )

    def endpoint(self) -> str:
        """The base URL calls go to (rate limits are shared per endpoint)."""
        return self.base_url or ""

    def request_body(self, request: ModelRequest) -> tuple[dict[str, Any], bool]:
        """The Messages API body for `request`, and whether the output schema was wrapped."""
        system, turns = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": request.max_tokens,
            "messages": turns,
        }
        if self.send_temperature:
            body["temperature"] = request.temperature
        if system:
            body["system"] = system
        wrapped = False
        if request.json_schema is not None:
            # The forced output tool replaces any other tools: the answer must be the JSON.
            schema, wrapped = _output_schema(request.json_schema)
            body["tools"] = [
                {
                    "name": OUTPUT_TOOL,
                    "description": "Give the final answer as JSON matching this schema.",
                    "input_schema": schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": OUTPUT_TOOL}
        elif request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        return body, wrapped

    def _complete_once(self, request: ModelRequest) -> ModelResult:
        body, wrapped = self.request_body(request)
        params = dict(body)
        extra = {"temperature": params.pop("temperature")} if "temperature" in params else None
        response = self._client.messages.create(**params, extra_body=extra)
        raw = response.model_dump(mode="json")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in raw.get("content") or []:
            if block.get("type") == "text":
                texts.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                arguments = block.get("input") or {}
                calls.append(
                    ToolCall(
                        id=block.get("id") or f"toolu_{len(calls)}",
                        name=block.get("name") or "",
                        arguments=arguments if isinstance(arguments, dict) else {},
                        arguments_json=json.dumps(arguments),
                    )
                )
        text = "".join(texts)
        if request.json_schema is not None:
            forced = next((c for c in calls if c.name == OUTPUT_TOOL), None)
            if forced is not None:
                value = forced.arguments.get(_WRAP_KEY) if wrapped else forced.arguments
                text = json.dumps(value)
                calls = [c for c in calls if c is not forced]
        return ModelResult(
            model=self.name,
            text=text,
            tool_calls=calls,
            usage=parse_usage(raw.get("usage")),
            finish_reason=raw.get("stop_reason"),
            raw_request=body,
            raw_response=raw,
        )
