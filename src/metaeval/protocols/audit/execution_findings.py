"""From what the oracle, the null agent and the image build did to findings.

An oracle failure is GT-LOGIC unless its log shows a more specific cause (see
`execution_checks` for the order); a missing file the log names is diagnosed against the
task's files (`diagnose_missing_file`); a null agent that passes is EVAL-COVERAGE; a build the
task breaks is Critical. Findings from an approximation of the image are capped
(`cap_approximate`).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metaeval.protocols.audit.execution_results import NULL_AGENT_LOG, ORACLE_LOG, PhaseOutcome
from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.oracle_log import (
    NETWORK_ERRORS,
    diagnose_missing_file,
    missing_absolute_path,
    missing_dependency,
)
from metaeval.protocols.audit.static.instruction_commands import names
from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.tasks.images import ImageOutcome
from metaeval.tasks.limits import TrialLimits
from metaeval.tasks.safe_files import classify, read_regular, walk_tree

SOURCE = "static"
CONFIDENCE = 0.9
LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 3000
MENTION_SCAN_BYTES = 4 * 1024 * 1024


MISMATCH_KINDS = ("ENV-DEP", "ENV-PATH", "ENV-RESOURCE")


APPROXIMATE_CONFIDENCE = 0.3


def cap_approximate(finding: Finding) -> Finding:
    """A finding from an approximation of the task's image: Low, confidence at most 0.3."""
    return finding.model_copy(
        update={
            "severity": "Low",
            "finding_type": "Warning",
            "evidence_tier": "assumed",
            "tier_reason": "seen only in an approximation of the task's image",
            "confidence": min(finding.confidence, APPROXIMATE_CONFIDENCE),
            "description": finding.description
            + " (Seen in an approximation of the task's Dockerfile environment (bubblewrap or "
            "a local stand-in base image), not in its real image: unconfirmed.)",
        }
    )


BUILD_LOG = "logs/build.log"


_COPY_MISSING = re.compile(r"(COPY|ADD)[^\n]*(no such file or directory|not found)", re.I)


def build_finding(task: LoadedTask, image: ImageOutcome) -> Finding:
    copy_problem = _COPY_MISSING.search(image.log)
    return Finding(
        task_id=task.task_id,
        category="ENV",
        subcategory="ENV-PATH" if copy_problem else "ENV-DEP",
        severity="Critical",
        finding_type="Bug",
        title="The task's environment image does not build",
        description=(
            "Building environment/Dockerfile with environment/ as the build context failed "
            f"({image.reason}); no agent can run the task. "
            + (
                "A COPY/ADD source is not in the build context."
                if copy_problem
                else "See the end of the build log."
            )
        ),
        evidence=[Evidence(file=BUILD_LOG, snippet=log_tail(image.log))],
        recommendation=(
            "Make `docker build environment/` succeed: ship every copied file inside "
            "environment/ and fix the failing step."
        ),
        confidence=0.95,
        source=SOURCE,
        protocol="static",
        evidence_tier="executed",  # seen in a run of the task's own environment
        tier_reason="shown by building the task's environment",
    )


def log_tail(text: str, lines: int = LOG_TAIL_LINES, chars: int = LOG_TAIL_CHARS) -> str:
    """The last `lines` lines of a log, at most `chars` characters: an exact substring."""
    body = text.rstrip("\n")
    start = len(body)
    for _ in range(lines):
        cut = body.rfind("\n", 0, start)
        if cut < 0:
            start = 0
            break
        start = cut
    tail = body[start:].lstrip("\n") if start else body
    return tail[-chars:]


@dataclass(frozen=True)
class _OracleRun:
    """What a diagnosis of a failed oracle run reads."""

    task: LoadedTask
    oracle: PhaseOutcome
    limits: TrialLimits
    got: str  # "a reward of 0" or "no reward (...)"


Diagnosis = dict[str, Any]  # the fields of the finding, besides the common ones


def oracle_finding(task: LoadedTask, oracle: PhaseOutcome, limits: TrialLimits) -> Finding | None:
    """The finding a failed oracle run makes: the first diagnosis that applies, in the order
    of `DIAGNOSES`; the generic GT-LOGIC one when none does. None when the oracle passed."""
    if not oracle.ran or oracle.passed:
        return None
    got = (
        f"a reward of {oracle.reward:g}"
        if oracle.reward is not None
        else f"no reward ({oracle.reward_error})"
    )
    run = _OracleRun(task, oracle, limits, got)
    fields = next((d for diagnose in DIAGNOSES if (d := diagnose(run)) is not None), None)
    common: Diagnosis = {
        "task_id": task.task_id,
        "finding_type": "Bug",
        "confidence": CONFIDENCE,  # a diagnosis may give its own
        "source": SOURCE,
        "protocol": "static",
        "evidence_tier": "executed",  # seen in a run of the task's own environment
        "tier_reason": "shown by a run of the reference solution and the tests",
        "evidence": [Evidence(file=ORACLE_LOG, snippet=log_tail(oracle.log))],
    }
    return Finding(**{**common, **(fields if fields is not None else _fails_its_tests(run))})


def _no_reward_file(run: _OracleRun) -> Diagnosis | None:
    if run.oracle.reward_source is not None or _tests_mention_reward(run.task):
        return None
    return dict(
        category="EVAL",
        subcategory="EVAL-MISMATCH",
        severity="Critical",
        title="The verifier never writes a reward file",
        description=(
            "Running the reference solution and then tests/test.sh left neither "
            "/logs/verifier/reward.txt nor /logs/verifier/reward.json, and no file under "
            "tests/ mentions either. Harbor scores a trial only from that file, so every "
            "run of this task, correct or not, ends without a score."
        ),
        recommendation=(
            "Make tests/test.sh write 1 to /logs/verifier/reward.txt when the checks pass "
            "and 0 when they fail (for example from the exit status of the checker)."
        ),
    )


def _timed_out(run: _OracleRun) -> Diagnosis | None:
    if not run.oracle.timed_out:
        return None
    solve_timed_out = run.oracle.solve is not None and run.oracle.solve.timed_out
    phase = "solution/solve.sh" if solve_timed_out else "tests/test.sh"
    limit = (run.limits.agent if solve_timed_out else run.limits.verifier).timeout_s
    return dict(
        category="ENV",
        subcategory="ENV-RESOURCE",
        severity="High",
        title="The reference solution does not finish within the time limit",
        description=(
            f"In the oracle run, {phase} was killed after {limit:g} s, its time limit "
            f"(task.toml: {_declared_timeouts(run.task)}); the run ended with {run.got}. The "
            "task may need more time than it declares, or a step hangs."
        ),
        recommendation=(
            "Check the timeouts in task.toml against the real run time of solve.sh and "
            "test.sh, and look for steps that wait on input or on the network."
        ),
        confidence=0.6,
    )


def _missing_dependency(run: _OracleRun) -> Diagnosis | None:
    missing = missing_dependency(run.oracle.log)
    if missing is None:
        return None
    return dict(
        category="ENV",
        subcategory="ENV-DEP",
        severity="Critical",
        title=f"The reference run needs '{missing}', which the environment lacks",
        description=(
            f"Running the reference solution and tests failed because '{missing}' is "
            f"not available (the run ended with {run.got}). Nothing in the environment "
            "installs it, so a correct agent solution that relies on the same tool fails "
            "too, and the reference solution cannot be reproduced."
        ),
        recommendation=(
            f"Install '{missing}' in environment/Dockerfile (pinned), or rewrite the "
            "solution and tests to use only what the environment provides."
        ),
    )


def _needs_network(run: _OracleRun) -> Diagnosis | None:
    limits = run.limits
    if limits.agent.network and limits.verifier.network:
        return None
    if not any(marker in run.oracle.log for marker in NETWORK_ERRORS):
        return None
    if not (limits.agent.network_declared and limits.verifier.network_declared):
        # metaeval's default (no network), not the task's own choice
        return dict(
            category="ENV",
            subcategory="ENV-RESOURCE",
            severity="Medium",
            title="The reference run needs the network, which task.toml does not request",
            description=(
                "task.toml says nothing about network access; metaeval then runs a phase "
                "without network (Harbor's default would be public network), and the "
                f"oracle run failed on a network lookup or connection (it ended with {run.got})."
            ),
            recommendation=(
                "Ship the data the solution or tests download inside the task (tests/ or "
                'environment/), or request it explicitly with network_mode = "public" '
                "in task.toml if it is really needed."
            ),
        )
    return dict(
        category="ENV",
        subcategory="ENV-RESOURCE",
        severity="Critical",
        title="The reference run needs the network, which task.toml disables",
        description=(
            "task.toml disables network access, and the oracle run failed on a network "
            f"lookup or connection (it ended with {run.got}). The task cannot pass as "
            "configured, whatever the agent does."
        ),
        recommendation=(
            "Ship the data the solution or tests download inside the task (tests/ or "
            "environment/), or allow network access in task.toml if it is really needed."
        ),
    )


def _foreign_path(run: _OracleRun) -> Diagnosis | None:
    path = missing_absolute_path(run.oracle.log)
    if path is None:
        return None
    return dict(
        category="ENV",
        subcategory="ENV-PATH",
        severity="Critical",
        title=f"The reference run reads '{path}', which does not exist in the task environment",
        description=(
            f"The oracle run failed because '{path}' does not exist (it ended with {run.got}). "
            "The path lies outside the directories the task's environment provides "
            "(/app, /tests, /solution, /logs), so it looks like a path from the author's "
            "machine."
        ),
        recommendation=(
            "Refer to the file where the environment puts it (usually under /app) in the "
            "solution and tests, and ship the file with the task."
        ),
    )


def _missing_file(run: _OracleRun) -> Diagnosis | None:
    diagnosed = diagnose_missing_file(run.task, run.oracle.log)
    if diagnosed is None:
        return None
    subcategory, title, description, recommendation = diagnosed
    return dict(
        category=subcategory.split("-", 1)[0],
        subcategory=subcategory,
        severity="High",
        title=title,
        description=(
            f"{description} This is why the reference solution fails its own tests: the "
            f"oracle run ended with {run.got} instead of 1 (its log is cited)."
        ),
        recommendation=recommendation,
    )


def _fails_its_tests(run: _OracleRun) -> Diagnosis:
    return dict(
        category="GT",
        subcategory="GT-LOGIC",
        severity="High",
        title="The reference solution fails the task's own tests",
        description=(
            "Running solution/solve.sh in a fresh environment and then tests/test.sh ended with "
            f"{run.got} instead of 1. Either the reference solution is wrong or the tests expect "
            "something else; in both cases the expected answer of the task is not a correct "
            "solution."
        ),
        recommendation=(
            "Read the end of the oracle log to see which check fails, then fix the reference "
            "solution (or the expected values in the tests) so that the oracle scores 1."
        ),
    )


# Checked in this order; the first that applies names the cause.
DIAGNOSES: tuple[Callable[[_OracleRun], Diagnosis | None], ...] = (
    _no_reward_file,
    _timed_out,
    _missing_dependency,
    _needs_network,
    _foreign_path,
    _missing_file,
)


def _declared_timeouts(task: LoadedTask) -> str:
    parts = []
    for section in ("agent", "verifier"):
        table = task.config.get(section)
        value = table.get("timeout_sec") if isinstance(table, dict) else None
        parts.append(f"[{section}] timeout_sec = {value if value is not None else 'unset'}")
    return ", ".join(parts)


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
            names=passing,
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
            names=passing,
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
        names=passing,
        confidence=0.5,
        finding_type="Warning",
    )


def _null_finding(
    task: LoadedTask,
    null: PhaseOutcome,
    *,
    severity: str,
    title: str,
    description: str,
    names: list[str],
    confidence: float = CONFIDENCE,
    finding_type: str = "Bug",
) -> Finding:
    return Finding(
        task_id=task.task_id,
        category="EVAL",
        subcategory="EVAL-COVERAGE",
        severity=severity,  # type: ignore[arg-type]
        finding_type=finding_type,  # type: ignore[arg-type]
        title=title,
        description=description,
        evidence=_naming_lines(null, names),
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


def _naming_lines(null: PhaseOutcome, names: list[str]) -> list[Evidence]:
    """The lines of the null agent's log that report the passing tests (exact lines), or
    the log's tail when none does (a report file named them)."""
    lines = [
        line
        for line in null.log.splitlines()
        if "PASSED" in line and any(name in line for name in names)
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


def _tests_mention_reward(task: LoadedTask) -> bool:
    tests = task.root / "tests"
    if classify(tests, task.root)[0] not in ("dir", "link_dir"):
        return False
    for entry in walk_tree(os.path.realpath(tests), boundary=task.root):
        if entry.kind not in ("file", "link"):
            continue
        try:
            data = read_regular(entry.path, task.root, max_bytes=MENTION_SCAN_BYTES)
        except OSError:
            continue
        if b"reward.txt" in data or b"reward.json" in data:
            return True
    return False
