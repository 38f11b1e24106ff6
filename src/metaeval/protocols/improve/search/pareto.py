"""The per-task Pareto front of valid candidates (GEPA-style parent selection).

For each optimize task that some valid node passed, the nodes that passed it are that task's
best. The front is every node best on at least one task, less the nodes another front node
dominates (passes a strict superset of its tasks). A front node's weight is the number of
tasks it is best on: parents are drawn in proportion to it. When no node passed any task,
every valid node is on the front with weight 1.
"""

from __future__ import annotations

from collections.abc import Sequence

from metaeval.protocols.improve.search.population import Node


def pareto_front(nodes: Sequence[Node]) -> dict[str, int]:
    """Front node id -> the number of tasks it is best on, in population order."""
    valid = [n for n in nodes if n.valid]
    tasks = sorted(set().union(*(n.passed for n in valid))) if valid else []
    if not tasks:
        return {n.id: 1 for n in valid}
    wins = {n.id: sum(1 for t in tasks if t in n.passed) for n in valid}
    on_front = [n for n in valid if wins[n.id] > 0]
    kept = [n for n in on_front if not any(o.passed > n.passed for o in on_front)]
    return {n.id: wins[n.id] for n in kept}


__all__ = ["pareto_front"]
