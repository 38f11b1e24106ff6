"""Evaluate one node of the lineage (the baseline or a candidate) on the suites.

The target is launched from a checkout over PACT (one server per concurrent episode, or one
per episode on Ray workers) and scored on the optimize split and, when asked, the held-out
split. The outcome is a `NodeEval` whose status keeps the failure classes apart: `evaluated`,
`launch_failed` / `broken` (the target's fault), `framework_failure` (the harness's, a server
whose sandbox bwrap could not set up included; retried once, never promoted). Container tasks
run the image ids of the bundle's `image_pins.jsonl` (`image_pins`).
"""

from __future__ import annotations

import queue
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaeval.engine.executor import selected_backend
from metaeval.errors import MetaevalError
from metaeval.protocols.improve.feedback import keep_task_logs
from metaeval.protocols.improve.image_pins import IMAGE_PINS, ImagePins
from metaeval.protocols.improve.pact.launcher import LaunchError, launch
from metaeval.protocols.improve.records import NodeEval, SuiteSummary, TargetUsage, TaskRow
from metaeval.protocols.improve.suite_eval import SuiteResult, evaluate_suite
from metaeval.protocols.improve.target_model import TargetModelService
from metaeval.protocols.improve.target_runtime import EpisodeServer, LeasedClient, target_sandbox

if TYPE_CHECKING:
    from metaeval.protocols.improve.bundle import BundleFiles
    from metaeval.protocols.improve.plan import Plan

SRC_DIR = Path(__file__).resolve().parents[3]  # .../src, so a target's PACT server finds metaeval


def suite_summary(result: SuiteResult) -> SuiteSummary:
    """A suite's result as the bundle keeps it: score, counts, one row per task."""
    return SuiteSummary(
        score=result.score,
        passed=result.passed,
        failed=result.failed,
        infra_errors=result.infra_errors,
        target_errors=result.target_errors,
        tasks=[
            TaskRow(
                task_id=o.task_id,
                status=o.status,
                reward=o.reward,
                steps=o.steps,
                reason=o.reason,
                backend=o.backend,
                image_id=o.image_id,
                usage=o.usage,
            )
            for o in result.outcomes
        ],
    )


def target_usage(counted: TargetUsage | None, node: NodeEval, free: bool = False) -> TargetUsage:
    """The target's tokens and cost in one evaluation (retry included): the gateway's count
    when the harness's gateway served its model; otherwise (a local model server, a model the
    target loads itself, no model) the per-step usage the target reported over PACT, summed
    over the suites' tasks, labelled `target_reported` (the candidate's own word), cost 0
    when the model costs nothing (`free`: a local model, or none) or no tokens were used,
    else unknown."""
    if counted is not None:
        return counted
    totals = {"input_tokens": 0, "output_tokens": 0}
    for row in (t for s in node.suites() for t in s.tasks):
        for key in totals:
            value = row.usage.get(key)
            totals[key] += value if isinstance(value, int) and value > 0 else 0
    used = totals["input_tokens"] + totals["output_tokens"]
    return TargetUsage(
        source="target_reported",
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        cost_usd=0.0 if free or not used else None,
    )


LOG_TAIL_LINES = 6


def serve_failure(suites: list[SuiteSummary], out_dir: Path, label: str) -> str:
    """Why a target failed to serve, for the console: the first target error's reason and
    the last lines of its server logs (already redacted when written)."""
    reasons = [t.reason for s in suites for t in s.rows("target_error")]
    text = "target agent failed to serve"
    if reasons:
        text += f" ({len(reasons)} task(s); first: {reasons[0]})"
    for log in sorted(out_dir.glob(f"{label}-server-*.log"))[:1]:
        try:
            lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        tail = [ln[:300] for ln in lines if not ln.startswith("# launch")][-LOG_TAIL_LINES:]
        if tail:
            text += f"; last lines of {log.name}:\n  " + "\n  ".join(tail)
    return text


class NodeEvaluator:
    """Scores a target checkout on the plan's suites (see the module docstring)."""

    def __init__(
        self,
        plan: Plan,
        model_service: TargetModelService,
        sealed: list[str],
        files: BundleFiles,
    ):
        self.plan = plan
        self.model_service = model_service
        self.sealed = sealed
        self.files = files
        # every evaluation of the run, resumed or not, runs the image ids in the bundle
        self.pins = ImagePins(plan.bundle / IMAGE_PINS)
        self.pins.check_recorded()  # a tag moved since: refused before anything runs

    def evaluate(self, worktree: Path, label: str, out_dir: Path, held_out: bool) -> NodeEval:
        """Score the target in `worktree` on the suites; an evaluation in which the harness
        could not run some task is tried once more, and if it fails again it is a
        framework failure (not comparable with its parent, never promoted)."""
        mark = self.model_service.usage_mark()
        node = self._evaluate_once(worktree, label, out_dir, held_out)
        if node.status == "framework_failure" and node.optimize is not None:
            node = self._evaluate_once(worktree, f"{label}-retry", out_dir, held_out)
        counted = self.model_service.usage_since(mark)
        node.target_usage = target_usage(counted, node, free=self.model_service.free())
        return node

    def _evaluate_once(self, worktree: Path, label: str, out_dir: Path, held_out: bool) -> NodeEval:
        """Launch the target from `worktree` over PACT and score it on the suites."""
        plan = self.plan
        profile = plan.target_profile.model_copy(update={"cwd": worktree})
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            env = self.model_service.env()
        except (LaunchError, MetaevalError) as exc:  # the harness's model server, not the candidate
            return NodeEval(status="framework_failure", error=f"target model: {str(exc)[-3000:]}")
        env["PYTHONPATH"] = f"{worktree}:{SRC_DIR}"
        servers: list = []
        if selected_backend() == "ray":
            # Each episode starts its own PACT server on the worker that runs it (loopback there).
            client_factory: Any = EpisodeServer(
                profile,
                env,
                worktree,
                out_dir / label,
                plan.episode_limits.task_timeout_s,
                self.sealed,
                self.model_service.services(),
            )
        else:
            try:
                for index in range(plan.concurrency):
                    servers.append(
                        launch(
                            profile,
                            log_path=out_dir / f"{label}-server-{index}.log",
                            extra_env=env,
                            sandbox=target_sandbox(
                                worktree, self.sealed, self.model_service.services()
                            ),
                        )
                    )
            except LaunchError as exc:
                for server in servers:
                    server.stop()
                # a sandbox bwrap could not set up is the harness's failure, not the target's
                failed = "framework_failure" if exc.sandbox_error else "launch_failed"
                return NodeEval(status=failed, error=str(exc)[-3000:])
            # One PACT server serves one episode at a time: an episode leases a free server.
            pool: queue.SimpleQueue = queue.SimpleQueue()
            for server in servers:
                pool.put(server)

            def client_factory() -> LeasedClient:
                return LeasedClient(pool, plan.episode_limits.task_timeout_s)

        try:
            optimize = self._summary(
                plan.optimize_tasks, client_factory, out_dir, label, "optimize"
            )
            held = None
            if held_out and plan.held_out_tasks:
                held = self._summary(
                    plan.held_out_tasks, client_factory, out_dir, label, "held_out"
                )
        finally:
            for server in servers:
                server.stop()
        return self._outcome(optimize, held, out_dir, label)

    def _outcome(
        self,
        optimize: SuiteSummary,
        held: SuiteSummary | None,
        out_dir: Path,
        label: str,
    ) -> NodeEval:
        """The node's status from its suites: the model endpoint gone or a task the harness
        could not run is a framework failure, a target that failed to serve is broken."""
        suites = [s for s in (optimize, held) if s is not None]
        if self.model_service.endpoint_down():
            return NodeEval(
                status="framework_failure",
                optimize=optimize,
                held_out=held,
                error="the target's model endpoint stopped answering during the evaluation",
            )
        if any(s.target_errors for s in suites):
            return NodeEval(
                status="broken",
                optimize=optimize,
                held_out=held,
                error=serve_failure(suites, out_dir, label),
            )
        unrun = [f"{t.task_id}: {t.reason}" for s in suites for t in s.rows("infra_error")]
        if unrun or optimize.score is None:
            return NodeEval(
                status="framework_failure",
                optimize=optimize,
                held_out=held,
                error=f"the harness could not run {len(unrun)} task(s): " + "; ".join(unrun)[:2000]
                if unrun
                else "no task could be evaluated",
            )
        return NodeEval(status="evaluated", optimize=optimize, held_out=held)

    def _summary(
        self, tasks: list[Path], client_factory: Any, out_dir: Path, label: str, split: str
    ) -> SuiteSummary:
        """Run one suite and summarise it; each task's test log and trace are kept under
        `<out_dir>/<label>-logs/<split>/` (redacted, capped), named in its task row."""
        result = self._run_suite(tasks, client_factory, out_dir / split)
        summary = suite_summary(result)
        log_dir = out_dir / f"{label}-logs" / split
        keep_task_logs(self.files, self.plan.bundle, result, summary, log_dir)
        return summary

    def _run_suite(self, tasks: list[Path], client_factory: Any, work_root: Path) -> SuiteResult:
        plan = self.plan
        return evaluate_suite(
            tasks,
            client_factory,
            concurrency=plan.concurrency,
            limits=plan.episode_limits,
            work_root=work_root,
            host_env=plan.host_env,
            sandbox=plan.sandbox,
            pins=self.pins,
        )
