"""The population a search draws parents from: the baseline and every candidate so far.

A node is `valid` when its candidate was evaluated (no failure class); invalid trials are in
the ledger but never a parent. `passed` is the set of optimize tasks the node passed (read
from its evaluation), the per-task view the Pareto front needs; held-out scores are kept for
the final pick only and never offered to a meta-agent (`offered`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from metaeval.protocols.improve.records import (
    BASELINE_EVAL,
    CANDIDATE_EVAL,
    LedgerEntry,
    NodeEval,
    Number,
    ParentRef,
    SuiteSummary,
    trial_path,
)


class Offered(BaseModel):
    """What a meta-agent may see of a population member (never a held-out score)."""

    id: str
    commit: str | None
    optimize_score: Number | None
    passed_tasks: list[str]


@dataclass(frozen=True)
class Node:
    """One version of the target: the baseline or a trial's candidate."""

    id: str
    commit: str | None
    optimize_score: Number | None
    held_out_score: Number | None
    trial: int | None  # None for the baseline
    parents: tuple[str, ...]  # () for the baseline; two for a merge
    decision: str  # baseline | promoted | rejected | invalid
    valid: bool
    passed: frozenset[str]  # optimize tasks passed

    def as_parent(self) -> ParentRef:
        """The parent record the trial loop and the selection gate read."""
        return ParentRef(
            id=self.id,
            commit=self.commit,
            optimize_score=self.optimize_score,
            held_out_score=self.held_out_score,
            trial=self.trial,
        )

    def offered(self) -> Offered:
        """What a meta-agent may see of a population member (never a held-out score)."""
        return Offered(
            id=self.id,
            commit=self.commit,
            optimize_score=self.optimize_score,
            passed_tasks=sorted(self.passed),
        )


def _passed(summary: SuiteSummary | None) -> frozenset[str]:
    return frozenset(t.task_id for t in summary.rows("passed")) if summary else frozenset()


def optimize_summary(path: Path) -> SuiteSummary | None:
    """The optimize suite of the evaluation at `path` (None when it is missing or unreadable)."""
    try:
        return NodeEval.model_validate_json(path.read_bytes()).optimize
    except (OSError, ValueError):
        return None


def population(
    bundle: Path,
    baseline_id: str,
    baseline_commit: str,
    baseline_scores: tuple[Number | None, Number | None],
    ledger: Sequence[LedgerEntry],
) -> list[Node]:
    """The baseline and every ledger entry as nodes, in trial order."""
    nodes = [
        Node(
            id=baseline_id,
            commit=baseline_commit,
            optimize_score=baseline_scores[0],
            held_out_score=baseline_scores[1],
            trial=None,
            parents=(),
            decision="baseline",
            valid=True,
            passed=_passed(optimize_summary(bundle / BASELINE_EVAL)),
        )
    ]
    for entry in ledger:
        second = entry.second_parent_id
        nodes.append(
            Node(
                id=entry.candidate_id,
                commit=entry.candidate_commit,
                optimize_score=entry.optimize_score,
                held_out_score=entry.held_out_score,
                trial=entry.trial,
                parents=(entry.parent_id, *((second,) if second else ())),
                decision=str(entry.decision),
                valid=entry.valid,
                passed=_passed(optimize_summary(trial_path(bundle, entry.trial) / CANDIDATE_EVAL))
                if entry.valid
                else frozenset(),
            )
        )
    return nodes


def children(nodes: Sequence[Node]) -> dict[str, int]:
    """How many trials (valid or not) took each node as a parent."""
    counts = {n.id: 0 for n in nodes}
    for node in nodes:
        for parent in node.parents:
            counts[parent] = counts.get(parent, 0) + 1
    return counts


__all__ = ["Node", "Offered", "children", "optimize_summary", "population"]
