"""Anthropic Messages API: ``POST /v1/messages`` (JSON or SSE) and ``/v1/messages/count_tokens``.

Request content blocks handled: ``text``, ``tool_use``, ``tool_result`` (string or text blocks,
``is_error`` kept as a prefix), ``image``/``document`` (a placeholder), ``thinking`` (dropped).
Tools without an ``input_schema`` (server tools such as web search) are not offered to the
model. ``usage.input_tokens`` excludes both cache categories, as Anthropic reports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from metaeval.gateway.wire import (
    Call,
    WireError,
    as_int,
    as_temperature,
    dumps,
    finish_kind,
    new_id,
    parse_arguments,
    sse,
    text_of,
    tool_list,
)
from metaeval.models.types import Message, ModelRequest, ModelResult, ToolCall, ToolSpec, Usage

API = "anthropic"
STOP_REASONS = {"tool": "tool_use", "length": "max_tokens", "stop": "end_turn"}


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    if isinstance(system, str | list):
        return text_of(system)
    raise WireError("must be a string or a list of text blocks", "system")


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    raise WireError("must be a string or a list of content blocks", where)


def _messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise WireError("must be a non-empty list", "messages")
    out: list[Message] = []
    for i, msg in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant", "system"):
            raise WireError("must be an object with role 'user', 'assistant' or 'system'", where)
        if msg["role"] == "system":  # Claude Code 2.1 sends mid-conversation system notes
            out.append(Message(role="system", content=text_of(msg.get("content"))))
            continue
        texts: list[str] = []
        calls: list[ToolCall] = []
        for j, block in enumerate(_blocks(msg.get("content"), f"{where}.content")):
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind in ("tool_use", "server_tool_use"):
                args, raw_args = parse_arguments(block.get("input"), f"{where}.content[{j}].input")
                calls.append(
                    ToolCall(
                        id=str(block.get("id") or new_id("toolu")),
                        name=str(block.get("name") or ""),
                        arguments=args,
                        arguments_json=raw_args,
                    )
                )
            elif kind == "tool_result":
                body = text_of(block.get("content"))
                if block.get("is_error"):
                    body = f"[error] {body}"
                out.append(
                    Message(role="tool", content=body, tool_call_id=block.get("tool_use_id"))
                )
            elif kind in ("image", "document"):
                texts.append(f"[{kind}]")
            # thinking / redacted_thinking blocks are the model's own notes: not sent back
        if texts or calls:
            out.append(Message(role=msg["role"], content="\n".join(texts), tool_calls=calls))
    return out


def _tools(raw: Any) -> list[ToolSpec]:
    specs = []
    for i, tool in enumerate(tool_list(raw)):
        if not isinstance(tool, dict) or not tool.get("name"):
            raise WireError("must be an object with a name", f"tools[{i}]")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            continue  # a server tool (web_search, ...): nothing the model can call here
        specs.append(
            ToolSpec(
                name=str(tool["name"]),
                description=str(tool.get("description") or ""),
                parameters=schema,
            )
        )
    return specs


def parse(body: dict[str, Any], model_name: str) -> Call:
    """The metaeval request of a Messages call."""
    messages = _messages(body.get("messages"))
    system = _system_text(body.get("system"))
    if system:
        messages.insert(0, Message(role="system", content=system))
    request = ModelRequest(
        model=model_name,
        messages=messages,
        tools=_tools(body.get("tools")),
        temperature=as_temperature(body.get("temperature"), "temperature"),
        max_tokens=as_int(body.get("max_tokens"), "max_tokens", 4096),
    )
    requested = str(body.get("model") or model_name)
    return Call(API, request, bool(body.get("stream")), requested)


def usage_json(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


def _content(result: ModelResult) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if result.text:
        blocks.append({"type": "text", "text": result.text})
    for call in result.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def render(call: Call, result: ModelResult, usage: Usage) -> dict[str, Any]:
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": call.requested_model,
        "content": _content(result),
        "stop_reason": STOP_REASONS[finish_kind(result)],
        "stop_sequence": None,
        "usage": usage_json(usage),
    }


def stream(call: Call, result: ModelResult, usage: Usage) -> Iterator[bytes]:
    """The SSE events of one message: start, one block at a time, delta with usage, stop."""
    message = render(call, result, usage)
    content = message["content"]
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 0}
    yield sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(content):
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": dumps(block["input"])}
        yield sse(
            {"type": "content_block_start", "index": index, "content_block": empty},
            "content_block_start",
        )
        yield sse(
            {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
        )
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": message["usage"],
        },
        "message_delta",
    )
    yield sse({"type": "message_stop"}, "message_stop")


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "api_error"
    return {"type": "error", "error": {"type": kind, "message": message}}


def models_list(names: list[str]) -> dict[str, Any]:
    data = [
        {"type": "model", "id": n, "display_name": n, "created_at": "2026-01-01T00:00:00Z"}
        for n in names
    ]
    return {"data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}
