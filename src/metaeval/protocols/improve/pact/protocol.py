"""PACT wire format: the one interface every evaluation-facing system serves.

GET /health -> Health; GET /describe -> Describe; POST /reset (ResetRequest) -> ResetResponse;
POST /act (ActRequest) -> ActResponse. JSON bodies. The benchmark owns the environment: /reset
starts an episode with a task's instruction, /act takes the latest observation and returns the
next action; the harness executes actions in its sandbox and records every step.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PACT_VERSION = "pact/1"
TOKEN_ENV = "METAEVAL_PACT_TOKEN"
"""The variable `launcher.launch` puts a fresh token in for metaeval's own server to check."""


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Describe(BaseModel):
    """What a server is: its name, version, the PACT version and the actions it may emit."""

    name: str
    version: str = "0"
    contract: str = PACT_VERSION
    actions: list[str] = Field(default_factory=lambda: ["command", "write_file", "submit"])
    info: dict[str, Any] = Field(default_factory=dict)


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode_id: str
    task_id: str
    instruction: str
    max_steps: int = 30


class ResetResponse(BaseModel):
    episode_id: str
    ok: bool = True


class Observation(BaseModel):
    """The latest observation: `initial` at the start, then the result of the last action."""

    kind: Literal["initial", "command_result", "file_written", "error"]
    step: int = 0
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    message: str = ""


class ActRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode_id: str
    observation: Observation


class CommandAction(BaseModel):
    type: Literal["command"] = "command"
    command: str
    timeout_s: float | None = None


class WriteFileAction(BaseModel):
    type: Literal["write_file"] = "write_file"
    path: str
    content: str


class SubmitAction(BaseModel):
    type: Literal["submit"] = "submit"
    answer: str = ""


Action = Annotated[CommandAction | WriteFileAction | SubmitAction, Field(discriminator="type")]


class ActResponse(BaseModel):
    episode_id: str
    action: Action
    usage: dict[str, int] = Field(default_factory=dict)  # model tokens spent on this step
