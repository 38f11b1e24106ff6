"""What a population search adds to the bundle summary: the policy, how each promoted node's
parents were chosen, and the final pick (`final_selection.json`), which replaces the
recursive rule "the final candidate is the last promoted one"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from metaeval.protocols.improve.bundle_reads import read_record
from metaeval.protocols.improve.records import LedgerEntry, Number, trial_path
from metaeval.protocols.improve.search.final_pick import FINAL_SELECTION, FinalSelection
from metaeval.protocols.improve.search.policy import PARENT_CHOICE, ParentChoice
from metaeval.protocols.improve.summary_records import (
    FinalNode,
    PromotedNode,
    RunSummary,
    SearchSection,
)

Gain = Callable[[Number | None, Number | None], Number | None]


def with_search(
    bundle: Path, summary: RunSummary, entries: Sequence[LedgerEntry], gain: Gain
) -> RunSummary:
    """`summary` with a `search` section and the final pick, when the bundle holds a
    population search's final selection; else `summary` unchanged (a recursive run).
    `gain(score, baseline score)` is the summary's own gain rule."""
    notes: list[str] = []  # bundle files refused (a bundle may come from anyone)
    pick = read_record(bundle / FINAL_SELECTION, FinalSelection, bundle, notes)
    if pick is None:
        if not notes:
            return summary
        return summary.model_copy(update={"search": SearchSection(notes=notes)})
    promoted = []
    for entry in entries:
        if entry.decision != "promoted":
            continue
        path = trial_path(bundle, entry.trial) / PARENT_CHOICE
        choice = read_record(path, ParentChoice, bundle, notes)
        second = [entry.second_parent_id] if entry.second_parent_id else []
        promoted.append(
            PromotedNode(
                id=entry.candidate_id,
                parents=[entry.parent_id, *second],
                parent_chosen=choice.rule if choice else "not recorded",
                merge=entry.second_parent_id is not None,
            )
        )
    picked = next((c for c in pick.contenders if c.id == pick.picked), None)
    if picked is None:
        notes.append(f"{FINAL_SELECTION} not used: its pick {pick.picked} is no contender")
        return summary.model_copy(update={"search": SearchSection(notes=notes)})
    base = summary.baseline
    final = FinalNode(
        id=picked.id,
        optimize_score=picked.optimize_score,
        held_out_score=picked.held_out_score,
        gain_optimize=gain(picked.optimize_score, base.optimize_score),
        gain_held_out=gain(picked.held_out_score, base.held_out_score),
        chosen_by=pick.rule,
    )
    search = SearchSection(
        policy=pick.policy,
        seed=pick.seed,
        final_pick=pick,
        promoted=promoted,
        notes=notes or None,
    )
    return summary.model_copy(update={"final": final, "search": search})


RECURSIVE_RULE = (
    "recursive: every trial patches the active parent (the last promoted candidate, "
    "else the baseline)"
)


def search_items(summary: RunSummary) -> list[tuple[str, str]]:
    """(label, text) pairs for a report's summary: the policy that ran and, for a population
    search, how each promoted node's parents were chosen. A summary without a search section
    is a recursive run's, whose one rule chose every parent."""
    search = summary.search or SearchSection()
    if search.policy is None:
        notes = search.notes or []
        text = f"not known ({'; '.join(notes)})" if notes else RECURSIVE_RULE
        return [("Search policy", text)]
    on = search.final_pick.on.replace("_", "-") if search.final_pick else "n/a"
    items = [
        ("Search policy", f"{search.policy} (seed {search.seed}), final picked on {on} scores")
    ]
    for node in search.promoted or []:
        parents = " and ".join(node.parents)
        how = f"merge of {parents}" if node.merge else f"from {parents}"
        items.append((f"Promoted {node.id}", f"{how}; parent {node.parent_chosen}"))
    for note in search.notes or []:
        items.append(("Search note", note))
    return items


__all__ = ["RECURSIVE_RULE", "search_items", "with_search"]
