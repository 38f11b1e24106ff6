"""The step policy: follow a matching recipe, else ask the model, else submit."""

from __future__ import annotations

import json
import os

from metaeval.protocols.improve.pact.protocol import (
    CommandAction,
    Describe,
    Observation,
    ResetRequest,
    SubmitAction,
    WriteFileAction,
)
from target_agent import playbook, prompts

# No maxLength: llama.cpp's server turns each bound into nested grammar rules and refuses the
# grammar ("exceeds sane defaults"); the reply's length is bounded by max_tokens instead.
ACTION_SCHEMA = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "type": {"const": "command"},
                "command": {"type": "string"},
            },
            "required": ["type", "command"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "write_file"},
                "path": {"type": "string"},
                "content": {"type": "string"},
            },
            "required": ["type", "path", "content"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "submit"},
                "answer": {"type": "string"},
            },
            "required": ["type"],
        },
    ]
}


class TargetPolicy:
    """One episode at a time: recipe commands first, then model turns up to the step limit."""

    def __init__(self, model_name: str | None = None):
        self.model_name = model_name or os.environ.get("METAEVAL_TARGET_MODEL", "none")
        self.model = None
        if self.model_name not in ("", "none"):
            from metaeval.models.registry import get_model

            self.model = get_model(self.model_name)
        self.queue: list[str] = []
        self.messages: list = []

    def describe(self) -> Describe:
        return Describe(name="target_agent", version="1", info={"model": self.model_name})

    def reset(self, request: ResetRequest) -> None:
        from metaeval.models.types import Message

        recipe = playbook.match(request.instruction)
        self.queue = list(recipe) if recipe else []
        self.messages = [
            Message(role="system", content=prompts.SYSTEM_PROMPT),
            Message(role="user", content=request.instruction),
        ]

    def act(self, observation: Observation):
        if self.queue:
            return CommandAction(command=self.queue.pop(0))
        if self.model is None or observation.step >= 8:
            return SubmitAction(answer="")
        return self._model_action(observation)

    def _model_action(self, observation: Observation):
        from metaeval.models.types import Message, ModelRequest

        if observation.kind != "initial":
            text = f"exit {observation.exit_code}\n{observation.stdout}{observation.stderr}{observation.message}"
            self.messages.append(Message(role="user", content=text[-2000:]))
        request = ModelRequest(
            model=self.model_name, messages=self.messages, json_schema=ACTION_SCHEMA, max_tokens=256
        )
        assert self.model is not None  # act() submits without a model
        result = self.model.complete(request)
        self.messages.append(Message(role="assistant", content=result.text))
        try:
            data = json.loads(result.text)
        except json.JSONDecodeError:
            return SubmitAction(answer="")
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "command" and data.get("command"):
            return CommandAction(command=str(data["command"]))
        if kind == "write_file" and data.get("path"):
            return WriteFileAction(path=str(data["path"]), content=str(data.get("content", "")))
        return SubmitAction(answer=str(data.get("answer", "")) if isinstance(data, dict) else "")
