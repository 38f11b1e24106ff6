"""Evaluate a target agent on a suite: one episode per task (`evaluate.evaluate_task`) as one
executor job each, and the suite's score.

Suite scoring (`SuiteResult`, `evaluate_suite`): score = passed / total, over every task of
the suite. A task the harness could not run (infra_error) or a candidate that broke
(target_error) is never dropped from the denominator, so a candidate cannot raise its score by
making tasks unrunnable; the caller (the IMPROVE loop) treats an evaluation with any infra
error as an evaluation-framework failure (retried once, then not comparable and never
promoted), and a candidate with any target error as broken (`SuiteResult.broken`).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from metaeval.engine.executor import Executor, Job, JobOutcome, make_executor
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.episode_room import DEFAULT_SANDBOX, check_sandbox
from metaeval.protocols.improve.evaluate import evaluate_task
from metaeval.protocols.improve.image_pins import ImagePins
from metaeval.protocols.improve.suites import SuiteConfig, suite_tasks
from metaeval.protocols.improve.task_outcome import EpisodeClient, TaskOutcome, describe_error


class SuiteResult(BaseModel):
    """Outcomes of one suite slice and its accuracy over all of its tasks."""

    name: str = ""
    outcomes: list[TaskOutcome] = Field(default_factory=list)
    passed: int = 0
    failed: int = 0
    infra_errors: int = 0
    target_errors: int = 0
    score: float | None = None  # passed / total; None for an empty suite
    duration_s: float = 0.0

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def scored(self) -> int:
        return self.passed + self.failed

    @property
    def broken(self) -> bool:
        """True when any task ended in a target error: the candidate is broken."""
        return self.target_errors > 0

    @classmethod
    def from_outcomes(
        cls, outcomes: Sequence[TaskOutcome], *, name: str = "", duration_s: float = 0.0
    ) -> SuiteResult:
        counts = {status: 0 for status in ("passed", "failed", "infra_error", "target_error")}
        for outcome in outcomes:
            counts[outcome.status] += 1
        total = len(outcomes)
        return cls(
            name=name,
            outcomes=list(outcomes),
            passed=counts["passed"],
            failed=counts["failed"],
            infra_errors=counts["infra_error"],
            target_errors=counts["target_error"],
            score=counts["passed"] / total if total else None,
            duration_s=round(duration_s, 3),
        )


def evaluate_suite(
    tasks: Sequence[Path],
    client_factory: Callable[[], EpisodeClient],
    *,
    concurrency: int = 1,
    limits: EpisodeLimits | None = None,
    work_root: Path | None = None,
    name: str = "",
    on_outcome: Callable[[TaskOutcome], None] | None = None,
    executor: Executor | None = None,
    host_env: Sequence[str] = (),
    sandbox: str = DEFAULT_SANDBOX,
    pins: ImagePins | None = None,
) -> SuiteResult:
    """Evaluate every task as one executor job each (one client per task from
    `client_factory`) and score the suite; outcomes keep the order of `tasks`.

    `executor` defaults to a local executor running `concurrency` jobs at once. A factory
    that raises gives that task a target_error (the candidate cannot be reached); a client
    with a `release()` method gets it called when its episode ends. A job the executor
    reports as failed (the harness crashed, a worker was lost) is an infra_error.
    `on_outcome` is called as each task finishes, in the executor's orchestrating thread.
    `limits`, `host_env`, `sandbox`, `pins`: see `evaluate_task`; without `pins` every
    task's image is resolved once for this suite evaluation.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    started = time.monotonic()
    episode = functools.partial(
        evaluate_task,
        limits=limits or EpisodeLimits(),
        work_root=work_root,
        host_env=tuple(host_env),
        sandbox=check_sandbox(sandbox),
        pins=pins if pins is not None else ImagePins(),
    )
    jobs = [
        Job(
            key=f"{index:05d}:{Path(task).name}",
            fn=functools.partial(_episode_job, Path(task), client_factory, episode),
            label=Path(task).name,
        )
        for index, task in enumerate(tasks)
    ]
    results: dict[str, TaskOutcome] = {}

    def record(done: JobOutcome) -> None:
        outcome = _job_outcome(done)
        results[done.job.key] = outcome
        if on_outcome is not None:
            with contextlib.suppress(Exception):
                on_outcome(outcome)

    runner = executor or make_executor(concurrency, progress=False, description=name or "tasks")
    runner.run(jobs, record)
    outcomes = [results[job.key] for job in jobs]
    return SuiteResult.from_outcomes(outcomes, name=name, duration_s=time.monotonic() - started)


def _job_outcome(done: JobOutcome) -> TaskOutcome:
    """A finished job's outcome; a job the executor reports as failed is an infra_error."""
    if done.status == "done":
        return done.value
    return TaskOutcome(
        task_id=done.job.label,
        status="infra_error",
        reason=f"evaluation job {done.status}: {(done.error or '').strip()[-2000:]}",
        duration_s=round(done.duration_s, 3),
    )


def _episode_job(
    task: Path,
    client_factory: Callable[[], EpisodeClient],
    episode: Callable[[Path, EpisodeClient], TaskOutcome],
) -> TaskOutcome:
    """One executor job: get a client, run the episode, give the client back."""
    task_started = time.monotonic()
    try:
        client = client_factory()
    except Exception as exc:
        return TaskOutcome(
            task_id=task.name,
            status="target_error",
            reason=f"the client could not be created: {describe_error(exc)}",
            duration_s=round(time.monotonic() - task_started, 3),
        )
    try:
        return episode(task, client)
    finally:
        release = getattr(client, "release", None)
        if callable(release):
            release()


def run_suite(
    config: SuiteConfig,
    client_factory: Callable[[], EpisodeClient],
    *,
    work_root: Path | None = None,
    verifier_timeout_s: float | None = None,
    on_outcome: Callable[[TaskOutcome], None] | None = None,
) -> SuiteResult:
    """Evaluate the tasks a suite config selects, with its budget and concurrency."""
    return evaluate_suite(
        suite_tasks(config),
        client_factory,
        concurrency=config.concurrency,
        limits=config.episode_limits(verifier_timeout_s),
        work_root=work_root,
        name=config.name,
        on_outcome=on_outcome,
    )
