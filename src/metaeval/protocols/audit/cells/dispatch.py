"""From a (task, source) key to the cell module that computes it, and where it runs.

The static source's cell (`cells/static.py`) runs in the engine's process lane when the run
has one (called there by name, so this process never imports the static checks), else in
this process holding a CPU slot; a model's cell (`cells/model.py`) holds a call slot and
gives the CPU back while its call is out. The execution tier's `--agent` step
(`cells/agent_run.py`) runs before any of them, by `run_agent_first`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from metaeval.engine.cells import Cell
from metaeval.engine.executor import JobResources
from metaeval.engine.pacing import CallPacing
from metaeval.engine.process_lane import ProcessLane
from metaeval.models.base import Model
from metaeval.protocols.audit.records import STATIC_SOURCE
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.protocols.audit.task_hints import Hints, load_hints
from metaeval.protocols.audit.task_view import LoadedTask, load_task
from metaeval.records import RunDir

STATIC_LANE = "static"
STATIC_WORKER = "metaeval.protocols.audit.cells.static:in_worker"
"""Computed in the process lane by name: this process never imports the static checks."""


@dataclass
class CellWork:
    """What every cell of one audit run needs: its settings, models and hints."""

    settings: AuditSettings
    models: dict[str, Model]
    hints: Hints

    @classmethod
    def for_run(cls, settings: AuditSettings, models: dict[str, Model]) -> CellWork:
        """The run's cell work; the benchmark's hints are read once here (a malformed hints
        file is refused before anything runs)."""
        return cls(settings, models, load_hints(settings.bench_dir))

    def plan(
        self,
        run: RunDir,
        task_dir: Path,
        source: str,
        pacing: CallPacing,
        lane: ProcessLane | None,
    ) -> Cell:
        """The engine's job for one (task, source) cell."""
        task_id = task_dir.relative_to(self.settings.bench_dir).as_posix()
        static = source == STATIC_SOURCE
        return Cell(
            key=(task_id, source),
            fn=partial(self.compute, run, task_dir, source, pacing, lane),
            timeout_s=3600,
            label=f"{task_id} {source}",
            resources=JobResources(sandbox=static and self.settings.execution_checks),
            lane=STATIC_LANE if static and lane is not None else None,
        )

    def compute(
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
            return lane.call_named(STATIC_WORKER, task_dir, base, *self._static_worker_args())
        if source == STATIC_SOURCE:
            with pacing.in_service():
                return self._static_cell(run, self.load(task_dir), base)
        with pacing.call_cell():  # the CPU gate is given back while the call is out
            return self._model_cell(run, self.load(task_dir), source, base)

    def load(self, task_dir: Path) -> LoadedTask:
        """The task as the auditors see it (the run's tier, hints and agent results)."""
        return load_task(
            task_dir,
            hints=self.hints,  # read once per run, not once per cell
            tier=self.settings.tier,
            bench_root=self.settings.bench_dir,
            agent_results=self.settings.agent_results,
        )

    def _static_worker_args(self) -> tuple[Any, ...]:
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

        own = self.settings.model_settings(source)
        # a model of a models file records its own settings in each cell; the others' are
        # the run's, recorded once in the manifest
        call = {"call": own.recorded()} if source in self.settings.per_model else {}
        return model_cell(
            task,
            self.models[source],
            {**base, "task_id": task.task_id, **call},
            protocol=self.settings.protocol_name(),
            max_tokens=own.max_tokens,
            temperature=own.call.temperature,
            answer=own.call.answer,
            blobs=run.blobs,
        )


def calls_a_model(source: str) -> bool:
    """Whether a cell of this source holds a model call (every source but the static one)."""
    return source != STATIC_SOURCE


def run_agent_first(s: AuditSettings, task_dirs: list[Path]) -> dict[str, Any]:
    """Run the settings' agent on the audited tasks into its agent-results directory
    (RUN_DIR/agent_results; resumes) before the audit's cells read them."""
    from metaeval.protocols.audit.cells.agent_run import AgentRuns, AgentRunSettings

    assert s.agent is not None and s.agent_results is not None
    tasks = [d.relative_to(s.bench_dir).as_posix() for d in task_dirs]
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
