"""The question rows of a build-and-find run (one row per slice, build, find run and
question), filtered and paginated on the server: a run of 10,000 rows sends one page."""

from __future__ import annotations

from typing import Any

from metaeval.view import buildfind_pages
from metaeval.view.runs import Run

PAGE_SIZE = 200
FILTERS = ("slice", "task", "builder", "finder", "label", "correct")
SHOWN = (
    "slice", "task", "builder", "build_trial", "finder", "find_trial", "question_id", "gold",
    "answer", "correct", "label", "novel_retrieval_bytes", "novel_tool_call_bytes",
)  # fmt: skip
LINK_KEY = ("slice", "task", "builder", "build_trial", "finder", "find_trial")


def question_rows(run: Run, params: dict[str, str], page_size: int = PAGE_SIZE) -> dict[str, Any]:
    """One page of the run's question rows matching the filters, with the choices of each
    filter and, per row, the query of its find run's transcript page."""
    import polars as pl

    rows, source = buildfind_pages._rows(run)
    choices = {
        name: sorted({str(v) for v in rows.get_column(name).unique().to_list() if v is not None})
        for name in FILTERS
        if name != "correct" and name in rows.columns
    }
    choices["correct"] = ["true", "false"]
    chosen = {k: params.get(k, "") for k in FILTERS}
    for name, value in chosen.items():
        if not value or name not in rows.columns:
            continue
        if name == "correct":
            rows = rows.filter(pl.col("correct") == (value == "true"))
        else:
            rows = rows.filter(pl.col(name).cast(pl.Utf8) == value)
    total = rows.height
    pages = max(1, -(-total // page_size))
    try:
        page = min(pages, max(1, int(params.get("page") or 1)))
    except ValueError:
        page = 1
    shown = [c for c in SHOWN if c in rows.columns]
    items = rows.slice((page - 1) * page_size, page_size).select(shown).to_dicts()
    for item in items:
        item["find"] = {k: "" if item.get(k) is None else item.get(k) for k in LINK_KEY}
    return {
        "source": source,
        "total": total,
        "page": page,
        "pages": pages,
        "columns": shown,
        "items": items,
        "choices": choices,
        "params": chosen,
    }
