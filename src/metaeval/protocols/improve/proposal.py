"""One proposal of a trial: the meta-agent's input, its call within limits, and what it made.

`contract_input` is everything the meta-agent may know for one trial (never a held-out
score); `propose_within` asks for a proposal within the SUT config's time limit; `take_patch`
turns the proposal into the candidate patch (applying a `patch/1` diff only after checking
it names the right parent), lists files the patch cannot carry, and checks the patch against
the mutation boundary. Every reason the proposal is invalid is listed, none is collapsed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaeval.agents.types import Limits
from metaeval.protocols.improve.boundary import MutationBoundary
from metaeval.protocols.improve.feedback import ParentResults
from metaeval.protocols.improve.gitops import (
    GitError,
    TrialTree,
    apply_patch,
    candidate_diff,
    left_out_files,
    tampered,
)
from metaeval.protocols.improve.patch_check import check_patch
from metaeval.protocols.improve.patch_verdict import PatchVerdict, Reason
from metaeval.protocols.improve.records import (
    FEEDBACK,
    FeedbackPacket,
    LedgerEntry,
    MetaOutput,
    ParentRef,
    trial_path,
)
from metaeval.protocols.improve.search.merge import MergeConflict

if TYPE_CHECKING:
    from metaeval.protocols.improve.plan import Plan


def left_out_reasons(paths: list[str], boundary: MutationBoundary) -> list[Reason]:
    """Boundary reasons for files the patch cannot carry that lie outside the mutable root.

    Python's own bytecode caches (files directly in a `__pycache__` directory) are exempt: an
    honest meta-agent that runs the target leaves them, and Python never imports them without
    their source. None of these files reaches the evaluation, which runs from the commit.
    """
    return [
        Reason(
            code="left_out_outside_boundary",
            path=path,
            detail=f"{path}: a file ignored by the target's .gitignore, outside the "
            "mutation boundary (it cannot be part of the candidate)",
        )
        for path in paths
        if not boundary.allows(path) and Path(path).parent.name != "__pycache__"
    ]


def contract_input(
    plan: Plan,
    trial: int,
    parent: ParentRef,
    ledger: Sequence[LedgerEntry],
    worktree: Path,
    results: ParentResults,
) -> dict[str, Any]:
    """The meta-agent's input for one trial (`optimizer_input.json`)."""
    root = worktree / (plan.boundary.mutable_root or ".")
    files = sorted(
        p.relative_to(worktree).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.parts and "__pycache__" not in p.parts
    )
    packets = []
    for entry in ledger:
        path = trial_path(plan.bundle, entry.trial) / FEEDBACK
        if path.exists():
            packets.append(FeedbackPacket.model_validate_json(path.read_bytes()))
    return {
        "trial": trial,
        # what the meta-agent may know of its parent: never a held-out score
        "parent": parent.model_dump(include={"id", "commit", "optimize_score"}),
        "target_state": {"mutable_root": plan.boundary.mutable_root, "files": files},
        "feedback": [p.model_dump(exclude_unset=True) for p in packets],
        "parent_results": results.model_dump(),
        "invalid_trials": [  # why earlier trials were invalid
            p.model_dump(include={"trial", "failure_class", "reasons", "error"})
            for p in packets
            if p.decision == "invalid"
        ],
        "boundary": json.loads(plan.boundary.to_json()),
        "remaining_budget": plan.trial_budget - trial + 1,
        "suites": {"optimize": [p.name for p in plan.optimize_tasks]},
    }


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


@dataclass
class Proposal:
    """What a proposal made: the candidate patch, files it cannot carry, and why it is
    invalid (empty when it is a candidate)."""

    patch: str = ""
    left_out: list[str] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    verdict: PatchVerdict | None = None


def take_patch(
    output: MetaOutput,
    tree: TrialTree,
    parent_id: str,
    boundary: MutationBoundary,
    merge: Callable[[], None] | None = None,
) -> Proposal:
    """The candidate patch of `output` in `tree`, with every reason it is invalid.
    `merge` (a proposal naming a second parent) merges it into the tree before the diff."""
    got = Proposal()
    if output.status == "timeout":
        got.reasons.append(Reason(code="meta_agent_timeout", detail=output.error or "timeout"))
    elif output.status != "ok":
        got.reasons.append(Reason(code="meta_agent_error", detail=output.error or output.status))
    elif (tamper := tampered(tree)) is not None:
        # git is never run on this tree: its metadata is the meta-agent's, not the harness's
        got.reasons.append(Reason(code="git_metadata_changed", detail=tamper))
    else:
        try:
            if output.patch is not None:
                if output.parent not in (None, parent_id):
                    raise ValueError(
                        f"patch names parent {output.parent}, active parent is {parent_id}"
                    )
                apply_patch(tree, output.patch)
                if (tamper := tampered(tree)) is not None:
                    raise ValueError(tamper)
            if merge is not None:
                merge()
            got.patch = candidate_diff(tree)
            got.left_out = left_out_files(tree)
        except MergeConflict as exc:
            got.reasons.append(Reason(code="merge_conflict", detail=str(exc)))
        except (GitError, ValueError) as exc:
            got.reasons.append(Reason(code="malformed_patch", detail=str(exc)))
    got.reasons += left_out_reasons(got.left_out, boundary)
    if not got.reasons:
        got.verdict = check_patch(got.patch, boundary, worktree=tree.path)
        got.reasons += got.verdict.reasons
    return got
