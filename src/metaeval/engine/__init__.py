"""The cell engine every protocol runs on.

A run is a set of cells, each one unit of resume named by the key fields of its record::

    from metaeval.engine.cells import Cell, plan_cells, run_cells

    plan = plan_cells(run, "audits", ("task_id", "source"), keys)     # skip completed cells
    cells = [Cell(key, partial(body, key), label=..., resources=...) for key, _ in plan.todo]
    results = run_cells(run, cells, write, concurrency=4, progress=None, description="cells")

`write(result)` gets a `CellResult` whose `kind` is decided by ONE rule (`cells.classify`):
``ok`` (the body returned), ``final`` (it raised an error `transient.is_transient` calls
final: recorded once, not retried) or ``transient`` (a transient error, a timeout, a lost
worker: recorded with ``infra_error: true``, retried on resume). It returns the records to
append, in stages; the engine submits them to the run's writer.

Modules (import them directly; this package imports nothing, so any layer may use a part):

- `executor`: `Job`, `JobOutcome`, `LocalExecutor`, `make_executor` (the backend is chosen by
  name, `select_backend("local" | "ray")`, and imported only then), `available_cores`;
  heartbeat lines for running jobs when output is not a terminal.
- `workers`, `job_clock`: the local executor's threads, and a job body's own time
  (`queued()` leaves a wait for a shared slot out of it).
- `ray_backend`: the Ray backend; ``python -m metaeval.engine.ray_backend`` prints the
  resources for ``ray start --resources``. `ray_worker`: what crosses between the driver
  and a worker (the pickled job, the run it sees, its blobs).
- `cells`: the cell loop above.
- `pacing`: `CallPacing` (call slots + CPU gate + cells prepared ahead) for runs of model
  calls; `process_lane_workers`.
- `process_lane`: `ProcessLane`, worker processes for plain CPU cells.
- `call_slots`, `cpu_gate`: the two bounds `pacing` combines.
- `progress`: `StepProgress` for loops of long steps; `write_line`.
"""
