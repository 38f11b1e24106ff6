"""Check 8: files of the task that lead outside it, and special files.

- **Symlinks leaving the task** (`task.outside_links`: a file or directory whose link target
  resolves outside the task directory) -> one ENV-PATH finding, High, Bug, 0.9. The target
  exists only on the author's machine (or not at all), so the task ships without the file and
  breaks everywhere else; metaeval never reads, copies, binds or runs such a target, so the
  task is audited and executed without it. The finding names the links and their link text,
  never the content behind them.
- **FIFOs, sockets and device files** (`task.special_files`) -> one ENV-PATH finding, Low,
  Warning, 0.7: they cannot be packaged or copied into an image, and metaeval never opens
  them.
"""

from __future__ import annotations

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.static.finding_builder import make_finding, plural
from metaeval.protocols.audit.static.task_context import TaskContext

LISTED = 20


def _listing(entries: list[str]) -> str:
    shown = [f"`{entry}`" for entry in entries[:LISTED]]
    if len(entries) > LISTED:
        shown.append(f"and {len(entries) - LISTED} more")
    return ", ".join(shown)


def _evidence(entries: list[str], separator: str) -> list[Evidence]:
    return [Evidence(file=entry.split(separator, 1)[0].rstrip("/")) for entry in entries[:8]]


def check_links(ctx: TaskContext) -> list[Finding]:
    findings: list[Finding] = []
    outside = ctx.task.outside_links
    if outside:
        findings.append(
            make_finding(
                ctx,
                subcategory="ENV-PATH",
                severity="High",
                finding_type="Bug",
                title=f"The task has {plural(len(outside), 'symlink')} leading outside itself",
                description=(
                    f"{_listing(outside)} point outside the task directory. The targets are "
                    "not part of the task, so on any other machine the files are missing (or "
                    "are someone else's files), and the task behaves differently from what its "
                    "author tested. metaeval did not read, copy or run them."
                ),
                recommendation=(
                    "Replace each link with the file itself (or a link to a file inside the "
                    "task), and ship every file the task needs inside its directory."
                ),
                confidence=0.9,
                evidence=_evidence(outside, " -> "),
            )
        )
    special = ctx.task.special_files
    if special:
        findings.append(
            make_finding(
                ctx,
                subcategory="ENV-PATH",
                severity="Low",
                finding_type="Warning",
                title=f"The task contains {plural(len(special), 'special file')}",
                description=(
                    f"{_listing(special)} are FIFOs, sockets or device files. They cannot be "
                    "stored in an archive or copied into an image, so the task differs between "
                    "machines; metaeval did not open them."
                ),
                recommendation="Remove them from the task directory.",
                confidence=0.7,
                evidence=_evidence(special, " ("),
            )
        )
    return findings
