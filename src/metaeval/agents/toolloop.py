"""toolloop: the built-in agent. One loop: ask the model for an action, run it, repeat.

Models with native tool calling get the tools as tool specs. Models without it (the local
llama.cpp models) get one JSON-schema-constrained action per step, so every step parses.
The run ends on submit, on the step or time limit (status "timeout"), or on a model failure.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metaeval.agents.effort import compute_effort
from metaeval.agents.tools import TOOL_KINDS, ToolOutput, run_tool, tool_specs
from metaeval.agents.types import (
    AgentResult,
    AgentStatus,
    Limits,
    Task,
    TranscriptEvent,
    env_files,
)
from metaeval.errors import MetaevalError
from metaeval.models.types import Message, ModelRequest, ModelResult, ToolCall, ToolSpec, Usage
from metaeval.sandbox.process import SandboxNotStarted
from metaeval.transient import is_transient

if TYPE_CHECKING:
    from metaeval.models.base import Model
    from metaeval.sandbox.environment import Environment

SYSTEM_PROMPT = """\
You are a careful software agent working inside a repository. Use the tools to look at files,
then call submit with your final answer. Start with list_dir on "." to see what exists.
Read before you answer; do not guess file names or contents.
"""

REPEAT_NOTE = "[you repeated your previous action; choose a different one or submit]\n"
LAST_STEP_NOTE = "This is your last step. Submit your answer now."

JSON_MODE_HINT = """\
Reply with exactly one JSON action per turn: {{"tool": NAME, "args": {{...}}}}.
Tools:
{tools}
"""


def action_schema(specs: list[ToolSpec]) -> dict[str, Any]:
    """JSON schema for one action of a model without native tool calls."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"tool": {"const": s.name}, "args": s.parameters},
                "required": ["tool", "args"],
            }
            for s in specs
        ]
    }


def _describe_tools(specs: list[ToolSpec]) -> str:
    lines = []
    for spec in specs:
        params = ", ".join(spec.parameters.get("properties", {}))
        lines.append(f"- {spec.name}({params}): {spec.description}")
    return "\n".join(lines)


def _parse_json_action(text: str, step: int) -> ToolCall:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("args", {}), dict):
        raise ValueError("action must be an object with 'tool' and 'args'")
    args = data.get("args", {})
    return ToolCall(
        id=f"call-{step}",
        name=str(data.get("tool", "")),
        arguments=args,
        arguments_json=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
    )


class ToolLoopAgent:
    """The built-in agent for any model."""

    name = "toolloop"

    def __init__(self, model: Model, system_prompt: str = SYSTEM_PROMPT, temperature: float = 0.0):
        self.model = model
        self.system_prompt = system_prompt
        self.temperature = temperature

    def _initial_messages(self, task: Task, specs: list[ToolSpec], native: bool) -> list[Message]:
        system = self.system_prompt
        if not native:
            system += "\n" + JSON_MODE_HINT.format(tools=_describe_tools(specs))
        return [
            Message(role="system", content=system),
            Message(role="user", content=task.instruction),
        ]

    def run(self, task: Task, env: Environment, limits: Limits) -> AgentResult:
        """Run the loop until submit or a limit; never raises for model or tool failures.

        A model call still running at the time limit is abandoned (its answer discarded):
        the run returns at the limit, as a timeout."""
        started = time.monotonic()
        before = env_files(env)
        native = self.model.supports_native_tools()
        specs = tool_specs(task.allow_write, task.metadata.get("answer_schema"), task.tools)
        messages = self._initial_messages(task, specs, native)
        run = _Run(
            task=task,
            workspace=env,
            limits=limits,
            native=native,
            specs=specs,
            messages=messages,
            transcript=[
                TranscriptEvent(type="system", text=messages[0].content, t=0.0),
                TranscriptEvent(type="user", text=messages[1].content, t=0.0),
            ],
            started=started,
        )
        step = 0
        while run.state.status is None:
            if step >= limits.max_steps:
                run.state.finish(
                    "timeout", "step_limit", f"step limit of {limits.max_steps} reached"
                )
            elif time.monotonic() >= run.deadline:
                run.state.finish("timeout", "time_limit", time_limit_error(limits))
            else:
                step += 1
                self._step(run, step)
        state = run.state
        return AgentResult(
            status=state.status or "error",
            stop_reason=state.stop_reason,
            infra_error=state.infra_error,
            error=state.error,
            submission=state.submission,
            files_produced=sorted(env_files(env) - before),
            usage=state.usage,
            cost_usd=state.cost_usd,
            effort=compute_effort(run.transcript),
            steps=step,
            wall_clock_s=time.monotonic() - started,
            time_limit_s=limits.time_limit_s,
            transcript=run.transcript,
            model_calls=state.model_calls,
        )

    def _step(self, run: _Run, step: int) -> None:
        """One step: ask the model for an action, run the tool calls it made, and hand the
        results back; a submit (or a model failure) ends the run through `run.state`."""
        # On the last step a JSON-action model may only submit, so it still hands in an answer.
        force_submit = not run.native and step == run.limits.max_steps
        step_specs = [s for s in run.specs if s.name == "submit"] if force_submit else run.specs
        if force_submit:
            run.messages.append(Message(role="user", content=LAST_STEP_NOTE))
        request = ModelRequest(
            model=self.model.name,
            messages=run.messages,
            tools=run.specs if run.native else [],
            json_schema=None if run.native else action_schema(step_specs),
            temperature=self.temperature,
            max_tokens=run.limits.max_tokens_per_step,
            seed=run.task.metadata.get("seed"),
        )
        result = self._call_model(request, run)
        if result is None:
            return
        now = time.monotonic() - run.started
        calls = self._calls_from(result, step, run.native, run.transcript, now)
        tool_calls = calls if run.native else []
        run.messages.append(Message(role="assistant", content=result.text, tool_calls=tool_calls))
        if not calls:
            note = "No valid action. Call a tool, or submit your answer."
            run.messages.append(Message(role="user", content=note))
            return
        for call in calls:
            try:
                output = self._run_call(call, run)
            except SandboxNotStarted as exc:  # the harness's sandbox, not the agent: retried
                run.state.finish("error", "sandbox_error", str(exc), infra=True)
                return
            self._deliver(run, call, output)
            if output.submitted is not None:
                run.state.submission = output.submitted
                run.state.finish("ok", "forced_submit" if force_submit else "submitted")
                return

    def _deliver(self, run: _Run, call: ToolCall, output: ToolOutput) -> None:
        """Record a tool's output in the transcript and give it to the model (noting a
        repeated action)."""
        signature = (call.name, json.dumps(call.arguments, sort_keys=True))
        if signature == run.state.last_action:
            output.note += REPEAT_NOTE
        run.state.last_action = signature
        run.transcript.append(
            TranscriptEvent(
                type="tool_result",
                id=f"result-{call.id}",
                call_id=call.id,
                text=output.text,
                span=output.span,
                raw_bytes=output.raw_bytes,
                t=time.monotonic() - run.started,
            )
        )
        if run.native:
            run.messages.append(
                Message(role="tool", content=output.for_model, tool_call_id=call.id)
            )
        else:
            run.messages.append(
                Message(role="user", content=f"Result of {call.name}:\n{output.for_model}")
            )

    def _call_model(self, request: ModelRequest, run: _Run) -> ModelResult | None:
        state = run.state
        try:
            result = complete_by(self.model, request, run.deadline)
        except DeadlinePassed:
            state.finish("timeout", "time_limit", time_limit_error(run.limits, in_call=True))
            return None
        except MetaevalError as exc:
            # retries exhausted on a rate limit or a dead server, a provider not usable yet:
            # infrastructure (retried on resume); a rejected request (fatal) fails again
            state.finish("error", "model_error", str(exc), infra=is_transient(exc))
            return None
        except ValueError as exc:  # e.g. the prompt no longer fits the context window
            state.finish("error", "model_error", f"{type(exc).__name__}: {exc}")
            return None
        except Exception as exc:  # noqa: BLE001 - the harness's failure, not the agent's
            state.finish(
                "error", "model_error", f"{type(exc).__name__}: {exc}", infra=is_transient(exc)
            )
            return None
        state.add(result)
        return result

    def _calls_from(
        self, result: ModelResult, step: int, native: bool, transcript: list, now: float
    ) -> list[ToolCall]:
        if result.text:
            transcript.append(TranscriptEvent(type="assistant", text=result.text, t=now))
        if native:
            calls = result.tool_calls
        else:
            try:
                calls = [_parse_json_action(result.text, step)]
            except (ValueError, TypeError) as exc:
                transcript.append(TranscriptEvent(type="error", text=f"unparsable action: {exc}"))
                return []
        for call in calls:
            transcript.append(
                TranscriptEvent(
                    type="tool_call",
                    id=call.id,
                    tool=call.name,
                    kind=TOOL_KINDS.get(call.name, "other"),
                    arguments=call.arguments,
                    arguments_json=call.arguments_json or None,
                    t=now,
                )
            )
        return calls

    def _run_call(self, call: ToolCall, run: _Run) -> ToolOutput:
        remaining = max(1.0, run.deadline - time.monotonic())
        task = run.task
        try:
            if task.tools is not None and call.name not in run.offered:  # outside the menu
                raise MetaevalError(
                    f"tool not offered: {call.name} (offered: {', '.join(sorted(run.offered))})"
                )
            return run_tool(
                run.workspace,
                call.name,
                call.arguments,
                run.limits.max_tool_output_bytes,
                timeout_s=min(remaining, 120.0),
                allow_write=task.allow_write,
            )
        except (MetaevalError, OSError, ValueError, TypeError) as exc:
            text = f"error: {exc}\n"
            return ToolOutput(text=text, raw_bytes=len(text.encode("utf-8")))


class _RunState:
    """Accumulates usage and the final outcome of one run."""

    def __init__(self) -> None:
        self.status: AgentStatus | None = None
        self.stop_reason = ""
        self.error: str | None = None
        self.infra_error = False
        self.submission: str | None = None
        self.usage = Usage()
        self.cost_usd: float | None = 0.0
        self.model_calls: list[dict[str, Any]] = []
        self.last_action: tuple[str, str] | None = None

    def add(self, result: ModelResult) -> None:
        self.usage = self.usage + result.usage
        if result.cost_usd is None or self.cost_usd is None:
            self.cost_usd = None  # one unpriced call makes the total unknown, never 0
        else:
            self.cost_usd += result.cost_usd
        self.model_calls.append(result.model_dump(mode="json"))

    def finish(
        self, status: AgentStatus, reason: str, error: str | None = None, infra: bool = False
    ) -> None:
        self.status, self.stop_reason, self.error, self.infra_error = status, reason, error, infra


@dataclass
class _Run:
    """One run in progress: its task and limits, the conversation so far, and its state."""

    task: Task
    workspace: Environment
    limits: Limits
    native: bool
    specs: list[ToolSpec]
    messages: list[Message]
    transcript: list[TranscriptEvent]
    started: float
    state: _RunState = field(default_factory=_RunState)

    @property
    def deadline(self) -> float:
        return self.started + self.limits.time_limit_s

    @property
    def offered(self) -> set[str]:
        return {s.name for s in self.specs}


class DeadlinePassed(Exception):
    """A model call was still running at the run's time limit."""


def complete_by(model: Model, request: ModelRequest, deadline: float) -> ModelResult:
    """`model.complete(request)`, waited for until monotonic `deadline` at the latest.

    The call runs in a daemon thread; one still running at the deadline is abandoned (it
    ends on its own, its answer discarded) and DeadlinePassed is raised. Its exception, if
    it failed in time, is raised here."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def call() -> None:
        try:
            outcome["result"] = model.complete(request)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, name="toolloop-model-call", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise DeadlinePassed
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def time_limit_error(limits: Limits, in_call: bool = False) -> str:
    """The error of a run stopped by its time limit."""
    text = f"time limit of {limits.time_limit_s}s reached"
    return text + " (a model call still running was abandoned)" if in_call else text
