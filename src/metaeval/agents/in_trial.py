"""An agent as the agent phase of a Harbor trial (`metaeval.tasks.trial.PhaseAgent`).

`TrialAgent` gives any agent the task's instruction (instruction.md; empty when the task has
none), the agent phase's time limit and the room's agent phase as its environment, and keeps
what the agent returned. An agent with `sees_solution` (the oracle) is shown the solution.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from metaeval.agents.types import Agent, AgentResult, Limits, Task
from metaeval.tasks.safe_files import read_regular

if TYPE_CHECKING:
    from metaeval.sandbox.environment import Environment

MAX_INSTRUCTION_BYTES = 1024 * 1024


class TrialAgent:
    """`agent` bound to a trial: run once by `run_trial(agent=...)`, its result in `result`."""

    def __init__(self, agent: Agent, *, max_steps: int = Limits().max_steps) -> None:
        self.agent = agent
        self.max_steps = max_steps
        self.result: AgentResult | None = None

    @property
    def sees_solution(self) -> bool:
        return bool(getattr(self.agent, "sees_solution", False))

    def solve(self, env: Environment, task_root: Path, timeout_s: float) -> AgentResult:
        task = Task(id=task_root.name, instruction=instruction(task_root), allow_write=True)
        limits = Limits(max_steps=self.max_steps, time_limit_s=timeout_s)
        self.result = self.agent.run(task, env, limits)
        return self.result


def instruction(task_root: Path) -> str:
    """The task's instruction.md (a link out of the task, or none at all: empty)."""
    try:
        data = read_regular(
            task_root / "instruction.md", task_root, max_bytes=MAX_INSTRUCTION_BYTES
        )
    except OSError:  # missing, or not a regular file inside the task
        return ""
    return data.decode("utf-8", errors="replace")
