"""The cell loop every protocol runs: plan keys -> skip completed -> run -> classify -> record.

A cell is one unit of resume, named by the values of its record's key fields. `plan_cells`
reads the run's records once and keeps the planned keys whose latest record is not final
(`records.run.is_final`). `run_cells` runs each cell's body as a job of the selected executor
(local threads or Ray), sorts how it ended with ONE rule (`classify`) and hands the
`CellResult` to the protocol's `write`, which returns the records to append; the engine
submits them to the run's writer, stage by stage (a cell's findings before the cell record
that makes them count).

The rule (`classify`):

* the body returned a value -> ``ok`` (the value may itself record a failure the protocol
  judged, e.g. a model whose output stays malformed);
* the body raised an exception that `metaeval.transient.is_transient` calls final (a parse,
  validation or recursion error: it fails the same way every time) -> ``final``, with the
  exception's ``Type: message``; it is recorded once and not retried;
* the body raised a transient exception (timeout, rate limit, 5xx, lost connection, a full
  disk, a killed worker process), exceeded its timeout, or the backend lost it (a Ray worker
  or node died, a job that cannot be shipped) -> ``transient``, with the error text; the
  record carries ``infra_error: true`` and a rerun retries the cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from metaeval.engine.executor import Job, JobOutcome, JobResources, make_executor
from metaeval.records.run import RunDir, cell_key, is_final
from metaeval.transient import is_transient

CellKind = Literal["ok", "final", "transient"]
Stages = Sequence[Sequence[tuple[str, Mapping[str, Any]]]]
"""Records to append: stages of (record file name, record), each stage durable before the next."""


@dataclass
class Cell:
    """One planned cell: its key (values of the key fields) and the body that computes it.

    `fn` must be picklable by cloudpickle for the Ray backend (a partial of a method is)."""

    key: tuple[Any, ...]
    fn: Callable[[], Any]
    label: str = ""
    timeout_s: float | None = None
    resources: JobResources | None = None
    lane: str | None = None  # a bounded lane of the local executor (e.g. a process lane)
    recovery: int = 0  # earlier infrastructure failures of this cell (see `plan_cells`)


@dataclass
class CellResult:
    """How one cell ended: `kind` under the one rule, the body's `value` when ok, else the
    `error` text (final: ``Type: message``; transient: the traceback or the timeout)."""

    cell: Cell
    kind: CellKind
    value: Any = None
    error: str | None = None
    duration_s: float = 0.0  # the body's own time (queue waits left out)


@dataclass(frozen=True)
class FinalFailure:
    """What a body's final (non-transient) exception becomes; returned rather than raised,
    so that it travels back from a Ray worker like any value."""

    message: str


@dataclass
class Plan:
    """Cells to run, by key with their recovery index, and how many planned keys were
    already final (`reused`) or gave up after too many infrastructure failures."""

    todo: list[tuple[tuple[Any, ...], int]]
    reused: int
    exhausted: int = 0


def plan_cells(
    run: RunDir,
    name: str,
    key_fields: Sequence[str],
    keys: Sequence[tuple[Any, ...]],
    *,
    recovery_limit: int | None = None,
) -> Plan:
    """The planned `keys` whose latest record in ``<name>.jsonl`` (current layer) is not
    final. With `recovery_limit`, a cell with more infrastructure failures than that stays
    as it is (counted in `exhausted`)."""
    history: dict[tuple, list[Mapping[str, Any]]] = {}
    for record in run.read(name):
        key = cell_key(record, key_fields)
        if key is not None:
            history.setdefault(key, []).append(record)
    plan = Plan(todo=[], reused=0)
    for key in keys:
        records = history.get(tuple(key), [])
        if records and is_final(records[-1]):
            plan.reused += 1
            continue
        failures = sum(1 for r in records if r.get("infra_error"))
        if recovery_limit is not None and failures > recovery_limit:
            plan.exhausted += 1
            continue
        plan.todo.append((tuple(key), failures))
    return plan


def final_message(exc: BaseException) -> str:
    """``Type: message`` (or ``Type`` alone) of a final failure."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Guarded:
    """A cell body under the one rule: a final exception is returned as `FinalFailure`, a
    transient one propagates to the executor (which reports the job as failed)."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def __call__(self) -> Any:
        try:
            return self.fn()
        except Exception as exc:
            if is_transient(exc):
                raise
            return FinalFailure(final_message(exc))


def classify(outcome: JobOutcome, cell: Cell) -> CellResult:
    """THE rule sorting a job's outcome into ok, final or transient (see the module doc)."""
    if outcome.status == "done" and isinstance(outcome.value, FinalFailure):
        return CellResult(cell, "final", error=outcome.value.message, duration_s=outcome.duration_s)
    if outcome.status == "done":
        return CellResult(cell, "ok", value=outcome.value, duration_s=outcome.duration_s)
    return CellResult(
        cell, "transient", error=outcome.error or outcome.status, duration_s=outcome.duration_s
    )


def job_key(key: tuple[Any, ...]) -> str:
    """A cell's job key: its key values joined by ``|`` (deterministic across restarts)."""
    return "|".join(str(value) for value in key)


def run_cells(
    run: RunDir,
    cells: Sequence[Cell],
    write: Callable[[CellResult], Stages],
    *,
    concurrency: int,
    progress: bool | None,
    description: str,
    lanes: dict[str, int] | None = None,
    heartbeat_s: float | None = None,
) -> list[CellResult]:
    """Run `cells` on the selected executor; `write(result)` (on the driver, once per cell,
    one at a time) returns the records the engine appends for it. Returns every result once
    all records are durable."""
    by_job: dict[int, Cell] = {}
    jobs = []
    for cell in cells:
        job = Job(
            key=job_key(cell.key),
            fn=Guarded(cell.fn),
            timeout_s=cell.timeout_s,
            label=cell.label,
            resources=cell.resources,
            lane=cell.lane,
        )
        by_job[id(job)] = cell
        jobs.append(job)
    results: list[CellResult] = []

    def on_outcome(outcome: JobOutcome) -> Future[None] | None:
        result = classify(outcome, by_job[id(outcome.job)])
        results.append(result)
        stages = [list(stage) for stage in write(result) if stage]
        return run.submit(*stages) if stages else None

    executor = make_executor(
        concurrency, progress, description, lanes=lanes, heartbeat_s=heartbeat_s
    )
    executor.run(jobs, on_outcome)
    return results
