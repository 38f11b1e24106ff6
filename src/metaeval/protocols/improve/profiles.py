"""System profiles: how one evaluation-facing system (a PACT server) is launched."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SystemProfile(BaseModel):
    """Launch command, working directory, environment, host/port, startup timeout, paths.

    `command` is an argv list; the strings `{port}` and `{host}` in it are filled in at launch
    (port 0 means: pick a free port). Target-agent profiles also declare the mutable root and
    the allowed mutation paths for recursive experiments, and how they reach their model:
    `model_api: metaeval` (the target loads the model named by METAEVAL_TARGET_MODEL itself)
    or `openai` (it calls the OpenAI-compatible endpoint in METAEVAL_TARGET_BASE_URL, which the
    harness serves itself for `local/` models).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    command: list[str] = Field(min_length=1)
    cwd: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    startup_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    health_path: str = "/health"
    describe_path: str = "/describe"
    mutable_root: str | None = None  # scaffold-relative root the meta-agent may change
    allowed_mutation_paths: list[str] = Field(default_factory=list)  # under mutable_root
    model_api: Literal["metaeval", "openai"] = "metaeval"


TOOLLOOP_TARGET = SystemProfile(
    name="toolloop-target",
    command=[
        "{python}",
        "-m",
        "metaeval.protocols.improve.pact.server",
        "--policy",
        "target_agent.pact:make_policy",
        "--host",
        "{host}",
        "--port",
        "{port}",
    ],
    cwd=Path("."),
    mutable_root="target_agent",
    allowed_mutation_paths=["."],
)
"""The target agent `metaeval improve init-target toolloop` writes, served over PACT: the
target profile of a SUT config that names none (the whole `target_agent/` is mutable)."""
