"""Every build-and-find table at once, from the rows table (and builder tokens if known)."""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis import core, extras
from metaeval.protocols.buildfind.analysis.panels import DEFAULT_PANELS, form_panels

EVIDENCE_AUDIT_SEED = extras.EVIDENCE_AUDIT_SEED
EVIDENCE_AUDIT_PER_STRATUM = extras.EVIDENCE_AUDIT_PER_STRATUM


def run_analysis(
    rows: pl.DataFrame, builds: pl.DataFrame | None = None, panels: str = DEFAULT_PANELS
) -> dict[str, pl.DataFrame]:
    """Core metrics (Eqs. 1-8, Tables 1-3, 9, 11) plus Kendall tau, affinity, subsets,
    finder calibration, token usage and the evidence-audit sample.

    `panels` (matched or cross, see `analysis.panels`) forms the effort panels first; the
    `effort_panels` table lists them. String columns may be String, Categorical or Enum (the
    extras work on the categorical codes and return String-keyed tables either way)."""
    paneled, panel_table = form_panels(rows, panels)
    rows = paneled.collect()
    tables = dict(core.analyze(rows))
    tables["effort_panels"] = panel_table
    tables.update(
        extras.analyze_extras(
            rows, builds, seed=EVIDENCE_AUDIT_SEED, per_stratum=EVIDENCE_AUDIT_PER_STRATUM
        )
    )
    return tables
