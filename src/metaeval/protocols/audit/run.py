"""Run an audit: static and execution checks plus the LLM protocol per (task, model) cell.

Every cell is one unit of resume. A cell appends its findings to `findings.jsonl` tagged with
the cell's attempt id, then its cell record to `audits.jsonl`; readers keep only findings whose
attempt matches the latest final cell record, so a process killed between the two writes never
duplicates or half-counts a cell. Provider failures (after retries) and other transient causes
(timeouts, lost connections, a full disk, a killed worker) are infrastructure errors and are
retried on resume; a model whose output stays malformed, or a task whose own files make a check
fail deterministically (a parse, validation or recursion error), is a final audit failure,
recorded once with its message.

The whole run reads in five files of its own beside the engine: `settings.py` (what the run
was asked for, and the manifest's view of it), `plan.py` (which cells exist),
`cells/dispatch.py` (which cell module computes a cell, and where), `summary.py` (the record
files) and `finish.py` (summary and reports).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from metaeval.engine.cells import CellResult, Stages, plan_cells, run_cells
from metaeval.engine.pacing import CallPacing, process_lane_workers
from metaeval.engine.process_lane import ProcessLane
from metaeval.errors import ConfigError
from metaeval.models.base import Model
from metaeval.models.registry import get_model
from metaeval.protocols.audit.cells.dispatch import (
    STATIC_LANE,
    STATIC_WORKER,
    CellWork,
    calls_a_model,
    run_agent_first,
)
from metaeval.protocols.audit.finish import finish_run, warm_up_reports
from metaeval.protocols.audit.plan import cell_keys, plan_tasks
from metaeval.protocols.audit.records import CELLS, FINDINGS, FailedCell, finding_record
from metaeval.protocols.audit.settings import (
    AGENT_RESULTS_SUBDIR,
    AuditSettings,
    input_hashes,
    meaning_settings,
    run_config,
    validate,
)
from metaeval.records import RunDir
from metaeval.tasks.bench_hash import benchmark_hash
from metaeval.tasks.task_dirs import discover_tasks


class AuditRun:
    """One audit over a benchmark, writing into a run directory."""

    def __init__(self, settings: AuditSettings, models: dict[str, Model] | None = None):
        """`models` (name -> instance) overrides the registry, e.g. for models built with options."""
        validate(settings)
        if settings.agent is not None:  # the agent-run goes inside the audit's run directory
            settings = replace(settings, agent_results=settings.run_dir / AGENT_RESULTS_SUBDIR)
        self.settings = settings
        self.task_dirs, self.skipped = plan_tasks(settings.bench_dir, settings.task_filter)
        # the benchmark hash covers every task, so that --task narrows a run without changing it
        self.bench_task_dirs = discover_tasks(settings.bench_dir)[0]
        self.keys = cell_keys(
            [d.relative_to(settings.bench_dir).as_posix() for d in self.task_dirs],
            list(dict.fromkeys(settings.models)),
            static_only=settings.static_only,
            model_tasks=settings.model_tasks,
        )
        given = models or {}
        models = {
            name: given.get(name) or get_model(name, **own.model_options(name))
            for name in settings.models
            for own in [settings.model_settings(name)]
        }
        self.work = CellWork.for_run(settings, models)

    def deferred_hashes(self, lane: ProcessLane | None = None) -> dict[str, Callable[[], str]]:
        """The benchmark's hash, the slow input: a new run computes it while its first
        requests are out (`RunDir.open(deferred_hashes=...)`); a resume needs it at once.
        With a process lane, a worker computes it (no GIL shared with the cells)."""
        bench_dir, task_dirs = self.settings.bench_dir, self.bench_task_dirs
        if lane is not None:
            return {"benchmark": lane.background(benchmark_hash, bench_dir, task_dirs)}
        return {"benchmark": lambda: benchmark_hash(bench_dir, task_dirs)}

    def run(self) -> dict[str, Any]:
        """Audit every cell not yet completed; return the summary."""
        s = self.settings
        # worker processes start first: their imports overlap hashing and planning
        workers = process_lane_workers(s.concurrency, len(self.task_dirs))
        lane = ProcessLane(workers, preload=[STATIC_WORKER.split(":")[0]]) if workers else None
        if lane is not None:
            lane.start()
        try:
            run = RunDir.open(
                s.run_dir,
                protocol="audit",
                config=run_config(s, self.task_dirs),
                hashes=input_hashes(),
                deferred_hashes=self.deferred_hashes(lane),
                settings=meaning_settings(s),
                seeds={"model_seed": 0},
                new_layer=s.new_layer,
            )
            try:
                return self._run_cells(run, lane)
            finally:
                run.close()
        finally:
            if lane is not None:
                lane.close()

    def _run_cells(self, run: RunDir, lane: ProcessLane | None) -> dict[str, Any]:
        """Plan, run and record the cells, then the summary and reports."""
        if self.settings.agent is not None:
            run_agent_first(self.settings, self.task_dirs)
        dirs = {d.relative_to(self.settings.bench_dir).as_posix(): d for d in self.task_dirs}
        check_model_calls(run, self.settings)
        plan = plan_cells(run, CELLS, ("task_id", "source"), self.keys)
        pacing = CallPacing(self.settings.concurrency)
        cells = [
            self.work.plan(run, dirs[task_id], source, pacing, lane)
            for (task_id, source), _ in plan.todo
        ]
        # once every call is out, the run waits: render-ready the reports meanwhile
        pacing.when_all_busy(warm_up_reports)
        has_model_cells = any(calls_a_model(cell.key[1]) for cell in cells)
        run_cells(
            run,
            cells,
            write_cell,
            concurrency=self.settings.concurrency + pacing.prepared_ahead(has_model_cells),
            progress=self.settings.progress,
            description="audit cells",
            # static cells run in worker processes and hold no model call's slot; two per
            # worker keep the workers busy while results travel back
            lanes={STATIC_LANE: 2 * lane.workers} if lane is not None else None,
        )
        return finish_run(run, self, self.settings.min_tier, reused=plan.reused, ran=len(cells))


def check_model_calls(run: RunDir, settings: AuditSettings) -> None:
    """Refuse to resume a model whose recorded cells were called with other settings than
    it would be now (its models-file entry changed), naming the model and each setting."""
    for record in run.latest_records(CELLS, ("task_id", "source")).values():
        model, recorded = record.get("source"), record.get("call")
        if model not in settings.models or not isinstance(recorded, dict):
            continue
        now = settings.model_settings(model).recorded()
        changed = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
        if changed:
            raise ConfigError(
                f"model {model} was called with other settings in this run: "
                + ", ".join(f"{k} {recorded.get(k)!r} -> {now.get(k)!r}" for k in changed)
                + "; keep them, or audit into a new run directory",
                field="models",
            )


def write_cell(result: CellResult) -> Stages:
    """The records of one finished cell: its findings (tagged with the attempt) durable
    before the cell record that makes them count; a failed cell is one cell record."""
    task_id, source = result.cell.key
    if result.kind == "ok":
        cell, findings = result.value
        return [[(FINDINGS, finding_record(f, cell["attempt"])) for f in findings], [(CELLS, cell)]]
    if result.kind == "final":  # the task's own input makes the code fail: not retried
        failure = FailedCell(
            task_id=task_id,
            source=source,
            attempt=uuid.uuid4().hex[:12],
            status="error",
            infra_error=False,
            audit_failure=True,
            error=f"deterministic failure, not retried: {result.error}"[:2000],
        )
        return [[(CELLS, failure.as_record())]]
    failure = FailedCell(
        task_id=task_id,
        source=source,
        status="error",
        infra_error=True,
        error=(result.error or "")[-4000:],
    )
    return [[(CELLS, failure.as_record())]]
