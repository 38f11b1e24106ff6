"""Every build-and-find table at once, from the rows table (and builder tokens if known).

`analyze` derives the core metrics (Eqs. 1-8) from one pass of each of the two row
aggregations of `core`; `analyze_extras` derives the extras from `prepared.Prepared`.
"""

from __future__ import annotations

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis import accuracy, calibration, core, coverage, effort
from metaeval.protocols.buildfind.analysis.affinity import (
    affinity_from,
    affinity_matrix_from,
    family_from,
)
from metaeval.protocols.buildfind.analysis.bootstrap import bootstrap_ci, bootstrap_seed
from metaeval.protocols.buildfind.analysis.core import lazy
from metaeval.protocols.buildfind.analysis.core_finders import core_finders_from
from metaeval.protocols.buildfind.analysis.effort_accuracy import effort_accuracy_from
from metaeval.protocols.buildfind.analysis.evidence_audit import (
    EVIDENCE_AUDIT_PER_STRATUM,
    EVIDENCE_AUDIT_SEED,
    evidence_audit_rule_from,
    evidence_audit_sample_from,
)
from metaeval.protocols.buildfind.analysis.finder_calibration import finder_calibration_from
from metaeval.protocols.buildfind.analysis.pair_sets import (
    PANEL_TABLES,
    SPLIT,
    Reading,
    table_pairs,
)
from metaeval.protocols.buildfind.analysis.pair_sets import TABLE as PAIRS_TABLE
from metaeval.protocols.buildfind.analysis.panels import DEFAULT_PANELS, form_panels
from metaeval.protocols.buildfind.analysis.paper_tables import builder_labels, paper_tables
from metaeval.protocols.buildfind.analysis.prepared import Prepared
from metaeval.protocols.buildfind.analysis.ranking import kendall_from
from metaeval.protocols.buildfind.analysis.robustness import robustness_from
from metaeval.protocols.buildfind.analysis.subsets import subset_views_from
from metaeval.protocols.buildfind.analysis.tokens import token_usage_from
from metaeval.protocols.buildfind.artifact.relaxed_probe import TABLE as RELAXED_TABLE
from metaeval.protocols.buildfind.artifact.relaxed_probe import relaxed_probe_table
from metaeval.protocols.buildfind.seeds import DEFAULT_SEED0


def run_analysis(
    rows: pl.DataFrame,
    builds: pl.DataFrame | None = None,
    panels: str = DEFAULT_PANELS,
    seed0: int = DEFAULT_SEED0,
    *,
    reading: Reading = SPLIT,
    find_pairs: str | None = None,
) -> dict[str, pl.DataFrame]:
    """Core metrics (Eqs. 1-8, Tables 1-3, 9, 11) plus Kendall tau, affinity, subsets,
    finder calibration and the core-finder selector (Appendix E), token usage, the
    evidence-audit sample and (with `builds`) the relaxed compile probe's Table 10.

    `panels` (matched or cross, see `analysis.panels`) forms the effort panels first; the
    `effort_panels` table lists them. With the default `reading` ("split", see
    `analysis.pair_sets`) the pooled tables read every formal pair of the run and the
    per-panel tables the panels' pairs, and `table_pairs` says which table reads which (and
    whether a pooled table is partial; `find_pairs` is the run's setting, None when unknown);
    "panel" reads every table on the panels' pairs, as releases made before the split did.
    String columns may be String, Categorical or Enum (the extras work on the categorical
    codes and return String-keyed tables either way). `seed0` (the run's) seeds the bootstrap
    intervals of `bootstrap_ci`."""
    paneled, panel_table = form_panels(rows, panels)
    labels = builder_labels(rows)  # from the builders' own efforts, before panels form
    panel_rows = paneled.collect()
    dropped = panel_table.filter(~pl.col("analysed")).height > 0
    if reading == SPLIT and dropped:
        whole = lazy(rows).collect()
        tables = _tables(whole, builds, None)
        per_panel = _tables(panel_rows, builds, None, agreement_of=whole)
        tables.update({k: v for k, v in per_panel.items() if k in PANEL_TABLES})
        tables["bootstrap_ci"] = bootstrap_ci(whole, seed=bootstrap_seed(seed0), rb_rows=panel_rows)
    else:
        tables = _tables(panel_rows, builds, seed0)
    tables["effort_panels"] = panel_table
    tables.update(paper_tables(tables, labels))
    tables["core_finders"] = core_finders_from(
        tables["finder_calibration"], tables["kendall_tau"], tables["affinity_matrix"]
    )
    if builds is not None and {"status", "compile_pass"} <= set(builds.columns):
        tables[RELAXED_TABLE] = relaxed_probe_table(builds)
    if reading == SPLIT:
        tables[PAIRS_TABLE] = table_pairs(list(tables), panel_table, find_pairs)
    return tables


def _tables(
    rows: pl.DataFrame,
    builds: pl.DataFrame | None,
    seed0: int | None,
    agreement_of: pl.DataFrame | None = None,
) -> dict[str, pl.DataFrame]:
    """Every table over one set of rows (`agreement_of`: the rows whose question agreement
    defines the low-prior and implementation-signal subsets, `rows` when None; `seed0` None:
    no bootstrap, the caller draws it once over both sets)."""
    tables = dict(analyze(rows))
    if seed0 is not None:
        tables["bootstrap_ci"] = bootstrap_ci(rows, seed=bootstrap_seed(seed0))
    tables.update(
        analyze_extras(
            rows,
            builds,
            seed=EVIDENCE_AUDIT_SEED,
            per_stratum=EVIDENCE_AUDIT_PER_STRATUM,
            agreement_of=agreement_of,
        )
    )
    return tables


def analyze(
    rows: core.Frame,
    *,
    eta: float = 0.1,
    reliable_threshold: float = 0.9,
    agreement: str = "all_correct",
) -> dict[str, pl.DataFrame]:
    """Every analysis table from one pass of each of the two row aggregations.

    Returns {"run_accuracy", "calibration", "repeatability", "recovery_gate", "cell_costs",
    "rb_effort", "aels", "coverage"}; "cell_costs" and "rb_effort" hold the three metrics of
    `METRICS` stacked (their `metric` column tells them apart). Each table equals what the
    matching public function returns for the same arguments.
    """
    rows = core.keyed(rows).collect()  # cast the string keys once for both aggregations
    runs = core.run_table(rows)
    groups = core.question_groups(rows)
    costs = [effort.cell_costs_from(runs, m).collect().lazy() for m in core.METRICS]
    rb = [effort.rb_effort_from(c, m) for c, m in zip(costs, core.METRICS, strict=True)]
    return {
        "run_accuracy": accuracy.run_accuracy_from(runs),
        "calibration": calibration.calibration_from(runs),
        "repeatability": calibration.repeatability_from(groups, reliable_threshold, agreement),
        "recovery_gate": accuracy.recovery_gate_from(runs),
        "cell_costs": core.finish(pl.concat(costs), ["metric", *core.CELL_KEYS]),
        "rb_effort": core.finish(pl.concat(rb), ["metric", "effort_panel", "builder"]),
        "aels": effort.aels_from(runs, groups, rb[0], eta, agreement),
        "coverage": coverage.coverage_from(groups),
    }


def analyze_extras(
    rows: pl.DataFrame,
    builds: pl.DataFrame | None = None,
    *,
    seed: int = EVIDENCE_AUDIT_SEED,
    per_stratum: int = EVIDENCE_AUDIT_PER_STRATUM,
    agreement_of: pl.DataFrame | None = None,
) -> dict[str, pl.DataFrame]:
    """Every extra table with its default options, from two shared aggregations of the rows.

    Equal to calling `kendall_tau`, `affinity`, `affinity_family`, `affinity_matrix`,
    `affinity_matrix_family`, `question_agreement`,
    `finder_calibration`, `token_usage` (with ``builds``), `subset_views`,
    `evidence_audit_sample` and `evidence_audit_rule` (with ``seed``, ``per_stratum``) and
    `robustness_pivots` one by
    one (and `effort_accuracy`), but the question rows are aggregated once (per run, and per (artifact, finder, question)) and every table is
    derived from those. String columns may be String, Categorical or Enum; outputs are keyed
    by String columns either way.

    Returns a dict with keys kendall_tau, affinity, affinity_family, affinity_matrix,
    affinity_matrix_family, question_agreement,
    finder_calibration, token_usage, every `subset_views` key, evidence_audit_sample,
    evidence_audit_rule,
    robustness_pivots and effort_accuracy. `agreement_of` (rows) defines the question
    subsets instead of `rows` (the per-panel reading takes them from every pair).
    """
    if per_stratum < 0:
        raise ConfigError("per_stratum must be >= 0", field="per_stratum")
    prep = Prepared(rows, True, None if agreement_of is None else Prepared(agreement_of, True))
    runs = prep.run_view()
    pairs = affinity_from(runs, "recovery")
    matrix = affinity_matrix_from(runs, "recovery")
    tables = {
        "kendall_tau": kendall_from(runs),
        "affinity": pairs,
        "affinity_family": family_from(pairs),
        "affinity_matrix": matrix,
        "affinity_matrix_family": family_from(matrix),
        "question_agreement": prep.agreement,
        "finder_calibration": finder_calibration_from(prep),
        "token_usage": token_usage_from(prep, builds, False),
    }
    tables.update(subset_views_from(prep))
    tables["evidence_audit_sample"] = evidence_audit_sample_from(prep, seed, per_stratum)
    tables["evidence_audit_rule"] = evidence_audit_rule_from(prep, seed, per_stratum)
    tables["robustness_pivots"] = robustness_from(prep)
    tables["effort_accuracy"] = effort_accuracy_from(prep)
    return tables
