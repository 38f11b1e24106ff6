"""From what the oracle, the null agent and the image build did to findings.

An oracle failure is GT-LOGIC unless its log shows a more specific cause (see
`execution_checks` for the order); a missing file the log names is diagnosed against the
task's files (`diagnose_missing_file`); a build the task breaks is Critical. Tests that pass
without the work are in `coverage_findings`. Findings from an approximation of the image are capped
(`cap_approximate`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metaeval.protocols.audit.execution_results import ORACLE_LOG, PhaseOutcome
from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.oracle_log import (
    NETWORK_ERRORS,
    diagnose_missing_file,
    missing_absolute_path,
    missing_dependency,
)
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
