"""Check a finding's citations against the loaded task files.

`verify_evidence` returns a copy of the finding with `evidence_verified` and
`evidence_problems` filled in, and every cited path replaced by the canonical task-relative
path it resolved to (so "solve.sh" and "./solution/solve.sh" both become "solution/solve.sh",
which lets the ensemble compare citations across models).

Rules, per evidence item:
- the file must be a loaded task file; citations are normalised (backslashes, "./", a leading
  "/", the task id or a container prefix like "/app/") and a unique path-suffix match is
  accepted ("solve.sh" -> "solution/solve.sh"); an ambiguous suffix is a problem;
- files under "logs/" are produced by execution checks, not task files: they verify only when
  `extra_files` provides their text (any other path may be supplied that way too);
- line_start/line_end must be >= 1, start <= end, and within the file (a missing one takes the
  other's value);
- the snippet (whitespace-normalised, line-number prefixes such as "12| " stripped, "..." read
  as a gap) must occur within the cited lines +- 2; if it occurs elsewhere the problem names
  where ("snippet found at lines X-Y, not at the cited lines"); else it was not found at all.
A finding without any evidence is unverified ("no evidence cited"). A finding is verified
when it has evidence and no item has a problem.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.task_view import LoadedTask

SLACK_LINES = 2
LOGS_PREFIX = "logs/"
_CONTAINER_PREFIXES = ("app/", "workspace/", "task/")
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\s*[|:]\s?")
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.+|…)\s*")


def normalize_path(path: str) -> str:
    """A cited path in canonical form: posix separators, no "./", no leading "/"."""
    p = path.strip().strip("`'\"").replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    p = p.lstrip("/")
    return posixpath.normpath(p) if p else p


@dataclass(frozen=True)
class ResolvedFile:
    path: str
    text: str


def resolve_file(
    cited: str, task: LoadedTask, extra_files: dict[str, str] | None = None
) -> tuple[ResolvedFile | None, str | None]:
    """The file a citation names, or (None, problem)."""
    extra = {normalize_path(k): v for k, v in (extra_files or {}).items()}
    norm = normalize_path(cited)
    if not norm or norm == ".":
        return None, "no file named"
    paths = {f.path: f.text for f in task.files}
    if norm.startswith(LOGS_PREFIX) and norm not in paths:
        if norm in extra:
            return ResolvedFile(norm, extra[norm]), None
        return None, f"'{cited}' is not a task file and no text was provided for it"
    candidates = [norm]
    prefix = normalize_path(task.task_id) + "/"
    if norm.startswith(prefix):
        candidates.append(norm[len(prefix) :])
    for container in _CONTAINER_PREFIXES:
        if norm.startswith(container):
            candidates.append(norm[len(container) :])
    for c in candidates:
        if c in paths:
            return ResolvedFile(c, paths[c]), None
        if c in extra:
            return ResolvedFile(c, extra[c]), None
    # A unique suffix match in either direction ("solve.sh" <-> "solution/solve.sh").
    matches = sorted(
        {p for p in paths for c in candidates if p.endswith("/" + c) or c.endswith("/" + p)}
    )
    if len(matches) == 1:
        return ResolvedFile(matches[0], paths[matches[0]]), None
    if len(matches) > 1:
        return None, f"ambiguous file '{cited}': matches {', '.join(matches)}"
    return None, f"file '{cited}' is not among the loaded task files"


def _norm_ws(text: str) -> str:
    return " ".join(text.split())


class _Index:
    """A file's text with whitespace normalised, mapping positions back to line numbers."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        parts: list[str] = []
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            norm = _norm_ws(line)
            self.starts.append(pos)
            if norm:  # blank lines add nothing, so they never create a double space
                parts.append(norm)
                pos += len(norm) + 1  # the joining space
        self.text = " ".join(parts)

    def line_of(self, pos: int) -> int:
        """1-based line containing normalised position `pos`."""
        return max(1, bisect.bisect_right(self.starts, pos))

    def window(self, first: int, last: int) -> tuple[int, int]:
        """Normalised char span [start, end) of lines first..last (1-based, clamped)."""
        first = max(1, first)
        last = min(len(self.lines), last)
        if first > last:
            return 0, 0
        start = self.starts[first - 1]
        end = self.starts[last] - 1 if last < len(self.lines) else len(self.text)
        return start, end

    def find(self, parts: list[str], start: int = 0, end: int | None = None) -> tuple[int, int]:
        """Span of `parts` found in order within [start, end), or (-1, -1)."""
        end = len(self.text) if end is None else end
        pos, first = start, -1
        for part in parts:
            hit = self.text.find(part, pos, end)
            if hit < 0:
                return -1, -1
            if first < 0:
                first = hit
            pos = hit + len(part)
        return first, pos


def _snippet_variants(snippet: str) -> list[list[str]]:
    """Ways to read a snippet: as quoted, and with line-number prefixes stripped; each split
    at ellipses into parts that must occur in order."""
    raw_lines = snippet.splitlines() or [snippet]
    stripped = "\n".join(_LINE_NUMBER_PREFIX.sub("", line) for line in raw_lines)
    variants = []
    for text in dict.fromkeys([snippet, stripped]):
        parts = [_norm_ws(p) for p in _ELLIPSIS.split(text)]
        parts = [p for p in parts if p]
        if parts:
            variants.append(parts)
    return variants


def _check_item(
    ev: Evidence, task: LoadedTask, extra_files: dict[str, str] | None
) -> tuple[Evidence, list[str]]:
    if normalize_path(ev.file) in {normalize_path(m) for m in task.missing_files}:
        # A citation of a file the task lacks verifies the claim "this file is missing";
        # it cannot quote lines, so any line range or snippet is a problem.
        if ev.line_start is None and ev.line_end is None and not ev.snippet.strip():
            return ev, []
        return ev, ["cites lines of a file the task does not have"]
    unread = {normalize_path(s.split(": ", 1)[0]) for s in task.skipped_files}
    if normalize_path(ev.file) in unread:
        # likewise a file that is there but not text (binary, not UTF-8): whole, never lines
        if ev.line_start is None and ev.line_end is None and not ev.snippet.strip():
            return ev, []
        return ev, ["cites lines of a file that is not text"]
    resolved, problem = resolve_file(ev.file, task, extra_files)
    if resolved is None:
        return ev, [problem or f"file '{ev.file}' not found"]
    ev = ev.model_copy(update={"file": resolved.path})
    index = _Index(resolved.text)
    n = len(index.lines)
    problems: list[str] = []

    start, end = ev.line_start, ev.line_end
    if start is None and end is not None:
        start = end
    if end is None and start is not None:
        end = start
    lines_ok = start is not None and end is not None
    if start is not None and end is not None:
        if start < 1 or end < 1:
            problems.append(f"line range {start}-{end} is invalid (lines start at 1)")
            lines_ok = False
        elif start > end:
            problems.append(f"line_start {start} is after line_end {end}")
            lines_ok = False
        elif end > n:
            problems.append(f"lines {start}-{end} are beyond the end of the file ({n} lines)")
            lines_ok = False

    variants = _snippet_variants(ev.snippet) if ev.snippet.strip() else []
    if not variants:
        return ev, problems

    if lines_ok:
        assert start is not None and end is not None
        lo, hi = index.window(start - SLACK_LINES, end + SLACK_LINES)
        if any(index.find(parts, lo, hi)[0] >= 0 for parts in variants):
            return ev, problems
    elif start is None and any(index.find(parts)[0] >= 0 for parts in variants):
        return ev, problems  # no lines cited: the snippet may be anywhere in the file

    for parts in variants:
        first, last = index.find(parts)
        if first >= 0:
            a, b = index.line_of(first), index.line_of(max(first, last - 1))
            problems.append(f"snippet found at lines {a}-{b}, not at the cited lines")
            return ev, problems
    problems.append(f"snippet not found in {resolved.path}")
    return ev, problems


def verify_evidence(
    finding: Finding, task: LoadedTask, extra_files: dict[str, str] | None = None
) -> Finding:
    """A copy of `finding` with evidence_verified, evidence_problems and canonical paths."""
    if not finding.evidence:
        return finding.model_copy(
            update={"evidence_verified": False, "evidence_problems": ["no evidence cited"]}
        )
    checked: list[Evidence] = []
    problems: list[str] = []
    for i, ev in enumerate(finding.evidence):
        new, item_problems = _check_item(ev, task, extra_files)
        checked.append(new)
        problems.extend(f"evidence[{i}] {ev.file}: {p}" for p in item_problems)
    return finding.model_copy(
        update={
            "evidence": checked,
            "evidence_verified": not problems,
            "evidence_problems": problems,
        }
    )


def verify_all(
    findings: list[Finding], task: LoadedTask, extra_files: dict[str, str] | None = None
) -> list[Finding]:
    """`verify_evidence` for every finding of one task."""
    return [verify_evidence(f, task, extra_files) for f in findings]
