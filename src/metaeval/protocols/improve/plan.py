"""The plan of one recursive run: everything the trial loop needs (`Plan`), and `build_plan`,
which resolves it from the manifest and every layer the manifest names."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaeval.agents.types import Limits
from metaeval.errors import ConfigError
from metaeval.protocols.improve.boundary import MutationBoundary, boundary_from_profile, narrow
from metaeval.protocols.improve.config import TargetModelSettings
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.episode_room import DEFAULT_SANDBOX, check_sandbox
from metaeval.protocols.improve.extension import extended_budget
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.resolve import resolve_manifest, with_models
from metaeval.protocols.improve.search.settings import SearchSettings
from metaeval.protocols.improve.split_check import check_disjoint
from metaeval.protocols.improve.suite_images import check_pull
from metaeval.protocols.improve.suites import SuiteConfig, load_suite_config, suite_tasks
from metaeval.protocols.improve.target_source import target_source


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
    # the bounds of each task's episode (the optimize suite config's budget)
    episode_limits: EpisodeLimits = field(
        default_factory=lambda: EpisodeLimits(
            max_steps=10, task_timeout_s=120.0, command_timeout_s=30.0
        )
    )
    concurrency: int = 1
    host_env: tuple[str, ...] = ()  # host variables task.toml's env tables may read
    sandbox: str = "bwrap"  # where tasks run: bwrap, auto, docker, podman (episode_room)
    # the meta-agent's steps and wall clock per trial (SUT `max_steps`, `timeout_s`)
    meta_limits: Limits = field(
        default_factory=lambda: Limits(max_steps=40, time_limit_s=600.0, max_tokens_per_step=1024)
    )
    tool_menu: tuple[str, ...] = ()  # tools the meta-agent is offered; empty: all
    sut_config: str | None = None  # the SUT config file, for errors naming its fields
    documents: dict[str, Any] = field(default_factory=dict)  # bundle files written at start
    search: SearchSettings = field(default_factory=SearchSettings)  # parent choice (issue 41)
    search_seed: int = 0  # the search's seed: `search.seed`, else the manifest's `seed`
    pull: str = "never"  # --pull: never | missing | always (`suite_images`)
    baseline_repeats: int = 1  # evaluations of the baseline (`noise`)
    noise_gate: str = "off"  # off | above_spread (`noise`)


def _boundary(resolved: Any) -> MutationBoundary:
    policy = resolved.manifest.mutation_policy
    if policy.source == "file":
        return MutationBoundary.model_validate(resolved.boundary)
    base = boundary_from_profile(resolved.sum_profile)
    return narrow(base, resolved.boundary) if resolved.boundary else base


def _tasks(suite: Any) -> tuple[list[Path], SuiteConfig]:
    config = load_suite_config(suite.suite_config)
    if suite.split_id:
        config = config.model_copy(update={"split_id": suite.split_id})
    return suite_tasks(config), config


def suite_hash(tasks: Sequence[Path]) -> str:
    """sha256 over the split's task list (names, in order) and every file of every task."""
    from metaeval.tasks.bench_hash import benchmark_hash

    digest = hashlib.sha256()
    for task in tasks:
        digest.update(task.name.encode() + b"\0")
        digest.update(benchmark_hash(task.parent, [task]).encode() + b"\0")
    return "sha256:" + digest.hexdigest()


def _contract_json(
    resolved: Any, budget: int | None, sandbox: str, suites: dict[str, list[Path] | None]
) -> dict[str, Any]:
    """resolved_manifest.json: the resolved manifest and the contract as it runs: the
    effective budget (`--budget` included), models, sandbox, every suite's content and the
    meta-agent's limits, so a resume with any of them changed is refused (`open_bundle`)."""
    manifest, sut = resolved.manifest, resolved.sut
    data: dict[str, Any] = resolved.to_json()
    data["trial_budget"] = budget or manifest.trial_budget
    data["models"] = {"target": manifest.sum.model, "meta_agent": sut.meta_agent.model}
    data["sandbox"] = sandbox  # where the tasks and their verifiers run
    data["noise"] = {"baseline_repeats": manifest.baseline_repeats, "gate": manifest.noise_gate}
    data["suites"] = {
        split: {"tasks": [t.name for t in tasks], "sha256": suite_hash(tasks)}
        for split, tasks in suites.items()
        if tasks is not None
    }
    # the meta-agent's limits as they run (Plan.meta_*): the SUT config's, with its defaults
    data["meta_agent_limits"] = {
        "timeout_s": min(sut.timeout_s, manifest.budget_step_timeout_s),
        "max_steps": sut.max_steps,
        "tool_menu": list(sut.tool_menu) or "full",
        "launch_profile": resolved.launch_profile.name if resolved.launch_profile else None,
    }
    return data


def _sut_contract(resolved: Any) -> dict[str, Any]:
    """sut_contract.json: the SUT and what one proposal receives and returns."""
    return {
        "sut": resolved.sut.model_dump(mode="json"),
        "contract": resolved.sut.contract,
        "contract_input": [
            "trial",
            "parent",
            "target_state",
            "feedback",
            "parent_results",
            "invalid_trials",
            "boundary",
            "remaining_budget",
            "suites",
        ],
        "contract_output": "edit/1: edits in the worktree, diff taken by the harness; "
        "patch/1: a unified diff naming its parent",
    }


def build_plan(
    manifest_path: Path,
    output: Path | None = None,
    budget: int | None = None,
    host_env: Sequence[str] = (),
    sandbox: str | None = None,
    models: Mapping[str, str | None] | None = None,
    pull: str = "never",
) -> tuple[Plan, Any]:
    """Resolve the manifest and every layer it names into a Plan (and the resolved manifest).

    `host_env` names the host variables task.toml's env tables may read (`--allow-host-env`);
    `sandbox` where the tasks run (`--sandbox`, `metaeval.protocols.improve.episode_room`);
    `models` the models of `-M/--target-model/--meta-model` (`resolve.with_models`);
    `pull` which task images are fetched first (`--pull`, `suite_images`).
    """
    check_pull(pull)
    sandbox = sandbox or DEFAULT_SANDBOX
    try:
        check_sandbox(sandbox)
    except ValueError as exc:
        raise ConfigError(str(exc), field="sandbox") from None
    resolved = with_models(resolve_manifest(manifest_path), **(models or {}))
    manifest = resolved.manifest
    bundle = _bundle_dir(output or resolved.output, manifest_path if output is None else None)
    boundary = _boundary(resolved)
    optimize_tasks, optimize_config = _tasks(resolved.optimize)
    held_tasks = None
    if resolved.held_out is not None:
        held_tasks, _ = _tasks(resolved.held_out)
    check_disjoint(optimize_tasks, held_tasks, resolved.manifest_path)
    suites = {"optimize": optimize_tasks, "held_out": held_tasks}
    budget = budget or extended_budget(bundle)
    resolved_json = _contract_json(resolved, budget, sandbox, suites)
    resolved_json["pull"] = pull  # like the sandbox: "always" may fetch a newer image
    resolved_json["target_source"] = target_source(manifest.baseline.repo, resolved.base_commit)
    sut = resolved.sut
    held = manifest.evaluation.held_out
    plan = Plan(
        bundle=bundle,
        run_id=bundle.name,
        repo=manifest.baseline.repo,
        baseline_id=manifest.baseline.id,
        baseline_commit=resolved.base_commit,
        target_profile=resolved.sum_profile,
        target_settings=manifest.sum,
        boundary=boundary,
        optimize_tasks=optimize_tasks,
        held_out_tasks=held_tasks,
        held_out_required=held.required,
        selection_gate=held.selection_gate,
        trial_budget=budget or manifest.trial_budget,
        step_timeout_s=manifest.budget_step_timeout_s,
        episode_limits=_episode_limits(resolved.target_budget, optimize_config),
        concurrency=getattr(optimize_config, "concurrency", 1),
        host_env=tuple(dict.fromkeys(host_env)),
        sandbox=sandbox,
        meta_limits=_meta_limits(sut, manifest.budget_step_timeout_s),
        tool_menu=tuple(sut.tool_menu),
        sut_config=resolved.sut_source,
        documents=_documents(resolved, resolved_json, boundary),
        search=manifest.search,
        search_seed=resolved.search_json()["seed"],
        pull=pull,
        baseline_repeats=manifest.baseline_repeats,
        noise_gate=manifest.noise_gate,
    )
    return plan, resolved


def _episode_limits(target_budget: Any, optimize_config: Any) -> EpisodeLimits:
    """Each task episode's bounds: the target budget's steps and time, the optimize suite
    config's cap on one command."""
    return EpisodeLimits(
        max_steps=target_budget.max_steps_per_task,
        task_timeout_s=target_budget.task_timeout_s,
        command_timeout_s=getattr(optimize_config, "command_timeout_s", 30.0),
    )


def _meta_limits(sut: Any, step_timeout_s: float) -> Limits:
    """The meta-agent's bounds per trial: the SUT config's steps and time (at most the
    manifest's `budget_step_timeout_s`)."""
    return Limits(
        max_steps=sut.max_steps,
        time_limit_s=min(sut.timeout_s, step_timeout_s),
        max_tokens_per_step=1024,
    )


def _documents(
    resolved: Any, resolved_json: dict[str, Any], boundary: MutationBoundary
) -> dict[str, Any]:
    """The contract documents written into the bundle, by file name."""
    return {
        "source_manifest.json": resolved.source_text,
        "resolved_manifest.json": resolved_json,
        "sut_contract.json": _sut_contract(resolved),
        "sum_boundary.json": json.loads(boundary.to_json()),
    }


def _bundle_dir(output: Path, manifest_path: Path | None) -> Path:
    """The bundle directory, absolute; an existing non-directory there is a ConfigError
    (against the manifest when the manifest named it)."""
    bundle = output.resolve()
    if bundle.exists() and not bundle.is_dir():
        raise ConfigError(
            f"bundle directory {bundle} exists and is not a directory",
            file=str(manifest_path) if manifest_path is not None else None,
            field="output",
        )
    return bundle
