"""Agent runs for the audit's execution tier: an agent solves each task in its sandbox, the
task's tests score it, and what it did becomes the agent results the execution tier reads.

BenchGuard's execution-level mode shows auditors one agent's attempt beside the task (its
program and its evaluation result), so defects that only show when a real candidate meets the
tests come out. `AgentRuns` produces that attempt with any metaeval agent, usually a CLI on a
metaeval model (``claude-code:local/smollm2``, ``codex:replay/FILE``; the gateway starts
itself). Per task:

1. a fresh /app is seeded from the task's environment/ files (as the execution checks do);
2. the agent runs in the task's bubblewrap root (`TaskRootWorkspace`: /app, no /tests, no
   /solution, no network but its gateway relay) on instruction.md, within the task's
   `[agent] timeout_sec` (or the given limit); the oracle (``--agent oracle``, the only agent
   that asks to see the solution) runs in the room's agent phase with /solution and
   `[solution.env]`, the null agent (``--agent null``) does nothing: their rewards bound
   what an agent can score;
3. `bash /tests/test.sh` runs on the /app the agent left, in a fresh root with /tests (the
   verifier phase of the execution checks), and the reward is read from /logs/verifier;
4. the results land in ``<out>/<task_id>/``: ``program.diff`` (a unified diff of /app from
   start to end: the agent's program), ``result.json`` (status and its classification,
   reward, test outcome, token usage counted by the gateway and as the CLI reported it,
   steps, time, files produced), ``transcript.md`` (a summary of the transcript) and
   ``tests.log`` (the verifier's output). The audit loads that folder as ``agent/...``
   files (`metaeval audit run --tier execution --agent-results <out>`).

``<out>`` is a run directory (protocol ``audit-agent``): one record per task in
``agent_runs.jsonl``, written after the task's files, so a run killed at any point resumes
without repeating a finished task. An agent that times out, crashes, runs out of memory or
exits with an error is recorded with that classification, and its tests still run (a partial
attempt is evidence too); a harness failure (the gateway's provider unreachable, a transient
OS error) is an infrastructure error, retried on resume.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.registry import BUILTIN_AGENTS, get_agent
from metaeval.agents.types import AgentResult, Limits, Task
from metaeval.engine.cells import Cell, CellResult, Stages, plan_cells, run_cells
from metaeval.engine.executor import JobResources
from metaeval.errors import ConfigError
from metaeval.protocols.audit.cells.agent_results import (
    attempt_record,
    documents,
    transcript_summary,
    tree_diff,
    write_documents,
)
from metaeval.protocols.audit.plan import plan_tasks
from metaeval.protocols.audit.records import AGENT_RUNS, AgentRunRecord
from metaeval.protocols.audit.task_view import LoadedTask, load_task
from metaeval.records import RunDir
from metaeval.sandbox.container import SANDBOX_KINDS, ContainerError
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable, seed_app
from metaeval.tasks.image_backend import container_backend
from metaeval.tasks.limits import timeout_s, trial_limits
from metaeval.tasks.rooms import BwrapBackend, BwrapRoom, ContainerRoom
from metaeval.tasks.safe_files import remove_tree
from metaeval.tasks.task_workspace import TaskRootWorkspace
from metaeval.tasks.trial import run_trial

PROTOCOL = "audit-agent"
RECORDS = AGENT_RUNS
WORK_DIR = ".work"
DEFAULT_TIME_LIMIT_S = 600.0
DEFAULT_MAX_STEPS = 30
DEFAULT_TEST_TIMEOUT_S = 300.0


@dataclass
class AgentRunSettings:
    """One agent-run over a benchmark (goes into the run's manifest)."""

    bench_dir: Path
    out_dir: Path
    agent: str
    task_filter: list[str] = field(default_factory=list)
    concurrency: int = 1
    time_limit_s: float | None = None  # None: the task's [agent] timeout_sec, else the default
    max_steps: int = DEFAULT_MAX_STEPS
    test_timeout_s: float | None = None  # None: the task's [verifier] timeout_sec
    memory_cgroup_mb: int | None = None  # None: the agent's own default
    progress: bool | None = None
    new_layer: str | None = None
    # Host variables task.toml's [verifier.env] may read as ${NAME} (`metaeval.tasks.limits`)
    host_env: tuple[str, ...] = ()
    # Where the agent works: "bwrap" (the task's bubblewrap root), or "podman" / "docker" /
    # "auto" (a fresh container of the task's image, for agents that take any Environment)
    sandbox: str = "bwrap"


class AgentRuns:
    """Runs one agent on every task of a benchmark, writing agent results into `out_dir`."""

    def __init__(self, settings: AgentRunSettings, agent: Any = None):
        """`agent` overrides building one from `settings.agent` (tests, embedding)."""
        if not settings.bench_dir.is_dir():
            raise ConfigError("benchmark directory not found", file=str(settings.bench_dir))
        if not settings.agent:
            raise ConfigError("give an agent, e.g. claude-code:local/smollm2", field="agent")
        if settings.sandbox not in SANDBOX_KINDS:
            raise ConfigError(
                f"unknown sandbox '{settings.sandbox}' ({', '.join(SANDBOX_KINDS)})",
                field="sandbox",
            )
        if settings.sandbox != "bwrap" and settings.agent.split(":")[0] not in BUILTIN_AGENTS:
            raise ConfigError(
                f"--sandbox {settings.sandbox} runs the built-in agents only "
                f"({', '.join(BUILTIN_AGENTS)}; a CLI agent needs the bubblewrap root)",
                field="sandbox",
            )
        self.settings = settings
        self.task_dirs, _ = plan_tasks(settings.bench_dir, settings.task_filter)
        self._given = agent
        _ = self.agent  # a bad spec fails here, before anything runs

    @property
    def agent(self) -> Any:
        """The agent; one per process when built from the spec (a job shipped to another
        process, e.g. a Ray worker, builds its own there)."""
        if self._given is not None:
            return self._given
        return _agent_for(self.settings.agent, self.settings.memory_cgroup_mb)

    def _bench_tasks(self) -> list[Path]:
        from metaeval.tasks.task_dirs import discover_tasks

        return discover_tasks(self.settings.bench_dir)[0]

    def task_id(self, task_dir: Path) -> str:
        return task_dir.relative_to(self.settings.bench_dir).as_posix()

    def config(self) -> dict[str, Any]:
        s = self.settings
        return {
            "benchmark": str(s.bench_dir.resolve()),
            "agent": s.agent,
            "tasks": [self.task_id(d) for d in self.task_dirs],
            "time_limit_s": s.time_limit_s,
            "max_steps": s.max_steps,
            "test_timeout_s": s.test_timeout_s,
            "memory_cgroup_mb": getattr(self.agent, "memory_cgroup_mb", None),
            **({"host_env": list(s.host_env)} if s.host_env else {}),
            **({"sandbox": s.sandbox} if s.sandbox != "bwrap" else {}),
        }

    def meaning_settings(self) -> dict[str, Any]:
        """The settings a rerun must keep (the agent, its limits, the host variable names);
        `--task` only selects tasks and is left out."""
        config = self.config()
        selection = ("benchmark", "tasks")
        return {
            **{k: v for k, v in config.items() if k not in selection},
            "host_env": sorted(self.settings.host_env),
        }

    def run(self) -> dict[str, Any]:
        """Run every task without a final record; returns a summary of all records."""
        from metaeval.tasks.bench_hash import benchmark_hash

        for task_dir in self.task_dirs:  # a name that would shadow the run's bookkeeping
            first = self.task_id(task_dir).split("/", 1)[0]
            reserved = ("blobs", "manifest.json", "summary.json", ".lock", WORK_DIR)
            if first in reserved or first.endswith(".jsonl"):
                raise ConfigError(
                    f"task id '{self.task_id(task_dir)}' collides with a run directory file; "
                    "rename the task or use --task to leave it out",
                    file=str(task_dir),
                )
        run = RunDir.open(
            self.settings.out_dir,
            protocol=PROTOCOL,
            config=self.config(),
            # over every task of the benchmark: --task narrows a run without changing it
            hashes={"benchmark": benchmark_hash(self.settings.bench_dir, self._bench_tasks())},
            settings=self.meaning_settings(),
            seeds={},
            new_layer=self.settings.new_layer,
        )
        try:
            remove_tree(run.path / WORK_DIR)  # scratch of a killed run (we hold the lock)
            by_id = {self.task_id(d): d for d in self.task_dirs}
            plan = plan_cells(run, RECORDS, ("task_id",), [(t,) for t in by_id])
            cells = [
                Cell(
                    key=(task_id,),
                    fn=partial(self._one, run, by_id[task_id]),
                    label=f"{task_id} {self.settings.agent}",
                    resources=JobResources(sandbox=True),
                )
                for (task_id,), _ in plan.todo
            ]
            run_cells(
                run,
                cells,
                partial(self._write, run),
                concurrency=self.settings.concurrency,
                progress=self.settings.progress,
                description="agent runs",
            )
            run.flush()
            latest = run.latest_records(RECORDS, ("task_id",))
            summary = summarize([r for key, r in latest.items() if key[0] in by_id])
            summary.update(skipped_completed=plan.reused, ran=len(cells))
            run.write_summary(summary)
            return summary
        finally:
            remove_tree(run.path / WORK_DIR)
            run.close()

    def _write(self, run: RunDir, result: CellResult) -> Stages:
        """On the driver: the task's folder first, then the record that completes it."""
        (task_id,) = result.cell.key
        if result.kind == "ok":
            cell, files = result.value
        elif result.kind == "final":  # the harness fails the same way every time
            cell = AgentRunRecord(
                task_id=task_id,
                agent=self.settings.agent,
                attempt=uuid.uuid4().hex[:12],
                status="error",
                classification="error",
                infra_error=False,
                error=f"deterministic failure, not retried: {result.error}"[:2000],
            ).as_record()
            files = documents(cell, "", "", f"not run: {cell['error']}\n")
        else:  # infrastructure: retried on resume, no folder
            failure = AgentRunRecord(
                task_id=task_id,
                agent=self.settings.agent,
                status="error",
                classification="infra_error",
                infra_error=True,
                error=(result.error or "")[-4000:],
            ).as_record()
            return [[(RECORDS, failure)]]
        write_documents(run, cell["task_id"], files)
        return [[(RECORDS, cell)]]

    # ------------------------------------------------------------------ one task

    def _one(self, run: RunDir, task_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
        """(record, the task's result files) of one task."""
        task = load_task(task_dir, tier="minimal", bench_root=self.settings.bench_dir)
        base: dict[str, Any] = {
            "task_id": task.task_id,
            "agent": self.settings.agent,
            "attempt": uuid.uuid4().hex[:12],
        }
        skip = _not_runnable(task)
        if skip is not None:
            record = AgentRunRecord(
                **base, status="error", classification="not_run", infra_error=False, error=skip
            ).as_record()
            return record, documents(record, "", "", f"not run: {skip}\n")
        scratch = run.path / WORK_DIR / f"{base['attempt']}"
        try:
            return self._attempt(run, task, base, scratch)
        except ContainerError as exc:  # no image or engine: infrastructure, retried on resume
            record = AgentRunRecord(
                **base,
                status="error",
                classification="infra_error",
                infra_error=True,
                error=str(exc),
            ).as_record()
            return record, documents(record, "", "", f"not run: {exc}\n")
        finally:
            remove_tree(scratch)

    def _attempt(
        self, run: RunDir, task: LoadedTask, base: dict[str, Any], scratch: Path
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The agent as the solve step of one Harbor trial (`tasks.trial.run_trial`) in the
        bubblewrap room, then the task's tests; /app is diffed against a fresh copy."""
        scratch.mkdir(parents=True)
        start = scratch / "start"
        seed_app(task.root, start)
        trial_limits_ = trial_limits(
            task.config,
            agent_timeout_s=self.settings.time_limit_s
            or timeout_s(task.config, "agent", DEFAULT_TIME_LIMIT_S),
            verifier_timeout_s=self.settings.test_timeout_s
            or timeout_s(task.config, "verifier", DEFAULT_TEST_TIMEOUT_S),
            host_env=self.settings.host_env,
        )
        instruction = next(f.text for f in task.files if f.role == "instruction")
        limits = Limits(
            max_steps=self.settings.max_steps, time_limit_s=trial_limits_.agent.timeout_s
        )
        agent_task = Task(id=task.task_id, instruction=instruction, allow_write=True)
        ran: list[AgentResult] = []

        before, after = [start], []

        sees = TrialAgent(self.agent).sees_solution  # the oracle: shown /solution

        def drive(room: BwrapRoom) -> None:
            workspace = TaskRootWorkspace(room.app, room.agent_logs)
            env = room.agent_env(solution=True) if sees else workspace
            ran.append(self.agent.run(agent_task, env, limits))
            after.append(room.app)

        def drive_inside(room: ContainerRoom) -> None:
            before[0] = room.app_snapshot(scratch / "app-before")  # the image's own /app
            ran.append(self.agent.run(agent_task, room.agent_env(solution=sees), limits))
            after.append(room.app_snapshot(scratch / "app-after"))

        if self.settings.sandbox == "bwrap":
            trial = run_trial(
                task.root, BwrapBackend(), limits=trial_limits_, scratch=scratch, solve=drive
            )
        else:
            backend = container_backend(task.root, task.config, self.settings.sandbox)
            trial = run_trial(
                task.root, backend, limits=trial_limits_, scratch=scratch, solve=drive_inside
            )
        result = ran[0]
        diff = tree_diff(before[0], after[0])
        record = AgentRunRecord(
            **base, **attempt_record(run, result, trial, limits, diff)
        ).as_record()
        summary = transcript_summary(result.transcript, result.submission)
        return record, documents(record, diff, summary, trial.log)


_agents: dict[tuple[int, str, int | None], Any] = {}


def _agent_for(spec: str, memory_cgroup_mb: int | None) -> Any:
    """The agent a spec names, built once per process (CLI adapters are thread-safe)."""
    key = (os.getpid(), spec, memory_cgroup_mb)
    agent = _agents.get(key)
    if agent is None:
        agent = get_agent(spec)
        if memory_cgroup_mb is not None and hasattr(agent, "memory_cgroup_mb"):
            agent.memory_cgroup_mb = memory_cgroup_mb
        _agents[key] = agent
    return agent


def _not_runnable(task: LoadedTask) -> str | None:
    """Why the agent is not run on this task (its tests cannot score it), or None."""
    from metaeval.protocols.audit.execution_checks import unsafe_script

    if not (task.root / "tests" / "test.sh").is_file():
        return "no tests/test.sh"
    if not any(f.role == "instruction" for f in task.files):
        return "no readable instruction.md"
    unsafe = unsafe_script(task.root, "tests", "test.sh")
    if unsafe is not None:
        return unsafe
    return harbor_sandbox_unavailable()


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over the latest record of each task."""
    by_class: dict[str, int] = {}
    for r in records:
        by_class[r.get("classification", "?")] = by_class.get(r.get("classification", "?"), 0) + 1
    rewards = [r["reward"] for r in records if isinstance(r.get("reward"), int | float)]
    return {
        "tasks": len(records),
        "passed": sum(1 for r in records if r.get("passed")),
        "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
        "classifications": dict(sorted(by_class.items())),
        "infra_errors": sum(1 for r in records if r.get("infra_error")),
        "input_tokens": sum((r.get("usage") or {}).get("input_tokens", 0) for r in records),
        "output_tokens": sum((r.get("usage") or {}).get("output_tokens", 0) for r in records),
    }
