"""The population a search draws parents from: the baseline and every candidate so far.

A node is `valid` when its candidate was evaluated (no failure class); invalid trials are in
the ledger but never a parent. `passed` is the set of optimize tasks the node passed (read
from its evaluation), the per-task view the Pareto front needs; held-out scores are kept for
the final pick only and never offered to a meta-agent (`offered`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.records import (
    BASELINE_EVAL,
    CANDIDATE_EVAL,
    Number,
    trial_path,
)


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

    def as_parent(self) -> dict[str, Any]:
        """The parent record the trial loop and the selection gate read."""
        parent: dict[str, Any] = {
            "id": self.id,
            "commit": self.commit,
            "optimize_score": self.optimize_score,
            "held_out_score": self.held_out_score,
        }
        if self.trial is not None:
            parent["trial"] = self.trial
        return parent

    def offered(self) -> dict[str, Any]:
        """What a meta-agent may see of a population member (never a held-out score)."""
        return {
            "id": self.id,
            "commit": self.commit,
            "optimize_score": self.optimize_score,
            "passed_tasks": sorted(self.passed),
        }


def _passed(summary: Mapping[str, Any] | None) -> frozenset[str]:
    rows = (summary or {}).get("tasks") or []
    return frozenset(str(r["task_id"]) for r in rows if r.get("status") == "passed")


def _optimize_summary(path: Path) -> Mapping[str, Any] | None:
    try:
        return json.loads(path.read_text()).get("optimize")
    except (OSError, ValueError, AttributeError):
        return None


def population(
    bundle: Path,
    baseline_id: str,
    baseline_commit: str,
    baseline_scores: tuple[Number | None, Number | None],
    ledger: Sequence[Mapping[str, Any]],
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
            passed=_passed(_optimize_summary(bundle / BASELINE_EVAL)),
        )
    ]
    for entry in ledger:
        valid = entry.get("failure_class") is None and entry.get("candidate_commit") is not None
        second = entry.get("second_parent_id")
        parents = (str(entry["parent_id"]),) + ((str(second),) if second else ())
        trial = int(entry["trial"])
        nodes.append(
            Node(
                id=str(entry["candidate_id"]),
                commit=entry.get("candidate_commit"),
                optimize_score=entry.get("optimize_score"),
                held_out_score=entry.get("held_out_score"),
                trial=trial,
                parents=parents,
                decision=str(entry.get("decision")),
                valid=valid,
                passed=_passed(_optimize_summary(trial_path(bundle, trial) / CANDIDATE_EVAL))
                if valid
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


__all__ = ["Node", "children", "population"]
