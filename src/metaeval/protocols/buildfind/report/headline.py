"""The headline figures: their computation (`headline`, behind summary.json, the CLI and the
viewer) and the report's headline section, each figure over all finders (the calibration cell
that Table 1 and the claim map print) and over the scored finders (reference finders left
out, as the CLI and summary.json quote it), each naming what it includes and why it is n/a.

The all-finder value is the calibration table's cell itself. A figure is n/a when no find run
of the finders it covers scored on its slice; the reason counts their failed cells
(`failures.TABLE`) by kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import polars as pl
from pydantic import BaseModel

from metaeval.protocols.buildfind.analysis.paper_tables import TABLE1_SLICES
from metaeval.protocols.buildfind.failures import TABLE as FAILED_TABLE

HEADLINE = {
    "formal_recovery": ("compile_pass", "formal recovery"),
    "question_only_accuracy": ("question_only", "question-only accuracy"),
    "spec_only_accuracy": ("spec_only", "spec-only accuracy"),
}
"""Summary key -> (calibration-table slice, name shown everywhere). The CLI, the report and
summary.json quote the calibration table's pooled (task "all") accuracy under these names."""


REFERENCE_FINDER_PREFIX = "reference"
"""A finder whose agent starts with this answers from the pack's expected answers: right by
construction, so it is kept out of the headline (its rows stay in every table)."""


def reference_finders(config: dict[str, Any]) -> list[str]:
    """Names of the configured finders whose agent is a reference (scripted) finder."""
    return sorted(
        str(f["name"])
        for f in config.get("finders", [])
        if str(f.get("agent", "")).startswith(REFERENCE_FINDER_PREFIX)
    )


def headline(
    tables: dict[str, pl.DataFrame], left_out: Sequence[str] = ()
) -> dict[str, float | None]:
    """The pooled accuracies of the calibration table, keyed as in `HEADLINE`. When finders
    are `left_out` (reference finders beside scored ones), the same mean of per-run Eq. 1
    accuracy is taken over the other finders' runs of `run_accuracy`."""
    runs = tables.get("run_accuracy")
    if left_out and runs is not None and runs.height:
        scored = runs.filter(~pl.col("finder").is_in(list(left_out)))
        if scored.height:
            return _headline_from_runs(scored)
    calibration = tables.get("calibration")
    out: dict[str, float | None] = {}
    for key, (slice_name, _) in HEADLINE.items():
        value = None
        if calibration is not None and calibration.height:
            hit = calibration.filter((pl.col("slice") == slice_name) & (pl.col("task") == "all"))
            if hit.height:
                value = hit.get_column("accuracy").item()
        out[key] = value
    return out


def _headline_from_runs(runs: pl.DataFrame) -> dict[str, float | None]:
    """Calibration's pooled accuracy (mean per-run accuracy over runs that have one) per
    headline slice, from the run_accuracy table."""
    slices = {
        "compile_pass": (pl.col("slice") == "formal") & pl.col("compile_pass").fill_null(False),
        "question_only": pl.col("slice") == "question_only",
        "spec_only": pl.col("slice") == "spec_only",
    }
    out: dict[str, float | None] = {}
    for key, (slice_name, _) in HEADLINE.items():
        values = runs.filter(slices[slice_name]).get_column("accuracy").drop_nulls()
        out[key] = float(values.sort().cum_sum()[-1] / values.len()) if values.len() else None
    return out


def headline_text(summary: dict[str, Any]) -> str:
    """'formal recovery 1.000, question-only accuracy 0.500, ...' (3 places, as the tables)."""
    parts = []
    for key, (_, name) in HEADLINE.items():
        value = summary.get(key)
        parts.append(f"{name} {'n/a' if value is None else f'{value:.3f}'}")
    return ", ".join(parts)


LEFT_OUT_KEY = "headline_left_out"
"""Report meta key: the reference finders the scored figures leave out ([]: none)."""

PAIRS = "pooled over every formal pair of the run (calibration)"
"""The pair set of every headline figure: the calibration table's (`pair_sets`)."""


class HeadlineFigure(BaseModel):
    """One headline figure as the report prints it."""

    name: str  # as the CLI and summary.json name it
    table1_slice: str  # the Table 1 row holding the all-finder value
    all_finders: float | None  # calibration accuracy, task "all"
    all_why: str | None  # why all_finders is n/a
    scored: float | None  # the reference finders left out (None when none are)
    scored_why: str | None  # why scored is n/a (None when it is not, or none are left out)


def record_slice(calibration_slice: str) -> str:
    """The records' slice a calibration slice is drawn from (compile-pass is formal)."""
    return "formal" if calibration_slice == "compile_pass" else calibration_slice


def why_na(kinds: Counter[str], scored: bool) -> str:
    """'no scored find run on this slice (1 timeout)': why a pooled figure has no value."""
    why = f"no {'scored ' if scored else ''}find run on this slice"
    if kinds:
        why += " (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"
    return why


def failed_finds(
    failed: pl.DataFrame | None, slice_name: str, left_out: Sequence[str] = ()
) -> Counter[str]:
    """Failed find cells on a records slice, by kind, of the finders not `left_out`."""
    if failed is None or failed.height == 0:
        return Counter()
    rows = failed.filter(
        (pl.col("phase") == "find")
        & (pl.col("slice") == slice_name)
        & ~pl.col("finder").is_in(list(left_out))
    )
    return Counter(str(k) for k in rows.get_column("kind").to_list())


def headline_figures(
    tables: dict[str, pl.DataFrame], left_out: Sequence[str]
) -> list[HeadlineFigure]:
    """The headline figures of a set of analysis tables; `left_out` are the reference
    finders the scored figures leave out (none: the scored column is not shown)."""
    every = headline(tables)
    scored = headline(tables, left_out) if left_out else {}
    failed = tables.get(FAILED_TABLE)
    out = []
    for key, (calibration_slice, name) in HEADLINE.items():
        records = record_slice(calibration_slice)
        value = every.get(key)
        mine = scored.get(key) if left_out else None
        out.append(
            HeadlineFigure(
                name=name,
                table1_slice=TABLE1_SLICES[calibration_slice],
                all_finders=value,
                all_why=None if value is not None else why_na(failed_finds(failed, records), False),
                scored=mine,
                scored_why=(
                    why_na(failed_finds(failed, records, left_out), True)
                    if left_out and mine is None
                    else None
                ),
            )
        )
    return out


def headline_table(figures: list[HeadlineFigure], left_out: Sequence[str]) -> pl.DataFrame:
    """The headline as a table of text cells (percentages as Table 1 prints them)."""
    from metaeval.protocols.buildfind.analysis.paper_tables import percent

    def cell(value: float | None, why: str | None) -> str:
        return percent(value) if value is not None else f"n/a: {why}"

    columns = {"figure": [f.name for f in figures]}
    columns["all finders (as Table 1 and the claim map)"] = [
        cell(f.all_finders, f.all_why) for f in figures
    ]
    if left_out:
        columns[f"scored finders ({', '.join(left_out)} left out)"] = [
            cell(f.scored, f.scored_why) for f in figures
        ]
    columns["Table 1 row"] = [f.table1_slice for f in figures]
    return pl.DataFrame(columns, schema=dict.fromkeys(columns, pl.Utf8))


def headline_intro(left_out: Sequence[str]) -> str:
    """What the headline's figures include."""
    text = (
        "Pooled accuracy of each headline slice, task 'all', " + PAIRS + ". The all-finder "
        "column is the calibration cell that Table 1 and the claim map print"
    )
    if left_out:
        names = ", ".join(left_out)
        text += (
            f"; the scored-finder column leaves out the reference finder(s) {names} (right by "
            "construction), as the command line and summary.json report it: the same mean of "
            "per-run accuracy over the other finders' runs (run_accuracy)"
        )
    return text + (
        ". n/a says why: no find run of those finders scored on the slice, and how many of "
        "their cells failed, by kind."
    )
