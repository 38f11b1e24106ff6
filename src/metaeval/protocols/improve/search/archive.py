"""The archive of valid candidates (Darwin Goedel Machine-style parent selection).

Every valid node stays in the archive. A node's weight is its sigmoid-scaled optimize score
times a novelty term that falls with the number of children it already has:
`w = 1 / (1 + exp(-SHARPNESS * (score - MIDPOINT))) * 1 / (1 + children)`; parents are drawn
in proportion to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from metaeval.protocols.improve.search.population import Node, children

SHARPNESS = 10.0
MIDPOINT = 0.5


def archive_weights(nodes: Sequence[Node]) -> dict[str, float]:
    """Archive node id -> its sampling weight, in population order."""
    kids = children(nodes)
    weights = {}
    for node in nodes:
        if not node.valid:
            continue
        score = float(node.optimize_score or 0.0)
        scaled = 1.0 / (1.0 + math.exp(-SHARPNESS * (score - MIDPOINT)))
        weights[node.id] = scaled / (1 + kids.get(node.id, 0))
    return weights


__all__ = ["MIDPOINT", "SHARPNESS", "archive_weights"]
