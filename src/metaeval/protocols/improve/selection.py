"""The selection gate (AIE Bench Section 3.4): promote a candidate or reject it.

A candidate is promoted when its optimize score is strictly better than its parent's and,
when held-out gating is required, its held-out score holds (`must_not_regress`) or rises
(`must_improve`) against the parent's. `record_only` records held-out scores without gating.
Under `noise_gate: above_spread` the optimize gain must also exceed the baseline's spread
(`noise`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaeval.protocols.improve.noise import above_margin
from metaeval.protocols.improve.records import Gate, HeldOutGate, OptimizeGate, ParentRef

if TYPE_CHECKING:
    from metaeval.protocols.improve.plan import Plan
    from metaeval.protocols.improve.records import NodeEval


def select(plan: Plan, parent: ParentRef, node: NodeEval, margin: float = 0.0) -> Gate:
    """Strict improvement on optimize over the parent, by more than `margin` (the baseline's
    spread under `noise_gate: above_spread`, `noise`); held-out gates promotion if required."""
    parent_opt = parent.optimize_score or 0.0
    better = node.optimize_score is not None and node.optimize_score > parent_opt
    if better and margin:
        better = above_margin((node.optimize_score or 0.0) - parent_opt, margin)
    held_state = "not_required"
    held_ok = True
    if plan.held_out_tasks:
        cand, base = node.held_out_score, parent.held_out_score
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
    return Gate(
        optimize=OptimizeGate(
            parent=parent_opt,
            candidate=node.optimize_score,
            strictly_better=better,
            # the gain had to exceed the baseline's spread (written only then)
            noise_margin=margin or None,
        ),
        held_out=HeldOutGate(
            gate=plan.selection_gate,
            state=held_state,
            parent=parent.held_out_score,
            candidate=node.held_out_score,
        ),
        decision="promoted" if promoted else "rejected",
    )
