"""How a static check states a finding: evidence lines, the finding itself, small wording helpers."""

from __future__ import annotations

from collections.abc import Iterable

from metaeval.protocols.audit.findings import (
    SUBCATEGORIES,
    Evidence,
    Finding,
    FindingType,
    Severity,
)
from metaeval.protocols.audit.static.task_context import TaskContext

STATIC_SOURCE = "static"


def evidence_line(ctx: TaskContext, path: str, line: int) -> Evidence:
    """Evidence for one line of a loaded (or task.toml) file, quoting the line exactly."""
    lines = ctx.lines(path)
    snippet = lines[line - 1] if 0 < line <= len(lines) else ""
    return Evidence(file=path, line_start=line, line_end=line, snippet=snippet)


def make_finding(
    ctx: TaskContext,
    *,
    subcategory: str,
    severity: Severity,
    finding_type: FindingType,
    title: str,
    description: str,
    recommendation: str,
    confidence: float,
    evidence: list[Evidence],
    unseen: str | None = None,
) -> Finding:
    """A finding from the static protocol; the category follows from the subcategory.

    `unseen` says what the check could not see (an image it could not inspect, a path the
    image may hold): the finding is then `assumed` and its description ends with it; else it
    is `self-contained` (provable from the task's files)."""
    if unseen:
        description = f"{description.rstrip()} Not seen: {unseen.rstrip('.')}."
    return Finding(
        task_id=ctx.task.task_id,
        category=SUBCATEGORIES[subcategory],
        subcategory=subcategory,
        severity=severity,
        finding_type=finding_type,
        title=title,
        description=description,
        evidence=evidence,
        recommendation=recommendation,
        confidence=round(confidence, 2),
        source=STATIC_SOURCE,
        protocol="static",
        evidence_tier="assumed" if unseen else "self-contained",
    )


def dedupe_evidence(items: Iterable[Evidence], limit: int = 8) -> list[Evidence]:
    """Drop repeated (file, line) citations, keep the first `limit` in order."""
    seen: set[tuple[str, int | None]] = set()
    out: list[Evidence] = []
    for item in items:
        key = (item.file, item.line_start)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= limit:
            break
    return out


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"
