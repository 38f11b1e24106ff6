"""What the build-and-find pages show: the builder x finder grid (recovery from the
protocol's own run table, effort from the records), a cell's find runs, and a transcript
step by step with the bytes `compute_effort` counts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from metaeval.agents.effort import compute_effort
from metaeval.agents.types import TranscriptEvent
from metaeval.errors import MetaevalError
from metaeval.protocols.buildfind.records import BUILD_KEY, BUILDS, FIND_KEY, FINDS, logical_view
from metaeval.tasks.safe_files import is_inside, walk_tree
from metaeval.view.runs import Run

MAX_STEP_CHARS = 20_000
MAX_TREE_ENTRIES = 2_000


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
    from metaeval.protocols.buildfind.extract import rows_from_finds
    from metaeval.protocols.buildfind.rows import read_rows

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
    return {"builders": builders, "finders": finders, "cells": cells, "source": source}


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
