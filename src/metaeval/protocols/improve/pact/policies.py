"""Policies: what a PACT server asks for the next action.

A policy sees one episode at a time: `reset(request)` starts it with the task's instruction,
then `act(observation)` is called once per step and returns the next action (or a `Step`, an
action plus the model tokens it cost). The policy never executes anything itself: the
benchmark runs the action in its sandbox and sends the result back as the next observation.

Implementations here: `ScriptedPolicy` (canned actions, for tests and smoke runs) and
`ModelPolicy` (a step-level agent over any metaeval model, asking for JSON actions).
`load_policy("module:factory")` builds a policy from a dotted path; the small factories at
the bottom (`echo_policy`, `crash_policy`, ...) are there for tests and examples.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from metaeval.errors import ConfigError, MetaevalError
from metaeval.models.base import Model
from metaeval.models.types import Message, ModelRequest, Usage
from metaeval.protocols.improve.pact.action_text import (
    ACTION_ADAPTER,
    DEFAULT_SYSTEM_PROMPT,
    action_json,
    action_json_schema,
    parse_action,
    render_observation,
)
from metaeval.protocols.improve.pact.protocol import (
    Action,
    CommandAction,
    Describe,
    Observation,
    ResetRequest,
    SubmitAction,
    WriteFileAction,
)

log = logging.getLogger(__name__)


@dataclass
class Step:
    """An action plus what producing it cost (`usage`: token counts) and an optional note."""

    action: Action
    usage: dict[str, int] = field(default_factory=dict)
    note: str = ""


@runtime_checkable
class Policy(Protocol):
    """The interface a PACT server drives. One episode at a time; calls are serialized."""

    def describe(self) -> Describe:
        """Name, version and the actions this policy may emit."""
        ...

    def reset(self, request: ResetRequest) -> None:
        """Forget any previous episode and start `request` (instruction, step budget)."""
        ...

    def act(self, observation: Observation) -> Action | Step:
        """The next action for the current episode, given the latest observation."""
        ...


def as_step(result: Any) -> Step:
    """Normalise what `Policy.act` returned (an Action, a Step or an action dict) to a Step."""
    if isinstance(result, Step):
        return result
    if isinstance(result, CommandAction | WriteFileAction | SubmitAction):
        return Step(action=result)
    if isinstance(result, dict):
        return Step(action=ACTION_ADAPTER.validate_python(result))
    raise TypeError(f"policy act() returned {type(result).__name__}, expected an Action or Step")


class PolicyError(MetaevalError):
    """A policy used out of order (act before reset) or unable to produce an action."""


# ---------------------------------------------------------------------------------------------
# Scripted


class ScriptedPolicy:
    """Canned actions: a list played in order (then SubmitAction), or `fn(observation, index)`.

    `index` counts act() calls since the last reset (0-based). Every observation received is
    kept in `observations`, every reset in `resets`.
    """

    def __init__(
        self,
        actions: Sequence[Action | Step] | Callable[[Observation, int], Action | Step],
        *,
        name: str = "scripted-policy",
        version: str = "0",
    ):
        self._actions = actions
        self.name = name
        self.version = version
        self.index = 0
        self.request: ResetRequest | None = None
        self.resets: list[ResetRequest] = []
        self.observations: list[Observation] = []

    def describe(self) -> Describe:
        return Describe(name=self.name, version=self.version, info={"kind": "scripted"})

    def reset(self, request: ResetRequest) -> None:
        self.request = request
        self.resets.append(request)
        self.index = 0

    def act(self, observation: Observation) -> Action | Step:
        if self.request is None:
            raise PolicyError("act() before reset()")
        self.observations.append(observation)
        i = self.index
        self.index += 1
        if callable(self._actions):
            return self._actions(observation, i)
        if i < len(self._actions):
            return self._actions[i]
        return SubmitAction(answer="")


# ---------------------------------------------------------------------------------------------
# Model-backed


class ModelPolicy:
    """A step-level agent over any metaeval model, one JSON action per step.

    Keeps the message history of one episode (system prompt, task, then alternating action /
    observation turns), always asks the model for `action_json_schema()` output, and parses
    the reply. A malformed reply gets one corrective retry; a second failure ends the episode
    with `SubmitAction(answer="")` and a note. `max_history_chars` bounds the history sent:
    the oldest action/observation pairs are dropped first (the task message stays).
    """

    def __init__(
        self,
        model: Model | str,
        system_prompt: str | None = None,
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        seed: int | None = None,
        max_observation_chars: int = 4000,
        max_history_chars: int = 60_000,
        name: str | None = None,
    ):
        if isinstance(model, str):
            from metaeval.models import get_model

            model = get_model(model)
        self.model = model
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.max_observation_chars = max_observation_chars
        self.max_history_chars = max_history_chars
        self.name = name or f"model-policy/{model.name}"
        self.request: ResetRequest | None = None
        self.messages: list[Message] = []
        self.notes: list[str] = []  # malformed-output notes, across episodes

    def describe(self) -> Describe:
        return Describe(
            name=self.name,
            version="1",
            info={"kind": "model", "model": self.model.name, "max_tokens": self.max_tokens},
        )

    def reset(self, request: ResetRequest) -> None:
        self.request = request
        self.messages = [
            Message(role="system", content=self.system_prompt),
            Message(
                role="user",
                content=(
                    f"Task {request.task_id}:\n{request.instruction}\n\n"
                    f"You have at most {request.max_steps} steps."
                ),
            ),
        ]

    def _window(self) -> list[Message]:
        """System + task message, then as many of the latest turns as fit the budget."""
        head, turns = self.messages[:2], self.messages[2:]
        budget = self.max_history_chars - sum(len(m.content) for m in head)
        kept: list[Message] = []
        for m in reversed(turns):
            if kept and budget - len(m.content) < 0:
                break
            budget -= len(m.content)
            kept.append(m)
        kept.reverse()
        # keep turns alternating: after the task (a user turn) the window starts with an action
        while len(kept) > 1 and kept[0].role == "user":
            kept.pop(0)
        return head + kept

    def _ask(self, messages: list[Message]) -> tuple[str, Usage, bool]:
        """The model's reply text, its usage, and whether it hit max_tokens."""
        result = self.model.complete(
            ModelRequest(
                model=self.model.name,
                messages=messages,
                json_schema=action_json_schema(),
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=self.seed,
            )
        )
        truncated = (result.finish_reason or "") in ("length", "max_tokens")
        return result.text, result.usage, truncated

    def _explain(self, error: ValueError, truncated: bool) -> str:
        if truncated:
            return f"the reply was cut off at max_tokens={self.max_tokens}: {error}"
        return str(error)

    def act(self, observation: Observation) -> Step:
        if self.request is None:
            raise PolicyError("act() before reset()")
        saved = list(self.messages)
        try:
            return self._act(observation)
        except BaseException:
            self.messages = saved  # a failed call (provider error) leaves the history as it was
            raise

    def _act(self, observation: Observation) -> Step:
        rendered = render_observation(observation, self.max_observation_chars)
        if observation.kind == "initial" and self.messages[-1].role == "user":
            # fold the initial observation into the task message: no two user turns in a row
            last = self.messages[-1]
            self.messages[-1] = last.model_copy(update={"content": f"{last.content}\n\n{rendered}"})
        else:
            self.messages.append(Message(role="user", content=rendered))
        messages = self._window()
        usage = Usage()
        text, spent, truncated = self._ask(messages)
        usage += spent
        note = ""
        try:
            action = parse_action(text)
        except ValueError as error:
            first = self._explain(error, truncated)
            retry = [
                *messages,
                Message(role="assistant", content=text),
                Message(
                    role="user",
                    content=f"That reply was not a valid action ({first}). Reply with exactly "
                    'one short JSON object such as {"action": {"type": "command", "command": '
                    '"ls"}}.',
                ),
            ]
            text, spent, truncated = self._ask(retry)
            usage += spent
            try:
                action = parse_action(text)
            except ValueError as error2:
                second = self._explain(error2, truncated)
                action = SubmitAction(answer="")
                note = f"malformed model output twice ({first}; {second}); submitted empty answer"
                self.notes.append(note)
                log.warning("ModelPolicy: %s", note)
        self.messages.append(Message(role="assistant", content=action_json(action)))
        return Step(
            action=action,
            usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            note=note,
        )


# ---------------------------------------------------------------------------------------------
# Loading


def _is_policy(obj: Any) -> bool:
    return not isinstance(obj, type) and all(
        callable(getattr(obj, m, None)) for m in ("describe", "reset", "act")
    )


def load_policy(spec: str, **kwargs: Any) -> Policy:
    """Build a policy from "package.module:factory" (or "module:attr.attr").

    The attribute is either a policy instance, or a callable (factory function or class)
    called with `kwargs` that returns one. ConfigError when the spec does not resolve.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"policy spec {spec!r} must look like package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import policy module {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"policy spec {spec!r}: {part!r} not found") from None
    if not _is_policy(obj):
        if not callable(obj):
            raise ConfigError(f"policy spec {spec!r} is neither a policy nor callable")
        obj = obj(**kwargs)
    if not _is_policy(obj):
        raise ConfigError(
            f"policy spec {spec!r} gave {type(obj).__name__}, which lacks describe/reset/act"
        )
    return obj


# ---------------------------------------------------------------------------------------------
# Small factories for tests and examples (usable as --policy module:factory)


def echo_policy() -> ScriptedPolicy:
    """Prints the instruction with one command, then submits what that command printed."""
    holder: dict[str, ScriptedPolicy] = {}

    def step(observation: Observation, index: int) -> Action:
        if index == 0:
            request = holder["policy"].request
            text = request.instruction if request else ""
            return CommandAction(command=f"printf '%s\\n' {shlex.quote(text)}")
        return SubmitAction(answer=observation.stdout.strip())

    policy = ScriptedPolicy(step, name="echo-policy")
    holder["policy"] = policy
    return policy


def crash_policy() -> ScriptedPolicy:
    """Answers the first act with a command, then kills its own process on the second."""

    def step(observation: Observation, index: int) -> Action:
        if index >= 1:
            os._exit(1)
        return CommandAction(command="true")

    return ScriptedPolicy(step, name="crash-policy")


def failing_policy() -> ScriptedPolicy:
    """Raises on every act (the server answers 500 with the message)."""

    def step(observation: Observation, index: int) -> Action:
        raise RuntimeError("failing_policy always fails")

    return ScriptedPolicy(step, name="failing-policy")


def command_policy() -> ScriptedPolicy:
    """Runs the shell commands of the JSON list in METAEVAL_PACT_COMMANDS (a launch
    profile's `env`), each reporting 5 input and 2 output tokens, then submits
    METAEVAL_PACT_SUMMARY."""
    commands = [str(c) for c in json.loads(os.environ.get("METAEVAL_PACT_COMMANDS", "[]"))]
    summary = os.environ.get("METAEVAL_PACT_SUMMARY", "done")

    def step(observation: Observation, index: int) -> Step:
        usage = {"input_tokens": 5, "output_tokens": 2}
        if index < len(commands):
            return Step(CommandAction(command=commands[index]), usage=usage)
        return Step(SubmitAction(answer=summary), usage=usage)

    return ScriptedPolicy(step, name="command-policy")
