"""Files the Harbor layout requires that a task lacks (part of check 7, `config.py`).

One finding per missing file, its kind chosen by which file it is (the reasons are in
`config.py`'s docstring). A missing file has no line to quote: its evidence names the file
without line numbers. Missing agent results (execution tier) are not a benchmark defect.
"""

from __future__ import annotations

from dataclasses import dataclass

from metaeval.protocols.audit.findings import Evidence, Finding, FindingType, Severity
from metaeval.protocols.audit.static.finding_builder import make_finding
from metaeval.protocols.audit.static.task_context import TaskContext


@dataclass(frozen=True)
class _Verdict:
    """How one kind of missing file is reported; `{path}` in the texts is the file."""

    subcategory: str
    severity: Severity
    finding_type: FindingType
    confidence: float
    title: str
    description: str
    recommendation: str


_NO_INSTRUCTION = _Verdict(
    "INST-INFEASIBLE",
    "Critical",
    "Bug",
    0.9,
    "The task has no instruction.md",
    "Agents receive no task description, so no agent can know what to do: the task "
    "is infeasible as written and its results measure nothing.",
    "Add instruction.md with the full task specification.",
)
_NO_TESTS = _Verdict(
    "EVAL-MISMATCH",
    "Critical",
    "Bug",
    0.9,
    "The task has no tests/test.sh",
    "Harbor runs tests/test.sh to compute the reward; without it nothing evaluates "
    "the agent, so every agent gets the same (missing) reward whatever it did.",
    "Add tests/test.sh that checks the required outputs and writes /logs/verifier/reward.txt.",
)
_NO_SOLUTION = _Verdict(
    "GT-NO-ORACLE",
    "Low",
    "Warning",
    0.5,
    "The task has no reference solution ({path})",
    "Without a reference solution the task was never shown to be solvable in its "
    "environment, so infeasible or contradictory requirements go unnoticed.",
    "Add solution/solve.sh that solves the task and check that the tests pass on it.",
)
_NO_ENVIRONMENT = _Verdict(
    "ENV-DEP",
    "High",
    "Bug",
    0.8,
    "The task has no environment ({path})",
    "Neither environment/Dockerfile nor `[environment] docker_image` defines the "
    "image, so the packages and files the task needs are undefined and the task "
    "cannot be built as shipped.",
    "Add environment/Dockerfile installing the task's dependencies (or set "
    "`[environment] docker_image`).",
)
_NO_TASK_TOML = _Verdict(
    "ENV-RESOURCE",
    "Medium",
    "Warning",
    0.7,
    "The task has no task.toml",
    "Without task.toml the runtime limits (timeouts, resources, network) fall back "
    "to Harbor's defaults, which the task was not designed for.",
    "Add task.toml with the task's timeouts and resources.",
)
_NO_OTHER_FILE = _Verdict(
    "ENV-PATH",
    "Medium",
    "Warning",
    0.6,
    "Required file {path} is missing",
    "The task layout requires `{path}`, but it is not in the task directory, so "
    "the runtime cannot find it.",
    "Add `{path}` to the task.",
)


def _verdict(ctx: TaskContext, path: str) -> _Verdict | None:
    """How a missing `path` is reported; None when it is not a defect."""
    if path == "instruction.md":
        return _NO_INSTRUCTION
    if path in ("tests/test.sh", "tests"):
        return _NO_TESTS
    if path.startswith("solution"):
        return _NO_SOLUTION
    if path.startswith("environment"):
        return None if ctx.docker_image else _NO_ENVIRONMENT
    if path == "task.toml":
        return _NO_TASK_TOML
    return _NO_OTHER_FILE


def missing_file_findings(ctx: TaskContext) -> list[Finding]:
    """One finding per file of `task.missing_files`, in that order."""
    findings: list[Finding] = []
    for missing in ctx.task.missing_files:
        path = missing.strip().split(" ", 1)[0].rstrip("/") or missing
        if path.startswith(("agent_results/", "agent/")):
            continue  # missing agent results (execution tier) are not a benchmark defect
        verdict = _verdict(ctx, path)
        if verdict is None:
            continue
        findings.append(
            make_finding(
                ctx,
                subcategory=verdict.subcategory,
                severity=verdict.severity,
                finding_type=verdict.finding_type,
                title=verdict.title.format(path=path),
                description=verdict.description.format(path=path),
                recommendation=verdict.recommendation.format(path=path),
                confidence=verdict.confidence,
                evidence=[Evidence(file=path)],
            )
        )
    return findings
