"""The plan of one recursive run: everything the trial loop needs, resolved from the
manifest by `runner.build_plan`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.boundary import MutationBoundary
from metaeval.protocols.improve.config import TargetModelSettings
from metaeval.protocols.improve.profiles import SystemProfile


@dataclass
class Plan:
    """Everything one recursive run needs, resolved from the manifest."""

    bundle: Path
    run_id: str
    repo: Path
    baseline_id: str
    baseline_commit: str
    target_profile: SystemProfile
    target_settings: TargetModelSettings  # manifest `sum`: the target's model, fixed
    boundary: MutationBoundary
    optimize_tasks: list[Path]
    held_out_tasks: list[Path] | None
    held_out_required: bool
    selection_gate: str
    trial_budget: int
    step_timeout_s: float
    max_steps_per_task: int = 10
    task_timeout_s: float = 120.0
    command_timeout_s: float = 30.0
    concurrency: int = 1
    host_env: tuple[str, ...] = ()  # host variables task.toml's env tables may read
    sandbox: str = "bwrap"  # where tasks run: bwrap, auto, docker, podman (episode_room)
    meta_timeout_s: float = 600.0  # the meta-agent's wall clock per trial (SUT `timeout_s`)
    meta_max_steps: int = 40  # the meta-agent's steps per trial (SUT `max_steps`)
    tool_menu: tuple[str, ...] = ()  # tools the meta-agent is offered; empty: all
    sut_config: str | None = None  # the SUT config file, for errors naming its fields
    documents: dict[str, Any] = field(default_factory=dict)  # bundle files written at start
