"""Run a recursive improve experiment from its manifest into a bundle (resumable)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import ValidationError

from metaeval.config_files import validation_error
from metaeval.errors import ConfigError
from metaeval.protocols.improve.boundary import MutationBoundary, boundary_from_profile, narrow
from metaeval.protocols.improve.episode_room import DEFAULT_SANDBOX, check_sandbox
from metaeval.protocols.improve.loop import TrialLoop
from metaeval.protocols.improve.meta_agents import make_meta_agent
from metaeval.protocols.improve.plan import Plan
from metaeval.protocols.improve.records import (
    BASELINE_EVAL,
    LEDGER,
    LEDGER_NAME,
    LedgerEntry,
    NodeEval,
)
from metaeval.protocols.improve.resolve import resolve_manifest, with_models
from metaeval.protocols.improve.suites import SuiteConfig, load_suite_config, suite_tasks
from metaeval.tasks.safe_files import irregular_entries
from metaeval.tasks.safe_json import read_json


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
    sandbox: str = DEFAULT_SANDBOX,
    models: Mapping[str, str | None] | None = None,
) -> tuple[Plan, Any]:
    """Resolve the manifest and every layer it names into a Plan (and the resolved manifest).

    `host_env` names the host variables task.toml's env tables may read (`--allow-host-env`);
    `sandbox` where the tasks run (`--sandbox`, `metaeval.protocols.improve.episode_room`);
    `models` the models of `-M/--target-model/--meta-model` (`resolve.with_models`).
    """
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
    suites = {"optimize": optimize_tasks, "held_out": held_tasks}
    resolved_json = _contract_json(resolved, budget, sandbox, suites)
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
        max_steps_per_task=resolved.target_budget.max_steps_per_task,
        task_timeout_s=resolved.target_budget.task_timeout_s,
        command_timeout_s=getattr(optimize_config, "command_timeout_s", 30.0),
        concurrency=getattr(optimize_config, "concurrency", 1),
        host_env=tuple(dict.fromkeys(host_env)),
        sandbox=sandbox,
        meta_timeout_s=min(sut.timeout_s, manifest.budget_step_timeout_s),
        meta_max_steps=sut.max_steps,
        tool_menu=tuple(sut.tool_menu),
        sut_config=resolved.sut_source,
        documents=_documents(resolved, resolved_json, boundary),
    )
    return plan, resolved


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


def run_experiment(
    manifest_path: Path,
    output: Path | None = None,
    budget: int | None = None,
    meta_agent: Any = None,
    host_env: Sequence[str] = (),
    sandbox: str = DEFAULT_SANDBOX,
    models: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Run or resume the experiment; returns the benchmark-level summary (Section 3.5)."""
    plan, resolved = build_plan(manifest_path, output, budget, host_env, sandbox, models)
    agent = meta_agent or make_meta_agent(
        resolved.sut.meta_agent.model_dump(), launch_profile=resolved.launch_profile
    )
    return TrialLoop(plan, agent).run()


def rerender(bundle: Path) -> list[Path]:
    """Re-write the bundle's summary files and reports from its ledger.

    ConfigError (naming the file and field) for a directory that is not a bundle or a bundle
    file that is unreadable or malformed.
    """
    from metaeval.protocols.improve.bundle import BundleFiles, write_summary_files
    from metaeval.records import RunDir

    bundle = Path(bundle)
    if not bundle.is_dir():
        raise ConfigError("bundle directory not found", file=str(bundle))
    _check_bundle_entries(bundle)
    # validate the bundle's own files first: their errors name the file and field
    resolved = _bundle_json(bundle, "resolved_manifest.json")
    try:
        plan = SimpleNamespace(
            bundle=bundle,
            run_id=bundle.name,
            baseline_id=resolved["baseline"]["id"],
            baseline_commit=resolved["baseline"]["base_commit"],
            trial_budget=resolved["trial_budget"],
        )
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"not a resolved manifest (missing {exc})",
            file=str(bundle / "resolved_manifest.json"),
        ) from exc
    baseline_data = _bundle_json(bundle, BASELINE_EVAL)
    try:
        baseline = NodeEval.model_validate(baseline_data)
    except ValidationError as exc:
        raise validation_error(exc, file=bundle / BASELINE_EVAL) from None
    try:
        run = RunDir.open_existing(bundle, "improve")
    except RecursionError:  # a layers.jsonl line nested too deeply for the JSON parser
        raise ConfigError("a record is nested too deeply to read", file=str(bundle)) from None
    try:
        files = BundleFiles(run)
        try:
            ledger = files.run.read(LEDGER_NAME, all_layers=True)
        except RecursionError:
            raise ConfigError(
                "a record is nested too deeply to read", file=str(bundle / LEDGER)
            ) from None
        entries = _check_ledger(ledger, bundle / LEDGER)
        try:
            write_summary_files(plan, baseline, entries, files)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(
                f"a ledger or baseline record lacks a field or has a wrong type "
                f"({type(exc).__name__}: {exc}); the bundle was not written by this version "
                "of metaeval",
                file=str(bundle / LEDGER),
            ) from exc
    finally:
        run.close()
    return [bundle / "report.md", bundle / "report.html"]


def _check_ledger(ledger: list[dict[str, Any]], path: Path) -> list[LedgerEntry]:
    """Every ledger line read through its record model (`records.LedgerEntry`): a line that
    lacks a field or has a wrong type is a ConfigError naming the line and the field."""
    entries = []
    for number, entry in enumerate(ledger, 1):
        try:
            entries.append(LedgerEntry.model_validate(entry))
        except ValidationError as exc:
            error = validation_error(exc, file=path)
            message = str(error).removeprefix(f"{path}: field '{error.field}': ")
            raise ConfigError(
                f"line {number}: {message}", file=str(path), field=error.field
            ) from None
    return entries


def _bundle_json(bundle: Path, name: str) -> dict[str, Any]:
    """A JSON object of the bundle: a regular file (no symlink, FIFO or device), size and
    nesting capped; ConfigError naming the file otherwise."""
    path = bundle / name
    if not os.path.lexists(path):
        raise ConfigError(
            f"not an improve bundle: no {name} (bundles are written by `metaeval improve run`)",
            file=str(bundle),
        )
    return read_json(path, bundle)


def _check_bundle_entries(bundle: Path) -> None:
    """Refuse a bundle whose top level holds what `metaeval improve run` never writes: a
    symlink (its manifest, ledger or lock would be read or written through it) or a FIFO,
    socket or device (reading or locking it would block)."""
    odd = irregular_entries(bundle, recursive=False)
    if odd:
        listed = "; ".join(f"{e.rel}: {e.describe()}" for e in odd[:10])
        raise ConfigError(
            f"not an improve bundle as metaeval writes it, not read: {listed}", file=str(bundle)
        )
