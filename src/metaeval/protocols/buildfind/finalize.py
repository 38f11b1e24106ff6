"""After the find phase: rows table, implementation labels, analysis, tables and report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.pair_sets import SPLIT, Reading
from metaeval.protocols.buildfind.analysis.pair_sets import TABLE as PAIRS_TABLE
from metaeval.protocols.buildfind.analysis.panels import DEFAULT_PANELS, panel_notes
from metaeval.protocols.buildfind.failures import TABLE as FAILED_TABLE
from metaeval.protocols.buildfind.failures import failed_cells, failure_counts
from metaeval.protocols.buildfind.report.headline import HEADLINE, headline, reference_finders
from metaeval.protocols.buildfind.rows.extract import builds_table, rows_from_records
from metaeval.protocols.buildfind.rows.table import read_rows, write_rows
from metaeval.protocols.buildfind.tables.files import csv_unescaped, write_csv, write_parquet
from metaeval.protocols.buildfind.views.evidence import view_layer
from metaeval.records import RunDir

RUN_COLUMNS = ["slice", "task", "builder", "build_trial", "finder", "find_trial"]
LABELS_DIR = "labels"
REVIEW_CSV = "review.csv"
PRELABELS = "prelabels.parquet"


def label_rows(run: RunDir, rows: pl.DataFrame, base_finders: list[str]) -> pl.DataFrame:
    """Consensus prelabels from base finders, a review CSV for the rest, merged with provenance.

    An existing review CSV (possibly filled in by a person) is never overwritten; its filled
    labels are applied. A new review CSV is written only when none exists yet.
    """
    from metaeval.protocols.buildfind.labels import (
        apply_labels,
        consensus_prelabels,
        review_queue,
    )
    from metaeval.protocols.buildfind.review_csv import read_review_csv, write_review_csv

    labels_dir = run.path / LABELS_DIR
    prelabels = consensus_prelabels(rows, base_finders) if base_finders else None
    if prelabels is not None:
        write_parquet(prelabels, labels_dir / PRELABELS, run.path)
    review_path = labels_dir / REVIEW_CSV
    reviewed = read_review_csv(review_path) if review_path.is_file() else None
    if reviewed is None:
        queue = review_queue(rows, prelabels, _question_texts(run))
        write_review_csv(queue, review_path, run.path)
    return apply_labels(rows, prelabels, reviewed)


def _question_texts(run: RunDir) -> dict[object, str]:
    """(task, question id) -> question text, from the pack named in the run config."""
    from metaeval.protocols.buildfind.pack.load import load_pack

    pack_path = run.manifest.get("config", {}).get("pack")
    if not pack_path or not Path(pack_path).is_dir():
        return {}
    pack = load_pack(Path(pack_path))
    return {(t.task_id, q.id): q.question for t in pack.tasks.values() for q in t.questions}


def analyze_rows(
    rows: pl.DataFrame,
    builds: pl.DataFrame | None = None,
    panels: str = DEFAULT_PANELS,
    finders: Sequence[Mapping[str, Any]] = (),
    seed0: int | None = None,
    *,
    reading: Reading = SPLIT,
    find_pairs: str | None = None,
) -> dict[str, pl.DataFrame]:
    """Every table of the analysis, from the rows table alone (plus builder tokens if known);
    `panels` is matched (the paper's) or cross (see `analysis.panels`). `finders` (the run
    config's finder entries) keeps every configured finder in finder_calibration; `seed0`
    (the run's; the config default when None) seeds the bootstrap intervals; `reading` and
    `find_pairs` (the run's, None when unknown) say which pairs each table reads
    (`analysis.pair_sets`)."""
    from metaeval.protocols.buildfind.analysis.finder_calibration import with_every_finder
    from metaeval.protocols.buildfind.analysis.suite import run_analysis
    from metaeval.protocols.buildfind.seeds import DEFAULT_SEED0

    seed = DEFAULT_SEED0 if seed0 is None else seed0
    tables = run_analysis(rows, builds, panels, seed, reading=reading, find_pairs=find_pairs)
    tables["finder_calibration"] = with_every_finder(tables["finder_calibration"], finders)
    return tables


def run_find_pairs(config: Mapping[str, Any]) -> str:
    """The run's `find_pairs` from its recorded config; a config written before the option
    existed ran every pair ("all")."""
    return str(config.get("find_pairs", "all"))


def write_outputs(
    tables: dict[str, pl.DataFrame], meta: dict[str, Any], out_dir: Path
) -> list[Path]:
    """tables/ (CSV, Parquet, README) plus report.md and report.html."""
    from metaeval.protocols.buildfind.report.pages import write_report
    from metaeval.protocols.buildfind.tables.write import write_tables

    out_dir.mkdir(parents=True, exist_ok=True)
    warnings = list(meta.get("warnings") or [])
    return [*write_tables(tables, out_dir, warnings), *write_report(tables, meta, out_dir)]


def self_labelled_finders(rows: pl.DataFrame, base_finders: list[str]) -> list[str]:
    """Scored finders whose own answers made the consensus prelabels of their scoring set.

    A consensus prelabel is ``implemented_gold`` exactly when the base finders all answered
    the gold option, so a base finder that is also scored is right by construction on every
    prelabelled question: its audited recovery measures agreement with itself.
    """
    if not base_finders:
        return []
    formal = rows.filter(
        (pl.col("slice") == "formal") & (pl.col("label_source") == "consensus_prelabel")
    )
    scored = set(formal.get_column("finder").unique().to_list())
    return sorted(scored & set(base_finders))


def self_label_warning(finders: list[str]) -> str | None:
    """The warning shown by the CLI, the report and tables/README.md, or None."""
    if not finders:
        return None
    names = ", ".join(finders)
    return (
        f"labels come from the finders being scored: the consensus prelabels were made from the "
        f"answers of {names}, which {'is' if len(finders) == 1 else 'are'} also scored, so "
        f"formal recovery is correct by construction on every prelabelled question. Use "
        f"independent base_finders or fill labels/{REVIEW_CSV} by hand."
    )


def mark_self_labelled(tables: dict[str, pl.DataFrame], finders: list[str]) -> None:
    """finder_calibration gets `labels_from_self`: the finder's answers made its labels."""
    table = tables.get("finder_calibration")
    if table is not None:
        tables["finder_calibration"] = table.with_columns(
            labels_from_self=pl.col("finder").cast(pl.Utf8).is_in(finders)
        )


def finalize_run(run: RunDir) -> dict[str, Any]:
    """Rows, labels, analysis and report for a run directory; returns a summary."""
    config = dict(run.manifest.get("config", {}))
    # a later evidence layer may have other settings (`--new-layer`): its own apply
    layer: dict[str, Any] = next(
        (e for e in reversed(run.layers) if e.get("name") == run.layer), {}
    )
    config.update(layer.get("settings") or {})
    base_finders = list(config.get("base_finders", []))
    rows = rows_from_records(run)
    rows = label_rows(run, rows, base_finders)
    write_rows(rows, run.path)
    builds = builds_table(run)
    panels = config.get("panels", DEFAULT_PANELS)
    tables = analyze_rows(
        rows,
        builds,
        panels,
        config.get("finders", []),
        config.get("seed0"),
        find_pairs=run_find_pairs(config),
    )
    # restricted views: their own rows and tables
    tables.update(view_layer(run, rows, tables, config.get("panels", DEFAULT_PANELS)))
    self_labelled = self_labelled_finders(rows, base_finders)
    mark_self_labelled(tables, self_labelled)
    references = reference_finders(config)
    scored_finders = [f["name"] for f in config.get("finders", []) if f["name"] not in references]
    left_out = references if scored_finders else []  # a reference-only run keeps its numbers
    figures = headline(tables, left_out)
    warning = self_label_warning(self_labelled)
    warnings = ([warning] if warning else []) + panel_notes(
        tables.get("effort_panels"), tables.get(PAIRS_TABLE)
    )
    if left_out:
        warnings.append(
            f"reference finder(s) {', '.join(left_out)} (right by construction) are left out "
            "of the headline figures; their rows stay in every table"
        )
    meta = {
        "run_id": run.path.name,
        "pack": config.get("pack"),
        "builders": [b["name"] for b in config.get("builders", [])],
        "finders": [f["name"] for f in config.get("finders", [])],
        "r_build": config.get("r_build"),
        "r_find": config.get("r_find"),
        "rows": rows.height,
        **{HEADLINE[key][1]: value for key, value in figures.items()},
        "panels": config.get("panels", DEFAULT_PANELS),
        "find_pairs": run_find_pairs(config),
        "warnings": warnings,
        "headline_left_out": left_out,  # report.headline.LEFT_OUT_KEY
    }
    tables.update(evidence_audit(run, tables.get("evidence_audit_sample")))
    failed = failed_cells(run)
    tables[FAILED_TABLE] = failed
    meta["failed_cells"] = failure_counts(failed)
    paths = write_outputs(tables, meta, run.path)
    report_only = {"headline_left_out", *(name for _, name in HEADLINE.values())}
    summary = {
        **{k: v for k, v in meta.items() if k not in report_only},
        **figures,
        "failed_cell_reasons": failed.to_dicts(),
        "builds": builds.height,
        "compile_failed": builds.filter(pl.col("compile_pass").not_()).height,
        "find_runs": rows.select(RUN_COLUMNS).unique().height,
        "self_labelled_finders": self_labelled,
        "unlabeled_review_rows": unlabeled_review_rows(run.path),
        "outputs": [str(p.relative_to(run.path)) for p in paths],
    }
    run.write_summary(summary)
    return summary


def unlabeled_review_rows(run_path: Path) -> int | None:
    """Rows of labels/review.csv whose label is still empty (None without a review CSV)."""
    path = run_path / LABELS_DIR / REVIEW_CSV
    if not path.is_file():
        return None
    import csv

    with path.open(newline="", encoding="utf-8") as handle:
        return sum(1 for row in csv.DictReader(handle) if not (row.get("label") or "").strip())


EVIDENCE_AUDIT_CSV = "evidence_audit.csv"


def evidence_audit(run: RunDir, sample: pl.DataFrame | None) -> dict[str, pl.DataFrame]:
    """Write the stratified evidence-audit sample for labelling, with each answer's cited
    evidence from the find records; once a person has filled `evidence_label`, summarize it
    (Table 12). A filled file is never overwritten."""
    from metaeval.protocols.buildfind.analysis.evidence_audit import evidence_audit_summary

    path = run.path / LABELS_DIR / EVIDENCE_AUDIT_CSV
    if not path.is_file():
        if sample is None or sample.height == 0:
            return {}
        _write_evidence_sample(run, sample, path)
    # The summary is always read back from the file, so the run that writes the sample and
    # every later run report the same table (a finished run is a fixed point).
    try:
        labelled = csv_unescaped(pl.read_csv(path, infer_schema_length=0, encoding="utf8"))
        if "evidence_label" in labelled.columns:
            labelled = labelled.with_columns(pl.col("evidence_label").fill_null(""))
        return {"evidence_audit_summary": evidence_audit_summary(labelled)}
    except ConfigError as exc:
        raise ConfigError(str(exc), file=str(path)) from exc
    except pl.exceptions.PolarsError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ConfigError(f"malformed CSV: {first}", file=str(path)) from exc


def _write_evidence_sample(run: RunDir, sample: pl.DataFrame, path: Path) -> None:
    from metaeval.protocols.buildfind.records import FINDS, FindRecord, final_finds

    finds = final_finds(run.read(FINDS))
    evidence = []
    for row in sample.iter_rows(named=True):
        record = finds.get(
            (
                "formal",
                row["task"],
                row["builder"],
                row["build_trial"],
                row["finder"],
                row["find_trial"],
            )
        )
        answers = record.answers if isinstance(record, FindRecord) else {}
        answer = answers.get(row["question_id"])
        evidence.append(
            {
                "evidence_files": _joined(answer.evidence_files if answer else None),
                "evidence_symbols": _joined(answer.evidence_symbols if answer else None),
                "rationale": str((answer.rationale if answer else None) or ""),
            }
        )
    joined = pl.concat(
        [
            sample,
            pl.DataFrame(
                evidence,
                schema={
                    "evidence_files": pl.Utf8,
                    "evidence_symbols": pl.Utf8,
                    "rationale": pl.Utf8,
                },
            ),
        ],
        how="horizontal",
    )
    write_csv(joined, path, run.path)


def _joined(values: Any) -> str:
    """A record's list of cited files or symbols as one CSV cell ("a; b")."""
    return "; ".join(map(str, values or []))


def analyze_rows_file(
    path: Path,
    out_dir: Path,
    view_rows: Path | None = None,
    panels: str = DEFAULT_PANELS,
    seed0: int | None = None,
) -> list[Path]:
    """`analyze --rows FILE`: every published number recomputed from released rows (and the
    per-view tables from released view rows, when given), with matched or cross panels;
    `seed0` seeds the bootstrap intervals (the config default when None)."""
    from metaeval.protocols.buildfind.views.evidence import read_view_rows, view_tables

    rows = read_rows(path)
    tables = analyze_rows(rows, None, panels, seed0=seed0)
    if view_rows is not None:
        tables.update(view_tables(rows, read_view_rows(view_rows), tables, panels))
    meta = {
        "run_id": path.stem,
        "pack": None,
        "rows": rows.height,
        "source": str(path),
        "panels": panels,
        "warnings": panel_notes(tables.get("effort_panels"), tables.get(PAIRS_TABLE)),
        **{HEADLINE[key][1]: value for key, value in headline(tables).items()},
    }
    return write_outputs(tables, meta, out_dir)


def run_and_finalize(config: Any, run_dir: Path, new_layer: str | None = None) -> tuple[dict, dict]:
    """Build and find (resuming), then rows, labels, analysis and report: (counts, summary)."""
    from metaeval.protocols.buildfind.run import BuildFindRun

    bf = BuildFindRun(config, run_dir, new_layer=new_layer)
    counts = bf.run()
    run = bf.open()
    try:
        return counts, finalize_run(run)
    finally:
        run.close()
