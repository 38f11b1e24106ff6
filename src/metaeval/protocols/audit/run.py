"""Run an audit: static and execution checks plus the LLM protocol per (task, model) cell.

Every cell is one unit of resume. A cell appends its findings to `findings.jsonl` tagged with
the cell's attempt id, then its cell record to `audits.jsonl`; readers keep only findings whose
attempt matches the latest final cell record, so a process killed between the two writes never
duplicates or half-counts a cell. Provider failures (after retries) and other transient causes
(timeouts, lost connections, a full disk, a killed worker) are infrastructure errors and are
retried on resume; a model whose output stays malformed, or a task whose own files make a check
fail deterministically (a parse, validation or recursion error), is a final audit failure,
recorded once with its message.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from metaeval.engine.cells import Cell, CellResult, Stages, plan_cells, run_cells
from metaeval.engine.executor import JobResources, available_cores
from metaeval.engine.pacing import CallPacing, process_lane_workers
from metaeval.engine.process_lane import ProcessLane
from metaeval.errors import ConfigError
from metaeval.models.base import Model
from metaeval.models.pricing import price_table
from metaeval.models.registry import get_model
from metaeval.protocols.audit.call_options import ModelCallOptions
from metaeval.protocols.audit.plan import plan_tasks
from metaeval.protocols.audit.prompts import PROMPT_TEMPLATES, AuditProtocol
from metaeval.protocols.audit.records import (
    CELLS,
    FINDINGS,
    STATIC_SOURCE,
    FailedCell,
    finding_record,
)
from metaeval.protocols.audit.summary import read_records, summarize_run
from metaeval.protocols.audit.task_view import InputTier, LoadedTask, load_hints, load_task
from metaeval.records import RunDir
from metaeval.tasks.bench_hash import benchmark_hash
from metaeval.tasks.task_dirs import discover_tasks


@dataclass
class AuditSettings:
    """Resolved configuration of one audit run (goes into the manifest)."""

    bench_dir: Path
    run_dir: Path
    models: list[str] = field(default_factory=list)
    static_only: bool = False
    tier: InputTier = "definition"
    agent_results: Path | None = None
    agent: str | None = None  # execution tier: run this agent first (see cells/agent_run.py)
    task_filter: list[str] = field(default_factory=list)
    concurrency: int = 1
    max_tokens: int = 2048
    # temperature and what each answer may hold (call_options.py; `-M` keys of `audit run`)
    model_call: ModelCallOptions = field(default_factory=ModelCallOptions)
    execution_checks: bool = True
    new_layer: str | None = None
    progress: bool | None = None
    sandbox: str = "auto"  # execution backend: auto, docker, podman, bwrap
    # `--pull`: which task images the engine pulls first: never (the default: offline, no
    # registry call), missing, always (docs/audit-execution.md)
    pull: str = "never"
    # Host variables task.toml's [verifier.env] / [solution.env] may read as ${NAME}
    # (`metaeval.tasks.limits`); none by default. Names only: values are never recorded.
    host_env: tuple[str, ...] = ()
    # Task ids the models audit (None: every task); static and execution checks still run on
    # every task. The demo uses it to keep the slow local-model step to a few tasks.
    model_tasks: list[str] | None = None
    # `--min-tier`: the summary and reports show only findings with evidence this strong
    # (all findings are recorded either way).
    min_tier: str | None = None

    def protocol_name(self) -> AuditProtocol:
        return "execution" if self.tier == "execution" else "definition"


AGENT_RESULTS_SUBDIR = "agent_results"
"""Where `--agent` puts its agent-run inside the audit run directory."""


def default_concurrency(static_only: bool) -> int:
    """Jobs in flight when the user gives none: one per core for static and execution checks
    alone (sandboxed processes), else 1."""
    return available_cores() if static_only else 1


def validate(settings: AuditSettings) -> None:
    """Refuse settings that cannot run, naming the option."""
    if not settings.bench_dir.is_dir():
        raise ConfigError("benchmark directory not found", file=str(settings.bench_dir))
    if not settings.static_only and not settings.models:
        raise ConfigError("give at least one --model, or --static-only", field="model")
    if settings.agent is not None:
        if settings.tier != "execution":
            raise ConfigError("--agent needs --tier execution", field="agent")
        if settings.agent_results is not None:
            raise ConfigError("give --agent or --agent-results, not both", field="agent")
        return
    if settings.tier == "execution" and settings.agent_results is None:
        raise ConfigError(
            "--tier execution needs --agent-results DIR or --agent SPEC", field="agent_results"
        )
    if settings.agent_results is not None and not settings.agent_results.is_dir():
        raise ConfigError("agent results directory not found", file=str(settings.agent_results))


STATIC_LANE = "static"
STATIC_WORKER = "metaeval.protocols.audit.cells.static:in_worker"
"""Computed in the process lane by name: this process never imports the static checks."""


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
        ids = {d.relative_to(settings.bench_dir).as_posix() for d in self.task_dirs}
        unknown = sorted(set(settings.model_tasks or []) - ids)
        if unknown:
            raise ConfigError(f"no such task(s): {', '.join(unknown)}", field="model_tasks")
        given = models or {}
        self.models = {name: given.get(name) or get_model(name) for name in settings.models}
        self.hints = load_hints(settings.bench_dir)

    def hashes(self) -> dict[str, str]:
        """The run's inputs but the benchmark (see `deferred_hashes`)."""
        hashes = {f"prompt:{name}": text for name, text in PROMPT_TEMPLATES.items()}
        hashes["price_table"] = price_table().sha256
        return hashes

    def deferred_hashes(self, lane: ProcessLane | None = None) -> dict[str, Callable[[], str]]:
        """The benchmark's hash, the slow input: a new run computes it while its first
        requests are out (`RunDir.open(deferred_hashes=...)`); a resume needs it at once.
        With a process lane, a worker computes it (no GIL shared with the cells)."""
        bench_dir, task_dirs = self.settings.bench_dir, self.bench_task_dirs
        if lane is not None:
            return {"benchmark": lane.background(benchmark_hash, bench_dir, task_dirs)}
        return {"benchmark": lambda: benchmark_hash(bench_dir, task_dirs)}

    def meaning_settings(self) -> dict[str, Any]:
        """The settings that change what a cell means, compared on a rerun (`RunDir.open`):
        the execution checks and their sandbox, the input tier and agent results the models
        see, their token limit, the host variables tasks may read. Which tasks and models
        run, and how many at once, only select cells and are left out."""
        s = self.settings
        return {
            "execution_checks": s.execution_checks,
            "sandbox": s.sandbox,
            # only when not the default: a run made before `--pull` existed still resumes
            **({"pull": s.pull} if s.pull != "never" else {}),
            "tier": s.tier,
            "agent_results": str(s.agent_results) if s.agent_results else None,
            "agent": s.agent,
            "max_tokens": s.max_tokens,
            **s.model_call.settings(),
            "host_env": sorted(s.host_env),
        }

    def config(self) -> dict[str, Any]:
        """The run's resolved configuration (the manifest's `config`)."""
        s = self.settings
        return {
            "benchmark": str(s.bench_dir.resolve()),
            "models": s.models,
            "static_only": s.static_only,
            "tier": s.tier,
            "agent_results": str(s.agent_results) if s.agent_results else None,
            **({"agent": s.agent} if s.agent is not None else {}),
            "tasks": [str(d.relative_to(s.bench_dir).as_posix()) for d in self.task_dirs],
            "max_tokens": s.max_tokens,
            **s.model_call.settings(),
            "execution_checks": s.execution_checks,
            "sandbox": s.sandbox,
            "pull": s.pull,
            **({"host_env": list(s.host_env)} if s.host_env else {}),
            "concurrency": s.concurrency,
            **({"model_tasks": s.model_tasks} if s.model_tasks is not None else {}),
            **({"min_evidence_tier": s.min_tier} if s.min_tier else {}),
        }

    def _agent_runs(self) -> dict[str, Any]:
        """Run the settings' agent on the audited tasks into RUN_DIR/agent_results (resumes)."""
        from metaeval.protocols.audit.cells.agent_run import AgentRuns, AgentRunSettings

        s = self.settings
        assert s.agent is not None and s.agent_results is not None
        tasks = [d.relative_to(s.bench_dir).as_posix() for d in self.task_dirs]
        settings = AgentRunSettings(
            bench_dir=s.bench_dir,
            out_dir=s.agent_results,
            agent=s.agent,
            task_filter=tasks,
            progress=s.progress,
            new_layer=s.new_layer,
            host_env=s.host_env,
        )
        return AgentRuns(settings).run()

    def load(self, task_dir: Path) -> LoadedTask:
        """The task as the auditors see it (the run's tier, hints and agent results)."""
        return load_task(
            task_dir,
            hints=self.hints,  # read once per run, not once per cell
            tier=self.settings.tier,
            bench_root=self.settings.bench_dir,
            agent_results=self.settings.agent_results,
        )

    def sources(self, task_id: str) -> list[str]:
        """The sources that audit this task: the static source always, each model unless
        `--static-only` or `model_tasks` leaves the task out."""
        if self.settings.static_only:
            return [STATIC_SOURCE]
        wanted = self.settings.model_tasks
        models = list(self.models) if wanted is None or task_id in wanted else []
        return [STATIC_SOURCE, *models]

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
                config=self.config(),
                hashes=self.hashes(),
                deferred_hashes=self.deferred_hashes(lane),
                settings=self.meaning_settings(),
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
            self._agent_runs()
        dirs = {d.relative_to(self.settings.bench_dir).as_posix(): d for d in self.task_dirs}
        keys = [(task_id, source) for task_id in dirs for source in self.sources(task_id)]
        plan = plan_cells(run, CELLS, ("task_id", "source"), keys)
        pacing = CallPacing(self.settings.concurrency)
        cells = [
            self._plan_cell(run, dirs[task_id], source, pacing, lane)
            for (task_id, source), _ in plan.todo
        ]
        # once every call is out, the run waits: render-ready the reports meanwhile
        pacing.when_all_busy(_warm_up_reports)
        has_model_cells = any(cell.key[1] != STATIC_SOURCE for cell in cells)
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
        records = read_records(run, self.settings.min_tier)  # once, for summary and reports
        summary = summarize_run(run, self, records)
        summary["skipped_completed"] = plan.reused
        summary["ran"] = len(cells)
        run.write_summary(summary)
        from metaeval.protocols.audit.render import write_reports

        write_reports(run, records=records)
        return summary

    def _plan_cell(
        self, run: RunDir, task_dir: Path, source: str, pacing: CallPacing, lane: ProcessLane | None
    ) -> Cell:
        task_id = task_dir.relative_to(self.settings.bench_dir).as_posix()
        static = source == STATIC_SOURCE
        return Cell(
            key=(task_id, source),
            fn=partial(self.cell, run, task_dir, source, pacing, lane),
            timeout_s=3600,
            label=f"{task_id} {source}",
            resources=JobResources(sandbox=static and self.settings.execution_checks),
            lane=STATIC_LANE if static and lane is not None else None,
        )

    def cell(
        self,
        run: RunDir,
        task_dir: Path,
        source: str,
        pacing: CallPacing | None = None,
        lane: ProcessLane | None = None,
    ) -> tuple[dict, list[dict]]:
        """One cell: (cell record, findings). An exception propagates to the engine, which
        sorts it by the one rule (final error cell, or infrastructure error)."""
        task_id = task_dir.relative_to(self.settings.bench_dir).as_posix()
        base = {"task_id": task_id, "source": source, "attempt": uuid.uuid4().hex[:12]}
        pacing = pacing or CallPacing(1)
        if source == STATIC_SOURCE and lane is not None:
            return lane.call_named(STATIC_WORKER, task_dir, base, *self._static_worker_args(run))
        if source == STATIC_SOURCE:
            with pacing.in_service():
                return self._static_cell(run, self.load(task_dir), base)
        with pacing.call_cell():  # the CPU gate is given back while the call is out
            return self._model_cell(run, self.load(task_dir), source, base)

    def _static_worker_args(self, run: RunDir) -> tuple[Any, ...]:
        s = self.settings
        load = {"tier": s.tier, "bench_root": s.bench_dir, "agent_results": s.agent_results}
        checks = {
            "hints": self.hints,
            "execution_checks": s.execution_checks,
            "sandbox": s.sandbox,
            "host_env": s.host_env,
            "pull": s.pull,
        }
        return load, checks, Path(s.run_dir) / "blobs"

    def _static_cell(
        self, run: RunDir, task: LoadedTask, base: dict[str, Any]
    ) -> tuple[dict, list[dict]]:
        from metaeval.protocols.audit.cells.static import static_cell

        return static_cell(
            task,
            {**base, "task_id": task.task_id},
            hints=self.hints,
            execution_checks=self.settings.execution_checks,
            sandbox=self.settings.sandbox,
            blobs=run.blobs,
            host_env=self.settings.host_env,
            pull=self.settings.pull,
        )

    def _model_cell(
        self, run: RunDir, task: LoadedTask, source: str, base: dict[str, Any]
    ) -> tuple[dict, list[dict]]:
        from metaeval.protocols.audit.cells.model import model_cell

        return model_cell(
            task,
            self.models[source],
            {**base, "task_id": task.task_id},
            protocol=self.settings.protocol_name(),
            max_tokens=self.settings.max_tokens,
            temperature=self.settings.model_call.temperature,
            answer=self.settings.model_call.answer,
            blobs=run.blobs,
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


def _warm_up_reports() -> None:
    """Import and compile the report renderer ahead of the end of the run (best effort:
    a failure here surfaces, with its real cause, when the reports are written)."""
    with contextlib.suppress(Exception):
        from metaeval.protocols.audit.report import warm_up

        warm_up()
