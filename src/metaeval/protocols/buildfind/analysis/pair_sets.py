"""Which builder-finder pairs each table reads: one run, two readings (issue 39).

The paper runs every finder on every builder (Table 5: 41 artifacts x 12 finders x 3 trials =
1,476 find runs; Figure 5: "the full 12-agent matrix") and then reads the per-panel metrics on
effort-matched pairs only (Sec. 4.5: "high- and low-effort panels are computed separately").
So a table reads one of two pair sets:

* **all pairs** (pooled): every formal pair the run has, whatever the finder's effort. Table 1
  and 13 (`calibration`), Table 2 and 14 (`repeatability`), Table 8 (`finder_calibration`),
  Table 11 and Figure 2 (`coverage`), Figure 5 and Table 15 (`affinity_matrix`), Table 17
  (`token_usage`), Figure 3 (`robustness_pivots`), Table 4 (`low_prior_accuracy`), the
  evidence-audit sample (Appendix I draws from the compile-pass panel, not a panel of it) and
  every table derived from those.
* **panel pairs** (per panel): the pairs of the effort panels (`analysis.panels`): with
  ``panels: matched`` a builder's own-effort finders only. Figure 1 (`rb_effort`,
  `cell_costs`), Table 3 (`recovery_gate`), Table 9 (`aels`), Figure 4 (`kendall_tau`), the
  per-panel affinity (`affinity`), and their low-prior and implementation-signal analogues
  (Figures 6-8, Table 16).

A run that ran only matched pairs (``find_pairs: matched``) has no other pairs to pool: its
pooled tables are then **partial** (they read the matched pairs of the grid only), and the
`table_pairs` table and the warnings say so. Releases made before this split read every
table on the panel pairs (`LEGACY`); `verify-release` recomputes such a release that way.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

Reading = Literal["split", "panel"]
SPLIT: Reading = "split"  # pooled tables over all pairs, per-panel tables over panel pairs
LEGACY: Reading = "panel"  # before issue 39: every table over the panel pairs
TABLE = "table_pairs"

ALL_PAIRS = "all pairs"
PANEL_PAIRS = "panel pairs"

PANEL_TABLES = frozenset(
    {
        "recovery_gate",
        "paper_table3",
        "cell_costs",
        "rb_effort",
        "aels",
        "kendall_tau",
        "affinity",
        "affinity_family",
        "low_prior_rb_effort",
        *(
            f"{subset}_{view}"
            for subset in ("low_prior", "implementation_signal")
            for view in ("recovery_gate", "kendall_tau", "affinity", "affinity_family")
        ),
    }
)
"""The per-panel tables; every other analysis table pools all pairs. `bootstrap_ci` is
both: its R_b rows per panel, its recovery rows pooled."""
MIXED_TABLES = frozenset({"bootstrap_ci"})
UNPAIRED_TABLES = frozenset({"effort_panels", TABLE, "failed_cells", "relaxed_probe"})
"""Tables about the pairs or cells themselves, not read over a pair set."""
VIEW_PREFIX = "view_"  # restricted-view tables: their own layer (`views.evidence.view_tables`)

SCHEMA = {
    "table": pl.String,
    "pairs": pl.String,
    "effort_pairs": pl.String,
    "partial": pl.Boolean,
    "note": pl.String,
}


def pair_set(name: str) -> str:
    """The pair set a table reads (`ALL_PAIRS` or `PANEL_PAIRS`, both for `bootstrap_ci`)."""
    if name in MIXED_TABLES:
        return f"{PANEL_PAIRS} (R_b rows), {ALL_PAIRS} (recovery rows)"
    return PANEL_PAIRS if name in PANEL_TABLES else ALL_PAIRS


def pair_set_doc(name: str) -> str | None:
    """The sentence the table docs print about a table's pairs (None for unpaired tables)."""
    if name in UNPAIRED_TABLES or name.startswith(VIEW_PREFIX):
        return None
    if name in MIXED_TABLES:
        return (
            "Pairs: R_b rows read the effort panels' pairs (matched: a builder's own-effort "
            "finders); recovery rows pool every formal pair of the run."
        )
    if name in PANEL_TABLES:
        return (
            "Pairs: per panel, the effort panels' pairs only (matched: a builder's own-effort "
            "finders, the paper's n/6 panels; cross: each effort pair its own panel)."
        )
    return (
        "Pairs: pooled over every formal pair of the run, every finder on every builder (the "
        "paper's full grid); partial when the run ran matched pairs only (see table_pairs)."
    )


def missing_effort_pairs(panel_table: pl.DataFrame) -> list[tuple[str, str]]:
    """(builder effort, finder effort) pairs of the grid the run has no formal row of: every
    configured builder effort x finder effort seen, minus those present."""
    known = panel_table.filter(
        pl.col("finder_effort").is_not_null() & (pl.col("finder_effort") != "default")
    )
    present = set(known.select("builder_effort", "finder_effort").iter_rows())
    builders = sorted({b for b, _ in present})
    finders = sorted({f for _, f in present})
    return [(b, f) for b in builders for f in finders if (b, f) not in present]


def partial_note(panel_table: pl.DataFrame, find_pairs: str | None) -> str | None:
    """Why the pooled tables are partial, or None when they read the full grid."""
    missing = missing_effort_pairs(panel_table)
    if not missing:
        return None
    pairs = ", ".join(f"{b}/{f}" for b, f in missing)
    why = "find_pairs: matched" if find_pairs == "matched" else "no formal rows"
    return (
        f"pooled tables are partial: the run has no {pairs} builder/finder effort pair(s) "
        f"({why}), so they pool the pairs it ran, not the full grid"
    )


def table_pairs(
    names: list[str], panel_table: pl.DataFrame, find_pairs: str | None
) -> pl.DataFrame:
    """One row per table: the pair set it reads, the effort pairs in it, whether it is
    partial (a pooled table of a run without the full grid) and why."""
    analysed = panel_table.filter(pl.col("analysed"))
    every = _effort_pairs(panel_table)
    panel = _effort_pairs(analysed)
    note = partial_note(panel_table, find_pairs)
    rows = []
    for name in sorted(set(names) - UNPAIRED_TABLES):
        pooled = name not in PANEL_TABLES
        rows.append(
            {
                "table": name,
                "pairs": pair_set(name),
                "effort_pairs": every if pooled else panel,
                "partial": pooled and note is not None,
                "note": note if pooled else None,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def _effort_pairs(panel_table: pl.DataFrame) -> str:
    pairs = panel_table.select(
        pl.col("builder_effort").fill_null("?"), pl.col("finder_effort").fill_null("?")
    ).iter_rows()
    return ", ".join(f"{b}/{f}" for b, f in sorted(set(pairs)))
