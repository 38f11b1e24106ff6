"""The Ray backend of the executor: the same Job/JobOutcome contract, jobs run on a Ray cluster.

The driver (the process that opened the run directory) stays the only writer of records:

* A job's callable is pickled on the driver with one substitution: every `RunDir` it refers to
  becomes a `WorkerRun`, which knows the run's path and layer and collects the blobs the job
  stores (`run.blobs.put`) in memory instead of writing them.
* The worker runs the callable in a thread under the job's timeout (the timeout holds on the
  worker) and returns the value, the error text or the timeout, plus the collected blobs.
* The driver puts the blobs into the real blob store and hands the outcome to `on_outcome`,
  exactly as the local executor does, so resume (completed cells in the records) works the same.

A worker or node lost mid-job is an infrastructure failure: Ray resubmits the task elsewhere
(`max_retries`); if it still cannot finish, the outcome is `failed` with
``extra["infra_error"] = True`` and the protocol records an infra error that a re-run retries.
Per-job resources (`JobResources`) become Ray task options: CPUs, memory, and the custom
``sandbox`` resource a node advertises when it has bubblewrap or a container engine.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from metaeval.console import SafeConsole
from metaeval.engine.executor import (
    Executor,
    Job,
    JobOutcome,
    JobResources,
    OutcomeCallback,
    heartbeat_line,
    settled,
)
from metaeval.engine.progress import heartbeat_interval, write_line
from metaeval.engine.ray_worker import pickle_job, run_payload, store_blobs
from metaeval.errors import MetaevalError
from metaeval.records.blobs import BlobStore

SANDBOX_RESOURCE = "sandbox"
"""Custom Ray resource a node offers when it can run sandboxed jobs (bubblewrap or a container
engine); its amount is how many such jobs the node runs at once."""

DEFAULT_MAX_RETRIES = 3
_POLL_S = 0.2
_TIMEOUT_GRACE_S = 30.0  # driver-side backstop past a job's own timeout (worker unresponsive)


class RayUnavailable(MetaevalError):
    """Ray is not installed, or the cluster cannot be reached."""


def ray_options(resources: JobResources | None, max_retries: int) -> dict[str, Any]:
    """Ray task options for a job's resources."""
    options: dict[str, Any] = {"max_retries": max_retries, "retry_exceptions": False}
    res = resources or JobResources()
    options["num_cpus"] = res.cpus
    if res.memory_mb:
        options["memory"] = int(res.memory_mb) * 1024 * 1024
    if res.sandbox:
        options["resources"] = {SANDBOX_RESOURCE: 0.001}
    return options


START_LINE = 'ray start --resources "$(python -m metaeval.engine.ray_backend)"'
"""How a node offers the resources metaeval's jobs ask for (with the node's usual options)."""


def job_demand(resources: JobResources | None) -> dict[str, float]:
    """What one job asks of the node that runs it, in Ray's resource names."""
    options = ray_options(resources, 0)
    demand = {"CPU": float(options["num_cpus"]), **options.get("resources", {})}
    if "memory" in options:
        demand["memory"] = float(options["memory"])
    return {name: amount for name, amount in demand.items() if amount > 0}


def check_cluster_offers(
    nodes: Sequence[Mapping[str, Any]], jobs: Sequence[Job], address: str | None
) -> None:
    """Raise RayUnavailable, naming the missing resource and how to offer it, when no alive
    node (`ray.nodes()`) offers what some job asks for: Ray would keep such a job pending
    forever, with no message."""
    offers = [dict(n.get("Resources") or {}) for n in nodes if n.get("Alive", True)]
    short: dict[str, int] = {}  # resource no node has enough of -> jobs that need it
    seen: dict[frozenset, str | None] = {}
    for job in jobs:
        demand = job_demand(getattr(job, "resources", None))
        key = frozenset(demand.items())
        if key not in seen:
            seen[key] = _missing(demand, offers)
        missing = seen[key]
        if missing is not None:
            short[missing] = short.get(missing, 0) + 1
    if not short:
        return
    where = f"the Ray cluster at {address}" if address else "the local Ray instance"
    what = "; ".join(f"{n} job(s) need {name}" for name, n in sorted(short.items()))
    hint = ""
    if any(name.startswith(f"'{SANDBOX_RESOURCE}'") for name in short):
        hint = (
            f"; start each node that may run sandboxed jobs (it needs bubblewrap, Podman or "
            f"Docker) with the sandbox resource: {START_LINE}"
        )
    raise RayUnavailable(f"no node of {where} offers what the jobs ask for: {what}{hint}")


def _missing(demand: Mapping[str, float], offers: list[dict[str, float]]) -> str | None:
    """None when one node offers the whole demand, else what is missing, readably."""
    if any(all(node.get(k, 0.0) >= v for k, v in demand.items()) for node in offers):
        return None
    for name, amount in demand.items():
        if not any(node.get(name, 0.0) >= amount for node in offers):
            if name == SANDBOX_RESOURCE:
                return f"'{SANDBOX_RESOURCE}' (no node offers it)"
            most = max((node.get(name, 0.0) for node in offers), default=0.0)
            return f"{amount:g} {name} (the largest node offers {most:g})"
    return "all of " + ", ".join(f"{v:g} {k}" for k, v in demand.items()) + " on one node"


def connect(address: str | None) -> Any:
    """Connect to the Ray cluster at `address`, or start a local instance when None."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable("the ray executor needs Ray: pip install 'metaeval[ray]'") from exc
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
        # Workers import metaeval from the same place the driver does (an editable install
        # or a checkout): the same sys.path, no packaging step.
        "runtime_env": {"env_vars": {"PYTHONPATH": os.pathsep.join(_src_paths())}},
    }
    if address:
        kwargs["address"] = address
    else:
        kwargs["resources"] = node_resources()
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnavailable(
            f"cannot reach the Ray cluster at {address or 'local'}: {exc}"
        ) from exc
    return ray


def node_resources() -> dict[str, float]:
    """Custom resources this machine offers as a Ray node: ``sandbox`` (one per CPU) when it
    has a working bubblewrap or a container engine, else none."""
    import shutil

    from metaeval.sandbox.bwrap import bwrap_available

    if bwrap_available() or shutil.which("podman") or shutil.which("docker"):
        return {SANDBOX_RESOURCE: float(os.cpu_count() or 1)}
    return {}


def _src_paths() -> list[str]:
    import metaeval

    src = str(Path(metaeval.__file__).resolve().parents[1])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    return [src, *rest]


def _is_infra(exc: BaseException) -> bool:
    import ray.exceptions as rex

    infra = tuple(
        getattr(rex, name)
        for name in (
            "WorkerCrashedError",
            "NodeDiedError",
            "ObjectLostError",
            "OwnerDiedError",
            "RaySystemError",
            "LocalRayletDiedError",
            "TaskUnschedulableError",
            "TaskCancelledError",
            "ObjectReconstructionFailedError",
        )
        if hasattr(rex, name)
    )
    return isinstance(exc, infra)


class RayExecutor(Executor):
    """Runs jobs as Ray tasks, at most `concurrency` in flight; same contract as LocalExecutor."""

    def __init__(
        self,
        concurrency: int = 1,
        progress: bool | None = None,
        description: str = "jobs",
        console: Console | None = None,
        *,
        address: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.console = console or SafeConsole(stderr=True)
        self.progress = self.console.is_terminal if progress is None else progress
        self.description = description
        self.address = address
        self.max_retries = max_retries
        # not a terminal: a heartbeat line per job still in flight (see engine.executor)
        self.lines = progress is None and not self.console.is_terminal
        self.heartbeat_s = heartbeat_interval()
        self._last_beat = time.monotonic()

    def run(self, jobs: Sequence[Job], on_outcome: OutcomeCallback) -> list[JobOutcome]:
        """Run `jobs` on the cluster; `on_outcome` runs here, on the driver, once per job."""
        ray = connect(self.address)
        if jobs:  # before submitting: a job no node can take would wait forever
            check_cluster_offers(ray.nodes(), jobs, self.address)
        remote = ray.remote(run_payload)
        queue = list(jobs)
        queue.reverse()
        in_flight: dict[Any, tuple[Job, float, dict[str, BlobStore]]] = {}
        outcomes: list[JobOutcome] = []
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.progress,
        ) as bar:
            task_id = bar.add_task(self.description, total=len(jobs))
            try:
                while queue or in_flight:
                    while queue and len(in_flight) < self.concurrency:
                        job = queue.pop()
                        outcome = self._submit(ray, remote, job, in_flight)
                        if outcome is not None:
                            self._finish(outcome, on_outcome, outcomes, bar, task_id)
                    if not in_flight:
                        continue
                    ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=_POLL_S)
                    for ref in ready:
                        job, started, job_stores = in_flight.pop(ref)
                        outcome = self._collect(ray, ref, job, started, job_stores)
                        self._finish(outcome, on_outcome, outcomes, bar, task_id)
                    self._expire(ray, in_flight, on_outcome, outcomes, bar, task_id)
                    self._heartbeat(in_flight)
            except BaseException:
                for ref in in_flight:
                    ray.cancel(ref, force=True)
                raise
        return outcomes

    # ----------------------------------------------------------------- steps

    def _submit(self, ray: Any, remote: Any, job: Job, in_flight: dict) -> Any:
        try:
            payload, runs = pickle_job(job.fn)
        except Exception:  # noqa: BLE001 - a job that cannot be shipped fails on its own
            return JobOutcome(
                job,
                "failed",
                error="the job cannot be sent to a Ray worker (not picklable):\n"
                + traceback.format_exc(),
            )
        options = ray_options(getattr(job, "resources", None), self.max_retries)
        ref = remote.options(name=f"metaeval:{job.key}"[:200], **options).remote(
            payload, job.timeout_s
        )
        in_flight[ref] = (job, time.monotonic(), {str(run.path): run.blobs for run in runs})
        return None

    def _collect(
        self, ray: Any, ref: Any, job: Job, started: float, job_stores: Mapping[str, BlobStore]
    ) -> JobOutcome:
        try:
            result = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - classified below
            infra = _is_infra(exc)
            return JobOutcome(
                job,
                "failed",
                error=f"{'infrastructure' if infra else 'ray'} error: {type(exc).__name__}: {exc}",
                duration_s=time.monotonic() - started,
                extra={"infra_error": True},
            )
        value = result.get("value")
        blobs: dict[str, bytes] = result.get("blobs") or {}
        if blobs:
            value = store_blobs(blobs, job_stores, value)
        duration = float(result.get("duration_s") or 0.0)
        if result["status"] == "done":
            return settled(job, value, duration, backend="ray")
        return JobOutcome(
            job,
            result["status"],
            value=value,
            error=result.get("error"),
            duration_s=duration,
            extra={"backend": "ray"},
        )

    def _expire(self, ray: Any, in_flight: dict, on_outcome, outcomes, bar, task_id) -> None:
        """Driver-side backstop: a job far past its timeout (worker hung or unreachable).

        Counted from submission, so time spent waiting for a free slot in Ray counts too: keep
        `concurrency` within the cluster's slots for jobs with short timeouts."""
        now = time.monotonic()
        for ref, (job, started, _stores) in list(in_flight.items()):
            if job.timeout_s is not None and now - started > job.timeout_s + _TIMEOUT_GRACE_S:
                ray.cancel(ref, force=True)
                del in_flight[ref]
                outcome = JobOutcome(
                    job, "timeout", error=f"job exceeded {job.timeout_s}s", duration_s=now - started
                )
                self._finish(outcome, on_outcome, outcomes, bar, task_id)

    def _heartbeat(self, in_flight: dict) -> None:
        """Every `heartbeat_s`, one line per job in flight that long (counted from its
        submission: the driver cannot see when a worker started it)."""
        now = time.monotonic()
        if not self.lines or now - self._last_beat < self.heartbeat_s:
            return
        self._last_beat = now
        for job, started, _stores in list(in_flight.values()):
            if now - started >= self.heartbeat_s:
                write_line(self.console, heartbeat_line(self.description, job, now - started))

    @staticmethod
    def _finish(outcome: JobOutcome, on_outcome, outcomes: list, bar, task_id) -> None:
        on_outcome(outcome)
        outcomes.append(outcome)
        bar.advance(task_id)


if (
    __name__ == "__main__"
):  # `python -m metaeval.engine.ray_backend` prints --resources for ray start
    import json

    print(json.dumps(node_resources()))
