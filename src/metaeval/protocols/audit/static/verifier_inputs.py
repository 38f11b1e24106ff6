"""Where the oracle and the verifier get their inputs, against Harbor's order and rights.

Harbor runs a trial in two phases: the agent phase (an agent, or the oracle running
`solution/solve.sh`) and then the verifier phase, for which alone it uploads `tests/` to
/tests. Two contracts follow, both decidable from the task's files (`self-contained`):

- **oracle reads /tests**: a script of `solution/` that names a path under /tests (and does
  not create it itself) cannot find it when the oracle runs, so the reference solution fails
  as shipped (ENV-PATH, Bug, High, 0.75).
- **reference the agent can write**: a test reads its expected answer (a file named
  `expected*`, `*ground_truth*`, `golden*`, `gold*`) from outside /tests, /solution and
  /logs, where the agent works with full rights, and neither the tests write it first nor the
  instruction names it (then it is the agent's own deliverable). An agent can overwrite the
  reference with its own output and pass (EVAL-MISMATCH, Warning, Medium, 0.6).
"""

from __future__ import annotations

import posixpath
import re

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.path_uses import PathUse, shared_path_uses
from metaeval.protocols.audit.static.task_context import TaskContext

_REFERENCE_NAME = re.compile(r"^(?:expected|golden|gold)[\w.-]*$|ground[_-]?truth", re.I)
_VERIFIER_ONLY = ("/tests", "/solution", "/logs", "/oracle")


def check_verifier_inputs(ctx: TaskContext) -> list[Finding]:
    uses, created = shared_path_uses(ctx)
    findings: list[Finding] = []
    # A /tests file the task does not ship is the mounted-files check's (one finding a defect).
    oracle = [
        u
        for u in uses + _inline_test_paths(ctx)
        if u.role == "solution" and _under(u.path, "/tests") and _shipped(ctx, u.path)
    ]
    oracle = list({(u.file, u.line, u.path): u for u in oracle}.values())
    if oracle and not any(_under(c, "/tests") for c in created):
        findings.append(_oracle_finding(ctx, oracle))
    references = [u for u in uses if u.role == "tests" and _agent_writable_reference(ctx, u)]
    if references:
        findings.append(_reference_finding(ctx, references))
    return findings


_TESTS_PATH = re.compile(r"(?<![\w.$/-])/tests/[\w.-]+(?:/[\w.-]+)*")


def _inline_test_paths(ctx: TaskContext) -> list[PathUse]:
    """/tests paths in the solution's lines that the parsers leave to programs
    (`python3 -c "...open('/tests/x.json')..."`), comments left out."""
    found: list[PathUse] = []
    for f in ctx.role_files("solution"):
        for number, line in enumerate(ctx.lines(f.path), 1):
            if "/tests/" not in line or line.lstrip().startswith("#"):
                continue
            found += [PathUse(f.path, number, f.role, m) for m in _TESTS_PATH.findall(line)]
    return found


def _shipped(ctx: TaskContext, runtime: str) -> bool:
    rel = "tests" + runtime[len("/tests") :]
    return rel == "tests" or any(p == rel or p.startswith(rel + "/") for p in ctx.files)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def _agent_writable_reference(ctx: TaskContext, use: PathUse) -> bool:
    name = posixpath.basename(use.path.rstrip("/"))
    if not _REFERENCE_NAME.search(name) or any(_under(use.path, r) for r in _VERIFIER_ONLY):
        return False
    instruction = ctx.instruction.text if ctx.instruction is not None else ""
    if name in instruction:
        return False  # the agent is told about it: its deliverable or its input by design
    return not tests_write(ctx, use.path)


def tests_write(ctx: TaskContext, path: str) -> bool:
    """True when a line of the tests writes `path` (redirect, open for writing, cp/tee/
    write_text, a generator script's output)."""
    writes = re.compile(
        rf"(?:>\s*['\"]?{re.escape(path)}|{re.escape(path)}['\"]?\s*,\s*['\"][wax]"
        rf"|\b(?:cp|mv|tee|install)\b[^\n]*{re.escape(path)}\s*$)"
    )
    for f in ctx.role_files("tests"):
        if path in f.text and (writes.search(f.text) or ".write" in f.text):
            return True
    return False


def _oracle_finding(ctx: TaskContext, uses: list[PathUse]) -> Finding:
    paths = ", ".join(dict.fromkeys(f"`{u.path}`" for u in uses))
    files = ", ".join(dict.fromkeys(u.file for u in uses))
    return make_finding(
        ctx,
        subcategory="ENV-PATH",
        severity="High",
        finding_type="Bug",
        title="The reference solution reads /tests, which Harbor uploads only for the verifier",
        description=(
            f"{files} names {paths}. Harbor copies tests/ to /tests only after the agent "
            "phase, and the oracle runs in the agent phase, so the solution cannot read it "
            "and fails as shipped."
        ),
        recommendation=(
            "Ship what the solution needs in solution/ (it is at /solution when the oracle "
            "runs) or in the environment."
        ),
        confidence=0.75,
        evidence=dedupe_evidence(evidence_line(ctx, u.file, u.line) for u in uses),
    )


def _reference_finding(ctx: TaskContext, uses: list[PathUse]) -> Finding:
    paths = ", ".join(dict.fromkeys(f"`{u.path}`" for u in uses))
    return make_finding(
        ctx,
        subcategory="EVAL-MISMATCH",
        severity="Medium",
        finding_type="Warning",
        title="The tests read their reference from a path the agent can write",
        description=(
            f"The tests read {paths}, which lies outside /tests where the agent works with "
            "full rights; an agent can replace the reference with its own output and pass."
        ),
        recommendation="Keep expected outputs in tests/ (uploaded only for the verifier).",
        confidence=0.6,
        evidence=dedupe_evidence(evidence_line(ctx, u.file, u.line) for u in uses),
    )
