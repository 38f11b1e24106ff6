"""The recursive trial loop (AIE Bench Sections 2.3, 3.1-3.4, Appendix C.2).

propose -> validate -> evaluate -> select -> update. Every attempted candidate consumes one
trial, whatever its outcome. A trial is complete when its ledger line is written (fsynced);
a run killed mid-trial redoes that trial under the same number on resume, and the active parent
is rebuilt from the ledger. Failure classes are never collapsed:
meta_agent_failure (contract violation, malformed output, out-of-boundary or empty patch),
target_agent_failure (the candidate cannot launch or serve), evaluation_framework_failure
(infrastructure), task_failure (ran and failed: per task, inside a valid evaluation).

Which parent a trial patches is the search policy's (`search`): the active parent under
`recursive` (the default), a seeded draw from the population under `pareto` and `archive`,
with trials grouped in rounds (`search.rounds`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metaeval.engine.progress import StepProgress
from metaeval.errors import MetaevalError, RetryableRunError
from metaeval.protocols.improve.bundle import BundleFiles, open_bundle
from metaeval.protocols.improve.feedback import meta_error, parent_results, write_feedback
from metaeval.protocols.improve.gitops import (
    CONTEXT_DIR,
    TrialTree,
    add_worktree,
    commit_candidate,
    remove_worktree,
)
from metaeval.protocols.improve.meta_agents import apply_tool_menu
from metaeval.protocols.improve.node_eval import NodeEvaluator
from metaeval.protocols.improve.noise import BaselineNoise, measure_noise
from metaeval.protocols.improve.optimizer_prompt import render_context, render_instruction
from metaeval.protocols.improve.patch_verdict import Reason
from metaeval.protocols.improve.plan import Plan
from metaeval.protocols.improve.proposal import (
    Proposal,
    contract_input,
    propose_within,
    take_patch,
)
from metaeval.protocols.improve.records import (
    BASELINE_EVAL,
    CANDIDATE_EVAL,
    FEEDBACK,
    LEDGER_NAME,
    SELECTION,
    TRIAL_RESULT,
    CandidateRef,
    FeedbackPacket,
    Gate,
    LedgerEntry,
    MetaAgentRun,
    MetaOutput,
    NodeEval,
    ParentRef,
    SelectionDecision,
    SuiteSummary,
    SuiteView,
    ledger_entries,
    trial_path,
)
from metaeval.protocols.improve.search.final_pick import FINAL_SELECTION, final_pick
from metaeval.protocols.improve.search.merge import merge_into, named_second_parent
from metaeval.protocols.improve.search.policy import PARENT_CHOICE, ParentChoice, choose_parent
from metaeval.protocols.improve.search.population import Node, optimize_summary, population
from metaeval.protocols.improve.search.rounds import rounds, run_round
from metaeval.protocols.improve.selection import select
from metaeval.protocols.improve.summary_records import RunSummary
from metaeval.protocols.improve.target_model import TargetModelService
from metaeval.protocols.improve.target_runtime import sealed_paths, target_visible_roots

FAILURE_CLASS = {
    "evaluated": None,
    "launch_failed": "target_agent_failure",
    "broken": "target_agent_failure",
    "framework_failure": "evaluation_framework_failure",
}
"""The ledger's failure class of a candidate evaluation, by its status."""


class TrialLoop:
    """Runs (or resumes) one recursive experiment into its bundle."""

    def __init__(self, plan: Plan, meta_agent: Any):
        self.plan = plan
        self.meta_agent = meta_agent
        apply_tool_menu(meta_agent, plan.tool_menu, plan.sut_config)
        self.trace_lines: list[str] = []
        self.margin = 0.0  # the gain a promotion must exceed (`noise`)
        self.files: BundleFiles  # set by run(), once the bundle is open
        self.sealed = sealed_paths(
            [*plan.optimize_tasks, *(plan.held_out_tasks or [])], target_visible_roots()
        )
        self.model_service = TargetModelService(
            plan.target_settings, plan.target_profile.model_api, plan.bundle / "model_server"
        )

    def evaluate(self, worktree: Path, label: str, out_dir: Path, held_out: bool) -> NodeEval:
        """Score the target in `worktree` on the suites (see `node_eval`)."""
        evaluator = NodeEvaluator(self.plan, self.model_service, self.sealed, self.files)
        return evaluator.evaluate(worktree, label, out_dir, held_out)

    # ----------------------------------------------------------------- state

    def ledger(self) -> list[LedgerEntry]:
        """The trial ledger's entries (a torn last line from a kill is skipped)."""
        return ledger_entries(self.files.run.read(LEDGER_NAME, all_layers=True))

    def baseline(self) -> NodeEval:
        path = self.plan.bundle / BASELINE_EVAL
        if path.exists():
            return NodeEval.model_validate_json(path.read_bytes())
        node = self._evaluate_baseline("baseline", self.plan.bundle / "baseline_artifacts")
        if node.status == "evaluated":  # a failed baseline is tried again on resume
            self.files.json(path, node.model_dump())
        return node

    def population(self, baseline: NodeEval, ledger: list[LedgerEntry]) -> list[Node]:
        """The baseline and every candidate of `ledger`, the pool parents are drawn from."""
        plan = self.plan
        scores = (baseline.optimize_score, baseline.held_out_score)
        return population(plan.bundle, plan.baseline_id, plan.baseline_commit, scores, ledger)

    def _evaluate_baseline(self, label: str, out_dir: Path, held_out: bool = True) -> NodeEval:
        """Evaluate the baseline commit from a fresh worktree."""
        worktree = self.plan.bundle / "baseline-worktree"
        add_worktree(self.plan.repo, worktree, self.plan.baseline_commit)
        try:
            return self.evaluate(worktree, label, out_dir, held_out=held_out)
        finally:
            remove_worktree(self.plan.repo, worktree)
            shutil.rmtree(worktree, ignore_errors=True)

    def noise(self, baseline: NodeEval) -> BaselineNoise | None:
        """The baseline's repeats (`baseline_repeats`), evaluated once each (`noise`)."""
        plan = self.plan
        return measure_noise(
            plan.bundle,
            plan.baseline_repeats,
            plan.noise_gate,
            baseline,
            lambda n: self._evaluate_baseline(
                f"baseline-repeat-{n:02d}",
                plan.bundle / "baseline_artifacts" / f"repeat-{n:02d}",
                held_out=False,
            ),
            self.files,
        )

    # ----------------------------------------------------------------- loop

    def run(self) -> RunSummary:
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
            noise = self.noise(baseline)
            self.margin = 0.0 if noise is None else noise.margin
            ledger = self.ledger()
            done = {entry.trial for entry in ledger}
            todo = [t for t in range(1, plan.trial_budget + 1) if t not in done]
            writer = run.plain_records(LEDGER_NAME)
            search = plan.search
            with StepProgress("improve trials", len(todo)) as progress:
                # a round: trials whose parents come from the ledger before it (recursive,
                # one proposal per round: each trial's parent is the active parent)
                for first, trials in rounds(todo, search.proposals_per_round):
                    before = [e for e in ledger if e.trial < first]
                    nodes = self.population(baseline, before)
                    bodies = {t: self._trial_body(t, nodes, before) for t in trials}
                    workers = search.workers or search.proposals_per_round
                    results = run_round(bodies, workers)
                    for trial in trials:  # the ledger stays in trial order
                        entry = results[trial]
                        writer.append(entry.model_dump(exclude_unset=True))
                        ledger.append(entry)
                        progress.advance(_trial_line(entry))
            return self.finalize(baseline, ledger)
        finally:
            self.model_service.stop()
            run.close()

    def _trial_body(
        self, trial: int, nodes: list[Node], ledger: list[LedgerEntry]
    ) -> Callable[[], LedgerEntry]:
        """The trial as a function of nothing: its parent chosen under the search policy."""
        plan = self.plan
        choice = choose_parent(plan.search.policy, nodes, trial, plan.search_seed)
        parent = next(n for n in nodes if n.id == choice.parent_id)

        def body() -> LedgerEntry:
            return self.run_trial(trial, parent.as_parent(), ledger, nodes, choice)

        return body

    def run_trial(
        self,
        trial: int,
        parent: ParentRef,
        ledger: list[LedgerEntry],
        nodes: list[Node] | None = None,
        choice: ParentChoice | None = None,
    ) -> LedgerEntry:
        plan = self.plan
        trial_dir = trial_path(plan.bundle, trial)
        finished = _finished(trial_dir, parent.id)
        if finished is not None:  # finished before a kill, not yet in the ledger: adopt it
            return finished
        if trial_dir.exists():  # a killed attempt of this trial: redo it from scratch
            shutil.rmtree(trial_dir)
        if choice is not None and not plan.search.is_default():
            self.files.json(trial_dir / PARENT_CHOICE, choice.model_dump(mode="json"))
        worktree = trial_dir / "optimizer-worktree"
        started = time.time()
        tree = add_worktree(plan.repo, worktree, parent.checkout)
        try:
            return self._trial_in_worktree(
                trial, parent, ledger, trial_dir, tree, started, nodes or []
            )
        finally:
            remove_worktree(plan.repo, worktree)
            shutil.rmtree(worktree, ignore_errors=True)

    def _parent_optimize(self, parent: ParentRef) -> SuiteSummary | None:
        """The active parent's optimize summary (per-task rows with their log files)."""
        if parent.trial is not None:
            return optimize_summary(trial_path(self.plan.bundle, parent.trial) / CANDIDATE_EVAL)
        return optimize_summary(self.plan.bundle / BASELINE_EVAL)

    def _trial_in_worktree(
        self,
        trial: int,
        parent: ParentRef,
        ledger: list[LedgerEntry],
        trial_dir: Path,
        tree: TrialTree,
        started: float,
        nodes: list[Node],
    ) -> LedgerEntry:
        """One trial: propose, validate, evaluate the commit, select; write its records."""
        plan = self.plan
        output = self._propose(trial, parent, ledger, trial_dir, tree, nodes)
        second, refused = self._second_parent(output, parent, nodes)
        merge = None
        if second is not None and second.commit:
            first, other = parent.checkout, second.commit
            merge = lambda: merge_into(plan.repo, tree, first, other)  # noqa: E731
        got = take_patch(output, tree, parent.id, plan.boundary, merge)
        got.reasons[:0] = refused
        self.files.text(trial_dir / "candidate.patch", got.patch)
        candidate_id = f"trial-{trial:03d}"
        artifacts = trial_dir / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        if got.verdict is not None:
            self.files.json(artifacts / "boundary_verdict.json", got.verdict.model_dump())

        commit: str | None = None
        node: NodeEval | None = None
        failure_class: str | None = "meta_agent_failure"
        if not got.reasons:
            commit, node = self._commit_and_evaluate(tree, output.summary, candidate_id, trial_dir)
            failure_class = FAILURE_CLASS[node.status]
        gate = (
            select(plan, parent, node, self.margin)
            if node is not None and not failure_class
            else None
        )
        decision = gate.decision if gate is not None else "invalid"
        self._write_decision(
            trial, parent, candidate_id, commit, got, node, gate, failure_class, second
        )
        result = LedgerEntry(
            trial=trial,
            parent_id=parent.id,
            candidate_id=candidate_id,
            candidate_commit=commit,
            decision=decision,
            failure_class=failure_class,
            optimize_score=None if node is None else node.optimize_score,
            held_out_score=None if node is None else node.held_out_score,
            task_failures=0 if node is None or node.optimize is None else node.optimize.failed,
            meta_agent=MetaAgentRun(
                status=output.status,
                summary=output.summary,
                usage=output.usage,
                cost_usd=output.cost_usd,
            ),
            target=None if node is None else node.target_usage,
            patch_bytes=len(got.patch.encode()),
            wall_clock_s=round(time.time() - started, 3),
            second_parent_id=None if second is None else second.id,
        )
        self.files.json(trial_dir / TRIAL_RESULT, result.model_dump())
        self.trace_lines.append(
            f"trial {trial:03d}: {decision} ({failure_class or 'valid candidate'})"
        )
        return result

    def _second_parent(
        self, output: MetaOutput, parent: ParentRef, nodes: list[Node]
    ) -> tuple[Node | None, list[Reason]]:
        """The second parent a proposal names (a merge), or why it cannot be one."""
        name = output.second_parent if output.status == "ok" else None
        if name is None:
            return None, []
        if self.plan.search.policy == "recursive":
            detail = f"names a second parent {name}; the recursive policy offers none"
            return None, [Reason(code="second_parent_not_offered", detail=detail)]
        found = next((n for n in nodes if n.id == name and n.valid), None)
        if found is None or found.id == parent.id:
            detail = f"second parent {name} is not another valid candidate of the population"
            return None, [Reason(code="unknown_second_parent", detail=detail)]
        return found, []

    def _commit_and_evaluate(
        self, tree: TrialTree, summary: str, candidate_id: str, trial_dir: Path
    ) -> tuple[str, NodeEval]:
        """Commit the validated change as the candidate and evaluate that commit; the
        evaluation is written to the trial's `CANDIDATE_EVAL`."""
        plan = self.plan
        commit = commit_candidate(
            plan.repo,
            tree,
            f"{candidate_id}: {summary[:60]}",
            f"refs/metaeval/{plan.run_id}/{candidate_id}",
        )
        node = self._evaluate_commit(commit, candidate_id, trial_dir, trial_dir / "artifacts")
        self.files.json(trial_dir / CANDIDATE_EVAL, node.model_dump())
        return commit, node

    def _propose(
        self,
        trial: int,
        parent: ParentRef,
        ledger: list[LedgerEntry],
        trial_dir: Path,
        tree: TrialTree,
        nodes: list[Node],
    ) -> MetaOutput:
        """Write the trial's context into the worktree and the bundle; ask for a proposal."""
        plan = self.plan
        worktree = tree.path
        results, log_texts = parent_results(plan.bundle, parent.id, self._parent_optimize(parent))
        given = contract_input(plan, trial, parent, ledger, worktree, results)
        if plan.search.policy != "recursive":  # who a merge may name (no held-out score)
            given["population"] = [n.offered().model_dump() for n in nodes if n.valid]
        instruction = render_instruction(given)
        context = worktree / CONTEXT_DIR
        context.mkdir(exist_ok=True)
        write_feedback(self.files, trial_dir, context, results, log_texts)
        (context / "optimizer_context.md").write_text(render_context(given))
        (context / "mutation_boundary.json").write_text(plan.boundary.to_json())
        (context / "optimizer_instruction.md").write_text(instruction)
        self.files.json(trial_dir / "optimizer_input.json", given)
        self.files.text(trial_dir / "optimizer_instruction.md", instruction)
        output = propose_within(self.meta_agent, given, worktree, plan.meta_limits)
        if output.second_parent is None:  # a lane that only edits names it in a file
            output.second_parent = named_second_parent(worktree)
        self.files.json(trial_dir / "optimizer_output.json", output.to_json())
        trace_text = "".join(
            json.dumps(e, sort_keys=True, default=str) + "\n" for e in output.trace
        )
        self.files.text(trial_dir / "optimizer_trace.jsonl", trace_text)
        return output

    def _write_decision(
        self,
        trial: int,
        parent: ParentRef,
        candidate_id: str,
        commit: str | None,
        got: Proposal,
        node: NodeEval | None,
        gate: Gate | None,
        failure_class: str | None,
        second: Node | None = None,
    ) -> None:
        """selection_decision.json and feedback_packet.json of one trial."""
        folder = trial_path(self.plan.bundle, trial)
        decision = gate.decision if gate is not None else "invalid"
        selection = SelectionDecision(
            trial=trial,
            parent=parent,
            candidate=CandidateRef(id=candidate_id, commit=commit),
            decision=decision,
            failure_class=failure_class,
            reasons=got.reasons,
            gate=gate,
            left_out_of_patch=got.left_out,
            second_parent=None if second is None else second.as_parent(),
        )
        self.files.json(folder / SELECTION, selection.model_dump())
        feedback = FeedbackPacket(
            trial=trial,
            parent_id=parent.id,
            decision=decision,
            failure_class=failure_class,
            reasons=[r.detail or r.code for r in got.reasons],
            optimize=None if node is None else SuiteView.of(node.optimize),
            # the gate's state only (the decision implies it); held-out scores stay hidden
            held_out_gate=None if gate is None else gate.held_out.state,
            error=meta_error(node),
        )
        self.files.json(folder / FEEDBACK, feedback.model_dump())

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

    # ----------------------------------------------------------------- summary

    def finalize(self, baseline: NodeEval, ledger: list[LedgerEntry]) -> RunSummary:
        from metaeval.protocols.improve.bundle import write_summary_files

        plan = self.plan
        if plan.search.policy != "recursive":  # the final pick: its own, held-out decision
            nodes = self.population(baseline, ledger)
            held = bool(plan.held_out_tasks)
            pick = final_pick(plan.search.policy, plan.search_seed, nodes, held)
            self.files.json(FINAL_SELECTION, pick.model_dump(mode="json"))
        return write_summary_files(self.plan, baseline, ledger, self.files)


def _trial_line(entry: LedgerEntry) -> str:
    """'trial 001 (trial-001 from baseline): promoted, optimize 0.200' for progress output."""
    text = f"trial {entry.trial:03d} ({entry.candidate_id} from {entry.parent_id}): "
    text += str(entry.decision)
    if entry.failure_class:
        text += f" [{entry.failure_class}]"
    if entry.optimize_score is not None:
        text += f", optimize {entry.optimize_score:.3f}"
    return text


def _finished(trial_dir: Path, parent_id: str) -> LedgerEntry | None:
    """The trial's `trial_result.json` when a finished attempt from this parent wrote it."""
    try:
        entry = LedgerEntry.model_validate_json((trial_dir / TRIAL_RESULT).read_bytes())
    except (OSError, ValueError):
        return None
    return entry if entry.parent_id == parent_id else None
