"""The run's summary (`lineage_summary.json`'s `summary`, AIE Bench Section 3.5) as models.

`bundle.benchmark_summary` builds it from the ledger; a population search adds its section
and its own final pick (`search.summary.with_search`); the reports and the CLI line read it.
The JSON is the one bundles have always held: `baseline_noise` and `search` are written
only when the run has them, and a search section holds only `notes` when the bundle's
final selection could not be used.
"""

from __future__ import annotations

from pydantic import Field

from metaeval.protocols.improve.noise import BaselineNoise
from metaeval.protocols.improve.records import BundleRecord, Number
from metaeval.protocols.improve.search.final_pick import FinalSelection


class NodeScores(BundleRecord):
    """A node and its two scores."""

    id: str
    optimize_score: Number | None = None
    held_out_score: Number | None = None


class FinalNode(NodeScores):
    """The final candidate, its gains over the baseline and, after a population search, the
    rule that picked it."""

    _written_when_set = frozenset({"chosen_by"})

    gain_optimize: Number | None = None
    gain_held_out: Number | None = None
    chosen_by: str | None = None


class BestNode(BundleRecord):
    id: str
    score: Number | None = None


class Tokens(BundleRecord):
    input_tokens: int = 0
    output_tokens: int = 0


class PromotedNode(BundleRecord):
    """A promoted node of a population search: its parents and how they were chosen."""

    id: str
    parents: list[str]
    parent_chosen: str
    merge: bool


class SearchSection(BundleRecord):
    """What a population search adds: its policy, seed, final pick and promoted nodes, and
    notes on bundle files it could not use (only those when the final pick is unusable)."""

    _written_when_set = frozenset({"policy", "seed", "final_pick", "promoted", "notes"})

    policy: str | None = None
    seed: int | None = None
    final_pick: FinalSelection | None = None
    promoted: list[PromotedNode] | None = None
    notes: list[str] | None = None


class RunSummary(BundleRecord):
    """Baseline, final promoted candidate, gains, promotions, valid and invalid trials, cost.

    `best_so_far` is the active parent's optimize score after each trial; costs are None
    when any is unknown (an unpriced model)."""

    _written_when_set = frozenset({"baseline_noise", "search"})

    baseline: NodeScores
    final: FinalNode
    best_optimize: BestNode | None = None
    best_held_out: BestNode | None = None
    best_so_far: list[Number | None] = Field(default_factory=list)
    trials_consumed: int = 0
    trial_budget: int = 0
    promotions: int = 0
    valid_candidates: int = 0
    invalid_or_broken_trials: int = 0
    failure_classes: dict[str, int] = Field(default_factory=dict)
    meta_agent_cost_usd: Number | None = None
    meta_agent_tokens: Tokens = Field(default_factory=Tokens)
    target_cost_usd: Number | None = None
    target_tokens: Tokens = Field(default_factory=Tokens)
    target_usage_sources: list[str] = Field(default_factory=list)
    baseline_noise: BaselineNoise | None = None
    search: SearchSection | None = None


__all__ = [
    "BestNode",
    "FinalNode",
    "NodeScores",
    "PromotedNode",
    "RunSummary",
    "SearchSection",
    "Tokens",
]
