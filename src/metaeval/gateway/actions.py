"""Tool calls for models without native tools, and token counts the gateway can stand behind.

A model that takes no tool specs (local GGUF models) is asked for one JSON action through
grammar-constrained decoding: ``{"tool": NAME, "args": {...}}`` to call a tool, or
``{"answer": TEXT}`` to reply. The gateway turns that back into a tool call or text, so the
client sees native tool use either way.
"""

from __future__ import annotations

import json
import math
from typing import Any

from metaeval.gateway.wire import dumps, new_id
from metaeval.models.base import Model
from metaeval.models.types import Message, ModelRequest, ModelResult, ToolCall, Usage

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
CHARS_PER_TOKEN = 4


def wants_json_actions(model: Model, request: ModelRequest) -> bool:
    return bool(request.tools) and not model.supports_native_tools()


def with_json_actions(request: ModelRequest) -> ModelRequest:
    """`request` asking for one JSON action among its tools or a plain answer."""
    options = [
        {
            "type": "object",
            "properties": {"tool": {"const": t.name}, "args": {"type": "object"}},
            "required": ["tool", "args"],
        }
        for t in request.tools
    ]
    listing = "\n".join(
        f"- {t.name}({', '.join(t.parameters.get('properties', {}))}): "
        f"{t.description.strip().splitlines()[0][:100] if t.description.strip() else ''}"
        for t in request.tools
    )
    guide = (
        'Reply with one JSON object: {"tool": NAME, "args": {...}} to use a tool, or '
        '{"answer": TEXT} when done. Tools:\n' + listing
    )
    messages = list(request.messages)
    if messages and messages[0].role == "system":
        messages[0] = Message(role="system", content=messages[0].content + "\n\n" + guide)
    else:
        messages.insert(0, Message(role="system", content=guide))
    return request.model_copy(
        update={"messages": messages, "json_schema": {"anyOf": [*options, ANSWER_SCHEMA]}}
    )


def from_json_action(result: ModelResult) -> ModelResult:
    """A JSON action turned into a tool call or answer text; other text is left as it is."""
    try:
        data = json.loads(result.text)
    except (json.JSONDecodeError, TypeError):
        return result
    if not isinstance(data, dict):
        return result
    if isinstance(data.get("tool"), str) and data["tool"]:
        args = a if isinstance(a := data.get("args"), dict) else {}
        call = ToolCall(
            id=new_id("call"), name=data["tool"], arguments=args, arguments_json=dumps(args)
        )
        return result.model_copy(
            update={"text": "", "tool_calls": [call], "finish_reason": "tool_calls"}
        )
    if isinstance(data.get("answer"), str):
        return result.model_copy(update={"text": data["answer"]})
    return result


def request_text(request: ModelRequest) -> str:
    """Everything a request sends the model, as text (messages, calls, tool specs)."""
    pieces = []
    for m in request.messages:
        pieces.append(f"{m.role}: {m.content}")
        pieces += [f"call {c.name} {c.arguments_json or dumps(c.arguments)}" for c in m.tool_calls]
    pieces += [f"tool {t.name}: {t.description} {dumps(t.parameters)}" for t in request.tools]
    return "\n".join(pieces)


def result_text(result: ModelResult) -> str:
    calls = [f"{c.name} {c.arguments_json or dumps(c.arguments)}" for c in result.tool_calls]
    return "\n".join([result.text, *calls]) if calls else result.text


def _tokenizer(model: Model) -> Any:
    loaded = getattr(model, "_loaded", None)
    return getattr(loaded, "llama", None)


def count_tokens(model: Model, text: str) -> tuple[int, str]:
    """(tokens, method): the model's own tokenizer where it has one in process, else an
    estimate of one token per four characters (method ``estimate``)."""
    llama = _tokenizer(model)
    if llama is not None:
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)), "tokenizer"
    return math.ceil(len(text) / CHARS_PER_TOKEN), "estimate"


def settled_usage(model: Model, request: ModelRequest, result: ModelResult) -> tuple[Usage, str]:
    """The usage the gateway reports: the model's own when it reported any, else counted."""
    usage = result.usage
    if usage.input_tokens or usage.output_tokens:
        return usage, "model"
    tokens_in, method = count_tokens(model, request_text(request))
    tokens_out, _ = count_tokens(model, result_text(result))
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out), method


def context_window(model: Model) -> int | None:
    """Tokens the model can take in one call, when the gateway can know it (local models)."""
    llama = _tokenizer(model)
    return int(llama.n_ctx()) if llama is not None else None


def _sent_tokens(model: Model, messages: list[Message]) -> int:
    text = "\n".join(
        f"{m.role}: {m.content}"
        + "".join(f"\ncall {c.name} {c.arguments_json or dumps(c.arguments)}" for c in m.tool_calls)
        for m in messages
    )
    return count_tokens(model, text)[0]


def _clip(text: str, tokens: int) -> str:
    chars = max(0, tokens) * CHARS_PER_TOKEN
    return text if len(text) <= chars else text[:chars] + "\n[... cut by the gateway to fit]"


def fit_to_context(
    model: Model, request: ModelRequest, extra_tokens: int = 0
) -> tuple[ModelRequest, dict | None]:
    """`request` cut down to the model's context window, and a note of what was done (None
    when it fits). Agent CLIs send system prompts far larger than a small local model's
    window; cut in order until it fits: system text, then the oldest turns (the first user
    message and the latest turns stay), then what is left of each long message."""
    window = context_window(model)
    if window is None:
        return request, None
    reserve = min(request.max_tokens, window // 4)
    limit = window - reserve - extra_tokens - 64  # and room for the chat template's tokens
    messages = list(request.messages)
    before = _sent_tokens(model, messages)
    if before <= limit:
        return request, None
    system_budget = limit // 3
    messages = [
        m.model_copy(update={"content": _clip(m.content, system_budget)})
        if m.role == "system"
        else m
        for m in messages
    ]
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    while _sent_tokens(model, messages) > limit:
        droppable = [
            i for i, m in enumerate(messages[:-2]) if m.role != "system" and i != first_user
        ]
        if not droppable:
            break
        del messages[droppable[0]]
        if first_user is not None and droppable[0] < first_user:
            first_user -= 1
    if _sent_tokens(model, messages) > limit:
        share = limit // max(1, len(messages))
        messages = [m.model_copy(update={"content": _clip(m.content, share)}) for m in messages]
    after = _sent_tokens(model, messages)
    note = {"window": window, "tokens_before": before, "tokens_after": after}
    return request.model_copy(update={"messages": messages}), note
