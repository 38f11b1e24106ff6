"""The agent contract: run(task, env, limits) -> AgentResult, and the common transcript."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

from metaeval.models.types import Usage

if TYPE_CHECKING:
    from metaeval.sandbox.environment import Environment

EventType = Literal["system", "user", "assistant", "tool_call", "tool_result", "error", "info"]
ToolKind = Literal["read", "search", "write", "exec", "submit", "other"]
AgentStatus = Literal["ok", "timeout", "error"]


class Span(BaseModel):
    """Where a tool result's content came from: lines of a file, starting at `start_line` (1-based).

    With a span, the observation layer counts each (path, line) once; without one, it counts
    each distinct result text once.
    """

    path: str
    start_line: int = 1


class TranscriptEvent(BaseModel):
    """One event of an agent run, in the same shape for every agent and CLI adapter."""

    type: EventType
    id: str | None = None  # stable identity; a repeated id is replayed context and counted once
    text: str = ""
    tool: str | None = None  # tool name, for tool_call
    kind: ToolKind | None = None  # tool class, for tool_call
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_json: str | None = None  # the raw emitted argument text, when known
    call_id: str | None = None  # for tool_result: the tool_call it answers
    span: Span | None = None  # for tool_result of a file read
    raw_bytes: int | None = None  # for tool_result: size before any shortening
    replayed: bool = False  # context re-sent by the harness, not new to the model
    t: float | None = None  # seconds since the run started


class Effort(BaseModel):
    """Inspection effort (build-and-find, Appendix F): novel bytes the agent pulled and asked for."""

    novel_retrieval_bytes: int = 0
    novel_tool_call_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return self.novel_retrieval_bytes + self.novel_tool_call_bytes


class Task(BaseModel):
    """What an agent is asked to do. `allow_write` gates the write_file tool; `tools`, when
    set, is an allow-list of tool names (submit is always offered)."""

    id: str
    instruction: str
    allow_write: bool = False
    tools: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Limits(BaseModel):
    """Bounds on one agent run; exceeding them ends the run with a typed status."""

    max_steps: int = 20
    time_limit_s: float = 600.0
    max_tool_output_bytes: int = 16_000
    max_tokens_per_step: int = 512


class AgentResult(BaseModel):
    """What one agent run produced."""

    status: AgentStatus
    stop_reason: str = ""  # submitted | finished | step_limit | time_limit | model_error | ...
    infra_error: bool = False  # True when the harness or provider failed, not the agent
    error: str | None = None
    submission: str | None = None  # the text passed to submit, if any
    files_produced: list[str] = Field(default_factory=list)  # workspace-relative paths
    usage: Usage = Field(default_factory=Usage)
    # A CLI run on a gateway: `usage` is the gateway's count, this is what the CLI reported.
    cli_usage: Usage | None = None
    cost_usd: float | None = None
    effort: Effort = Field(default_factory=Effort)
    steps: int = 0
    wall_clock_s: float = 0.0  # the whole run() call, as its caller waited for it
    time_limit_s: float | None = None  # the limit the run was given (Limits.time_limit_s)
    transcript: list[TranscriptEvent] = Field(default_factory=list)
    model_calls: list[dict[str, Any]] = Field(default_factory=list)  # per-call usage, raw I/O

    @property
    def overrun_s(self) -> float | None:
        """Seconds the run took past its time limit (0 within it; None without a limit)."""
        if self.time_limit_s is None:
            return None
        return max(0.0, self.wall_clock_s - self.time_limit_s)


class Agent(Protocol):
    """Anything that can run a task in an environment (the toolloop and scripted agents take
    any `Environment`; a CLI adapter needs a `Workspace`, a host directory it binds). An agent
    whose `sees_solution` is true (the oracle) asks a Harbor trial to show it the solution."""

    name: str

    def run(self, task: Task, workspace: Any, limits: Limits) -> AgentResult: ...


def env_files(env: Environment) -> set[str]:
    """Paths of every file under the environment's working directory, relative to it (for
    files_produced)."""
    return set(env.list_files())


def list_files(root: Path) -> set[str]:
    """Workspace-relative paths of every regular file under root (for files_produced)."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
