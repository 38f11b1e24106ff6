"""What an episode on one task comes to (`TaskOutcome`), and what the evaluator needs from
the target agent it talks to (`EpisodeClient`)."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from metaeval.protocols.improve.pact.protocol import ActRequest, ActResponse, ResetRequest

TaskStatus = Literal["passed", "failed", "infra_error", "target_error"]


class EpisodeClient(Protocol):
    """What the evaluator needs from a target agent (PactClient satisfies it)."""

    def reset(self, request: ResetRequest) -> Any: ...

    def act(self, request: ActRequest) -> ActResponse: ...


class TaskOutcome(BaseModel):
    """The result of one episode on one task."""

    task_id: str
    status: TaskStatus
    reward: float | None = None
    steps: int = 0  # actions received from the agent
    submitted: bool = False
    answer: str = ""  # the submit action's answer
    reason: str = ""
    trace: list[dict[str, Any]] = Field(default_factory=list)
    test_log: str = ""
    usage: dict[str, int] = Field(default_factory=dict)  # summed over steps
    duration_s: float = 0.0
    backend: str = ""  # where the trial ran: "bubblewrap", "podman 4.9.3 (image ...)"
    image_id: str | None = None  # the image id both phases ran in (containers only)

    @property
    def scored(self) -> bool:
        """True when the outcome counts toward accuracy (passed or failed)."""
        return self.status in ("passed", "failed")


_TASK_ID_SALT = os.urandom(16)


def opaque_task_id(name: str) -> str:
    """The id a target is told for a task: stable within one process, meaningless outside it,
    so a candidate cannot look the task's answers up by name."""
    return "task-" + hashlib.sha256(_TASK_ID_SALT + name.encode()).hexdigest()[:12]


def describe_error(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
