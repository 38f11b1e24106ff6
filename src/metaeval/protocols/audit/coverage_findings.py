"""Findings of tests that pass without the work: under the null agent (the whole task, or
single tests read from the verifier's output), or after the oracle's outputs are removed
(`oracle_outputs`). All are EVAL-COVERAGE and `executed`."""

from __future__ import annotations

import posixpath

from metaeval.protocols.audit.execution_findings import CONFIDENCE, SOURCE, Diagnosis, log_tail
from metaeval.protocols.audit.execution_results import NULL_AGENT_LOG, PhaseOutcome
from metaeval.protocols.audit.findings import Evidence, Finding, FindingType, Severity
from metaeval.protocols.audit.static.instruction_commands import names
from metaeval.protocols.audit.task_view import LoadedTask

SHOWN_TESTS = 3  # test names in a title; the description names them all


def null_agent_finding(task: LoadedTask, null: PhaseOutcome) -> Finding | None:
    """The EVAL-COVERAGE finding of a null agent whose tests pass, or None.

    Severity: High when the reward is 1 or more (any agent scores full marks); Medium when
    every test the verifier's output names passed but something else in test.sh gave a
    lower reward; Low (a Warning) when some tests pass and others fail, since a check that
    holds on the untouched start (the input is unchanged, a tool is installed) is often
    there by design and matters only beside the others."""
    if not null.ran:
        return None
    passing = null.cases.named("passed") if null.cases is not None else []
    failing = null.cases.named("failed") if null.cases is not None else []
    if null.passed:
        named = f" Tests that passed: {_names(passing, len(passing))}." if passing else ""
        return _null_finding(
            task,
            null,
            severity="High",
            title="The tests pass when the agent does nothing",
            description=(
                "tests/test.sh was run on the untouched starting environment, without any "
                f"agent work, and reported a reward of {null.reward:g}. The tests do not check "
                "the output the instruction asks for (or accept its absence), so any agent "
                f"scores full marks.{named}"
            ),
            tests=passing,
        )
    if not passing or null.cases is None:
        return None
    source = null.cases.source
    if not failing:
        return _null_finding(
            task,
            null,
            severity="Medium",
            title=f"Every test passes when the agent does nothing: {_names(passing)}",
            description=(
                "tests/test.sh was run on the untouched starting environment, without any "
                f"agent work: all {len(passing)} tests it ran passed ({source}), though the "
                f"run ended with {_got(null)}. The tests themselves accept no work; only "
                f"something else in test.sh kept the reward down. Tests: {_names(passing, len(passing))}."
            ),
            tests=passing,
            confidence=0.7,
        )
    return _null_finding(
        task,
        null,
        severity="Low",
        title=(
            f"{len(passing)} of {len(passing) + len(failing)} tests pass when the agent does "
            f"nothing: {_names(passing)}"
        ),
        description=(
            "tests/test.sh was run on the untouched starting environment, without any agent "
            f"work: these tests passed ({source}) while the others failed: "
            f"{_names(passing, len(passing))}. A test that passes without any work checks "
            "nothing the agent does; it may be a deliberate check that the start is intact."
        ),
        tests=passing,
        confidence=0.5,
        finding_type="Warning",
    )


def _null_finding(
    task: LoadedTask,
    null: PhaseOutcome,
    *,
    severity: Severity,
    title: str,
    description: str,
    tests: list[str],
    confidence: float = CONFIDENCE,
    finding_type: FindingType = "Bug",
) -> Finding:
    return Finding(
        task_id=task.task_id,
        category="EVAL",
        subcategory="EVAL-COVERAGE",
        severity=severity,
        finding_type=finding_type,
        title=title,
        description=description,
        evidence=_naming_lines(null, tests),
        recommendation=(
            "Make the tests fail when the required output is missing or unchanged: check that "
            "the output file exists and compare its content with the expected answer."
        ),
        confidence=confidence,
        source=SOURCE,
        protocol="static",
        evidence_tier="executed",  # seen in a run of the task's own environment
        tier_reason="shown by a run of the tests without any agent work",
    )


def _names(tests: list[str], shown: int = SHOWN_TESTS) -> str:
    """`a`, `b` and 2 more: test names (their last `::` part) in backticks."""
    short = [f"`{t.rsplit('::', 1)[-1]}`" for t in tests]
    more = len(short) - shown
    return ", ".join(short[:shown]) + (f" and {more} more" if more > 0 else "")


def _got(phase: PhaseOutcome) -> str:
    if phase.reward is not None:
        return f"a reward of {phase.reward:g}"
    return f"no reward ({phase.reward_error})"


def _naming_lines(null: PhaseOutcome, tests: list[str]) -> list[Evidence]:
    """The lines of the null agent's log that report the passing tests (exact lines), or
    the log's tail when none does (a report file named them)."""
    lines = [
        line
        for line in null.log.splitlines()
        if "PASSED" in line and any(test in line for test in tests)
    ]
    if not lines:
        return [Evidence(file=NULL_AGENT_LOG, snippet=log_tail(null.log))]
    return [Evidence(file=NULL_AGENT_LOG, snippet=line) for line in dict.fromkeys(lines)][:5]


def outputs_finding(
    task: LoadedTask,
    removed: PhaseOutcome,
    files: list[str],
    other_changes: list[str],
) -> Finding | None:
    """The EVAL-COVERAGE finding of tests that still pass once the files the oracle created
    are removed (`oracle_outputs`), or None (the rule is in that module's docstring)."""
    if not removed.passed or not files:
        return None
    shown = ", ".join(f"`{f}`" for f in files[:SHOWN_TESTS])
    more = f" and {len(files) - SHOWN_TESTS} more" if len(files) > SHOWN_TESTS else ""
    evidence = [Evidence(file=removed.log_name, snippet=log_tail(removed.log))]
    common: Diagnosis = {
        "task_id": task.task_id,
        "category": "EVAL",
        "subcategory": "EVAL-COVERAGE",
        "finding_type": "Bug",
        "evidence": evidence,
        "recommendation": (
            "Make the tests read the outputs the instruction asks for and compare them with "
            "the expected answer, so that they fail when the outputs are missing."
        ),
        "source": SOURCE,
        "protocol": "static",
        "evidence_tier": "executed",
        "tier_reason": "shown by rerunning the tests after removing the oracle's outputs",
    }
    if not other_changes:
        return Finding(
            **common,
            severity="High",
            title="The tests pass after the reference solution's outputs are removed",
            description=(
                "The oracle passed; then every file it created ("
                f"{shown}{more}) was removed and tests/test.sh, run again in the same "
                f"environment, reported {removed.reward:g}. The oracle changed nothing else "
                "that could be seen, so the tests cannot tell its solution from no solution."
            ),
            confidence=0.8,
        )
    instruction = task.file("instruction.md")
    text = instruction.text if instruction is not None else ""
    asked = [f for f in files if posixpath.basename(f) and names(text, posixpath.basename(f))]
    if not asked:
        return None
    return Finding(
        **common,
        severity="Medium",
        title=f"The tests pass without `{asked[0]}`, which the instruction asks for",
        description=(
            f"The oracle passed; then the files it created ({shown}{more}) were removed and "
            f"tests/test.sh, run again, reported {removed.reward:g}. The instruction names "
            f"{', '.join(f'`{a}`' for a in asked)}, so the tests never check that deliverable "
            f"(the oracle also {other_changes[0]}, which the tests may check instead)."
        ),
        confidence=0.6,
    )
