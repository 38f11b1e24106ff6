"""Titles and column documentation of the question-subset views (paper Appendix J, L): the
low-prior and implementation-signal analogues of whole-set tables, documented from those
tables' own columns, the robustness pivots (Figure 3) that slice by the subsets and the
effort-vs-accuracy table (all questions against the low-prior ones)."""

from __future__ import annotations

Docs = dict[str, dict[str, str]]

SUBSETS = {
    "low_prior": "low-prior questions (question-only agreement below 0.90)",
    "implementation_signal": "implementation-signal questions (formal agreement at least 5 "
    "points above question-only agreement)",
}

ROBUSTNESS_PIVOTS: dict[str, str] = {
    "view": "builder (recovery of each builder's artifacts) or finder (recovery of each finder)",
    "slice": "all; calibrated_instruments (builder view over the 4 finders with the highest "
    "artifact-conditioned recovery, finder view over the 4 builders with the highest downstream "
    "recovery; ties by name); cross_family (builder and finder families differ); low_prior; "
    "implementation_signal (scoring set restricted to that question subset)",
    "agent": "the builder or finder of the row",
    "scored_rows": "scored question rows of formal compile-pass runs (audited scoring set)",
    "correct_rows": "correct rows among them",
    "recovery": "correct_rows / scored_rows (a fraction; the figure prints percentages)",
}

EFFORT_ACCURACY: dict[str, str] = {
    "finder": "finder name",
    "subset": "all (the audited scoring set) or low_prior (its low-prior questions only)",
    "runs": "formal compile-pass find runs of the finder scoring at least one question of "
    "the subset",
    "mean_novel_bytes": "mean novel retrieval + novel tool-call bytes per run (whole-run "
    "effort, also for the subset: bytes cannot be split by question)",
    "scored_rows": "scored question rows of those runs in the subset",
    "correct_rows": "correct rows among them",
    "accuracy": "correct_rows / scored_rows (pooled over rows, as low_prior_accuracy)",
}


def subset_table_docs(base: Docs) -> tuple[Docs, dict[str, str]]:
    """(column docs, titles) of the subset views, from the whole-set docs `base`."""
    docs: Docs = {}
    titles: dict[str, str] = {}
    for subset, what in SUBSETS.items():
        docs.update(_subset_docs(base, subset, what))
        titles.update(
            {
                f"{subset}_subset": f"The {what} (paper Appendix J).",
                f"{subset}_accuracy": f"Accuracy and lift over question-only on the {what} "
                "(paper Table 4).",
                f"{subset}_recovery_gate": f"Task-level recovery gate on the {what} (paper "
                "Table 16).",
                f"{subset}_kendall_tau": f"Kendall tau on the {what} (paper Figure 7).",
                f"{subset}_affinity": f"Affinity residuals on the {what} (paper Figure 8).",
                f"{subset}_affinity_family": f"Family-level affinity on the {what}.",
            }
        )
    docs["low_prior_rb_effort"] = {
        name: text
        + (
            " (all-correct on the low-prior questions; effort stays whole-run, Appendix L)"
            if name in ("R_b", "cells")
            else ""
        )
        for name, text in base["rb_effort"].items()
    }
    docs["robustness_pivots"] = ROBUSTNESS_PIVOTS
    titles["robustness_pivots"] = (
        "Control-conditioned robustness views: exact-match recovery per builder and per finder "
        "on five slices (paper Figure 3)."
    )
    titles["low_prior_rb_effort"] = (
        "Conditional inspection effort R_b with the all-correct gate on the low-prior questions "
        "(paper Figure 6)."
    )
    docs["effort_accuracy"] = EFFORT_ACCURACY
    titles["effort_accuracy"] = (
        "Inspection effort against accuracy per finder, on all questions and on "
        "the low-prior questions (the effort-vs-accuracy figure, next to paper Figure 6)."
    )
    return docs, titles


def _subset_docs(base: Docs, subset: str, what: str) -> Docs:
    """The analogue tables of one subset, columns documented from the whole-set tables."""
    on = f" (on the {what})"
    agreement = base["question_agreement"]
    return {
        f"{subset}_subset": {
            "task": "task id",
            "question_id": "question id",
            "question_only_cells": agreement["question_only_cells"],
            "question_only_agreement": agreement["question_only_agreement"],
            "formal_agreement": agreement["formal_agreement"],
            "lift_pp": agreement["lift_pp"],
        },
        f"{subset}_accuracy": {
            "slice": "question_only, spec_only or formal (compile-pass, audited scoring set)",
            "task": "task id, or 'all' for the row pooled over tasks",
            "runs": "find runs with at least one scored subset question",
            "scored_rows": "scored question rows of the subset",
            "accuracy": "correct scored rows / scored rows" + on,
            "perfect": "fraction of runs all-correct" + on,
            "lift_pp": "accuracy minus question-only accuracy of the same task(s), percentage "
            "points",
        },
        f"{subset}_recovery_gate": {
            "effort_panel": base["recovery_gate"]["effort_panel"],
            "builder": "builder name",
            "task": "task id",
            "recovery": "G_task recomputed" + on + "; null when no finder contributes",
            "cells": "finders contributing a defined g" + on,
            "panel_finders": "finders in the effort panel for the task",
        },
        f"{subset}_kendall_tau": {
            name: text + (on if name == "tau" else "") for name, text in base["kendall_tau"].items()
        },
        f"{subset}_affinity": {
            name: text + (on if name in ("residual", "score") else "")
            for name, text in base["affinity"].items()
        },
        f"{subset}_affinity_family": {
            name: text + (on if name == "residual" else "")
            for name, text in base["affinity_family"].items()
        },
    }
