"""How a static check states a finding: evidence lines, the finding itself, small wording helpers."""

from __future__ import annotations

from collections.abc import Iterable

from metaeval.protocols.audit.findings import (
    SUBCATEGORIES,
    Claim,
    Evidence,
    Finding,
    FindingType,
    Severity,
)
from metaeval.protocols.audit.static.task_context import TaskContext

STATIC_SOURCE = "static"
ABSENCE_UNSEEN = (
    "what the task's image holds and what runs before this step; an execution of the oracle "
    "in the task's image (`--pull missing`) would show it"
)


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
    claim: Claim = "intrinsic",
) -> Finding:
    """A finding from the static protocol; the category follows from the subcategory.

    `claim` says what the finding asserts: `intrinsic`, a fact of the task's files
    (`self-contained`), or `absence`, something missing at run time, which is `assumed`
    until a run in the task's image shows it (the tier rule keeps it at Low). `unseen` says
    what the check could not see (an image it could not inspect): an intrinsic finding with
    it is `assumed` too. The reason is in `tier_reason`; what a check names as unseen also
    ends the description."""
    if unseen:
        description = f"{description.rstrip()} Not seen: {unseen.rstrip('.')}."
    if claim == "absence" or unseen:
        seen = (unseen or ABSENCE_UNSEEN).rstrip(".")
        reason = f"{claim} claim; not seen: {seen}"
    else:
        reason = "intrinsic claim, decided from the task's files"
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
        evidence_tier="assumed" if unseen or claim == "absence" else "self-contained",
        claim=claim,
        tier_reason=reason,
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
