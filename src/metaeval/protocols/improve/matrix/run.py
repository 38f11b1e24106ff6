"""Plan and run a matrix: every cell an `improve run` of its own manifest, on the engine's
executor (threads here, or a Ray cluster with `--executor ray`), each resumable on its own.

A rerun after a kill resumes every cell where its bundle stopped (a finished cell only has its
summary files re-rendered). A cell that fails (its baseline cannot be evaluated, a contract
change refused) is reported as failed with the reason; the other cells still run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from metaeval.engine.executor import Job, JobFailed, JobOutcome, JobResources, make_executor
from metaeval.errors import MetaevalError
from metaeval.protocols.improve.matrix.cells import Cell, load_matrix, write_cell_manifests
from metaeval.protocols.improve.matrix.report import CellRow, cell_row, write_report
from metaeval.protocols.improve.records import LEDGER
from metaeval.protocols.improve.summary_records import RunSummary


@dataclass(frozen=True)
class CellPlan:
    """What one cell will run: its size and an upper bound on its evaluations and calls."""

    cell: Cell
    optimize_tasks: int
    held_out_tasks: int
    trial_budget: int
    trials_done: int
    baseline_repeats: int
    meta_max_steps: int
    max_steps_per_task: int

    @property
    def evaluations(self) -> int:
        """Node evaluations still to run, at most: the baseline's (when not done yet) and
        one per remaining trial (an invalid proposal is never evaluated)."""
        baseline = 0 if (self.cell.bundle / "baseline_evaluation.json").is_file() else 1
        repeats = self.baseline_repeats - 1 if baseline else 0
        return baseline + repeats + self.trial_budget - self.trials_done

    @property
    def episodes(self) -> int:
        """Target task episodes still to run, at most."""
        both = self.optimize_tasks + self.held_out_tasks
        baseline = 0 if (self.cell.bundle / "baseline_evaluation.json").is_file() else 1
        repeats = (self.baseline_repeats - 1) * self.optimize_tasks if baseline else 0
        return baseline * both + repeats + (self.trial_budget - self.trials_done) * both

    @property
    def target_calls(self) -> int:
        """Target model calls still to make, at most (one per step of every episode)."""
        return self.episodes * self.max_steps_per_task

    @property
    def meta_calls(self) -> int:
        """Meta-agent steps still to take, at most."""
        return (self.trial_budget - self.trials_done) * self.meta_max_steps


def _trials_done(bundle: Path) -> int:
    path = bundle / LEDGER
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_bytes().splitlines() if line.endswith(b"}"))


def plan_matrix(
    config_path: Path,
    sandbox: str | None = None,
    host_env: Sequence[str] = (),
    pull: str = "never",
) -> list[CellPlan]:
    """Every cell, checked as `improve run` checks a manifest (bad input is refused here,
    before any cell runs), with its size."""
    from metaeval.protocols.improve.plan import build_plan

    _, cells = write_cell_manifests(config_path)
    plans = []
    for cell in cells:
        plan, _ = build_plan(cell.manifest, host_env=host_env, sandbox=sandbox, pull=pull)
        plans.append(
            CellPlan(
                cell=cell,
                optimize_tasks=len(plan.optimize_tasks),
                held_out_tasks=len(plan.held_out_tasks or []),
                trial_budget=plan.trial_budget,
                trials_done=min(_trials_done(cell.bundle), plan.trial_budget),
                baseline_repeats=plan.baseline_repeats,
                meta_max_steps=plan.meta_limits.max_steps,
                max_steps_per_task=plan.episode_limits.max_steps,
            )
        )
    return plans


def plan_text(plans: list[CellPlan]) -> str:
    """`improve matrix --plan`: one line per cell and the totals."""
    lines = []
    for p in plans:
        lines.append(
            f"{p.cell.id}: {p.optimize_tasks} optimize + {p.held_out_tasks} held-out tasks, "
            f"trials {p.trials_done}/{p.trial_budget} done, baseline x{p.baseline_repeats}; "
            f"to run at most {p.evaluations} evaluations, {p.episodes} task episodes, "
            f"{p.target_calls} target calls, {p.meta_calls} meta-agent steps; "
            f"bundle {p.cell.bundle}"
        )
    lines.append(
        f"total: {len(plans)} cells, at most {sum(p.evaluations for p in plans)} evaluations, "
        f"{sum(p.episodes for p in plans)} task episodes, "
        f"{sum(p.target_calls for p in plans)} target calls, "
        f"{sum(p.meta_calls for p in plans)} meta-agent steps"
    )
    return "\n".join(lines)


def run_cell(
    manifest: Path, sandbox: str | None, host_env: tuple[str, ...], pull: str
) -> RunSummary | JobFailed:
    """One cell: `improve run` of its manifest (resumes its bundle)."""
    from metaeval.protocols.improve.run import run_experiment

    try:
        return run_experiment(manifest, host_env=host_env, sandbox=sandbox, pull=pull)
    except MetaevalError as exc:  # a refused contract or a failed baseline: say why
        return JobFailed(str(exc))


def run_matrix(
    config_path: Path,
    sandbox: str | None = None,
    host_env: Sequence[str] = (),
    pull: str = "never",
) -> tuple[list[CellRow], list[Path]]:
    """Run (or resume) every cell; write the matrix report; return its rows and files."""
    plans = plan_matrix(config_path, sandbox, host_env, pull)
    config = load_matrix(config_path)
    jobs = [
        Job(
            key=p.cell.id,
            fn=partial(run_cell, p.cell.manifest, sandbox, tuple(host_env), pull),
            label=p.cell.id,
            resources=JobResources(sandbox=True),
        )
        for p in plans
    ]
    errors: dict[str, str] = {}

    def on_outcome(outcome: JobOutcome) -> None:
        if isinstance(outcome.value, JobFailed):
            errors[outcome.job.key] = outcome.value.error
        elif outcome.status != "done":
            errors[outcome.job.key] = (outcome.error or outcome.status).strip().splitlines()[-1]

    executor = make_executor(config.concurrency, description="improve matrix cells")
    executor.run(jobs, on_outcome)
    rows = [cell_row(p.cell, errors.get(p.cell.id)) for p in plans]
    output = plans[0].cell.bundle.parent
    title = config.description or f"improve matrix {Path(config_path).name}"
    return rows, write_report(output, title, rows)
