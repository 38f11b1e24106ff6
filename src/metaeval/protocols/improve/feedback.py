"""What a meta-agent learns from earlier trials (AIE Bench Section 3.3, "logs for diagnosing
failures"), and the per-task logs the bundle keeps so failures can be diagnosed afterwards.

Each trial's input holds the active parent's per-task results on the optimize split (task,
status, reward, reason), the reasons earlier trials were invalid, and excerpts of the test
logs and the target's transcripts of the parent's failed optimize tasks: redacted, each
capped at `LOG_EXCERPT_BYTES` / `TRACE_EXCERPT_BYTES` (its tail, where test frameworks print
their verdict) with the raw and delivered sizes recorded.
The same files are kept in the bundle (`trials/NNN/feedback/`) and written into the
worktree's `.aie_bench_recursive/feedback/` for the meta-agent.

Held-out results never enter any of this: the paper reserves the held-out view "strictly for
validation and never exposed to the agent". Packets carry only the gate's state (passed,
failed, ...), which the decision already implies, never a held-out score or task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from metaeval.protocols.improve.records import NodeEval, SuiteSummary, SuiteView
from metaeval.records import redact, redact_text
from metaeval.tasks.safe_files import read_regular

if TYPE_CHECKING:
    from metaeval.protocols.improve.bundle import BundleFiles
    from metaeval.protocols.improve.suite_eval import SuiteResult

LOG_EXCERPT_BYTES = 6000
"""Bytes of one failed task's test log a meta-agent receives (the log's tail)."""
TRACE_EXCERPT_BYTES = 6000
"""Bytes of one failed task's target transcript a meta-agent receives (its tail)."""
MAX_LOGS = 20
"""Failed tasks whose test logs one trial's input carries."""
MAX_KEPT_LOG_BYTES = 1024 * 1024
"""Bytes of one task's test log or trace the bundle keeps."""


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:80] or "task"


def keep_task_logs(
    files: BundleFiles, bundle: Path, result: SuiteResult, summary: SuiteSummary, log_dir: Path
) -> None:
    """Write each task's test log and target trace (redacted, capped) under `log_dir` and
    point the summary's task rows at them (paths relative to the bundle)."""
    rows = {row.task_id: row for row in summary.tasks}
    for outcome in result.outcomes:
        row = rows.get(outcome.task_id)
        if row is None:
            continue
        name = _safe(outcome.task_id)
        if outcome.test_log:
            raw = outcome.test_log.encode("utf-8", errors="replace")
            path = log_dir / f"{name}.test.log"
            files.text(path, raw[-MAX_KEPT_LOG_BYTES:].decode("utf-8", errors="replace"))
            row.test_log = path.relative_to(bundle).as_posix()
            row.test_log_bytes = len(raw)
        if outcome.trace:
            path = log_dir / f"{name}.trace.json"
            text = json.dumps(redact(outcome.trace), indent=1, default=str)
            files.text(path, text[-MAX_KEPT_LOG_BYTES:])
            row.trace = path.relative_to(bundle).as_posix()
            row.trace_bytes = len(text.encode("utf-8"))


def meta_error(node: NodeEval | None) -> str | None:
    """A node's error as a meta-agent may see it: an evaluation-framework failure names only
    the optimize tasks the harness could not run (the held-out ones stay hidden)."""
    if node is None or node.error is None:
        return None
    if node.held_out is None:
        return node.error
    optimize = node.optimize or SuiteSummary()
    if node.status == "framework_failure":
        unrun = [f"{t.task_id}: {t.reason}" for t in optimize.rows("infra_error")]
        text = "evaluation-framework failure (not comparable, not promoted)"
        return text + ("; optimize tasks not run: " + "; ".join(unrun)[:2000] if unrun else "")
    if node.status == "broken" and not optimize.rows("target_error"):
        # its reason and log tail are a held-out task's
        return "the candidate failed to serve (on no optimize task)"
    return node.error


class Excerpt(BaseModel):
    """The tail of one failed task's kept file, as a meta-agent receives it."""

    task_id: str
    file: str  # where it is under the trial's `feedback/`
    raw_bytes: int
    delivered_bytes: int
    excerpt: str


def _excerpts(
    bundle: Path, kept: list[tuple[str, str, int | None]], folder: str, suffix: str, cap: int
) -> tuple[list[Excerpt], dict[str, str]]:
    """The last `cap` bytes (redacted) of each kept bundle file (task id, path, raw size),
    with raw and delivered sizes, and the texts by path under `feedback/`."""
    items: list[Excerpt] = []
    texts: dict[str, str] = {}
    for task_id, rel_path, raw_bytes in kept[:MAX_LOGS]:
        try:
            raw = read_regular(bundle / rel_path, bundle, max_bytes=MAX_KEPT_LOG_BYTES)
        except (OSError, ValueError):  # UnsafeFileError is an OSError
            continue
        data = redact_text(raw.decode("utf-8", errors="replace")).encode("utf-8")
        excerpt = data[-cap:].decode("utf-8", errors="ignore")
        rel = f"{folder}/{_safe(task_id)}{suffix}"
        texts[rel] = excerpt
        items.append(
            Excerpt(
                task_id=task_id,
                file=f"feedback/{rel}",
                raw_bytes=int(raw_bytes or len(raw)),
                delivered_bytes=len(excerpt.encode("utf-8")),
                excerpt=excerpt,
            )
        )
    return items, texts


class ParentResults(BaseModel):
    """The parent's optimize results and its failed tasks' log and transcript tails: what
    the next trial's meta-agent learns (`parent_results.json`)."""

    parent_id: str
    optimize: SuiteView | None
    failed_task_logs: list[Excerpt]
    failed_task_transcripts: list[Excerpt]
    log_excerpt_bytes: int = LOG_EXCERPT_BYTES
    transcript_excerpt_bytes: int = TRACE_EXCERPT_BYTES


def parent_results(
    bundle: Path, parent_id: str, optimize: SuiteSummary | None
) -> tuple[ParentResults, dict[str, str]]:
    """The parent's optimize results and, for its failed tasks, the tails of their test logs
    and of the target's transcripts for the next trial; and those texts by path under
    `feedback/`."""
    failed = [t for t in (optimize.tasks if optimize else []) if t.status != "passed"]
    logs, texts = _excerpts(
        bundle,
        [(t.task_id, t.test_log, t.test_log_bytes) for t in failed if t.test_log],
        "logs",
        ".log",
        LOG_EXCERPT_BYTES,
    )
    traces, trace_texts = _excerpts(
        bundle,
        [(t.task_id, t.trace, t.trace_bytes) for t in failed if t.trace],
        "transcripts",
        ".json",
        TRACE_EXCERPT_BYTES,
    )
    results = ParentResults(
        parent_id=parent_id,
        optimize=SuiteView.of(optimize),
        failed_task_logs=logs,
        failed_task_transcripts=traces,
    )
    return results, {**texts, **trace_texts}


def write_feedback(
    files: BundleFiles,
    trial_dir: Path,
    context: Path,
    results: ParentResults,
    texts: dict[str, str],
) -> None:
    """Keep the parent's results and log excerpts in the bundle (`trials/NNN/feedback/`)
    and give them to the meta-agent (`.aie_bench_recursive/feedback/`)."""
    text = json.dumps(redact(results.model_dump()), indent=2, sort_keys=True) + "\n"
    files.text(trial_dir / "feedback" / "parent_results.json", text)
    (context / "feedback").mkdir(parents=True, exist_ok=True)
    (context / "feedback" / "parent_results.json").write_text(text)
    for rel, excerpt in texts.items():
        files.text(trial_dir / "feedback" / rel, excerpt)
        (context / "feedback" / rel).parent.mkdir(parents=True, exist_ok=True)
        (context / "feedback" / rel).write_text(excerpt)
