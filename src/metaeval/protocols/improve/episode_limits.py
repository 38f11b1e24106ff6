"""The bounds of one evaluation episode, which travel together as one model.

A suite config (`suites.SuiteConfig`) or a plan (`plan.Plan`) sets them; `suite_eval`
passes them to every task's episode (`evaluate.evaluate_task`, `episode.Episode`): the
agent's steps, the episode's wall clock (reset included), the cap on one command, and the
verifier's time limit (None: the task's `[verifier] timeout_sec`, else Harbor's default).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_STEPS = 30
DEFAULT_TASK_TIMEOUT_S = 600.0
DEFAULT_COMMAND_TIMEOUT_S = 60.0


class EpisodeLimits(BaseModel):
    """Steps and time one episode may use; every bound is positive (ValueError otherwise)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1)
    task_timeout_s: float = Field(default=DEFAULT_TASK_TIMEOUT_S, gt=0)
    command_timeout_s: float = Field(default=DEFAULT_COMMAND_TIMEOUT_S, gt=0)
    verifier_timeout_s: float | None = Field(default=None, gt=0)


__all__ = [
    "DEFAULT_COMMAND_TIMEOUT_S",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TASK_TIMEOUT_S",
    "EpisodeLimits",
]
