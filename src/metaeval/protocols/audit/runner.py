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
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from metaeval.cpu_gate import CpuGate
from metaeval.errors import ConfigError, MetaevalError
from metaeval.executor import (
    Job,
    JobOutcome,
    JobResources,
    available_cores,
    make_executor,
    selected_backend,
)
from metaeval.models.base import Model
from metaeval.models.call_slots import CallSlots, call_slot
from metaeval.models.pricing import price_table
from metaeval.models.registry import get_model
from metaeval.protocols.audit.call_options import ModelCallOptions
from metaeval.protocols.audit.evidence import verify_evidence
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.protocols.audit.prompts import PROMPT_TEMPLATES, AuditProtocol
from metaeval.protocols.audit.static_pool import StaticPool
from metaeval.protocols.audit.summary import (
    CELLS,
    FINDINGS,
    STATIC_SOURCE,
    read_records,
    summarize_run,
)
from metaeval.records import RunDir
from metaeval.tasks.bench_hash import benchmark_hash
from metaeval.tasks.harbor import InputTier, LoadedTask, discover_tasks, load_hints, load_task
from metaeval.transient import is_transient


@dataclass
class AuditSettings:
    """Resolved configuration of one audit run (goes into the manifest)."""

    bench_dir: Path
    run_dir: Path
    models: list[str] = field(default_factory=list)
    static_only: bool = False
    tier: InputTier = "definition"
    agent_results: Path | None = None
    agent: str | None = None  # execution tier: run this agent first (see agent_runs.py)
    task_filter: list[str] = field(default_factory=list)
    concurrency: int = 1
    max_tokens: int = 2048
    # temperature and what each answer may hold (call_options.py; `-M` keys of `audit run`)
    model_call: ModelCallOptions = field(default_factory=ModelCallOptions)
    execution_checks: bool = True
    new_layer: str | None = None
    progress: bool | None = None
    sandbox: str = "auto"  # execution backend: auto, docker, podman, bwrap
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


def _validate(settings: AuditSettings) -> None:
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


def _plan_tasks(settings: AuditSettings) -> tuple[list[Path], list[tuple[str, str]]]:
    task_dirs, skipped = discover_tasks(settings.bench_dir)
    if settings.task_filter:
        wanted = set(settings.task_filter)
        ids = {str(d.relative_to(settings.bench_dir).as_posix()): d for d in task_dirs}
        unknown = sorted(wanted - set(ids))
        if unknown:
            raise ConfigError(f"no such task(s): {', '.join(unknown)}", field="task")
        task_dirs = [d for t, d in ids.items() if t in wanted]
    if not task_dirs:
        raise ConfigError(
            "no task directories (with task.toml) found", file=str(settings.bench_dir)
        )
    return task_dirs, skipped


STATIC_LANE = "static"
# At most this many cells wait with a prepared request (each is a thread): a full wave at
# C <= 256, while a very high --concurrency does not double the thread count.
MAX_PREPARED_AHEAD = 256


class AuditRun:
    """One audit over a benchmark, writing into a run directory."""

    def __init__(self, settings: AuditSettings, models: dict[str, Model] | None = None):
        """`models` (name -> instance) overrides the registry, e.g. for models built with options."""
        _validate(settings)
        if settings.agent is not None:  # the agent-run goes inside the audit's run directory
            settings = replace(settings, agent_results=settings.run_dir / AGENT_RESULTS_SUBDIR)
        self.settings = settings
        self.task_dirs, self.skipped = _plan_tasks(settings)
        # the benchmark hash covers every task, so that --task narrows a run without changing it
        self.bench_task_dirs = discover_tasks(settings.bench_dir)[0]
        ids = {d.relative_to(settings.bench_dir).as_posix() for d in self.task_dirs}
        unknown = sorted(set(settings.model_tasks or []) - ids)
        if unknown:
            raise ConfigError(f"no such task(s): {', '.join(unknown)}", field="model_tasks")
        given = models or {}
        self.models = {name: given.get(name) or get_model(name) for name in settings.models}
        self.hints = load_hints(settings.bench_dir)
        # model cells do their Python work a few threads at a time (see metaeval.cpu_gate)
        self._cpu_gate = CpuGate(available_cores())
        # at most --concurrency model calls in service, however many cells run (see _prepare_ahead)
        self._call_slots = CallSlots(settings.concurrency)
        self._static_pool: StaticPool | None = None

    def hashes(self) -> dict[str, str]:
        """The run's inputs but the benchmark (see `deferred_hashes`)."""
        hashes = {f"prompt:{name}": text for name, text in PROMPT_TEMPLATES.items()}
        hashes["price_table"] = price_table().sha256
        return hashes

    def deferred_hashes(self) -> dict[str, Callable[[], str]]:
        """The benchmark's hash, the slow input: a new run computes it while its first
        requests are out (`RunDir.open(deferred_hashes=...)`); a resume needs it at once."""
        bench_dir, task_dirs = self.settings.bench_dir, self.bench_task_dirs
        if self._static_pool is not None:  # in a worker process: no GIL shared with the cells
            return {"benchmark": self._static_pool.benchmark_hash(bench_dir, task_dirs)}
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
            "tier": s.tier,
            "agent_results": str(s.agent_results) if s.agent_results else None,
            "agent": s.agent,
            "max_tokens": s.max_tokens,
            **s.model_call.settings(),
            "host_env": sorted(s.host_env),
        }

    def config(self) -> dict[str, Any]:
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
            **({"host_env": list(s.host_env)} if s.host_env else {}),
            "concurrency": s.concurrency,
            **({"model_tasks": s.model_tasks} if s.model_tasks is not None else {}),
            **({"min_evidence_tier": s.min_tier} if s.min_tier else {}),
        }

    def _agent_runs(self) -> dict[str, Any]:
        """Run the settings' agent on the audited tasks into RUN_DIR/agent_results (resumes)."""
        from metaeval.protocols.audit.agent_runs import AgentRuns, AgentRunSettings

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
        return load_task(
            task_dir,
            hints=self.hints,  # read once per run, not once per cell
            tier=self.settings.tier,
            bench_root=self.settings.bench_dir,
            agent_results=self.settings.agent_results,
        )

    def run(self) -> dict[str, Any]:
        """Audit every cell not yet completed; return the summary."""
        # worker processes start first: their imports overlap hashing and planning
        self._static_pool = self._make_static_pool(len(self.task_dirs))
        try:
            return self._run_with_pool()
        finally:
            if self._static_pool is not None:
                self._static_pool.close()
                self._static_pool = None

    def _run_with_pool(self) -> dict[str, Any]:
        run = RunDir.open(
            self.settings.run_dir,
            protocol="audit",
            config=self.config(),
            hashes=self.hashes(),
            deferred_hashes=self.deferred_hashes(),
            settings=self.meaning_settings(),
            seeds={"model_seed": 0},
            new_layer=self.settings.new_layer,
        )
        try:
            if self.settings.agent is not None:
                self._agent_runs()
            done = run.completed_cells(CELLS, ("task_id", "source"))
            sources = [STATIC_SOURCE] + ([] if self.settings.static_only else list(self.models))
            jobs = []
            reused = 0  # of the selected cells (--task narrows a run to some of its cells)
            for task_dir in self.task_dirs:
                task_id = task_dir.relative_to(self.settings.bench_dir).as_posix()
                for source in sources:
                    if not self._audits(source, task_id):
                        continue
                    if (task_id, source) in done:
                        reused += 1
                        continue
                    jobs.append(
                        Job(
                            key=f"{task_id}|{source}",
                            fn=partial(self._cell, run, task_dir, source),
                            timeout_s=3600,
                            label=f"{task_id} {source}",
                            resources=JobResources(
                                sandbox=source == STATIC_SOURCE and self.settings.execution_checks
                            ),
                        )
                    )

            def record(outcome: JobOutcome) -> Future[None]:
                # Handed to the run's writer thread: findings first (tagged with the attempt),
                # durable before the cell record that makes them count.
                if outcome.status == "done":
                    cell, findings = outcome.value
                    tagged = [(FINDINGS, {**f, "attempt": cell["attempt"]}) for f in findings]
                    return run.submit(tagged, [(CELLS, cell)])
                task_id, source = outcome.job.key.split("|", 1)
                failure = {
                    "task_id": task_id,
                    "source": source,
                    "status": "error",
                    "infra_error": True,
                    "error": (outcome.error or outcome.status)[-4000:],
                }
                return run.submit([(CELLS, failure)])

            lanes = None
            if self._static_pool is not None:
                # static cells run in worker processes and hold no model call's slot; two
                # per worker keep the workers busy while results travel back
                lanes = {STATIC_LANE: 2 * self._static_pool.workers}
                for job in jobs:
                    if job.key.endswith("|" + STATIC_SOURCE):
                        job.lane = STATIC_LANE
            # once every call is out, the run waits: render-ready the reports meanwhile
            self._call_slots.when_all_busy(_warm_up_reports)
            executor = make_executor(
                self.settings.concurrency + self._prepare_ahead(jobs),
                self.settings.progress,
                "audit cells",
                lanes=lanes,
            )
            executor.run(jobs, record)
            records = read_records(run, self.settings.min_tier)  # once, for summary and reports
            summary = summarize_run(run, self, records)
            summary["skipped_completed"] = reused
            summary["ran"] = len(jobs)
            run.write_summary(summary)
            from metaeval.protocols.audit.render import write_reports

            write_reports(run, records=records)
            return summary
        finally:
            run.close()

    def _prepare_ahead(self, jobs: list[Job]) -> int:
        """Jobs the executor may run beyond `--concurrency`: with the local executor, as many
        model cells as there are call slots prepare their request while the calls are out
        (`metaeval.models.call_slots`); calls in service stay at most `--concurrency`."""
        has_model_cells = any(not job.key.endswith("|" + STATIC_SOURCE) for job in jobs)
        if not has_model_cells or selected_backend() != "local":
            return 0
        return min(self.settings.concurrency, MAX_PREPARED_AHEAD)

    def _make_static_pool(self, static_jobs: int) -> StaticPool | None:
        """Worker processes for static cells when more than one job is in flight on a
        machine with more than one core (local executor only: Ray places jobs itself);
        started at once."""
        workers = min(available_cores(), self.settings.concurrency, static_jobs)
        if workers < 2 or selected_backend() != "local":
            return None
        s = self.settings
        pool = StaticPool(
            workers,
            Path(s.run_dir) / "blobs",
            self.hints,
            s.tier,
            s.bench_dir,
            s.agent_results,
            s.execution_checks,
            s.sandbox,
            s.host_env,
        )
        pool.start()
        return pool

    def _audits(self, source: str, task_id: str) -> bool:
        """Whether `source` audits this task (the static source audits every task)."""
        wanted = self.settings.model_tasks
        return source == STATIC_SOURCE or wanted is None or task_id in wanted

    def _cell(self, run: RunDir, task_dir: Path, source: str) -> tuple[dict, list[dict]]:
        """One cell. A deterministic failure (the task's own input makes the code fail: a
        parse, validation or recursion error) is a final error cell, not retried on resume;
        transient failures (`is_transient`) propagate and become infrastructure errors."""
        task_id = task_dir.relative_to(self.settings.bench_dir).as_posix()
        base = {"task_id": task_id, "source": source, "attempt": uuid.uuid4().hex[:12]}
        try:
            return self._cell_body(run, task_dir, source, base)
        except Exception as exc:
            if is_transient(exc):
                raise
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            cell = {
                **base,
                "status": "error",
                "infra_error": False,
                "audit_failure": True,
                "error": f"deterministic failure, not retried: {message}"[:2000],
            }
            return cell, []

    def _cell_body(
        self, run: RunDir, task_dir: Path, source: str, base: dict[str, Any]
    ) -> tuple[dict, list[dict]]:
        if source == STATIC_SOURCE and self._static_pool is not None:
            return self._static_pool.run(task_dir, base)
        if source == STATIC_SOURCE:
            # in this process, a static cell is in service from start to end: it takes a
            # call slot, so the cells prepared ahead never raise the work in service above
            # --concurrency
            with self._call_slots.bound(), call_slot():
                task = self.load(task_dir)
                return self._static_cell(run, task, {**base, "task_id": task.task_id})
        # the CPU gate is given back while the call is out or waits for a call slot
        with self._call_slots.bound(), self._cpu_gate.held():
            return self._model_cell(run, task_dir, source, base)

    def _model_cell(
        self, run: RunDir, task_dir: Path, source: str, base: dict[str, Any]
    ) -> tuple[dict, list[dict]]:
        task = self.load(task_dir)
        base = {**base, "task_id": task.task_id}
        model = self.models[source]
        try:
            audit = audit_task(
                task,
                model,
                protocol=self.settings.protocol_name(),
                max_tokens=self.settings.max_tokens,
                temperature=self.settings.model_call.temperature,
                answer=self.settings.model_call.answer,
            )
        except MetaevalError as exc:  # provider unreachable after retries: rerun on resume
            return {**base, "status": "error", "infra_error": True, "error": str(exc)}, []
        findings = [verify_evidence(f, task) for f in audit.findings]
        cell = {
            **base,
            "status": "ok" if audit.status == "ok" else "error",
            "audit_failure": audit.status != "ok",
            "infra_error": False,
            "error": audit.error,
            "protocol": audit.protocol,
            "attempts": audit.attempts,
            "usage": audit.usage.model_dump(),
            "cost_usd": audit.cost_usd,
            "prompt_tokens": audit.prompt_tokens,
            "n_findings": len(findings),
            "dropped": audit.dropped,
            "notes": getattr(audit, "notes", []),
            "cuts": task.cuts,
            # durable before the cell record is (the run's writer syncs them first)
            "raw_outputs_blob": run.blobs.put(
                "\n\n-----\n\n".join(audit.raw_outputs), defer_sync=True
            ),
            "model_calls_blob": run.blobs.put(_jsonl(audit.model_calls), defer_sync=True),
        }
        return cell, [f.model_dump(mode="json") for f in findings]

    def _static_cell(self, run: RunDir, task: LoadedTask, base: dict) -> tuple[dict, list[dict]]:
        from metaeval.protocols.audit.static_cell import static_cell

        return static_cell(
            task,
            base,
            hints=self.hints,
            execution_checks=self.settings.execution_checks,
            sandbox=self.settings.sandbox,
            blobs=run.blobs,
            host_env=self.settings.host_env,
        )


def _warm_up_reports() -> None:
    """Import and compile the report renderer ahead of the end of the run (best effort:
    a failure here surfaces, with its real cause, when the reports are written)."""
    with contextlib.suppress(Exception):
        from metaeval.protocols.audit.report import warm_up

        warm_up()


def _jsonl(items: list[dict[str, Any]]) -> str:
    import json

    return "\n".join(json.dumps(item, sort_keys=True, default=str) for item in items)
