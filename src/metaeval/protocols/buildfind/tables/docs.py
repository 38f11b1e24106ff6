"""Titles and column-by-column documentation of every build-and-find table.

`tables/write.py` writes ``tables/README.md`` from these; a column documented nowhere here is
flagged as not documented. Rates (accuracy, coverage, agreement) are fractions in [0, 1];
columns holding percentage points say so.
"""

from __future__ import annotations

from metaeval.protocols.buildfind.analysis.core_finders import GATES as GATE_NAMES
from metaeval.protocols.buildfind.tables.subset_docs import subset_table_docs
from metaeval.protocols.buildfind.views.docs import VIEW_TABLE_DOCS, VIEW_TABLE_TITLES

# table -> one-line caption (used by the README and the reports)
TABLE_TITLES: dict[str, str] = {
    "calibration": "Prior, artifact and stress calibration (paper Table 1 and Table 13).",
    "repeatability": "Repeatability controls across repeated find trials (paper Table 2, 14).",
    "recovery_gate": "Task-level recovery gate G_task per builder and task (paper Table 3).",
    "rb_effort": "Conditional inspection effort R_b on all-correct cells (paper Figure 1).",
    "bootstrap_ci": "Bootstrap 95% intervals over artifacts for R_b and recovery (beyond the "
    "paper; B = `replicates` resamples, seeded by `seed`, derived from the run's seed0).",
    "aels": "Aggregate artifact-evidenced legibility score AELS (paper Table 9).",
    "coverage": "Builder-side implementation coverage from the audit labels (paper Table 11).",
    "kendall_tau": "Pairwise finder agreement on builder effort orderings (paper Figure 4).",
    "affinity_matrix": "Builder-finder affinity residuals of one matrix over every agent and "
    "effort, as the paper lays it out (paper Figure 5).",
    "affinity_matrix_family": "Family-level affinity of that matrix (paper Table 15).",
    "affinity": "Builder-finder affinity residuals centred inside each effort panel (the "
    "per-panel alternative to affinity_matrix).",
    "affinity_family": "Family-level affinity residuals, per effort panel.",
    "finder_calibration": "Per-finder calibration: recovery and lifts over controls (paper Table 8).",
    "token_usage": "Vendor token usage by role and agent (paper Table 17).",
    "run_accuracy": "Per-find-run accuracy on the audited scoring set (paper eq. 1).",
    "cell_costs": "Per finder-task cell all-correct cost and within-finder ratio (paper eq. 2-3).",
    "failed_cells": "Build and find cells that stayed failed after their recovery attempts.",
    "effort_panels": "Effort panels: which builder-effort x finder-effort pairs are analysed.",
    "evidence_audit_rule": "The evidence-audit sample's rule (paper Appendix I): seed, "
    "answers per stratum, population, strata and rows drawn.",
    "core_finders": "Core-finder selector: the hard gates of paper Appendix E per finder, "
    "the routine panel and the prior-stress audit finder.",
    "relaxed_probe": "Relaxed compile probe on the builds the root-level probe excluded "
    "(paper Table 10): is a unique nested project buildable?",
    "table_pairs": "Which builder-finder pairs each table reads: pooled tables every pair of "
    "the run, per-panel tables the effort panels' pairs (issue 39).",
    "paper_table1": "Table 1 as the paper prints it (percentages, pp lifts, dashes).",
    "paper_table2": "Table 2 as the paper prints it, with its Build and Find columns.",
    "paper_table3": "Table 3 as the paper prints it: effort panels side by side, one row per "
    "builder label (agent and model), G_task per task with (contributing/total) finder cells.",
}

_PANEL = (
    "effort panel (see effort_panels): in matched mode (default) the effort shared by the builder "
    "and its finders (e.g. high, low); in cross mode builder/finder effort (e.g. high/low)"
)

_PCT = "percent with one decimal (text; the fraction is in the table it comes from)"

# table -> column -> meaning. Column order here is the documented order.
TABLE_DOCS: dict[str, dict[str, str]] = {
    "paper_table1": {
        "Slice": "calibration slice as the paper names it",
        "Task": "all (the per-task rows are in calibration)",
        "Build": "artifacts in the slice; '–' for the controls",
        "Find": "find runs in the slice",
        "Accuracy": "mean per-run Eq. 1 accuracy, " + _PCT,
        "Perfect": "share of all-correct runs, " + _PCT + "; '–' for the controls",
        "Δ vs. question-only": "lift over question-only accuracy in percentage points",
    },
    "paper_table2": {
        "Slice": "repeatability slice as the paper names it",
        "Build": "compile-pass artifacts of the formal row; '–' for the controls",
        "Find": "find runs of the slice (compile-pass panel for the formal row)",
        "Answer rows": "scored question rows",
        "3-trial agreement": "share of matched cells whose trials are all correct, " + _PCT,
        "Reliable questions": "share of questions whose agreement reaches the threshold, " + _PCT,
    },
    "paper_table3": {},  # columns named by effort panel and task: see `column_doc`
    "effort_panels": {
        "builder_effort": "builder's configured effort",
        "finder_effort": "finder's configured effort; null for rows that predate the column",
        "effort_panel": "panel the pairs go to: the shared effort (matched) or builder/finder "
        "(cross); rows without a finder effort follow the builder's effort",
        "analysed": "whether the pairs enter the panel-local metrics (matched mode leaves out "
        "pairs whose efforts differ, as the paper's panels do)",
        "builders": "distinct builders with this effort pair",
        "finders": "distinct finders with this effort pair",
        "mode": "matched (paper: high with high, low with low) or cross (full grid)",
        "note": "why a pair is not analysed, or that the finder effort is unknown (old rows)",
    },
    "evidence_audit_rule": {
        "seed": "the sample's seed (the paper's audit seed 20260601)",
        "per_stratum": "answers drawn per stratum (2, the paper's rule)",
        "population": "correct formal answers on compile-pass artifacts in the audited "
        "scoring set (controls excluded)",
        "strata": "task x builder family x finder family x prior status strata the population "
        "falls into",
        "full_strata": "strata holding at least per_stratum answers",
        "rows": "answers the rule draws (the paper's 72 = 36 strata x 2)",
    },
    "core_finders": {
        "finder": "finder name",
        "finder_family": "finder adapter family",
        "formal_recovery": "formal recovery as in finder_calibration (gate: >= 0.95)",
        "qonly_lift_pp": "lift over its own question-only control, pp (gate: >= 1)",
        "low_prior_lift_pp": "lift on low-prior questions, pp (gate: >= 1)",
        "impl_signal_lift_pp": "lift on implementation-signal questions, pp (gate: >= 1)",
        "mean_tokens_per_run": "mean tokens per formal find run (gate: <= cost_ceiling)",
        "mean_tau": "mean Kendall tau with the other finders of its effort panel (kendall_tau, "
        "per panel; gate: >= 0; null fails)",
        "own_family_affinity": "mean affinity_matrix residual on its own family's builders "
        "(gate: |x| <= 0.05; null passes)",
        **{
            name: "whether the finder passes the gate (see docs/buildfind.md, Core finders)"
            for name in GATE_NAMES
        },
        "selected": "passes every gate: a routine core finder",
        "role": "core, prior_stress_audit (outside the core, largest question-only lift among "
        "finders passing the recovery gate) or null",
        "cost_ceiling": "half the median of mean_tokens_per_run over the finders",
    },
    "relaxed_probe": {
        "slice": "Table 10's row: the ok builds that failed the root-level compile probe, then "
        "by the relaxed probe's outcome (a unique nested project found, built, failed, timed "
        "out; none or several found; a project file at the root; not run)",
        "builds": "builds in the row",
    },
    "table_pairs": {
        "table": "table name",
        "pairs": "'all pairs' (pooled over every formal pair of the run) or 'panel pairs' (the "
        "effort panels' pairs; matched: a builder's own-effort finders); bootstrap_ci has both",
        "effort_pairs": "builder/finder effort pairs the table's rows come from",
        "partial": "a pooled table of a run that lacks part of the full grid (e.g. "
        "find_pairs: matched): it pools the pairs the run has",
        "note": "why the table is partial; null otherwise",
    },
    "failed_cells": {
        "phase": "build or find",
        "slice": "build for a build cell; formal, question_only or spec_only for a find cell",
        "task": "task id",
        "builder": "builder name ('' for a control find)",
        "build_trial": "build trial index (-1 for a control find)",
        "finder": "finder name ('' for a build cell)",
        "find_trial": "find trial index (-1 for a build cell)",
        "kind": "infra_error (every attempt failed on infrastructure, recovery budget spent), "
        "error or timeout (a final failure, not retried)",
        "attempts": "records written for the cell (first attempt plus recoveries)",
        "reason": "the last attempt's error, first line",
    },
    "calibration": {
        "slice": "row group: question_only, spec_only (controls), artifact_present (all formal "
        "rows), compile_pass (primary panel) or compile_failed (stress diagnostic)",
        "task": "task id, or 'all' for the row pooled over tasks",
        "builds": "distinct artifacts (task, builder, build_trial) in the group; null for controls",
        "finds": "find runs in the group",
        "accuracy": "mean per-run accuracy (fraction); formal groups use the audited scoring set",
        "perfect": "fraction of scored find runs that are all-correct",
        "delta_vs_question_only": "accuracy minus question-only accuracy on the same task(s), in "
        "percentage points; null on the question-only row",
    },
    "repeatability": {
        "slice": "formal (compile-pass primary panel, audited scoring set), spec_only or "
        "question_only",
        "task": "task id, or 'all' for the row pooled over tasks",
        "answer_rows": "scored question rows the row is computed from",
        "agreement": "fraction of matched cells (one finder, one artifact or control, one "
        "question, all its find trials) that agree, by default all trials correct",
        "reliable_questions": "fraction of questions whose agreement over all their matched "
        "cells reaches the reliability threshold (default 0.9)",
    },
    "recovery_gate": {
        "effort_panel": _PANEL,
        "builder": "builder name",
        "task": "task id",
        "G_task": "mean over contributing finders of g, the finder's mean audited accuracy over "
        "its repeated compile-pass find runs (paper eq. 5-6); null when no finder contributes",
        "contributing_cells": "finders of the panel with implemented-gold evidence (a defined g) "
        "for this builder and task",
        "total_cells": "finders in the effort panel (the denominator shown in parentheses)",
    },
    "rb_effort": {
        "effort_panel": _PANEL,
        "builder": "builder name",
        "metric": "effort metric: total_bytes (the reported unit: novel retrieval plus tool-call "
        "bytes), novel_retrieval_bytes or novel_tool_call_bytes",
        "R_b": "geometric mean over the builder's contributing cells of its mean all-correct "
        "cost divided by the smallest such cost in the same finder-task cell (paper eq. 4); "
        "1.0 is the least effort; null when no cell contributes",
        "cells": "|C_b|: finder-task cells with a defined all-correct cost",
        "total_cells": "finder-task cells in the panel (|F x T|)",
        "missing_cells": "cells without runs, without an all-correct run or without the metric",
        "zero_cost_cells": "cells whose all-correct cost is zero (no effort evidence; left out "
        "of C_b)",
    },
    "aels": {
        "effort_panel": _PANEL,
        "builder": "builder name",
        "A": "mean audited recovery over the builder's formal primary cells: the mean of g(b,f,t) "
        "(eq. 5) over its cells with a defined g, not scaled by coverage (C carries coverage)",
        "S": "mean repeat-answer agreement over repeated find runs",
        "C": "contributing-cell coverage |C_b| / |F x T|",
        "R_b": "conditional total-byte inspection effort (see rb_effort)",
        "AELS": "A * S * C * R_b^(-eta) with eta = 0.1 (paper eq. 7, the reading that reproduces "
        "Table 9's AELS column from its A, S, C and R_b for 11 of its 12 rows); higher is "
        "better; 0 when no cell contributes",
    },
    "bootstrap_ci": {
        "statistic": "R_b (total_bytes, per effort panel and builder) or recovery (per finder; "
        "finder 'all' pools every finder: the calibration table's compile_pass accuracy)",
        "effort_panel": "effort panel of an R_b row; null on recovery rows",
        "builder": "builder of an R_b row; null on recovery rows",
        "finder": "finder of a recovery row ('all' = pooled); null on R_b rows",
        "estimate": "the statistic on the run's artifacts (equals rb_effort / calibration)",
        "ci_low": "2.5th percentile of the statistic over the defined bootstrap replicates "
        "(numpy linear interpolation); null when none is defined",
        "ci_high": "97.5th percentile, as ci_low",
        "artifacts": "artifacts resampled: the builder's (R_b rows) or all (recovery rows); "
        "compile-pass artifacts with a scored find run",
        "replicates": "B, the number of bootstrap resamples (default 1000)",
        "defined_replicates": "replicates in which the statistic was defined (R_b needs a "
        "contributing cell)",
        "level": "confidence level of the percentile interval (0.95)",
        "seed": "numpy default_rng seed of the resampling, derive_seed(seed0, 'bootstrap_ci'); "
        "artifacts are drawn with replacement within each (builder, task) (stratified), "
        "strata in sorted order, artifacts sorted by build_trial",
    },
    "coverage": {
        "builder": "builder name",
        "pairs": "distinct artifact-question pairs of the builder's formal artifacts",
        "implemented_gold": "pairs labelled implemented_gold",
        "coverage": "implemented_gold divided by the labelled pairs (pairs minus unlabeled)",
        "non_gold": "pairs labelled implemented_non_gold",
        "ambiguous": "pairs labelled absent_ambiguous",
        "D_b": "implementation-aware downstream recovery: recovery times coverage (paper eq. 8)",
        "recovery": "correct answers over all scored finder-answer rows of the builder's "
        "implemented_gold pairs (first factor of paper eq. 8)",
        "unlabeled": "pairs without an implementation label",
    },
    "kendall_tau": {
        "effort_panel": _PANEL,
        "task": "task id",
        "finder_a": "first finder of the pair (alphabetically smaller)",
        "finder_b": "second finder of the pair",
        "tau": "Kendall tau-b between the two finders' builder orderings by mean all-correct "
        "total inspection bytes; null when fewer than two builders or all ties",
        "n": "builders for which both finders have an all-correct cost",
    },
    "affinity_matrix": {
        "builder": "builder name (one row of the matrix per builder at its effort)",
        "finder": "finder name (one column per finder at its effort)",
        "residual": "score minus the builder's mean minus the finder's mean plus the grand mean, "
        "every mean taken over all observed cells of the one matrix (every pair of a full grid; "
        "a run of matched pairs only leaves the off-diagonal effort blocks out of every mean)",
        "score": "the pair's matrix score: mean of the per-run Eq. 1 audited accuracy over the "
        "pair's formal find runs (each run weighs the same; tasks and build trials pooled)",
        "runs": "scored formal find runs of the pair",
        "builder_family": "builder adapter family",
        "finder_family": "finder adapter family",
    },
    "affinity_matrix_family": {
        "builder_family": "builder adapter family",
        "finder_family": "finder adapter family",
        "residual": "unweighted mean of the affinity_matrix residuals of the family's pairs",
        "cells": "number of builder-finder pairs averaged",
    },
    "affinity": {
        "effort_panel": _PANEL + "; affinity is panel-local: each panel is its own builder x "
        "finder matrix",
        "builder": "builder name",
        "finder": "finder name",
        "residual": "score minus the builder's mean minus the finder's mean plus the grand mean, "
        "every mean taken inside the effort panel; positive means above-marginal recovery for "
        "the pair",
        "score": "the pair's matrix score (by default mean audited accuracy over its formal runs)",
        "runs": "scored formal find runs of the pair",
        "builder_family": "builder adapter family",
        "finder_family": "finder adapter family",
    },
    "affinity_family": {
        "effort_panel": _PANEL + " (families are averaged inside each panel)",
        "builder_family": "builder adapter family",
        "finder_family": "finder adapter family",
        "residual": "mean affinity residual over the builder-finder pairs in the family cell",
        "cells": "number of builder-finder pairs averaged",
    },
    "finder_calibration": {
        "finder": "finder name",
        "finder_family": "finder adapter family",
        "formal_runs": "formal find runs with a non-empty scoring set",
        "formal_recovery": "exact-match recovery on the audited scoring set (fraction)",
        "question_only_accuracy": "accuracy in the question-only control (fraction)",
        "spec_only_accuracy": "accuracy in the spec-only control (fraction)",
        "qonly_lift_pp": "formal_recovery minus question_only_accuracy, percentage points",
        "spec_only_lift_pp": "spec_only_accuracy minus question_only_accuracy, percentage points",
        "formal_minus_spec_only_pp": "formal_recovery minus spec_only_accuracy, percentage points",
        "low_prior_formal": "formal recovery on low-prior questions",
        "low_prior_question_only": "question-only accuracy on low-prior questions",
        "low_prior_lift_pp": "low_prior_formal minus low_prior_question_only, percentage points",
        "impl_signal_formal": "formal recovery on implementation-signal questions",
        "impl_signal_question_only": "question-only accuracy on implementation-signal questions",
        "impl_signal_lift_pp": "impl_signal_formal minus impl_signal_question_only, percentage "
        "points",
        "mean_tokens_per_run": "mean input plus output tokens per formal find run",
        "labels_from_self": "true when the finder is also a base finder whose answers made the "
        "consensus prelabels: its formal recovery is then correct by construction on every "
        "prelabelled question (written by `buildfind run` and `label`)",
    },
    "token_usage": {
        "role": "builder, finder_formal, finder_question_only or finder_spec_only",
        "agent": "builder or finder name",
        "runs": "number of runs",
        "input_tokens": "total provider-reported input tokens",
        "output_tokens": "total provider-reported output tokens",
        "total": "input_tokens + output_tokens",
        "mean_per_run": "total / runs",
        "runs_missing_tokens": "runs with no reported input or output token count",
    },
    "run_accuracy": {
        "slice": "formal, question_only or spec_only",
        "effort_panel": _PANEL,
        "task": "task id",
        "builder": "builder name; '' for controls",
        "build_trial": "build trial index; -1 for controls",
        "finder": "finder name",
        "find_trial": "find trial index",
        "compile_pass": "compile probe passed for the artifact; null for controls",
        "scoring_set": "audited (implemented_gold questions of a labelled artifact) or "
        "all_questions (unlabelled artifacts and controls)",
        "n_questions": "questions answered in the run",
        "n_scored": "questions in the run's scoring set",
        "n_correct": "scored questions answered correctly",
        "accuracy": "n_correct / n_scored (paper eq. 1); null when nothing is scored",
        "all_correct": "every scored question answered correctly",
    },
    "cell_costs": {
        "effort_panel": _PANEL,
        "builder": "builder name",
        "finder": "finder name",
        "task": "task id",
        "metric": "effort metric (see rb_effort)",
        "runs": "scored primary find runs in the cell",
        "all_correct_runs": "all-correct runs among them",
        "cost": "mean metric over the all-correct runs (paper eq. 2)",
        "ratio": "cost divided by the smallest valid cost of the same finder, task and panel "
        "(paper eq. 3); null unless status is ok",
        "status": "ok, no_runs, no_all_correct, missing_metric or zero_cost",
    },
    "question_agreement": {
        "task": "task id",
        "question_id": "question id from questions.yaml",
        "question_only_cells": "question-only matched cells (one per finder) for the question",
        "question_only_agreement": "fraction of those cells in which every find trial answered "
        "correctly; null without cells",
        "formal_cells": "formal matched cells (finder x compile-pass artifact) whose scoring set "
        "holds the question",
        "formal_agreement": "fraction of those cells in which every find trial answered "
        "correctly; null without cells",
        "lift_pp": "formal_agreement minus question_only_agreement, percentage points",
        "low_prior": f"question_only_agreement below {0.9:.2f} (the low-prior subset)",
        "implementation_signal": "lift_pp of at least 5 points (the implementation-signal subset)",
    },
    "evidence_audit_sample": {
        "audit_id": "row number in the sample (1..N, by stratum then random draw)",
        "stratum": "task|builder_family|finder_family|prior_status the row was drawn from",
        "task": "task id",
        "builder": "builder name",
        "builder_family": "builder adapter family",
        "build_trial": "build trial index",
        "finder": "finder name",
        "finder_family": "finder adapter family",
        "find_trial": "find trial index",
        "question_id": "question id",
        "prior_status": "low_prior (question-only agreement below 0.90) or high_prior",
        "gold": "gold option key",
        "answer": "the finder's (correct) answer",
        "correct": "always true: the sample draws correct formal answers",
        "evidence_label": "to fill in labels/evidence_audit.csv: supported, "
        "partially_supported, unsupported or prior_like (paper Appendix I)",
        "notes": "free-text notes of the auditor",
    },
    "evidence_audit_summary": {
        "slice_kind": "all, prior_status, task or stratum",
        "slice": "the slice value (e.g. low_prior, a task id, a stratum)",
        "n": "sampled answers in the slice",
        "pending": "sampled answers without an evidence label yet",
        "labelled": "n minus pending",
        "supported": "answers labelled supported",
        "partially_supported": "answers labelled partially_supported",
        "unsupported": "answers labelled unsupported",
        "prior_like": "answers labelled prior_like",
        "unsupported_or_prior_like": "unsupported plus prior_like (paper Table 12)",
        "share_supported": "supported / labelled; null when nothing is labelled",
        "share_partially_supported": "partially_supported / labelled; null when nothing is "
        "labelled",
        "share_unsupported": "unsupported / labelled; null when nothing is labelled",
        "share_prior_like": "prior_like / labelled; null when nothing is labelled",
        "share_unsupported_or_prior_like": "unsupported_or_prior_like / labelled; null when "
        "nothing is labelled",
    },
}

# The low-prior and implementation-signal views repeat tables above on a question subset.
_SUBSET_DOCS, _SUBSET_TITLES = subset_table_docs(TABLE_DOCS)
TABLE_DOCS.update(_SUBSET_DOCS)
TABLE_TITLES.update(_SUBSET_TITLES)
TABLE_TITLES.update(
    {
        "question_agreement": "Per-question agreement in the question-only control and the "
        "formal condition (paper Appendix J).",
        "evidence_audit_sample": "Stratified sample of correct answers for the evidence audit "
        "(paper Appendix I); label it in labels/evidence_audit.csv.",
        "evidence_audit_summary": "Summary of the labelled evidence audit (paper Table 12).",
    }
)


def table_order(names: list[str] | tuple[str, ...] | set[str]) -> list[str]:
    """Known tables in documentation order, then the others alphabetically."""
    known = [n for n in TABLE_DOCS if n in names]
    return known + sorted(n for n in names if n not in TABLE_DOCS)


def column_doc(table: str, column: str) -> str | None:
    """The documented meaning of a column, or None."""
    if table == "paper_table3":  # builder, then "<panel> builder", "<panel> <task>" per panel
        if column == "builder":
            return (
                "builder label shared across panels: agent and model from the rows (e.g. "
                "'codex gpt-5.5'), else the config name without its effort suffix; builders "
                "of one panel that would share a label keep their config names"
            )
        if column.endswith(" builder"):
            return "config name of the panel's builder with that label; '–' if it has none"
        return (
            "G_task of the panel's builder on that task as a percent, with (contributing / "
            "total) finder cells; '– (0/k)' when no finder cell contributes or the panel has "
            "no builder with that label (k: the panel's finder cells on the task)"
        )
    return TABLE_DOCS.get(table, {}).get(column)


# The restricted-view evidence layer documents its own tables (views/docs.py).
TABLE_TITLES.update(VIEW_TABLE_TITLES)
TABLE_DOCS.update(VIEW_TABLE_DOCS)
