"""Rounds of proposals: trials whose parents are chosen together and run concurrently.

Round r holds trials (r-1)*k+1 .. r*k of the budget (k = `proposals_per_round`), fixed by the
trial numbers alone, so a resumed run rebuilds the same rounds. Every trial of a round sees
the ledger as it stood before the round, whatever order its trials finish in; their ledger
lines are written in trial order once the round is over, and a trial that finished before a
kill is adopted from its `trial_result.json`, not run again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from metaeval.engine.executor import Job, JobOutcome, LocalExecutor

R = TypeVar("R")


def rounds(todo: Sequence[int], k: int) -> Iterator[tuple[int, list[int]]]:
    """(first trial of the round, its trials still to run), in order, for trials `todo`."""
    by_round: dict[int, list[int]] = {}
    for trial in todo:
        by_round.setdefault((trial - 1) // k, []).append(trial)
    for index in sorted(by_round):
        yield index * k + 1, by_round[index]


def run_round(bodies: dict[int, Callable[[], R]], workers: int) -> dict[int, R]:
    """Run one round's trial bodies, `workers` at a time, on the engine's local executor;
    their results by trial. One at a time they run in this thread (no executor). A trial
    that raised raises here, after the others have finished (their records are written)."""
    if workers <= 1 or len(bodies) <= 1:
        return {trial: body() for trial, body in sorted(bodies.items())}
    results: dict[int, R] = {}
    errors: dict[int, BaseException] = {}

    def job(trial: int, body: Callable[[], R]) -> Callable[[], None]:
        def run() -> None:
            try:
                results[trial] = body()
            except BaseException as exc:  # noqa: BLE001 - raised once the round is over
                errors[trial] = exc

        return run

    def noted(_: JobOutcome) -> None:
        return None

    executor = LocalExecutor(min(workers, len(bodies)), progress=False, description="round")
    executor.run(
        [
            Job(key=f"trial-{t:03d}", fn=job(t, b), label=f"trial {t:03d}")
            for t, b in bodies.items()
        ],
        noted,
    )
    if errors:
        raise errors[min(errors)]
    return results


__all__ = ["rounds", "run_round"]
