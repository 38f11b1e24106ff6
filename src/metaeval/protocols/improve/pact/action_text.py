"""What a model reads and writes in a PACT episode: the system prompt, the JSON schema of
its reply (generated from the action models), the parser of its reply and the text of an
observation."""

from __future__ import annotations

import json
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from metaeval.protocols.improve.pact.protocol import Action, Observation

ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)


DEFAULT_SYSTEM_PROMPT = """\
You are a software engineering agent working in a Linux shell on a task given by the user.
You act one step at a time. Each reply is exactly one JSON object naming one action:

  {"type": "command", "command": "<shell command>"}
      Run a shell command in the task's working directory. You will see its stdout, stderr
      and exit code. Commands are non-interactive; keep output short (use head, tail, grep).
  {"type": "write_file", "path": "<path>", "content": "<full file content>"}
      Create or overwrite a file with exactly this content (paths relative to the
      working directory).
  {"type": "submit", "answer": "<final answer, or empty>"}
      Finish the task. Put the final answer in "answer" if the task asks for one;
      otherwise leave it empty. Nothing runs after you submit.

Inspect before you change things, check your work with commands, and submit when done.
You have a limited number of steps. Reply with the JSON object only, no other text."""


def action_json_schema() -> dict[str, Any]:
    """The JSON schema a model answers with: an object {"action": one of the three actions}.

    Generated from the action models in `pact.protocol` (the ones `parse_action` validates
    with): one branch per model of the `Action` union, with every field the model is asked for
    required. A field whose default is None (`CommandAction.timeout_s`) is a harness-side
    option and is left out. The root is an object (OpenAI and Anthropic both want one); the
    action itself is an anyOf of the action objects, which llama.cpp grammar decoding also
    enforces.
    """
    return {
        "type": "object",
        "properties": {"action": {"anyOf": [_model_facing(m) for m in action_models()]}},
        "required": ["action"],
        "additionalProperties": False,
    }


def action_models() -> tuple[type[BaseModel], ...]:
    """The models of the `Action` union, in its order."""
    union = get_args(Action)[0]  # Annotated[CommandAction | ..., Field(...)]
    return tuple(get_args(union))


def _model_facing(model: type[BaseModel]) -> dict[str, Any]:
    """One action model as the object schema a model is asked for."""
    props = {
        name: _field_schema(model, name, info.annotation)
        for name, info in model.model_fields.items()
        if not (info.default is None and not info.is_required())
    }
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def _field_schema(model: type[BaseModel], name: str, annotation: Any) -> dict[str, Any]:
    if get_origin(annotation) is Literal:
        return {"type": "string", "enum": list(get_args(annotation))}
    if annotation is str:
        return {"type": "string"}
    raise TypeError(f"{model.__name__}.{name}: no model-facing schema for {annotation!r}")


_INFER_TYPE = (("command", "command"), ("content", "write_file"), ("answer", "submit"))


def parse_action(text: str) -> Action:
    """Parse a model's reply into an Action; ValueError when it is not one.

    Accepts {"action": {...}} or a bare action object, optionally inside code fences or
    surrounded by prose; a missing "type" is inferred from the keys present.
    """
    raw = text.strip()
    value: Any
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        start, end = raw.find("{"), raw.rfind("}")
        if start < 0:
            raise ValueError("no JSON object in the reply") from None
        if end <= start:
            raise ValueError("incomplete JSON object (the reply was cut off?)") from None
        try:
            value = json.loads(raw[start : end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
    if isinstance(value, dict) and isinstance(value.get("action"), dict):
        value = value["action"]
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    if "type" not in value:
        for key, kind in _INFER_TYPE:
            if key in value:
                value = {**value, "type": kind}
                break
    try:
        return ACTION_ADAPTER.validate_python(value)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise ValueError(f"not a valid action: {errors}") from None


def _clip(text: str, limit: int) -> str:
    """Keep the head and the tail of long text, with a marker of what was cut."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters omitted ...]\n{text[-tail:]}"


def render_observation(observation: Observation, limit: int = 4000) -> str:
    """An observation as the text a model reads."""
    o = observation
    if o.kind == "initial":
        lines = [f"Step {o.step}: the episode has started."]
        if o.message:
            lines.append(o.message)
        if o.stdout:
            lines.append(f"stdout:\n{_clip(o.stdout, limit)}")
        lines.append("Reply with your first action.")
        return "\n".join(lines)
    if o.kind == "command_result":
        status = "timed out" if o.timed_out else f"exit code {o.exit_code}"
        lines = [f"Step {o.step}: command finished ({status})."]
    elif o.kind == "file_written":
        lines = [f"Step {o.step}: file written."]
    else:
        lines = [f"Step {o.step}: error."]
    if o.message:
        lines.append(o.message)
    if o.kind == "command_result" or o.stdout:
        lines.append(f"stdout:\n{_clip(o.stdout, limit) if o.stdout else '(empty)'}")
    if o.stderr:
        lines.append(f"stderr:\n{_clip(o.stderr, limit)}")
    lines.append("Reply with your next action.")
    return "\n".join(lines)


def action_json(action: Action) -> str:
    """An action as the JSON reply a model would have given for it."""
    return json.dumps({"action": action.model_dump(mode="json", exclude_none=True)})
