"""The manifest's `search` block: the search policy, proposals per round and its seed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PolicyName = Literal["recursive", "pareto", "archive"]
MAX_PROPOSALS_PER_ROUND = 64


class SearchSettings(BaseModel):
    """How parents are chosen (issue 41).

    `policy`: `recursive` (the default: every trial patches the active parent, as in the
    paper), `pareto` (parents drawn from the per-task Pareto front of valid candidates) or
    `archive` (parents drawn from every valid candidate, weighted by score and by how few
    children each has). `proposals_per_round`: trials whose parents are chosen together from
    the ledger as it stood before the round, and evaluated concurrently; the trial budget
    still counts trials. `seed`: the seed of parent sampling (default: the manifest's
    `seed`). `workers`: how many proposals of a round run at once (default: all of them;
    1 runs them one after another, with the same parents and the same ledger)."""

    model_config = ConfigDict(extra="forbid")

    policy: PolicyName = "recursive"
    proposals_per_round: int = Field(default=1, ge=1, le=MAX_PROPOSALS_PER_ROUND)
    seed: int | None = None
    workers: int | None = Field(default=None, ge=1, le=MAX_PROPOSALS_PER_ROUND)

    def is_default(self) -> bool:
        """The paper's loop, written as it always was (no `search` record in the bundle)."""
        return self == SearchSettings()


__all__ = ["MAX_PROPOSALS_PER_ROUND", "PolicyName", "SearchSettings"]
