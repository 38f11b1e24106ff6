"""scripted: a Python agent for reference runs and tests.

It performs a fixed list of tool actions (or actions computed by a function of the task) with
the same tools and transcript as toolloop, so its effort and outputs are comparable. The
oracle and the null agent of a Harbor trial are scripted agents
(`metaeval.agents.reference`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from metaeval.agents.effort import compute_effort
from metaeval.agents.tools import TOOL_KINDS, ToolOutput, run_tool
from metaeval.agents.types import (
    AgentResult,
    AgentStatus,
    Limits,
    Task,
    TranscriptEvent,
    env_files,
)
from metaeval.errors import MetaevalError
from metaeval.sandbox.process import SandboxNotStarted

if TYPE_CHECKING:
    from metaeval.sandbox.environment import Environment

Action = tuple[str, dict[str, Any]]
ActionSource = Sequence[Action] | Callable[[Task], Sequence[Action]]


class ScriptedAgent:
    """Runs scripted (tool, args) actions; a submit action ends the run with status ok.

    Each action gets what is left of the time limit, at most `action_timeout_s` (None: no
    cap of its own). `sees_solution` asks a Harbor trial to show the task's solution
    (`metaeval.tasks.trial.PhaseAgent`)."""

    def __init__(
        self,
        actions: ActionSource,
        name: str = "scripted",
        *,
        action_timeout_s: float | None = 60.0,
        sees_solution: bool = False,
    ):
        self.actions = actions
        self.name = name
        self.action_timeout_s = action_timeout_s
        self.sees_solution = sees_solution

    def run(self, task: Task, env: Environment, limits: Limits) -> AgentResult:
        """Execute the actions in order under the same step and time limits as any agent."""
        started = time.monotonic()
        before = env_files(env)
        actions = self.actions(task) if callable(self.actions) else self.actions
        transcript = [TranscriptEvent(type="user", text=task.instruction, t=0.0)]
        status: AgentStatus = "timeout"
        reason, submission, error, infra = "no_submit", None, None, False
        steps = 0
        for steps, (tool, args) in enumerate(actions, start=1):
            if steps > limits.max_steps:
                steps -= 1
                reason = "step_limit"
                break
            if time.monotonic() - started > limits.time_limit_s:
                reason = "time_limit"
                break
            remaining = max(1.0, limits.time_limit_s - (time.monotonic() - started))
            if self.action_timeout_s is not None:
                remaining = min(remaining, self.action_timeout_s)
            try:
                output = _act(env, task, limits, tool, args, steps, transcript, remaining)
            except SandboxNotStarted as exc:  # the harness's sandbox, not the script: retried
                status, reason, error, infra = "error", "sandbox_error", str(exc), True
                break
            if output.submitted is not None:
                status, reason, submission = "ok", "submitted", output.submitted
                break
        else:
            error = "script ended without submit"
        return AgentResult(
            status=status,
            stop_reason=reason,
            infra_error=infra,
            error=error,
            submission=submission,
            files_produced=sorted(env_files(env) - before),
            cost_usd=0.0,
            effort=compute_effort(transcript),
            steps=steps,
            wall_clock_s=time.monotonic() - started,
            time_limit_s=limits.time_limit_s,
            transcript=transcript,
        )


def _act(
    env: Environment,
    task: Task,
    limits: Limits,
    tool: str,
    args: dict[str, Any],
    step: int,
    transcript: list[TranscriptEvent],
    timeout_s: float,
) -> ToolOutput:
    """Run one scripted action within `timeout_s` and record its call and result in the
    transcript."""
    call_id = f"call-{step}"
    transcript.append(
        TranscriptEvent(
            type="tool_call",
            id=call_id,
            tool=tool,
            kind=TOOL_KINDS.get(tool, "other"),
            arguments=args,
            arguments_json=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
        )
    )
    try:
        output = run_tool(
            env, tool, args, limits.max_tool_output_bytes, timeout_s, task.allow_write
        )
    except MetaevalError as exc:
        output = ToolOutput(text=f"error: {exc}\n", raw_bytes=len(str(exc)) + 8)
    transcript.append(
        TranscriptEvent(
            type="tool_result",
            id=f"result-{call_id}",
            call_id=call_id,
            text=output.text,
            span=output.span,
            raw_bytes=output.raw_bytes,
        )
    )
    return output
