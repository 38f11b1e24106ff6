"""The recursive trial loop (AIE Bench Sections 2.3, 3.1-3.4, Appendix C.2).

propose -> validate -> evaluate -> select -> update. Every attempted candidate consumes one
trial, whatever its outcome. A trial is complete when its ledger line is written (fsynced);
a run killed mid-trial redoes that trial under the same number on resume, and the active parent
is rebuilt from the ledger. Failure classes are never collapsed:
meta_agent_failure (contract violation, malformed output, out-of-boundary or empty patch),
target_agent_failure (the candidate cannot launch or serve), evaluation_framework_failure
(infrastructure), task_failure (ran and failed: per task, inside a valid evaluation).
"""

from __future__ import annotations

import json
import queue
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaeval.agents.types import Limits
from metaeval.errors import MetaevalError, RetryableRunError
from metaeval.executor import selected_backend
from metaeval.progress import StepProgress
from metaeval.protocols.improve.boundary import MutationBoundary, check_patch
from metaeval.protocols.improve.bundle import BundleFiles, open_bundle
from metaeval.protocols.improve.config import TargetModelSettings
from metaeval.protocols.improve.evaluate import evaluate_suite
from metaeval.protocols.improve.feedback import (
    invalid_trials,
    keep_task_logs,
    meta_error,
    parent_results,
    task_rows,
    write_feedback,
)
from metaeval.protocols.improve.gitops import (
    CONTEXT_DIR,
    GitError,
    TrialTree,
    add_worktree,
    apply_patch,
    candidate_diff,
    commit_candidate,
    left_out_files,
    remove_worktree,
    tampered,
)
from metaeval.protocols.improve.meta_agents import MetaOutput, apply_tool_menu
from metaeval.protocols.improve.pact.launcher import LaunchError, launch
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.target_model import TargetModelService
from metaeval.protocols.improve.target_runtime import (
    EpisodeServer,
    LeasedClient,
    sealed_paths,
    target_sandbox,
    target_visible_roots,
)

LEDGER_NAME = "trial_ledger"
LEDGER = f"{LEDGER_NAME}.jsonl"
BASELINE_EVAL = "baseline_evaluation.json"
SRC_DIR = Path(__file__).resolve().parents[3]  # .../src, so a target's PACT server finds metaeval


@dataclass
class Plan:
    """Everything one recursive run needs, resolved from the manifest."""

    bundle: Path
    run_id: str
    repo: Path
    baseline_id: str
    baseline_commit: str
    target_profile: SystemProfile
    target_settings: TargetModelSettings  # manifest `sum`: the target's model, fixed
    boundary: MutationBoundary
    optimize_tasks: list[Path]
    held_out_tasks: list[Path] | None
    held_out_required: bool
    selection_gate: str
    trial_budget: int
    step_timeout_s: float
    max_steps_per_task: int = 10
    task_timeout_s: float = 120.0
    command_timeout_s: float = 30.0
    concurrency: int = 1
    host_env: tuple[str, ...] = ()  # host variables task.toml's env tables may read
    sandbox: str = "bwrap"  # where tasks run: bwrap, auto, docker, podman (episode_room)
    meta_timeout_s: float = 600.0  # the meta-agent's wall clock per trial (SUT `timeout_s`)
    meta_max_steps: int = 40  # the meta-agent's steps per trial (SUT `max_steps`)
    tool_menu: tuple[str, ...] = ()  # tools the meta-agent is offered; empty: all
    sut_config: str | None = None  # the SUT config file, for errors naming its fields
    documents: dict[str, Any] = field(default_factory=dict)  # bundle files written at start


@dataclass
class NodeEval:
    """Scores of one node (baseline or candidate) on the optimize and held-out suites."""

    status: str  # evaluated | launch_failed | broken | framework_failure
    optimize: dict[str, Any] | None = None
    held_out: dict[str, Any] | None = None
    error: str | None = None
    target_usage: dict[str, Any] | None = None  # the target's model calls (`target_usage`)

    @property
    def optimize_score(self) -> float | None:
        return None if self.optimize is None else self.optimize.get("score")

    @property
    def held_out_score(self) -> float | None:
        return None if self.held_out is None else self.held_out.get("score")


def _suite_summary(result: Any) -> dict[str, Any]:
    outcomes = [
        {
            "task_id": o.task_id,
            "status": o.status,
            "reward": o.reward,
            "steps": o.steps,
            "reason": o.reason,
            "backend": o.backend,
            "usage": o.usage,
        }
        for o in result.outcomes
    ]
    return {
        "score": result.score,
        "passed": result.passed,
        "failed": result.failed,
        "infra_errors": result.infra_errors,
        "target_errors": result.target_errors,
        "tasks": outcomes,
    }


def _left_out_reasons(paths: list[str], boundary: MutationBoundary) -> list[dict[str, Any]]:
    """Boundary reasons for files the patch cannot carry that lie outside the mutable root.

    Python's own bytecode caches (files directly in a `__pycache__` directory) are exempt: an
    honest meta-agent that runs the target leaves them, and Python never imports them without
    their source. None of these files reaches the evaluation, which runs from the commit.
    """
    return [
        {
            "code": "left_out_outside_boundary",
            "path": path,
            "detail": f"{path}: a file ignored by the target's .gitignore, outside the "
            "mutation boundary (it cannot be part of the candidate)",
        }
        for path in paths
        if not boundary.allows(path) and Path(path).parent.name != "__pycache__"
    ]


PROPOSAL_GRACE_S = 60.0
"""How long past its time limit the harness waits for a meta-agent's transcript: lanes stop
themselves at the limit (toolloop between steps, CLIs by killing their process), but a model
call in flight can end later. The proposal is a timeout either way."""


def propose_within(
    meta_agent: Any, contract_input: dict[str, Any], worktree: Path, limits: Limits
) -> MetaOutput:
    """Ask the meta-agent for one proposal within `limits.time_limit_s` of wall clock (the
    SUT config's `timeout_s`). A proposal handed back later is a timeout (its transcript is
    kept); a meta-agent still running `PROPOSAL_GRACE_S` after the limit is abandoned (its
    worktree is removed with the trial). A raising meta-agent is an error."""
    box: list[MetaOutput] = []

    def call() -> None:
        try:
            box.append(meta_agent.propose(contract_input, worktree, limits))
        except Exception as exc:  # noqa: BLE001 - a crashing meta-agent is its own failure
            box.append(MetaOutput(status="error", error=f"{type(exc).__name__}: {exc}"))

    started = time.monotonic()
    worker = threading.Thread(target=call, name="meta-agent", daemon=True)
    worker.start()
    worker.join(limits.time_limit_s + PROPOSAL_GRACE_S)
    over = f"{limits.time_limit_s:g} s (SUT config timeout_s)"
    if not box:
        return MetaOutput(
            status="timeout",
            error=f"the meta-agent did not finish within its time limit of {over}",
        )
    output = box[0]
    elapsed = time.monotonic() - started
    if output.status == "ok" and elapsed > limits.time_limit_s:
        output.status = "timeout"
        output.error = f"the meta-agent took {elapsed:.1f} s, over its time limit of {over}"
    elif output.status == "timeout" and not output.error:
        output.error = (
            f"the meta-agent reached its limits ({limits.max_steps} steps "
            f"(SUT config max_steps) or {over})"
        )
    return output


def target_usage(
    counted: dict[str, Any] | None, node: NodeEval, free: bool = False
) -> dict[str, Any]:
    """The target's tokens and cost in one evaluation (retry included): the gateway's count
    when the harness's gateway served its model; otherwise (a local model server, a model the
    target loads itself, no model) the per-step usage the target reported over PACT, summed
    over the suites' tasks, labelled `target_reported` (the candidate's own word), cost 0
    when the model costs nothing (`free`: a local model, or none) or no tokens were used,
    else unknown."""
    if counted is not None:
        return counted
    rows = [t for s in (node.optimize, node.held_out) if s for t in s.get("tasks", [])]
    totals = {"input_tokens": 0, "output_tokens": 0}
    for row in rows:
        usage = row.get("usage") or {}
        for key in totals:
            value = usage.get(key)
            totals[key] += value if isinstance(value, int) and value > 0 else 0
    used = totals["input_tokens"] + totals["output_tokens"]
    cost = 0.0 if free or not used else None
    return {"source": "target_reported", **totals, "cost_usd": cost}


LOG_TAIL_LINES = 6


def _serve_failure(suites: list[dict[str, Any]], out_dir: Path, label: str) -> str:
    """Why a target failed to serve, for the console: the first target error's reason and
    the last lines of its server logs (already redacted when written)."""
    reasons = [t["reason"] for s in suites for t in s["tasks"] if t["status"] == "target_error"]
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


class TrialLoop:
    """Runs (or resumes) one recursive experiment into its bundle."""

    def __init__(self, plan: Plan, meta_agent: Any):
        self.plan = plan
        self.meta_agent = meta_agent
        apply_tool_menu(meta_agent, plan.tool_menu, plan.sut_config)
        self.trace_lines: list[str] = []
        self.files: BundleFiles  # set by run(), once the bundle is open
        self.sealed = sealed_paths(
            [*plan.optimize_tasks, *(plan.held_out_tasks or [])], target_visible_roots()
        )
        self.model_service = TargetModelService(
            plan.target_settings, plan.target_profile.model_api, plan.bundle / "model_server"
        )

    # ----------------------------------------------------------------- evaluation

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
                plan.task_timeout_s,
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
                return NodeEval(status="launch_failed", error=str(exc)[-3000:])
            # One PACT server serves one episode at a time: an episode leases a free server.
            pool: queue.SimpleQueue = queue.SimpleQueue()
            for server in servers:
                pool.put(server)

            def client_factory() -> LeasedClient:
                return LeasedClient(pool, plan.task_timeout_s)

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
        suites = [s for s in (optimize, held) if s is not None]
        if self.model_service.endpoint_down():
            return NodeEval(
                status="framework_failure",
                optimize=optimize,
                held_out=held,
                error="the target's model endpoint stopped answering during the evaluation",
            )
        if any(s["target_errors"] for s in suites):
            return NodeEval(
                status="broken",
                optimize=optimize,
                held_out=held,
                error=_serve_failure(suites, out_dir, label),
            )
        unrun = [
            f"{t['task_id']}: {t['reason']}"
            for s in suites
            for t in s["tasks"]
            if t["status"] == "infra_error"
        ]
        if unrun or optimize["score"] is None:
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
    ) -> dict[str, Any]:
        """Run one suite and summarise it; each task's test log and trace are kept under
        `<out_dir>/<label>-logs/<split>/` (redacted, capped), named in its task row."""
        result = self._run_suite(tasks, client_factory, out_dir / split)
        summary = _suite_summary(result)
        log_dir = out_dir / f"{label}-logs" / split
        keep_task_logs(self.files, self.plan.bundle, result, summary, log_dir)
        return summary

    def _run_suite(self, tasks: list[Path], client_factory, work_root: Path):
        plan = self.plan
        return evaluate_suite(
            tasks,
            client_factory,
            concurrency=plan.concurrency,
            max_steps=plan.max_steps_per_task,
            task_timeout_s=plan.task_timeout_s,
            command_timeout_s=plan.command_timeout_s,
            work_root=work_root,
            host_env=plan.host_env,
            sandbox=plan.sandbox,
        )

    # ----------------------------------------------------------------- state

    def ledger(self) -> list[dict[str, Any]]:
        """The trial ledger's entries (a torn last line from a kill is skipped)."""
        return self.files.run.read(LEDGER_NAME, all_layers=True)

    def baseline(self) -> NodeEval:
        path = self.plan.bundle / BASELINE_EVAL
        if path.exists():
            data = json.loads(path.read_text())
            return NodeEval(**data)
        worktree = self.plan.bundle / "baseline-worktree"
        add_worktree(self.plan.repo, worktree, self.plan.baseline_commit)
        try:
            node = self.evaluate(
                worktree, "baseline", self.plan.bundle / "baseline_artifacts", held_out=True
            )
        finally:
            remove_worktree(self.plan.repo, worktree)
            shutil.rmtree(worktree, ignore_errors=True)
        if node.status == "evaluated":  # a failed baseline is tried again on resume
            self.files.json(path, node.__dict__)
        return node

    def active_parent(self, baseline: NodeEval, ledger: list[dict]) -> dict[str, Any]:
        parent = {
            "id": self.plan.baseline_id,
            "commit": self.plan.baseline_commit,
            "optimize_score": baseline.optimize_score,
            "held_out_score": baseline.held_out_score,
        }
        for entry in ledger:
            if entry.get("decision") == "promoted":
                parent = {
                    "id": entry["candidate_id"],
                    "commit": entry["candidate_commit"],
                    "optimize_score": entry["optimize_score"],
                    "held_out_score": entry.get("held_out_score"),
                    "trial": entry["trial"],
                }
        return parent

    # ----------------------------------------------------------------- loop

    def run(self) -> dict[str, Any]:
        """Run every trial not yet in the ledger; write the bundle summary files."""
        plan = self.plan
        run = open_bundle(plan)
        self.files = BundleFiles(run)
        try:
            for name, data in plan.documents.items():
                if not (plan.bundle / name).exists():
                    if isinstance(data, str):
                        self.files.text(plan.bundle / name, data)
                    else:
                        self.files.json(plan.bundle / name, data)
            baseline = self.baseline()
            if baseline.status != "evaluated":
                raise_error = (
                    f"the baseline could not be evaluated ({baseline.status}): {baseline.error}"
                )
                if baseline.status == "framework_failure":  # retried on resume
                    raise RetryableRunError(
                        f"{raise_error}; fix the cause, then run the same command again: "
                        "it evaluates the baseline again"
                    )
                raise MetaevalError(raise_error)
            ledger = self.ledger()
            done = {entry["trial"] for entry in ledger}
            todo = [t for t in range(1, plan.trial_budget + 1) if t not in done]
            writer = run.plain_records(LEDGER_NAME)
            with StepProgress("improve trials", len(todo)) as progress:
                for trial in todo:
                    parent = self.active_parent(baseline, ledger)
                    entry = self.run_trial(trial, parent, ledger)
                    writer.append(entry)
                    ledger.append(entry)
                    progress.advance(_trial_line(entry))
            return self.finalize(baseline, ledger)
        finally:
            self.model_service.stop()
            run.close()

    def run_trial(self, trial: int, parent: dict[str, Any], ledger: list[dict]) -> dict[str, Any]:
        plan = self.plan
        trial_dir = plan.bundle / "trials" / f"{trial:03d}"
        if trial_dir.exists():  # a killed attempt of this trial: redo it from scratch
            shutil.rmtree(trial_dir)
        worktree = trial_dir / "optimizer-worktree"
        started = time.time()
        tree = add_worktree(plan.repo, worktree, parent["commit"])
        try:
            return self._trial_in_worktree(trial, parent, ledger, trial_dir, tree, started)
        finally:
            remove_worktree(plan.repo, worktree)
            shutil.rmtree(worktree, ignore_errors=True)

    def _contract_input(
        self,
        trial: int,
        parent: dict[str, Any],
        ledger: list[dict],
        worktree: Path,
        results: dict[str, Any],
    ) -> dict:
        root = worktree / (self.plan.boundary.mutable_root or ".")
        files = sorted(
            p.relative_to(worktree).as_posix()
            for p in root.rglob("*")
            if p.is_file() and ".git" not in p.parts and "__pycache__" not in p.parts
        )
        feedback = []
        for entry in ledger:
            packet = self.plan.bundle / "trials" / f"{entry['trial']:03d}" / "feedback_packet.json"
            if packet.exists():
                feedback.append(json.loads(packet.read_text()))
        return {
            "trial": trial,
            # what the meta-agent may know of its parent: never a held-out score
            "parent": {k: parent[k] for k in ("id", "commit", "optimize_score")},
            "target_state": {"mutable_root": self.plan.boundary.mutable_root, "files": files},
            "feedback": feedback,
            "parent_results": results,
            "invalid_trials": invalid_trials(feedback),
            "boundary": json.loads(self.plan.boundary.to_json()),
            "remaining_budget": self.plan.trial_budget - trial + 1,
            "suites": {"optimize": [p.name for p in self.plan.optimize_tasks]},
        }

    def _parent_optimize(self, parent: dict[str, Any]) -> dict[str, Any] | None:
        """The active parent's optimize summary (per-task rows with their log files)."""
        if "trial" in parent:
            path = self.plan.bundle / "trials" / f"{parent['trial']:03d}" / "artifacts"
            path = path / "candidates" / "evaluation.json"
        else:
            path = self.plan.bundle / BASELINE_EVAL
        try:
            return json.loads(path.read_text()).get("optimize")
        except (OSError, ValueError, AttributeError):
            return None

    def _trial_in_worktree(
        self,
        trial: int,
        parent: dict,
        ledger: list[dict],
        trial_dir: Path,
        tree: TrialTree,
        started: float,
    ) -> dict[str, Any]:
        plan = self.plan
        worktree = tree.path
        results, log_texts = parent_results(plan.bundle, parent, self._parent_optimize(parent))
        contract_input = self._contract_input(trial, parent, ledger, worktree, results)
        instruction = render_instruction(contract_input)
        context = worktree / CONTEXT_DIR
        context.mkdir(exist_ok=True)
        write_feedback(self.files, trial_dir, context, results, log_texts)
        (context / "optimizer_context.md").write_text(render_context(contract_input))
        (context / "mutation_boundary.json").write_text(plan.boundary.to_json())
        (context / "optimizer_instruction.md").write_text(instruction)
        self.files.json(trial_dir / "optimizer_input.json", contract_input)
        self.files.text(trial_dir / "optimizer_instruction.md", instruction)

        limits = Limits(
            max_steps=plan.meta_max_steps,
            time_limit_s=plan.meta_timeout_s,
            max_tokens_per_step=1024,
        )
        output = propose_within(self.meta_agent, contract_input, worktree, limits)
        self.files.json(trial_dir / "optimizer_output.json", output.to_json())
        trace_text = "".join(
            json.dumps(e, sort_keys=True, default=str) + "\n" for e in output.trace
        )
        self.files.text(trial_dir / "optimizer_trace.jsonl", trace_text)

        reasons: list[dict[str, Any]] = []
        patch = ""
        left_out: list[str] = []
        if output.status == "timeout":
            reasons.append({"code": "meta_agent_timeout", "detail": output.error or "timeout"})
        elif output.status != "ok":
            reasons.append({"code": "meta_agent_error", "detail": output.error or output.status})
        elif (tamper := tampered(tree)) is not None:
            # git is never run on this tree: its metadata is the meta-agent's, not the harness's
            reasons.append({"code": "git_metadata_changed", "detail": tamper})
        else:
            try:
                if output.patch is not None:
                    if output.parent not in (None, parent["id"]):
                        raise ValueError(
                            f"patch names parent {output.parent}, active parent is {parent['id']}"
                        )
                    apply_patch(tree, output.patch)
                    if (tamper := tampered(tree)) is not None:
                        raise ValueError(tamper)
                patch = candidate_diff(tree)
                left_out = left_out_files(tree)
            except (GitError, ValueError) as exc:
                reasons.append({"code": "malformed_patch", "detail": str(exc)})
        reasons += _left_out_reasons(left_out, plan.boundary)
        self.files.text(trial_dir / "candidate.patch", patch)
        verdict = None
        if not reasons:
            verdict = check_patch(patch, plan.boundary, worktree=worktree)
            reasons += [
                r.model_dump() if hasattr(r, "model_dump") else dict(r) for r in verdict.reasons
            ]
        candidate_id = f"trial-{trial:03d}"
        artifacts = trial_dir / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        if verdict is not None:
            self.files.json(
                artifacts / "boundary_verdict.json",
                verdict.model_dump() if hasattr(verdict, "model_dump") else verdict,
            )

        node: NodeEval | None = None
        commit = None
        failure_class: str | None
        decision: str | None
        if reasons:
            failure_class, decision = "meta_agent_failure", "invalid"
        else:
            commit = commit_candidate(
                plan.repo,
                tree,
                f"{candidate_id}: {output.summary[:60]}",
                f"refs/metaeval/{plan.run_id}/{candidate_id}",
            )
            node = self._evaluate_commit(commit, candidate_id, trial_dir, artifacts)
            self.files.json(artifacts / "candidates" / "evaluation.json", node.__dict__)
            failure_class = {
                "evaluated": None,
                "launch_failed": "target_agent_failure",
                "broken": "target_agent_failure",
                "framework_failure": "evaluation_framework_failure",
            }[node.status]
            decision = "invalid" if failure_class else None

        gate = (
            self._select(parent, node) if node is not None and node.status == "evaluated" else None
        )
        if gate is not None:
            decision = gate["decision"]
        selection = {
            "trial": trial,
            "parent": parent,
            "candidate": {"id": candidate_id, "commit": commit},
            "decision": decision,
            "failure_class": failure_class,
            "reasons": reasons,
            "gate": gate,
            "left_out_of_patch": left_out,
        }
        self.files.json(trial_dir / "selection_decision.json", selection)
        feedback = {
            "trial": trial,
            "parent_id": parent["id"],
            "decision": decision,
            "failure_class": failure_class,
            "reasons": [r.get("detail") or r.get("code") for r in reasons],
            "optimize": None if node is None else task_rows(node.optimize),
            # the gate's state only (the decision implies it); held-out scores stay hidden
            "held_out_gate": None if gate is None else gate["held_out"]["state"],
            "error": meta_error(node),
        }
        self.files.json(trial_dir / "feedback_packet.json", feedback)
        result = {
            "trial": trial,
            "parent_id": parent["id"],
            "candidate_id": candidate_id,
            "candidate_commit": commit,
            "decision": decision,
            "failure_class": failure_class,
            "optimize_score": None if node is None else node.optimize_score,
            "held_out_score": None if node is None else node.held_out_score,
            "task_failures": 0
            if node is None or node.optimize is None
            else node.optimize["failed"],
            "meta_agent": {
                "status": output.status,
                "summary": output.summary,
                "usage": output.usage,
                "cost_usd": output.cost_usd,
            },
            "target": None if node is None else node.target_usage,
            "patch_bytes": len(patch.encode()),
            "wall_clock_s": round(time.time() - started, 3),
        }
        self.files.json(trial_dir / "trial_result.json", result)
        self.trace_lines.append(
            f"trial {trial:03d}: {decision} ({failure_class or 'valid candidate'})"
        )
        return result

    def _evaluate_commit(
        self, commit: str, candidate_id: str, trial_dir: Path, artifacts: Path
    ) -> NodeEval:
        """Evaluate the candidate from a clean checkout of its commit: what was validated and
        committed is what runs, never the meta-agent's working copy."""
        checkout = trial_dir / "candidate-checkout"
        add_worktree(self.plan.repo, checkout, commit)
        try:
            return self.evaluate(checkout, candidate_id, artifacts / "candidates", held_out=True)
        finally:
            remove_worktree(self.plan.repo, checkout)

    def _select(self, parent: dict[str, Any], node: NodeEval) -> dict[str, Any]:
        """Strict improvement on optimize over the parent; held-out gates promotion if required."""
        plan = self.plan
        parent_opt = parent["optimize_score"] or 0.0
        better = node.optimize_score is not None and node.optimize_score > parent_opt
        held_state = "not_required"
        held_ok = True
        if plan.held_out_tasks:
            cand, base = node.held_out_score, parent.get("held_out_score")
            if plan.selection_gate == "record_only" or not plan.held_out_required:
                held_state = "recorded"
            elif cand is None or base is None:
                held_state, held_ok = "unavailable", False
            elif plan.selection_gate == "must_not_regress":
                held_ok = cand >= base
                held_state = "passed" if held_ok else "failed"
            elif plan.selection_gate == "must_improve":
                held_ok = cand > base
                held_state = "passed" if held_ok else "failed"
        promoted = better and held_ok
        return {
            "optimize": {
                "parent": parent_opt,
                "candidate": node.optimize_score,
                "strictly_better": better,
            },
            "held_out": {
                "gate": plan.selection_gate,
                "state": held_state,
                "parent": parent.get("held_out_score"),
                "candidate": node.held_out_score,
            },
            "decision": "promoted" if promoted else "rejected",
        }

    # ----------------------------------------------------------------- summary

    def finalize(self, baseline: NodeEval, ledger: list[dict]) -> dict[str, Any]:
        from metaeval.protocols.improve.bundle import write_summary_files

        return write_summary_files(self.plan, baseline, ledger, self.files)


def _trial_line(entry: dict[str, Any]) -> str:
    """'trial 001 (trial-001 from baseline): promoted, optimize 0.200' for progress output."""
    text = f"trial {entry['trial']:03d} ({entry['candidate_id']} from {entry['parent_id']}): "
    text += str(entry.get("decision"))
    if entry.get("failure_class"):
        text += f" [{entry['failure_class']}]"
    if entry.get("optimize_score") is not None:
        text += f", optimize {entry['optimize_score']:.3f}"
    return text


def render_instruction(contract_input: dict[str, Any]) -> str:
    """The meta-agent's instruction for one trial (optimizer_instruction.md)."""
    parent = contract_input["parent"]
    boundary = contract_input["boundary"]
    lines = [
        "# Improve the target agent",
        "",
        "The current directory is the target agent's repository at the active parent "
        f"`{parent['id']}` (optimize score {parent['optimize_score']}).",
        "Change the agent so that it solves more tasks of the optimize suite. You may edit only "
        f"files under `{boundary.get('mutable_root') or '.'}` within these paths: "
        f"{', '.join(boundary.get('allowed_paths') or ['(everything under the root)'])}.",
        "Do not touch `.git`, symlinks or `.aie_bench_recursive/` (benchmark-owned).",
        f"Remaining trial budget: {contract_input['remaining_budget']}.",
        "",
        "Context for this trial is in `.aie_bench_recursive/optimizer_context.md`. When your edits",
        "are done, call submit with a one-line summary of the change.",
    ]
    return "\n".join(lines) + "\n"


def render_context(contract_input: dict[str, Any]) -> str:
    """optimizer_context.md: target state, feedback from previous trials, boundary, budget."""
    lines = [
        "# Optimizer context",
        "",
        f"Trial {contract_input['trial']}; parent {contract_input['parent']['id']}.",
        "",
    ]
    lines.append("## Target files")
    lines += [f"- {f}" for f in contract_input["target_state"]["files"]]
    results = contract_input.get("parent_results") or {}
    optimize = results.get("optimize") or {}
    lines += ["", f"## The parent's results on the optimize split (score {optimize.get('score')})"]
    for task in optimize.get("tasks", []):
        reward = "" if task.get("reward") is None else f", reward {task['reward']:g}"
        lines.append(f"- {task['task_id']}: {task['status']}{reward}: {task.get('reason') or ''}")
    for key, what in (
        ("failed_task_logs", "Test logs"),
        ("failed_task_transcripts", "The target's transcripts"),
    ):
        items = results.get(key) or []
        if items:
            lines += ["", f"{what} of the failed tasks (their last bytes, redacted):"]
            lines += [
                f"- `.aie_bench_recursive/{item['file']}` ({item['delivered_bytes']} of "
                f"{item['raw_bytes']} bytes)"
                for item in items
            ]
    invalid = contract_input.get("invalid_trials") or []
    if invalid:
        lines += ["", "## Why earlier trials were invalid"]
        for item in invalid:
            why = "; ".join(str(r) for r in item["reasons"]) or item.get("error") or ""
            lines.append(f"- trial {item['trial']} ({item['failure_class']}): {why}")
    lines += ["", "## Feedback from previous trials"]
    if not contract_input["feedback"]:
        lines.append("(none yet)")
    for packet in contract_input["feedback"]:
        lines.append(
            f"- trial {packet['trial']}: {packet['decision']} ({packet.get('failure_class') or 'valid'})"
        )
        optimize = packet.get("optimize") or {}
        for task in optimize.get("tasks", []):
            lines.append(f"  - {task['task_id']}: {task['status']}")
    lines += [
        "",
        "## Mutation boundary",
        "```json",
        json.dumps(contract_input["boundary"], indent=2),
        "```",
    ]
    return "\n".join(lines) + "\n"
