"""Parent choice of one trial under the manifest's search policy (`SearchSettings`).

One interface for every policy: `choose_parent(policy, nodes, trial, seed)` returns the
`ParentChoice` (written to the trial's `parent_choice.json`). Under `recursive` the parent is
the active parent: the last promoted node (the baseline before any promotion). Under `pareto`
and `archive` it is drawn from the front or archive weights with a generator seeded by the
search seed and the trial number only, so the same seed replays the same parents whatever
order the trials of a round finish in.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel

from metaeval.protocols.improve.search.archive import archive_weights
from metaeval.protocols.improve.search.pareto import pareto_front
from metaeval.protocols.improve.search.population import Node

PARENT_CHOICE = "parent_choice.json"


class ParentChoice(BaseModel):
    """How one trial's parent was chosen: the policy, the seed, the weighted pool."""

    trial: int
    policy: str
    seed: int
    parent_id: str
    pool: dict[str, float]  # node id -> its weight (recursive: the active parent, 1)
    rule: str


def active_parent(nodes: Sequence[Node]) -> Node:
    """The recursive loop's parent: the last promoted node, else the baseline."""
    promoted = [n for n in nodes if n.decision == "promoted"]
    return promoted[-1] if promoted else nodes[0]


def choose_parent(policy: str, nodes: Sequence[Node], trial: int, seed: int) -> ParentChoice:
    """The parent of `trial` among `nodes` (the population before the trial's round)."""
    if policy == "recursive":
        parent = active_parent(nodes)
        return ParentChoice(
            trial=trial,
            policy=policy,
            seed=seed,
            parent_id=parent.id,
            pool={parent.id: 1.0},
            rule="the active parent: the last promoted candidate, else the baseline",
        )
    if policy == "pareto":
        pool = {k: float(v) for k, v in pareto_front(nodes).items()}
        rule = "drawn from the per-task Pareto front, weighted by tasks it is best on"
    elif policy == "archive":
        pool = archive_weights(nodes)
        rule = "drawn from the archive, weighted by sigmoid score / (1 + children)"
    else:
        raise ValueError(f"unknown search policy {policy!r}")
    rng = random.Random(f"{policy}:{seed}:{trial}")
    ids = list(pool)
    (picked,) = rng.choices(ids, weights=[pool[i] for i in ids])
    return ParentChoice(
        trial=trial, policy=policy, seed=seed, parent_id=picked, pool=pool, rule=rule
    )


__all__ = ["PARENT_CHOICE", "ParentChoice", "active_parent", "choose_parent"]
