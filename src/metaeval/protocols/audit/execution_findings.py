"""From what the oracle, the null agent and the image build did to findings.

An oracle failure is GT-LOGIC unless its log shows a more specific cause (see
`execution_checks` for the order); a missing file the log names is diagnosed against the
task's files (`diagnose_missing_file`); a null agent that passes is EVAL-COVERAGE; a build the
task breaks is Critical. Findings from an approximation of the image are capped
(`cap_approximate`).
"""

from __future__ import annotations

import os
import re
from functools import partial

from metaeval.protocols.audit.execution_results import NULL_AGENT_LOG, ORACLE_LOG, PhaseOutcome
from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.tasks.harbor_root import python_prefixes
from metaeval.tasks.images import ImageOutcome
from metaeval.tasks.limits import TrialLimits
from metaeval.tasks.safe_files import classify, read_regular, walk_tree

SOURCE = "static"
CONFIDENCE = 0.9
LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 3000
MENTION_SCAN_BYTES = 4 * 1024 * 1024
_CONTAINER_PREFIXES = (
    "/app",
    "/tests",
    "/solution",
    "/logs",
    "/tmp",
    "/usr",
    "/bin",
    "/lib",
    "/lib64",
    "/etc",
    "/proc",
    "/dev",
    "/sbin",
)


_MISSING_MODULE = re.compile(
    r"(ModuleNotFoundError: No module named '([^']+)'|"
    r"ImportError: No module named ([\w.]+))"
)


_MISSING_COMMAND = re.compile(r"([\w.+-]+): command not found")


_MISSING_COMMAND_DASH = re.compile(r"^\S+: \d+: ([\w.+-]+): not found$", re.MULTILINE)


_NETWORK_ERRORS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Could not resolve host",
    "nodename nor servname provided",
    "No address associated with hostname",
    "Failed to establish a new connection",
    "getaddrinfo failed",
)


_MISSING_PATH = re.compile(r"No such file or directory(?::)? ?'?(/[^'\s:\"]+)")


_MISSING_PATH_SHELL = re.compile(r"(/[^\s:'\"]+): No such file or directory")


MISMATCH_KINDS = ("ENV-DEP", "ENV-PATH", "ENV-RESOURCE")


APPROXIMATE_CONFIDENCE = 0.3


def cap_approximate(finding: Finding) -> Finding:
    """A finding from an approximation of the task's image: Low, confidence at most 0.3."""
    return finding.model_copy(
        update={
            "severity": "Low",
            "finding_type": "Warning",
            "evidence_tier": "assumed",
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


def oracle_finding(task: LoadedTask, oracle: PhaseOutcome, limits: TrialLimits) -> Finding | None:
    if not oracle.ran or oracle.passed:
        return None
    network = limits.agent.network and limits.verifier.network
    evidence = [Evidence(file=ORACLE_LOG, snippet=log_tail(oracle.log))]
    got = (
        f"a reward of {oracle.reward:g}"
        if oracle.reward is not None
        else f"no reward ({oracle.reward_error})"
    )
    finding = partial(
        Finding,
        task_id=task.task_id,
        finding_type="Bug",
        confidence=CONFIDENCE,
        source=SOURCE,
        protocol="static",
        evidence_tier="executed",  # seen in a run of the task's own environment
        evidence=evidence,
    )

    if oracle.reward_source is None and not _tests_mention_reward(task):
        return finding(
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
    log = oracle.log
    if oracle.timed_out:
        solve_timed_out = oracle.solve is not None and oracle.solve.timed_out
        phase = "solution/solve.sh" if solve_timed_out else "tests/test.sh"
        limit = (limits.agent if solve_timed_out else limits.verifier).timeout_s
        return finding(
            category="ENV",
            subcategory="ENV-RESOURCE",
            severity="High",
            title="The reference solution does not finish within the time limit",
            description=(
                f"In the oracle run, {phase} was killed after {limit:g} s, its time limit "
                f"(task.toml: {_declared_timeouts(task)}); the run ended with {got}. The task "
                "may need more time than it declares, or a step hangs."
            ),
            recommendation=(
                "Check the timeouts in task.toml against the real run time of solve.sh and "
                "test.sh, and look for steps that wait on input or on the network."
            ),
            confidence=0.6,
        )
    missing = missing_dependency(log)
    if missing is not None:
        return finding(
            category="ENV",
            subcategory="ENV-DEP",
            severity="Critical",
            title=f"The reference run needs '{missing}', which the environment lacks",
            description=(
                f"Running the reference solution and tests failed because '{missing}' is "
                f"not available (the run ended with {got}). Nothing in the environment "
                "installs it, so a correct agent solution that relies on the same tool fails "
                "too, and the reference solution cannot be reproduced."
            ),
            recommendation=(
                f"Install '{missing}' in environment/Dockerfile (pinned), or rewrite the "
                "solution and tests to use only what the environment provides."
            ),
        )
    if not network and any(marker in log for marker in _NETWORK_ERRORS):
        silent = not (limits.agent.network_declared and limits.verifier.network_declared)
        if silent:  # metaeval's default (no network), not the task's own choice
            return finding(
                category="ENV",
                subcategory="ENV-RESOURCE",
                severity="Medium",
                title="The reference run needs the network, which task.toml does not request",
                description=(
                    "task.toml says nothing about network access; metaeval then runs a phase "
                    "without network (Harbor's default would be public network), and the "
                    f"oracle run failed on a network lookup or connection (it ended with {got})."
                ),
                recommendation=(
                    "Ship the data the solution or tests download inside the task (tests/ or "
                    'environment/), or request it explicitly with network_mode = "public" '
                    "in task.toml if it is really needed."
                ),
            )
        return finding(
            category="ENV",
            subcategory="ENV-RESOURCE",
            severity="Critical",
            title="The reference run needs the network, which task.toml disables",
            description=(
                "task.toml disables network access, and the oracle run failed on a network "
                f"lookup or connection (it ended with {got}). The task cannot pass as "
                "configured, whatever the agent does."
            ),
            recommendation=(
                "Ship the data the solution or tests download inside the task (tests/ or "
                "environment/), or allow network access in task.toml if it is really needed."
            ),
        )
    path = _missing_absolute_path(log)
    if path is not None:
        return finding(
            category="ENV",
            subcategory="ENV-PATH",
            severity="Critical",
            title=f"The reference run reads '{path}', which does not exist in the task environment",
            description=(
                f"The oracle run failed because '{path}' does not exist (it ended with {got}). "
                "The path lies outside the directories the task's environment provides "
                "(/app, /tests, /solution, /logs), so it looks like a path from the author's "
                "machine."
            ),
            recommendation=(
                "Refer to the file where the environment puts it (usually under /app) in the "
                "solution and tests, and ship the file with the task."
            ),
        )
    diagnosed = diagnose_missing_file(task, log)
    if diagnosed is not None:
        subcategory, title, description, recommendation = diagnosed
        return finding(
            category=subcategory.split("-", 1)[0],
            subcategory=subcategory,
            severity="High",
            title=title,
            description=(
                f"{description} This is why the reference solution fails its own tests: the "
                f"oracle run ended with {got} instead of 1 (its log is cited)."
            ),
            recommendation=recommendation,
        )
    return finding(
        category="GT",
        subcategory="GT-LOGIC",
        severity="High",
        title="The reference solution fails the task's own tests",
        description=(
            "Running solution/solve.sh in a fresh environment and then tests/test.sh ended with "
            f"{got} instead of 1. Either the reference solution is wrong or the tests expect "
            "something else; in both cases the expected answer of the task is not a correct "
            "solution."
        ),
        recommendation=(
            "Read the end of the oracle log to see which check fails, then fix the reference "
            "solution (or the expected values in the tests) so that the oracle scores 1."
        ),
    )


def _declared_timeouts(task: LoadedTask) -> str:
    parts = []
    for section in ("agent", "verifier"):
        table = task.config.get(section)
        value = table.get("timeout_sec") if isinstance(table, dict) else None
        parts.append(f"[{section}] timeout_sec = {value if value is not None else 'unset'}")
    return ", ".join(parts)


def null_agent_finding(task: LoadedTask, null: PhaseOutcome) -> Finding:
    return Finding(
        task_id=task.task_id,
        category="EVAL",
        subcategory="EVAL-COVERAGE",
        severity="High",
        finding_type="Bug",
        title="The tests pass when the agent does nothing",
        description=(
            "tests/test.sh was run on the untouched starting environment, without any agent "
            f"work, and reported a reward of {null.reward:g}. The tests do not check the output "
            "the instruction asks for (or accept its absence), so any agent scores full marks."
        ),
        evidence=[Evidence(file=NULL_AGENT_LOG, snippet=log_tail(null.log))],
        recommendation=(
            "Make the tests fail when the required output is missing or unchanged: check that "
            "the output file exists and compare its content with the expected answer."
        ),
        confidence=CONFIDENCE,
        source=SOURCE,
        protocol="static",
        evidence_tier="executed",  # seen in a run of the task's own environment
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


def missing_dependency(log: str) -> str | None:
    match = _MISSING_MODULE.search(log)
    if match:
        return (match.group(2) or match.group(3)).split(".")[0]
    for pattern in (_MISSING_COMMAND, _MISSING_COMMAND_DASH):
        match = pattern.search(log)
        if match:
            return match.group(1)
    return None


_INSTRUCTION_FILE = re.compile(r"(?<![\w/.-])(/?(?:[\w.-]+/)*[\w-][\w.-]*\.([A-Za-z0-9]{1,8}))\b")


def _missing_paths(log: str) -> list[str]:
    """Absolute paths the log says do not exist, in order, once each."""
    found: list[str] = []
    for pattern in (_MISSING_PATH, _MISSING_PATH_SHELL):
        found += [m.group(1) for m in pattern.finditer(log)]
    return list(dict.fromkeys(p.rstrip(".,;") for p in found))


def diagnose_missing_file(task: LoadedTask, log: str) -> tuple[str, str, str, str] | None:
    """The cause of an oracle failure that its log shows as a missing file, from the task's
    own files: (subcategory, title, description, recommendation), or None.

    - a path under /tests or /solution that the task does not ship: a missing fixture
      (ENV-PATH);
    - a file the solution reads but the instruction never names, while the instruction names
      another file of the same kind: the instruction and the solution disagree on the input
      (INST-CONTRADICT);
    - a file the tests read but the instruction never names, while the instruction names
      another file of the same kind as the output: the tests check another file than the
      specification asks for (EVAL-MISMATCH).
    """
    texts = {f.path: f.text for f in task.files}
    instruction = texts.get("instruction.md", "")
    named = {
        m.group(1).rsplit("/", 1)[-1]: m.group(2).lower()
        for m in _INSTRUCTION_FILE.finditer(instruction)
    }
    for path in _missing_paths(log):
        for mount in ("/tests/", "/solution/"):
            if (
                path.startswith(mount)
                and path[1:] not in texts
                and not (task.root / path[1:]).exists()
            ):
                return (
                    "ENV-PATH",
                    f"The task does not ship `{path}`, which its run reads",
                    f"The oracle run failed because `{path}` does not exist: the task's "
                    f"{mount.strip('/')}/ directory does not contain `{path[len(mount) :]}`, so "
                    "the fixture is missing from the task.",
                    f"Add `{path[1:]}` to the task (or stop reading it).",
                )
        base = path.rsplit("/", 1)[-1]
        if "." not in base or base in named:
            continue
        ext = base.rsplit(".", 1)[-1].lower()
        others = [n for n, e in named.items() if e == ext and n != base]
        if not others:
            continue
        solution = "\n".join(t for p, t in texts.items() if p.startswith("solution/"))
        tests = "\n".join(t for p, t in texts.items() if p.startswith("tests/"))
        shipped = {p.rsplit("/", 1)[-1] for p in texts if p.startswith("environment/")}
        in_solution, in_tests = base in solution, base in tests
        if in_solution and not in_tests:  # the instructed input the environment ships first
            others.sort(key=lambda n: n not in shipped)
            return (
                "INST-CONTRADICT",
                f"The instruction names `{others[0]}` but the solution reads `{base}`",
                f"The reference solution reads `{path}`, which does not exist in the run; the "
                f"instruction never mentions `{base}` and names `{others[0]}` instead. The "
                "instruction and the solution disagree on the input file.",
                f"Make the instruction and the solution name the same file (`{others[0]}` or "
                f"`{base}`), and ship it.",
            )
        if in_tests and not in_solution:  # the instructed output the solution writes first
            others.sort(key=lambda n: n not in solution)
            return (
                "EVAL-MISMATCH",
                f"The tests read `{base}` but the instruction asks for `{others[0]}`",
                f"The tests read `{path}`, which does not exist after the reference solution "
                f"ran; the instruction never mentions `{base}` and asks for `{others[0]}`. An "
                "agent that writes the file it was asked for fails the tests.",
                f"Have the tests read `{others[0]}` (or change the instruction to `{base}`).",
            )
    return None


def _missing_absolute_path(log: str) -> str | None:
    allowed = (*_CONTAINER_PREFIXES, *python_prefixes())
    for pattern in (_MISSING_PATH, _MISSING_PATH_SHELL):
        for match in pattern.finditer(log):
            path = match.group(1)
            if not any(path == p or path.startswith(p + "/") for p in allowed):
                return path
    return None
