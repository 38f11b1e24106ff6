"""Titles and column documentation of the restricted-view tables (see `evidence`)."""

from __future__ import annotations

_VIEW = "restricted finder view (a preset such as readme_only, or a named set of globs)"
_PANEL = "effort panel shared by the builder and its finders (e.g. high, low)"

VIEW_TABLE_TITLES: dict[str, str] = {
    "view_accuracy": "Restricted-view recovery against the full view and the question-only "
    "control (view evidence layer; paper Appendix I).",
    "view_finder": "Per-finder recovery under each restricted view, with lifts over the full "
    "view and the question-only control.",
    "view_rb_effort": "Conditional inspection effort R_b under each restricted view, beside the "
    "full view's R_b (total bytes).",
    "view_recovery_gate": "Task-level recovery gate G_task under each restricted view, beside "
    "the full view's.",
    "view_files": "Files each restricted view kept and hid, per artifact.",
}

VIEW_TABLE_DOCS: dict[str, dict[str, str]] = {
    "view_accuracy": {
        "view": _VIEW,
        "slice": "artifact_present (all formal runs of the view), compile_pass (primary panel) "
        "or compile_failed (stress diagnostic)",
        "task": "task id, or 'all' for the row pooled over tasks",
        "builds": "distinct artifacts in the group",
        "finds": "view find runs in the group",
        "accuracy": "mean per-run accuracy under the view on the audited scoring set (labels of "
        "the full-view audit), as in calibration",
        "perfect": "fraction of scored view runs that are all-correct",
        "full_view_accuracy": "the same group's accuracy in the full view (calibration table)",
        "lift_vs_full_pp": "accuracy minus full_view_accuracy, percentage points",
        "question_only_accuracy": "question-only control accuracy on the same task(s)",
        "lift_vs_question_only_pp": "accuracy minus question_only_accuracy, percentage points",
    },
    "view_finder": {
        "view": _VIEW,
        "finder": "finder name",
        "formal_runs": "view find runs with a non-empty scoring set (compile-pass artifacts)",
        "recovery": "exact-match recovery under the view on the audited scoring set (pooled)",
        "full_view_recovery": "the finder's formal_recovery in the full view (finder_calibration)",
        "lift_vs_full_pp": "recovery minus full_view_recovery, percentage points",
        "question_only_accuracy": "the finder's question-only control accuracy",
        "lift_vs_question_only_pp": "recovery minus question_only_accuracy, percentage points",
    },
    "view_rb_effort": {
        "view": _VIEW,
        "effort_panel": _PANEL,
        "builder": "builder name",
        "R_b": "conditional total-byte inspection effort under the view (paper eq. 4, computed "
        "as in rb_effort from the view's all-correct cells); null when no cell contributes",
        "cells": "|C_b| under the view: finder-task cells with a defined all-correct cost",
        "total_cells": "finder-task cells in the panel",
        "full_view_R_b": "the builder's R_b in the full view (rb_effort, total_bytes)",
        "full_view_cells": "|C_b| in the full view",
    },
    "view_recovery_gate": {
        "view": _VIEW,
        "effort_panel": _PANEL,
        "builder": "builder name",
        "task": "task id",
        "G_task": "task-level recovery gate under the view (paper eq. 5-6, as in recovery_gate)",
        "contributing_cells": "finders with implemented-gold evidence for this builder and task",
        "total_cells": "finders in the effort panel",
        "full_view_G_task": "the same cell's G_task in the full view",
    },
    "view_files": {
        "view": _VIEW,
        "task": "task id",
        "builder": "builder name",
        "build_trial": "build trial index",
        "kept_files": "files the finder's clone held under the view",
        "hidden_files": "files of the artifact the view hid (build outputs not counted)",
        "kept": "the kept files' relative paths, '; '-separated",
    },
}
