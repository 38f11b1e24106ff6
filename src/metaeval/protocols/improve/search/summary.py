"""What a population search adds to the bundle summary: the policy, how each promoted node's
parents were chosen, and the final pick (`final_selection.json`), which replaces the
recursive rule "the final candidate is the last promoted one"."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.records import LedgerEntry, trial_path
from metaeval.protocols.improve.search.final_pick import FINAL_SELECTION, FinalSelection
from metaeval.protocols.improve.search.policy import PARENT_CHOICE, ParentChoice


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


Gain = Callable[[Any, Any], Any]


def with_search(
    bundle: Path, summary: dict[str, Any], entries: Sequence[LedgerEntry], gain: Gain
) -> dict[str, Any]:
    """`summary` with a `search` section and the final pick, when the bundle holds a
    population search's final selection; else `summary` unchanged (a recursive run).
    `gain(score, baseline score)` is the summary's own gain rule."""
    data = _read(bundle / FINAL_SELECTION)
    if data is None:
        return summary
    pick = FinalSelection.model_validate(data)
    promoted = []
    for entry in entries:
        if entry.decision != "promoted":
            continue
        choice = _read(trial_path(bundle, entry.trial) / PARENT_CHOICE)
        rule = ParentChoice.model_validate(choice).rule if choice else "not recorded"
        parents = [entry.parent_id, *([entry.second_parent_id] if entry.second_parent_id else [])]
        promoted.append(
            {
                "id": entry.candidate_id,
                "parents": parents,
                "parent_chosen": rule,
                "merge": entry.second_parent_id is not None,
            }
        )
    picked = next(c for c in pick.contenders if c.id == pick.picked)
    base = summary["baseline"]
    final = {
        "id": picked.id,
        "optimize_score": picked.optimize_score,
        "held_out_score": picked.held_out_score,
        "gain_optimize": gain(picked.optimize_score, base["optimize_score"]),
        "gain_held_out": gain(picked.held_out_score, base["held_out_score"]),
        "chosen_by": pick.rule,
    }
    search = {"policy": pick.policy, "seed": pick.seed, "final_pick": data, "promoted": promoted}
    return {**summary, "final": final, "search": search}


__all__ = ["with_search"]
