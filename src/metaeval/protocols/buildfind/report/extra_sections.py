"""Report sections beyond the table dump: one per restricted view, and the claim-evidence map.

Each section is a title, an introduction and blocks of (caption, table); `pages.py` renders
them in Markdown and in the HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from metaeval.protocols.buildfind.analysis.paper_tables import (
    AGREEMENT,
    ONE_TRIAL,
    agreement_name,
)
from metaeval.protocols.buildfind.report.claims import claims, claims_table


@dataclass
class Section:
    """One report section: anchor id, title, intro text and (caption, table) blocks."""

    id: str
    title: str
    intro: str
    blocks: list[tuple[str, pl.DataFrame]] = field(default_factory=list)


def _of(df: pl.DataFrame | None, view: str) -> pl.DataFrame | None:
    if df is None or "view" not in df.columns:
        return None
    return df.filter(pl.col("view") == view).drop("view")


def view_sections(tables: dict[str, pl.DataFrame]) -> list[Section]:
    """One section per restricted view found in the view tables."""
    accuracy = tables.get("view_accuracy")
    if accuracy is None or accuracy.height == 0:
        return []
    sections = []
    for view in sorted(set(accuracy.get_column("view").to_list())):
        files = _of(tables.get("view_files"), view)
        if files is not None and files.height:
            kept, hidden = files["kept_files"].sum(), files["hidden_files"].sum()
            seen = f"Over {files.height} artifact(s) the view kept {kept} file(s) and hid {hidden}."
        else:
            seen = "No per-artifact file counts were recorded."
        intro = (
            f"Finders saw only the files the view '{view}' kept of each artifact. These runs are "
            "a separate evidence layer: they are not part of any full-view table above. "
            + seen
            + " Accuracy uses the full-view audit labels and the compile-pass panel; lifts are "
            "percentage points over the full view and over the question-only control."
        )
        blocks = []
        for caption, name in (
            (
                "Pooled recovery against the full view and the question-only control",
                "view_accuracy",
            ),
            ("Per finder", "view_finder"),
            (
                "Conditional inspection effort R_b (total bytes) beside the full view",
                "view_rb_effort",
            ),
            ("Task-level recovery gate", "view_recovery_gate"),
            ("Files kept and hidden per artifact", "view_files"),
        ):
            part = _of(tables.get(name), view)
            if part is not None:
                blocks.append((caption, part))
        sections.append(Section(f"view-{view}", f"Restricted view: {view}", intro, blocks))
    return sections


def claims_section(tables: dict[str, pl.DataFrame], r_find: int | None = None) -> Section:
    """The claim-evidence map: each headline figure with its table cell, rows and command.
    The trial agreement claim is named for the run's `r_find`, and n/a with one trial."""
    intro = (
        "Each headline figure, the table cell that holds it, the question rows it is computed "
        "from and the command that recomputes the table from the released rows. Its figures "
        "are over every finder (reference finders included, as in Table 1) and pooled over "
        "every formal pair unless the source table is per panel (R_b). Every other number in "
        "this report is a cell of a table printed below in full; "
        "`metaeval buildfind verify-release` recomputes all of them."
    )
    table = claims_table(claims(tables))
    if r_find is not None:
        agreement = pl.col("claim") == "repeatability.formal"
        figure = pl.col("figure").str.replace(AGREEMENT, agreement_name(r_find), literal=True)
        if r_find == 1:
            figure = figure + " (" + ONE_TRIAL + ")"
        table = table.with_columns(figure=pl.when(agreement).then(figure).otherwise("figure"))
        if r_find == 1:
            table = table.with_columns(value=pl.when(agreement).then(None).otherwise("value"))
    return Section("claims", "Claim-evidence map", intro, [("", table)])


def extra_sections(tables: dict[str, pl.DataFrame], r_find: int | None = None) -> list[Section]:
    """Per-view sections, then the claim-evidence map."""
    return [*view_sections(tables), claims_section(tables, r_find)]
