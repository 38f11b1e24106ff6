"""Build-and-find report: Markdown and one self-contained HTML page.

The Markdown report has a run summary and every table. The HTML page adds the figures of
`figures` (SVG inlined into the page). The page
loads nothing from elsewhere: CSS is inline, the SVG carries no external references, and all
table text is HTML-escaped by jinja2's autoescape.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import polars as pl
from markupsafe import Markup

from metaeval.protocols.buildfind.analysis.pair_sets import pair_set_doc
from metaeval.protocols.buildfind.analysis.paper_tables import trial_agreement
from metaeval.protocols.buildfind.report.extra_sections import Section, extra_sections
from metaeval.protocols.buildfind.report.figures import (
    NA,
    Files,
    affinity_figure,
    kendall_figure,
    rb_figure,
)
from metaeval.protocols.buildfind.report.figures_effort import effort_accuracy_entry
from metaeval.protocols.buildfind.report.figures_paper import db_figure, robustness_figure
from metaeval.protocols.buildfind.report.headline import (
    HEADLINE,
    LEFT_OUT_KEY,
    headline_figures,
    headline_intro,
    headline_table,
)
from metaeval.protocols.buildfind.tables.docs import (
    TABLE_DOCS,
    TABLE_TITLES,
    column_doc,
    table_order,
)
from metaeval.records.durable import atomic_write
from metaeval.report.html import page_template, shared_css
from metaeval.report.markdown import markdown_table, md_document, md_text

TEMPLATE_PACKAGE = "metaeval.protocols.buildfind.report"
FIGURES_DIR = "figures"  # the report's figures as files: <figure id>.svg and .png
HTML_TEMPLATE = "templates/report.html.j2"

CONTROL_BUILD = "– (control)"
"""A control find's build_trial on the page: the rows hold -1 (no artifact is read)."""

# meta key -> label in the summary, in display order; other keys follow under their own name
SUMMARY_FIELDS = {
    "run_id": "Run",
    "pack": "Task pack",
    "builders": "Builders",
    "finders": "Finders",
    "trials": "Trials",
    "rows": "Question rows",
}


# ---------------------------------------------------------------------------------------------
# values


def fmt_value(value: Any) -> str:
    """Cell text: floats to 3 places, null and NaN as 'n/a'."""
    if value is None:
        return NA
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return NA
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_value(v) for v in value) + "]"
    return str(value)


def _meta_text(value: Any) -> str:
    if value is None:
        return NA
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_meta_text(v)}" for k, v in value.items()) or NA
    if isinstance(value, (list, tuple, set)):
        items = sorted(value, key=str) if isinstance(value, set) else list(value)
        return f"{', '.join(str(v) for v in items)} ({len(items)})" if items else NA
    return fmt_value(value)


def summary_items(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs for the run summary: known fields first, then any other key.

    ``trials`` may be given directly or as ``r_build`` / ``r_find`` (trial counts per cell).
    """
    meta = dict(meta)
    if "trials" not in meta and ("r_build" in meta or "r_find" in meta):
        meta["trials"] = {"build": meta.pop("r_build", None), "find": meta.pop("r_find", None)}
    meta.pop("warnings", None)  # shown on their own, above the summary
    for key in (LEFT_OUT_KEY, *(name for _, name in HEADLINE.values())):
        meta.pop(key, None)  # the headline section shows these, naming what they include
    items = [(label, _meta_text(meta.get(key))) for key, label in SUMMARY_FIELDS.items()]
    items += [(str(k), _meta_text(v)) for k, v in meta.items() if k not in SUMMARY_FIELDS]
    return items


def _is_numeric(dtype: pl.DataType) -> bool:
    return dtype.is_numeric()


def _r_find(meta: dict[str, Any]) -> int | None:
    value = meta.get("r_find")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shown_table(
    name: str, df: pl.DataFrame, meta: dict[str, Any]
) -> tuple[list[str], list[list[str]], str]:
    """A table's (header, text rows, note) as the report prints it: Table 2's agreement
    column named for the run's find trials (`paper_tables.trial_agreement`); a control's
    build trial (-1 in the rows: it reads no artifact) as a dash that says so."""
    rows = [
        [
            CONTROL_BUILD if c == "build_trial" and v == -1 else fmt_value(v)
            for c, v in zip(df.columns, row, strict=True)
        ]
        for row in df.iter_rows()
    ]
    if name == "paper_table2":
        return trial_agreement(list(df.columns), rows, _r_find(meta))
    return list(df.columns), rows, ""


def table_scope(name: str, meta: dict[str, Any]) -> str:
    """What a table's rows include: its pair set (`pair_sets.pair_set_doc`) and, when the
    headline leaves reference finders out, that this table keeps them."""
    parts = [pair_set_doc(name) or ""]
    left_out = list(meta.get(LEFT_OUT_KEY) or [])
    if left_out and parts[0]:
        parts.append(
            f"Every finder's rows, the reference finder(s) {', '.join(left_out)} included "
            "(the headline's scored-finder column leaves them out)."
        )
    return " ".join(p for p in parts if p)


def headline_section(tables: dict[str, pl.DataFrame], meta: dict[str, Any]) -> Section:
    """The headline figures (`headline`), over all finders and over scored ones."""
    left_out = list(meta.get(LEFT_OUT_KEY) or [])
    figures = headline_figures(tables, left_out)
    return Section(
        "headline",
        "Headline",
        headline_intro(left_out),
        [("", headline_table(figures, left_out))],
    )


# ---------------------------------------------------------------------------------------------
# Markdown


def _md_text(text: str) -> str:
    return md_text(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(tables: dict[str, pl.DataFrame], meta: dict[str, Any]) -> str:
    """The Markdown report: run summary, then each table (floats to 3 places, nulls 'n/a')."""
    title = "Build-and-find report"
    out = [f"# {title}", ""]
    out += [f"> **Warning:** {_md_text(w)}\n" for w in meta.get("warnings") or []]
    out += ["## Summary", ""]
    out += [f"- **{label}**: {_md_text(text)}" for label, text in summary_items(meta)]
    out += [
        "",
        "Figures (R_b bars, affinity heatmap, Kendall tau heatmaps) are in `report.html`.",
        "",
    ]
    out += _markdown_sections([headline_section(tables, meta)])
    out += _markdown_sections(extra_sections(tables, _r_find(meta)))
    out += ["## Tables", ""]
    if not tables:
        out += ["No tables.", ""]
    for name in table_order(set(tables)):
        df = tables[name]
        out += [f"### {name}", ""]
        if name in TABLE_TITLES:
            out += [TABLE_TITLES[name], ""]
        if scope := table_scope(name, meta):
            out += [_md_text(scope), ""]
        if df.height == 0:
            columns = ", ".join(f"`{c}`" for c in df.columns) or "none"
            out += [f"_No rows._ Columns: {columns}.", ""]
            continue
        header, rows, note = shown_table(name, df, meta)
        out += [markdown_table(header, rows)]
        if note:
            out += [_md_text(note), ""]
    return md_document("\n".join(out).rstrip() + "\n")


def _markdown_sections(sections: list[Section]) -> list[str]:
    """Report sections (headline, per-view sections, the claim-evidence map) in Markdown."""
    out = []
    for section in sections:
        out += [f"## {section.title}", "", section.intro, ""]
        for caption, df in section.blocks:
            if caption:
                out += [f"**{caption}**", ""]
            rows = [[fmt_value(v) for v in row] for row in df.iter_rows()]
            out += [markdown_table(df.columns, rows)]
    return out


# ---------------------------------------------------------------------------------------------
# HTML


def _html_tables(tables: dict[str, pl.DataFrame], meta: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name in table_order(set(tables)):
        df = tables[name]
        header, rows, note = shown_table(name, df, meta)
        columns = [
            {
                "name": shown,
                "doc": column_doc(name, c) or "not documented",
                "numeric": _is_numeric(t),
            }
            for shown, (c, t) in zip(header, df.schema.items(), strict=True)
        ]
        out.append(
            {
                "name": name,
                "anchor": f"table-{re.sub(r'[^A-Za-z0-9_-]', '-', name)}",
                "title": TABLE_TITLES.get(name, ""),
                "columns": columns,
                "rows": rows,
                "note": note,
                "scope": table_scope(name, meta),
                "known": name in TABLE_DOCS,
            }
        )
    return out


def render_html(
    tables: dict[str, pl.DataFrame], meta: dict[str, Any], files: Files | None = None
) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no external assets);
    with `files`, each figure is also added to it as SVG and PNG files."""
    template = page_template(TEMPLATE_PACKAGE, HTML_TEMPLATE)
    run_id = meta.get("run_id")
    return template.render(
        shared_css=shared_css(),
        title="Build-and-find report" + (f": {run_id}" if run_id else ""),
        summary=summary_items(meta),
        warnings=list(meta.get("warnings") or []),
        figures=_figures(tables, files),
        tables=_html_tables(tables, meta),
        headline=_html_sections([headline_section(tables, meta)], tables)[0],
        sections=_html_sections(extra_sections(tables, _r_find(meta)), tables),
    )


def _figures(tables: dict[str, pl.DataFrame], files: Files | None) -> list[dict[str, Any]]:
    """The report's figures (id, title, caption, inline SVG), in page order."""
    matrix = tables.get("affinity_matrix")
    figures = [
        {
            "id": "fig-rb",
            "title": "Conditional inspection effort R_b by effort panel",
            "caption": "Lower is less inspection effort; each bar is annotated with R_b and the "
            "number of contributing all-correct finder-task cells |C_b| (out of the panel's "
            "cells when known). Builders with no contributing cell show n/a. When the table "
            "stacks several effort metrics, the reported total-byte metric is drawn.",
            "svg": Markup(rb_figure(tables.get("rb_effort"), files)),
        },
        {
            "id": "fig-affinity",
            "title": "Builder-finder affinity residuals",
            "caption": "Recovery residual after removing builder and finder means: one matrix "
            "over every agent and effort as in the paper (affinity_matrix; the per-panel "
            "centring is the affinity table). Red is above marginal recovery, blue below; grey "
            "cells have no data.",
            "svg": Markup(
                affinity_figure(matrix if matrix is not None else tables.get("affinity"), files)
            ),
        },
        {
            "id": "fig-db",
            "title": "Implementation-aware downstream recovery D_b (paper Figure 2)",
            "caption": "Filled markers: D_b, downstream recovery on audited rows times "
            "builder-side implementation coverage (eq. 8); open markers: coverage alone. The "
            "axis is truncated; values are diagnostic, not a leaderboard.",
            "svg": Markup(db_figure(tables.get("coverage"), files)),
        },
        {
            "id": "fig-robustness",
            "title": "Control-conditioned robustness views (paper Figure 3)",
            "caption": "Exact-match recovery (%) over audited scoring rows per builder and per "
            "finder on five slices (robustness_pivots).",
            "svg": Markup(robustness_figure(tables.get("robustness_pivots"), files)),
        },
        {
            "id": "fig-rb-low-prior",
            "title": "R_b on the low-prior questions (paper Figure 6)",
            "caption": "As the R_b figure, with the all-correct gate on the low-prior questions "
            "(question-only agreement below 90%); effort stays whole-run, so these values "
            "upper-bound subset effort (low_prior_rb_effort).",
            "svg": Markup(rb_figure(tables.get("low_prior_rb_effort"), files, "fig-rb-low-prior")),
        },
        {
            "id": "fig-kendall",
            "title": "Kendall tau between finders' builder-effort orderings",
            "caption": "One heatmap per effort panel (rows) and task (columns); the diagonal "
            "is left blank. n/a says why: n=1 when fewer than two builders have an all-correct "
            "cost for both finders, ties when an ordering is all ties.",
            "svg": Markup(kendall_figure(tables.get("kendall_tau"), files)),
        },
    ]
    figures.append(effort_accuracy_entry(tables, files))
    return figures


def _source_link(column: str, value: Any, tables: dict[str, pl.DataFrame]) -> str | None:
    """The claim map's `source` cells ("table.column [...]") link to that table's section."""
    if column != "source" or not isinstance(value, str):
        return None
    table = value.split(".", 1)[0]
    return f"#table-{re.sub(r'[^A-Za-z0-9_-]', '-', table)}" if table in tables else None


def _html_sections(
    sections: list[Section], tables: dict[str, pl.DataFrame]
) -> list[dict[str, Any]]:
    return [
        {
            "id": s.id,
            "title": s.title,
            "intro": s.intro,
            "blocks": [
                {
                    "caption": caption,
                    "columns": [
                        {"name": c, "numeric": _is_numeric(t)} for c, t in df.schema.items()
                    ],
                    "rows": [
                        [
                            {"text": fmt_value(v), "href": _source_link(c, v, tables)}
                            for c, v in zip(df.columns, row, strict=True)
                        ]
                        for row in df.iter_rows()
                    ],
                }
                for caption, df in s.blocks
            ],
        }
        for s in sections
    ]


def render_report(
    tables: dict[str, pl.DataFrame], meta: dict[str, Any], files: Files | None = None
) -> tuple[str, str]:
    """(markdown, html) for the given analysis tables and run metadata; with `files`, the
    figures as SVG and PNG files too."""
    return render_markdown(tables, meta), render_html(tables, meta, files)


def write_report(
    tables: dict[str, pl.DataFrame], meta: dict[str, Any], out_dir: Path
) -> list[Path]:
    """Write report.md, report.html and figures/<figure>.{svg,png} into out_dir; returns the
    paths."""
    files: Files = {}
    markdown, html = render_report(tables, meta, files)
    out_dir.mkdir(parents=True, exist_ok=True)  # the directory the user named
    paths = [out_dir / "report.md", out_dir / "report.html"]
    atomic_write(paths[0], markdown.encode("utf-8"))
    atomic_write(paths[1], html.encode("utf-8"))
    for name, data in sorted(files.items()):  # figures/ made without following a link
        paths.append(out_dir / FIGURES_DIR / name)
        atomic_write(paths[-1], data, root=out_dir, mkdir=True)
    return paths
