"""What the improve pages show, from the bundle through the protocol's own readers: the ledger
(plain records, every layer), `bundle.lineage` (nodes with parents from the ledger's
`parent_id`), drawn by the report's own lineage chart (`charts.lineage_svg`), and
`report.trial_views` (decision, reason, scores, evidence, diff)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from markupsafe import Markup

from metaeval.protocols.improve.bundle import lineage
from metaeval.protocols.improve.charts import Link, lineage_svg
from metaeval.protocols.improve.loop import BASELINE_EVAL, LEDGER_NAME, NodeEval
from metaeval.protocols.improve.report import trial_views
from metaeval.protocols.improve.search.summary import search_items
from metaeval.protocols.improve.summary_records import RunSummary
from metaeval.tasks.safe_files import read_head
from metaeval.view.runs import Run

MAX_TRACE_BYTES = 4 << 20


def ledger(run: Run) -> list[dict[str, Any]]:
    return [
        e
        for e in run.reader.read_all(LEDGER_NAME)
        if isinstance(e.get("trial"), int) and isinstance(e.get("candidate_id"), str)
    ]


def baseline(run: Run) -> NodeEval:
    data = run.json_file(BASELINE_EVAL) or {}
    try:
        return NodeEval(**data) if data else NodeEval(status="not evaluated yet")
    except (TypeError, ValueError):  # ValidationError is a ValueError
        return NodeEval(status="unreadable", error=f"{BASELINE_EVAL} is not a baseline evaluation")


def nodes(run: Run, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    resolved = run.json_file("resolved_manifest.json") or {}
    found = resolved.get("baseline")
    base: dict[str, Any] = found if isinstance(found, dict) else {}
    plan = SimpleNamespace(
        baseline_id=str(base.get("id") or "baseline"), baseline_commit=base.get("base_commit")
    )
    return lineage(plan, baseline(run), entries)  # type: ignore[arg-type]


def budget(run: Run) -> int | None:
    resolved = run.json_file("resolved_manifest.json") or {}
    value = resolved.get("trial_budget")
    return value if isinstance(value, int) else None


def status(run: Run, entries: list[dict[str, Any]]) -> str:
    planned = budget(run)
    if run.in_use():
        return f"running ({len(entries)} of {planned if planned is not None else '?'} trials)"
    if planned is not None and len(entries) < planned:
        return f"resumable ({len(entries)} of {planned} trials done)"
    return f"complete ({len(entries)} trials)"


def short_headline(run: Run) -> str:
    summary = (run.json_file("lineage_summary.json") or {}).get("summary") or {}
    final = summary.get("final") or {}
    entries = ledger(run)
    promoted = sum(1 for e in entries if e.get("decision") == "promoted")
    text = f"{len(entries)} trials, {promoted} promoted"
    if isinstance(final.get("optimize_score"), int | float):
        text += f"; final {final.get('id')}: optimize {final['optimize_score']:.3f}"
        if isinstance(final.get("gain_optimize"), int | float):
            text += f" ({final['gain_optimize']:+.3f})"
    return text


def trial_link(run: Run) -> Link:
    """A lineage node -> its trial's page (the baseline has none)."""

    def link(node: dict[str, Any]) -> str | None:
        if node.get("decision") == "baseline":
            return None
        return f"/run/{run.id}/trial/{node['id'].rsplit('-', 1)[-1]}"

    return link


def _search_items(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The search section of a bundle's summary (none when the summary is unreadable)."""
    try:
        return search_items(RunSummary.model_validate(summary)) if summary else []
    except ValueError:  # ValidationError: a summary this version did not write
        return []


def overview(run: Run) -> dict[str, Any]:
    entries = ledger(run)
    items = nodes(run, entries)
    base = baseline(run)
    summary = (run.json_file("lineage_summary.json") or {}).get("summary") or {}
    return {
        "entries": entries,
        "nodes": items,
        "trials": trial_views(run.path, entries, base),
        "baseline": base,
        "summary": summary,
        "search": _search_items(summary),
        "status": status(run, entries),
        "svg": Markup(lineage_svg(items, trial_link(run))),
    }


def _text_file(run: Run, rel: str) -> tuple[str | None, str]:
    path = run.path / rel
    if not path.exists():
        return None, "not written"
    try:
        data, longer = read_head(
            path, run.path, max_bytes=MAX_TRACE_BYTES, follow_inside_links=False
        )
    except OSError as exc:
        return None, f"not read: {exc}"
    return data.decode("utf-8", "replace"), ("cut at 4 MiB" if longer else "")


def trial_page(run: Run, number: int) -> dict[str, Any] | None:
    entries = ledger(run)
    entry = next((e for e in entries if e["trial"] == number), None)
    if entry is None:
        return None
    view = next(v for v in trial_views(run.path, [entry], baseline(run)))
    folder = f"trials/{number:03d}"
    trace_text, trace_problem = _text_file(run, f"{folder}/optimizer_trace.jsonl")
    trace = []
    for line in (trace_text or "").splitlines():
        try:
            step = json.loads(line)
        except json.JSONDecodeError:
            step = {"unparsable line": line}
        trace.append(step if isinstance(step, dict) else {"value": step})
    evaluation = run.json_file(f"{folder}/artifacts/candidates/evaluation.json") or {}
    base_eval = baseline(run)
    tasks = []
    for suite in ("optimize", "held_out"):
        base_suite = base_eval.suite(suite)
        base_tasks = {t.task_id: t.model_dump() for t in (base_suite.tasks if base_suite else [])}
        for task in (evaluation.get(suite) or {}).get("tasks") or []:
            if isinstance(task, dict):
                tasks.append(
                    {
                        "suite": suite,
                        "t": task,
                        "base": base_tasks.get(str(task.get("task_id")), {}),
                    }
                )
    return {
        "entry": entry,
        "view": view,
        "selection": run.json_file(f"{folder}/selection_decision.json"),
        "boundary": run.json_file(f"{folder}/artifacts/boundary_verdict.json"),
        "output": run.json_file(f"{folder}/optimizer_output.json"),
        "instruction": _text_file(run, f"{folder}/optimizer_instruction.md"),
        "trace": trace,
        "trace_problem": trace_problem,
        "tasks": tasks,
    }


def scores(run: Run) -> dict[str, dict[str, Any]]:
    """Per node id: decision and scores (for diffs)."""
    return {
        n["id"]: {
            "decision": n.get("decision"),
            "optimize": n.get("optimize_score"),
            "held_out": n.get("held_out_score"),
            "parent": n.get("parent"),
        }
        for n in nodes(run, ledger(run))
    }


TASK_FILES = {"test_log": "test log", "trace": "target transcript"}


def task_file(run: Run, number: int, suite: str, task_id: str, kind: str) -> dict[str, Any] | None:
    """A candidate's per-task test log or target transcript, as the bundle keeps it (the path
    its evaluation records, which must lie in the trial's own folder); None when not kept."""
    if kind not in TASK_FILES or suite not in ("optimize", "held_out"):
        return None
    folder = f"trials/{number:03d}"
    evaluation = run.json_file(f"{folder}/artifacts/candidates/evaluation.json") or {}
    rows = (evaluation.get(suite) or {}).get("tasks") or []
    row = next((t for t in rows if isinstance(t, dict) and t.get("task_id") == task_id), None)
    rel = (row or {}).get(kind)
    if not isinstance(rel, str) or not rel.startswith(folder + "/") or ".." in rel.split("/"):
        return None
    text, problem = _text_file(run, rel)
    steps: list[Any] = []
    if kind == "trace" and text:
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = None
        steps = parsed if isinstance(parsed, list) else []
    return {
        "number": number,
        "suite": suite,
        "task_id": task_id,
        "kind": TASK_FILES[kind],
        "path": rel,
        "size": (row or {}).get(f"{kind}_bytes"),
        "text": text,
        "problem": problem,
        "steps": steps,
        "row": row,
    }


def task_rewards(run: Run) -> dict[tuple[str, str, str], Any]:
    """(node id, suite, task id) -> reward, for the baseline and every trial's candidate."""
    out: dict[tuple[str, str, str], Any] = {}
    sources: list[tuple[str, dict[str, Any]]] = [("baseline", baseline(run).model_dump())]
    for entry in ledger(run):
        folder = f"trials/{entry['trial']:03d}/artifacts/candidates/evaluation.json"
        sources.append((str(entry["candidate_id"]), run.json_file(folder) or {}))
    for node, evaluation in sources:
        for suite in ("optimize", "held_out"):
            block = evaluation.get(suite)
            for task in (block or {}).get("tasks") or [] if isinstance(block, dict) else []:
                if isinstance(task, dict) and isinstance(task.get("task_id"), str):
                    out[(node, suite, task["task_id"])] = task.get("reward")
    return out
