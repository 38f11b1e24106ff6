"""The static source's cell of one task: static checks, execution checks, evidence.

It is plain CPU work (parsers, AST walks) plus sandboxed child processes, so a run with
more than one job in flight does it in the engine's process lane (`metaeval.engine.
process_lane`, which calls `in_worker` by name: the orchestrating process never imports the
parsers), where it uses the other cores instead of contending for the interpreter lock with
the model calls. The worker writes its logs into the run's content-addressed blob store
itself (idempotent, atomic) and hands the cell and its findings back; only the orchestrating
process appends records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaeval.protocols.audit.dedupe import merge_check_findings
from metaeval.protocols.audit.evidence import verify_evidence
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.findings import Finding, apply_tier_rule
from metaeval.protocols.audit.records import ExecutionSummary, PhaseOutcome, StaticCell
from metaeval.protocols.audit.static_checks import run_static_checks_report
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_view import LoadedTask, load_task
from metaeval.records.blobs import BlobStore

Cell = tuple[dict[str, Any], list[dict[str, Any]]]


def static_cell(
    task: LoadedTask,
    base: dict[str, Any],
    *,
    hints: Hints | None,
    execution_checks: bool,
    sandbox: str,
    blobs: BlobStore,
    host_env: tuple[str, ...] = (),
    pull: str = "never",
) -> Cell:
    """The cell record and findings of the static source for one loaded task."""
    static = run_static_checks_report(task)
    findings: list[Finding] = list(static.findings)
    execution = ExecutionSummary(skipped="disabled")
    extra: dict[str, str] = {}
    infra: str | None = None  # why the execution checks could not run here
    if execution_checks:
        result = run_execution_checks(
            task, hints=hints, sandbox=sandbox, host_env=host_env, pull=pull
        )
        # one per defect; an absence a faithful run's log shows becomes `executed`
        findings = merge_check_findings(findings, result.findings, result.faithful_logs)
        execution = execution_summary(result, blobs)
        extra = execution_logs(result)
        if result.infra_error:  # no sandbox, engine or image here: the cell is retried
            infra = result.skipped or "the execution checks could not run"
    # The one place static and execution findings pass before they are recorded: the
    # evidence-tier rule (an `assumed` finding is at most Low, confidence <= 0.3).
    verified = [verify_evidence(apply_tier_rule(f), task, extra_files=extra) for f in findings]
    cell = StaticCell(
        **base,
        status="ok",
        infra_error=infra is not None,
        n_findings=len(verified),
        n_files=len(task.files),
        execution=execution,
        config_error=task.config_error,
        skipped_files=task.skipped_files,
        cuts=task.cuts,
    )
    if infra is not None:  # `error` written only when set, as in the records before it
        cell.error = infra
    if static.errors:  # a check that failed on this task's input (deterministic)
        cell.check_errors = static.errors
    return cell.as_record(), [f.model_dump(mode="json") for f in verified]


def execution_logs(result: Any) -> dict[str, str]:
    """The execution checks' logs by the file name findings cite them with."""
    logs = {}
    for name in ("oracle", "null_agent", "outputs_removed"):
        phase = getattr(result, name, None)
        log = getattr(phase, "log", None) if phase is not None else None
        if log:
            logs[getattr(phase, "log_name", "") or f"logs/{name}.log"] = log
    if getattr(result, "build_log", ""):
        logs["logs/build.log"] = result.build_log
    return logs


def execution_summary(result: Any, blobs: BlobStore) -> ExecutionSummary:
    """The oracle and null-agent outcomes for the cell record; full logs go to blobs."""
    summary = ExecutionSummary(
        skipped=result.skipped,
        backend=result.backend,
        approximate=result.approximate,
        stand_in=list(getattr(result, "stand_in", [])),
        mismatch=result.mismatch,
        build_log_blob=blobs.put(result.build_log) if result.build_log else None,
        image_id=getattr(result, "image_id", None),
    )
    for name in ("oracle", "null_agent", "outputs_removed"):
        phase = getattr(result, name, None)
        if phase is None:
            continue
        outcome = PhaseOutcome(
            ran=phase.ran,
            note=phase.note,
            reward=phase.reward,
            reward_source=phase.reward_source,
            reward_error=phase.reward_error,
            passed=phase.passed,
            timed_out=phase.timed_out,
            **_optional(phase),
            log_blob=blobs.put(phase.log) if phase.log else None,
        )
        setattr(summary, name, outcome)
    if getattr(result, "removed_files", None):
        summary.removed_files = list(result.removed_files)
    return summary


def _optional(phase: Any) -> dict[str, Any]:
    """The fields of a phase's record set only when they say something: task.toml's env
    notes, and the verifier's per-test outcomes (or why there are none)."""
    fields: dict[str, Any] = {}
    if getattr(phase, "notes", None):
        fields["env_notes"] = list(phase.notes)
    cases = getattr(phase, "cases", None)
    if cases is not None:
        fields["tests_source"] = cases.source
        fields["tests_passed"] = cases.named("passed")
        fields["tests_failed"] = cases.named("failed")
    elif getattr(phase, "cases_note", ""):
        fields["tests_note"] = phase.cases_note
    return fields


def in_worker(
    task_dir: Path,
    base: dict[str, Any],
    load: dict[str, Any],
    checks: dict[str, Any],
    blobs_root: Path,
) -> Cell:
    """The static cell of `task_dir`, in a worker process (blobs written by the worker)."""
    task = load_task(task_dir, hints=checks["hints"], **load)  # the run's hints, read once
    return static_cell(
        task, {**base, "task_id": task.task_id}, blobs=BlobStore(blobs_root), **checks
    )
