"""The final pick of a population search, made on held-out scores (its own decision).

Under `pareto` the candidates are the final Pareto front; under `archive` every valid node.
The pick is the candidate with the highest held-out score, then the highest optimize score,
then the earliest: held-out scores never reach a meta-agent (`population.Node.offered`), so a
meta-agent cannot fit the pick. Without a held-out suite the pick is made on optimize scores
and says so. `recursive` makes no such pick: its final candidate is the last promoted one.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from metaeval.protocols.improve.records import Number
from metaeval.protocols.improve.search.archive import archive_weights
from metaeval.protocols.improve.search.pareto import pareto_front
from metaeval.protocols.improve.search.population import Node

FINAL_SELECTION = "final_selection.json"


class Contender(BaseModel):
    id: str
    optimize_score: Number | None
    held_out_score: Number | None


class FinalSelection(BaseModel):
    """`final_selection.json`: which policy ran, who contended, who was picked and why."""

    policy: str
    seed: int
    on: str  # held_out | optimize
    contenders: list[Contender]
    picked: str
    rule: str


def final_pick(policy: str, seed: int, nodes: Sequence[Node], held_out: bool) -> FinalSelection:
    """Pick the final candidate among the front (pareto) or the archive (archive)."""
    pool = pareto_front(nodes) if policy == "pareto" else archive_weights(nodes)
    by_id = {n.id: n for n in nodes}
    contenders = [by_id[i] for i in pool]
    order = {n.id: k for k, n in enumerate(nodes)}

    def key(node: Node) -> tuple[float, float, int]:
        held = float(node.held_out_score or 0.0) if held_out else 0.0
        return (held, float(node.optimize_score or 0.0), -order[node.id])

    best = max(contenders, key=key)
    first = "held-out score" if held_out else "optimize score (no held-out suite)"
    return FinalSelection(
        policy=policy,
        seed=seed,
        on="held_out" if held_out else "optimize",
        contenders=[
            Contender(id=n.id, optimize_score=n.optimize_score, held_out_score=n.held_out_score)
            for n in contenders
        ],
        picked=best.id,
        rule=f"highest {first} among the {'front' if policy == 'pareto' else 'archive'}, "
        "then highest optimize score, then earliest",
    )


__all__ = ["FINAL_SELECTION", "Contender", "FinalSelection", "final_pick"]
