"""What the build-and-find pages show: the builder x finder grid (recovery from the
protocol's own run table, effort from the records), the paper's tables and figures as the run
wrote them, a cell's find runs, and a transcript step by step with the bytes `compute_effort`
counts."""

from __future__ import annotations

import base64
import csv
import io
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from metaeval.agents.effort import compute_effort
from metaeval.agents.types import TranscriptEvent
from metaeval.errors import MetaevalError
from metaeval.protocols.buildfind.analysis.paper_tables import trial_agreement
from metaeval.protocols.buildfind.records import BUILD_KEY, BUILDS, FIND_KEY, FINDS, logical_view
from metaeval.protocols.buildfind.report.headline import HEADLINE, reference_finders, why_na
from metaeval.protocols.buildfind.tables.docs import TABLE_TITLES
from metaeval.safe_text import csv_value
from metaeval.tasks.safe_files import is_inside, read_regular, walk_tree
from metaeval.view.runs import Run

MAX_STEP_CHARS = 20_000
MAX_TREE_ENTRIES = 2_000
PAPER_TABLES = ("paper_table1", "paper_table2", "paper_table3")
MAX_TABLE_BYTES = 1 << 20
MAX_FIGURE_BYTES = 4 << 20
MAX_FIGURES = 40


def table_csv(run: Run, name: str) -> list[list[str]]:
    """A table the run wrote (`tables/NAME.csv`) as rows of cell values (the CSV formula
    guard taken off again); [] when it is absent, a link or too large."""
    try:
        data = read_regular(
            run.path / "tables" / f"{name}.csv", run.path, max_bytes=MAX_TABLE_BYTES
        )
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    return [[csv_value(cell) for cell in row] for row in csv.reader(io.StringIO(text))]


def find_trials(run: Run) -> int | None:
    """The run's find trials per cell (`r_find`), None when not recorded."""
    value = run.config.get("r_find")
    return value if isinstance(value, int) else None


def paper_tables(run: Run) -> list[dict[str, Any]]:
    """Tables 1-3 in the paper's shape, as the run wrote them (`tables/paper_table*.csv`).
    Table 2's agreement column is named for the run's own find trials, and with one trial
    per cell it says why there is no agreement to show (`paper_tables.trial_agreement`)."""
    trials = find_trials(run)
    found = []
    for name in PAPER_TABLES:
        rows = table_csv(run, name)
        if not rows:
            continue
        header, body, note = trial_agreement(rows[0], rows[1:], trials)
        found.append(
            {
                "name": name,
                "title": TABLE_TITLES.get(name, name),
                "header": header,
                "rows": body,
                "note": note,
            }
        )
    return found


def _failed_finds(run: Run, left_out: Sequence[str]) -> dict[str, Counter[str]]:
    """Per slice, the failed find runs (timeout, error, unparsable) of the finders not
    `left_out`, by kind: they contribute no scored row to any accuracy."""
    out: dict[str, Counter[str]] = {}
    for key, rec in finds(run).items():
        slice_name, finder = str(key[0]), str(key[4])
        if finder in left_out:
            continue
        kind = failure_kind(rec)
        if kind:
            out.setdefault(slice_name, Counter())[kind] += 1
    return out


def headline_cards(run: Run) -> list[dict[str, Any]]:
    """The headline figures, each named for what it includes: over all finders it is Table
    1's accuracy (the calibration table, task "all"); over the scored finders (reference
    finders left out, as the CLI and summary.json report it) it is the summary's value. A
    missing figure says why (no scored run on the slice, and how many failed)."""
    summary = run.summary()
    pooled = {}
    rows = table_csv(run, "calibration")
    if rows:
        head = rows[0]
        for row in rows[1:]:
            record = dict(zip(head, row, strict=False))
            if record.get("task") == "all":
                pooled[record.get("slice", "")] = _number(record.get("accuracy"))
    references = reference_finders(run.config)
    names = [str(f.get("name")) for f in run.config.get("finders", []) if isinstance(f, dict)]
    left_out = references if any(n not in references for n in names) else []
    failed = _failed_finds(run, left_out)
    cards = []
    for key, (calibration_slice, name) in HEADLINE.items():
        record_slice = "formal" if calibration_slice == "compile_pass" else calibration_slice
        kinds = failed.get(record_slice, Counter())
        why = why_na(kinds, scored=True)
        cards.append(
            {
                "name": name,
                "all": pooled.get(calibration_slice),
                "scored": summary.get(key) if left_out else None,
                "left_out": left_out,
                "why": why,
                "failed": sum(kinds.values()),
            }
        )
    return cards


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def figures(run: Run) -> list[dict[str, str]]:
    """The report's figures as the run drew them (`figures/*.png`), inlined as data URIs (a
    PNG cannot carry script; the page's policy allows `data:` images only); links, FIFOs
    and oversized files are left out."""
    folder = run.path / "figures"
    if folder.is_symlink() or not folder.is_dir():
        return []
    shown = []
    for name in sorted(os.listdir(folder))[: MAX_FIGURES * 2]:
        if not name.endswith(".png"):
            continue
        try:
            data = read_regular(
                folder / name, run.path, max_bytes=MAX_FIGURE_BYTES, follow_inside_links=False
            )
        except OSError:
            continue
        if not data.startswith(b"\x89PNG\r\n\x1a\n"):
            continue
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        shown.append({"name": name.removesuffix(".png"), "uri": uri})
    return shown[:MAX_FIGURES]


def finds(run: Run) -> dict[tuple, dict]:
    return logical_view(run.reader.read(FINDS), FIND_KEY)


def builds(run: Run) -> dict[tuple, dict]:
    return logical_view(run.reader.read(BUILDS), BUILD_KEY)


def status(run: Run) -> str:
    if run.in_use():
        return "running"
    summary = run.records / "summary.json"
    records = [run.records / f"{name}.jsonl" for name in (BUILDS, FINDS)]
    newest = max((p.stat().st_mtime for p in records if p.exists()), default=0.0)
    if summary.is_file() and summary.stat().st_mtime >= newest:
        return "complete" if run.kind == "run" else "released"
    return "resumable (no summary after the last records: run the same command again)"


def short_headline(run: Run) -> str:
    s = run.summary()
    parts = []
    for key, name in (
        ("formal_recovery", "formal recovery"),
        ("question_only_accuracy", "question-only"),
        ("spec_only_accuracy", "spec-only"),
    ):
        if isinstance(s.get(key), int | float):
            parts.append(f"{name} {s[key]:.3f}")
    if s.get("builds") is not None:
        parts.append(f"{s.get('builds')} builds, {s.get('find_runs')} find runs")
    return "; ".join(parts) or "no summary yet"


def _rows(run: Run) -> Any:
    """The question rows: the labelled table the run wrote, else rows made from the records
    (unlabelled: every question scored)."""
    from metaeval.protocols.buildfind.rows.extract import rows_from_finds
    from metaeval.protocols.buildfind.rows.table import read_rows

    for path in (run.path / "question_rows.parquet", run.path / "data" / "question_rows.parquet"):
        if path.is_file():
            try:
                return read_rows(path), "labelled rows of " + path.name
            except MetaevalError:
                break
    return rows_from_finds(run.config, builds(run), finds(run)), "records (unlabelled)"


def grid(run: Run) -> dict[str, Any]:
    """Per (builder, finder) on the primary panel (formal slice, compile-pass artifacts):
    recovery = mean audited accuracy over the cell's find runs (the run table of Eq. 1), and
    effort = mean novel retrieval / tool-call bytes per find run."""
    import polars as pl

    from metaeval.protocols.buildfind.analysis.core import primary, run_table

    rows, source = _rows(run)
    config = run.config
    builders = [b.get("name") for b in config.get("builders", []) if isinstance(b, dict)]
    finder_specs = [f for f in config.get("finders", []) if isinstance(f, dict)]
    base = set(config.get("base_finders") or [])
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    if rows.height:
        table = (
            primary(run_table(rows))
            .group_by("builder", "finder")
            .agg(
                recovery=pl.col("accuracy").drop_nulls().mean(),
                runs=pl.len(),
                retrieval=pl.col("novel_retrieval_bytes").mean(),
                tool_call=pl.col("novel_tool_call_bytes").mean(),
            )
            .collect()
        )
        for rec in table.to_dicts():
            cells[(str(rec["builder"]), str(rec["finder"]))] = rec
    finders = [
        {
            "name": f.get("name"),
            "agent": f.get("agent"),
            "reference": str(f.get("agent", "")).startswith("reference"),
            "self_labelled": f.get("name") in base,
        }
        for f in finder_specs
    ]
    failed: dict[tuple[str, str], Counter[str]] = {}
    for key, rec in finds(run).items():
        kind = failure_kind(rec)
        if key[0] == "formal" and kind:
            failed.setdefault((str(key[2]), str(key[4])), Counter())[kind] += 1
    return {
        "builders": builders,
        "finders": finders,
        "cells": cells,
        "failed": {
            k: ", ".join(f"{n} {kind}" for kind, n in sorted(v.items())) for k, v in failed.items()
        },
        "source": source,
    }


def failure_kind(rec: dict[str, Any]) -> str:
    """How a find run failed (timeout, error, unparsable), "" when it was scored."""
    status = rec.get("status")
    if status in ("timeout", "error"):
        return str(status)
    return "unparsable" if rec.get("answers_status") == "unparsable" else ""


def cell_runs(run: Run, builder: str, finder: str) -> list[dict[str, Any]]:
    """The final find records of one builder x finder cell (formal slice), with their key."""
    out = []
    for key, rec in sorted(finds(run).items(), key=lambda kv: str(kv[0])):
        if key[0] == "formal" and key[2] == builder and key[4] == finder:
            out.append({"key": dict(zip(FIND_KEY, key, strict=True)), "rec": rec})
    return out


def find_record(run: Run, params: dict[str, str]) -> dict[str, Any] | None:
    for key, rec in finds(run).items():
        if all(
            str(params.get(k, "")) == str(v if v is not None else "")
            for k, v in zip(FIND_KEY, key, strict=True)
        ):
            return rec
    return None


def shown_letter(canonical: Any, order: Any) -> str | None:
    """The letter the finder saw for a canonical option key, given the run's option order
    for the question (shown letter i is canonical key order[i]); None when unknown."""
    from metaeval.protocols.buildfind.seeds import LETTERS

    if not isinstance(order, list) or canonical not in order or len(order) != len(LETTERS):
        return None
    return LETTERS[order.index(canonical)]


def answer_rows(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """A find record's answers, each with the letters as the finder saw them (options are
    shuffled per run: `permutation`) beside the canonical ones that are scored."""
    answers = rec.get("answers")
    found = rec.get("permutation")
    orders: dict[str, Any] = found if isinstance(found, dict) else {}
    out = []
    for question, given in (answers if isinstance(answers, dict) else {}).items():
        a: dict[str, Any] = given if isinstance(given, dict) else {}
        order = orders.get(question)
        out.append(
            {
                "question": question,
                "answer": a.get("answer"),
                "answer_shown": shown_letter(a.get("answer"), order),
                "gold": a.get("gold"),
                "gold_shown": shown_letter(a.get("gold"), order),
                "correct": a.get("correct"),
                "rationale": a.get("rationale", ""),
            }
        )
    return out


def build_record(run: Run, params: dict[str, str]) -> dict[str, Any] | None:
    for key, rec in builds(run).items():
        if all(str(params.get(k, "")) == str(v) for k, v in zip(BUILD_KEY, key, strict=True)):
            return rec
    return None


def transcript(run: Run, ref: Any) -> dict[str, Any]:
    """The steps of a transcript blob: each event with what `compute_effort` counts for it
    (the growth of the running totals: novel retrieval bytes, novel tool-call bytes)."""
    text, problem = run.reader.blob(ref)
    events: list[TranscriptEvent] = []
    bad = 0
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        try:
            events.append(TranscriptEvent.model_validate_json(line))
        except ValidationError:
            bad += 1
    steps = []
    before = compute_effort([])
    for i, event in enumerate(events):
        after = compute_effort(events[: i + 1])
        shown = event.text[:MAX_STEP_CHARS]
        steps.append(
            {
                "n": i + 1,
                "e": event,
                "text": shown,
                "cut": len(event.text) - len(shown),
                "retrieval": after.novel_retrieval_bytes - before.novel_retrieval_bytes,
                "tool_call": after.novel_tool_call_bytes - before.novel_tool_call_bytes,
            }
        )
        before = after
    return {"steps": steps, "problem": problem, "bad_lines": bad, "total": before}


def artifact_tree(run: Run, build: dict[str, Any]) -> dict[str, Any]:
    """The built repository's file tree (walked without following links out of it)."""
    rel = build.get("artifact")
    if not isinstance(rel, str) or not rel:
        return {"entries": [], "problem": "no artifact recorded"}
    folder = run.path / rel
    if Path(rel).is_absolute() or ".." in Path(rel).parts or not is_inside(run.path, folder):
        return {"entries": [], "problem": "the artifact path leaves the run"}
    if not os.path.isdir(folder):
        return {
            "entries": [],
            "problem": f"{rel} is not on disk (released runs keep it under artifacts/)",
        }
    entries = walk_tree(folder)
    return {
        "entries": entries[:MAX_TREE_ENTRIES],
        "more": max(0, len(entries) - MAX_TREE_ENTRIES),
        "problem": "",
    }


def recovery_by(run: Run) -> dict[str, dict[str, float | None]]:
    """Recovery per builder and per finder (mean over the grid's find runs), for diffs."""
    g = grid(run)
    out: dict[str, dict[str, float | None]] = {}
    for axis, index in (("builder", 0), ("finder", 1)):
        sums: dict[str, list[float]] = {}
        for key, cell in g["cells"].items():
            if cell["recovery"] is not None:
                sums.setdefault(key[index], []).extend([cell["recovery"]] * int(cell["runs"]))
        for name, values in sums.items():
            out[f"{axis} {name}"] = {"recovery": sum(values) / len(values)}
    return out
