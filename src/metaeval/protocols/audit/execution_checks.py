"""Execution checks: run a task's oracle and a do-nothing agent as Harbor trials.

Two trials per task, each in a fresh room (`metaeval.tasks.trial.run_trial`, limits from
task.toml through `metaeval.tasks.limits`):

- oracle: `bash /solution/solve.sh` (sees /solution), then `bash /tests/test.sh` (sees
  /tests). A reward below 1, or none at all, means the reference solution does not pass its
  own tests: a finding.
- null agent: only `bash /tests/test.sh`. A reward of 1 or more means the tests pass
  without any work: an EVAL-COVERAGE finding.

The reward is read from /logs/verifier/reward.txt (a number) or reward.json (a number, or
an object whose "reward" entry, or single numeric entry, is the reward).

An oracle failure is GT-LOGIC unless the log shows a more specific cause, checked in this
order: no file under tests/ mentions a reward file and none was written (EVAL-MISMATCH,
the verifier never reports a reward); a phase timed out (ENV-RESOURCE); a missing Python
module or command (ENV-DEP); a failed network access with the network disabled
(ENV-RESOURCE); a missing file at an absolute path outside the container's own
directories (ENV-PATH).

Where the runs happen (`sandbox`): a task with an environment (environment/Dockerfile or
`[environment] docker_image`) runs in its own image through a container engine
(`metaeval.sandbox.container`: Docker or Podman, a fresh container per trial). A build the
task breaks is a finding with the build log as evidence; an engine or image this machine
cannot get is a skip with the reason. Multi-container (compose) tasks are skipped. Tasks
without an environment run in bubblewrap. A task with an environment runs in bubblewrap only
with `sandbox="bwrap"`, or when no engine works and benchguard_hints.yaml marks it local:
that run only approximates the image, so its findings are capped at Low, confidence 0.3, and
a missing module, blocked network or absent path is recorded as an environment mismatch
instead of a finding. The same holds in a container whose base image is a local stand-in for
the one the Dockerfile names (an image labelled `org.metaeval.stand-in-for`, as
scripts/container-base-image.sh makes offline): a RUN step that fails there, or a phase
failure, is capped the same way; a COPY source missing from the build context does not
depend on the base image and stays Critical. A skipped check never counts as passed.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection
from functools import partial
from pathlib import Path

from pydantic import BaseModel, Field

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.static.dockerfile import parse_dockerfile
from metaeval.protocols.audit.task_view import Hints, LoadedTask
from metaeval.sandbox.container import ContainerError, Engine, describe_engine, find_engine
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable, python_prefixes
from metaeval.tasks.images import (
    DEFAULT_BUILD_TIMEOUT_S,
    ImageOutcome,
    ensure_image,
    stand_in_images,
)
from metaeval.tasks.limits import TrialLimits, trial_limits
from metaeval.tasks.rooms import BwrapBackend, ContainerBackend
from metaeval.tasks.safe_files import (
    UnsafeFileError,
    classify,
    read_regular,
    remove_tree,
    walk_tree,
)
from metaeval.tasks.trial import ORACLE, Backend, TrialResult, run_trial

SOURCE = "static"
CONFIDENCE = 0.9
LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 3000
ORACLE_LOG = "logs/oracle.log"
NULL_AGENT_LOG = "logs/null_agent.log"
NEEDS_DOCKER = "needs Docker"
MENTION_SCAN_BYTES = 4 * 1024 * 1024
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")

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


class PhaseOutcome(BaseModel):
    """One run (oracle or null agent) of a task."""

    name: str  # "oracle" or "null_agent"
    ran: bool = False
    note: str = ""  # why it did not run, or a remark about the reward
    reward: float | None = None
    reward_source: str | None = None  # "reward.txt" or "reward.json"
    reward_error: str | None = None
    notes: list[str] = Field(default_factory=list)  # on task.toml's env tables (names only)
    solve: ExecResult | None = None
    test: ExecResult | None = None
    log: str = ""
    log_name: str = ""

    @property
    def passed(self) -> bool:
        """True when the run finished with a reward of at least 1."""
        return self.ran and self.reward is not None and self.reward >= 1

    @property
    def timed_out(self) -> bool:
        return any(r is not None and r.timed_out for r in (self.solve, self.test))


class ExecutionCheckResult(BaseModel):
    """Findings of the execution checks of one task, with the runs behind them."""

    task_id: str
    findings: list[Finding] = Field(default_factory=list)
    skipped: str | None = None
    backend: str = ""  # "podman 4.3.1", "docker 27.0", "bubblewrap"
    approximate: bool = False  # bubblewrap or a stand-in image playing the task's image
    stand_in: list[str] = Field(default_factory=list)  # base images played by local stand-ins
    mismatch: str | None = None  # a failure the real environment would not have
    build_log: str = ""
    oracle: PhaseOutcome = Field(default_factory=lambda: PhaseOutcome(name="oracle"))
    null_agent: PhaseOutcome = Field(default_factory=lambda: PhaseOutcome(name="null_agent"))

    @property
    def logs(self) -> dict[str, str]:
        """Log texts by name (e.g. "logs/oracle.log"), for storing as blobs."""
        return {o.log_name: o.log for o in (self.oracle, self.null_agent) if o.ran and o.log_name}


def needs_docker(task: LoadedTask, hints: Hints | None) -> bool:
    """True when the task needs its container image and is not marked local."""
    if hints is not None and hints.is_local(task.task_id):
        return False
    env_dir = task.root / "environment"
    docker_files = ("Dockerfile", "docker-compose.yaml", "docker-compose.yml")
    if any((env_dir / name).is_file() for name in docker_files):
        return True
    environment = task.config.get("environment")
    return isinstance(environment, dict) and bool(environment.get("docker_image"))


def run_execution_checks(
    task: LoadedTask,
    *,
    hints: Hints | None,
    timeout_s: float | None = None,
    sandbox: str = "auto",
    host_env: Collection[str] = (),
) -> ExecutionCheckResult:
    """Run the oracle and the null agent of one task and turn failures into findings.

    `sandbox` ("auto", "docker", "podman", "bwrap") picks the backend: a container engine
    for tasks with an environment (see `metaeval.sandbox.container`), bubblewrap for tasks
    without one. With "bwrap", or a task marked local in the hints and no engine, a task
    with an environment runs in the bubblewrap approximation and its findings are capped
    (see `cap_approximate`). Limits come from task.toml (`metaeval.tasks.limits`);
    `timeout_s`, when given, replaces the time limit of every phase. `host_env` names the
    host variables task.toml's `[verifier.env]` / `[solution.env]` may read as `${NAME}`
    (none by default).
    """
    result = ExecutionCheckResult(task_id=task.task_id)
    if not (task.root / "tests" / "test.sh").is_file():
        result.skipped = "no tests/test.sh"
        return result
    unsafe = _unsafe_script(task.root, "tests", "test.sh")
    if unsafe is not None:  # never bound, copied or executed, on any backend
        result.skipped = f"not run: {unsafe}"
        return result
    limits = trial_limits(
        task.config,
        agent_timeout_s=timeout_s,
        verifier_timeout_s=timeout_s,
        host_env=host_env,
    )
    has_environment = needs_docker(task, None)
    if has_environment and sandbox != "bwrap":
        compose = [n for n in COMPOSE_FILES if (task.root / "environment" / n).is_file()]
        engine, why = find_engine(sandbox)
        if engine is not None and not compose:
            # an engine builds environment/ and copies tests/ and solution/ whole: a link
            # out of the task would carry host files into the image or the container
            leaving = _outside_link(task.root)
            if leaving is not None:
                result.skipped = f"not run: {leaving}"
                return result
            return run_in_container(task, engine, result, limits)
        if not (hints is not None and hints.is_local(task.task_id)):
            result.skipped = why or (
                f"multi-container environment (environment/{compose[0]}): not run, only "
                "single-image tasks are"
            )
            return result
    unavailable = harbor_sandbox_unavailable()
    if unavailable is not None:
        result.skipped = unavailable
        return result
    result.backend = "bubblewrap"
    result.approximate = has_environment
    _run_phases(task, BwrapBackend(), result, limits)
    _judge(task, result, limits)
    return result


def _run_phases(
    task: LoadedTask, backend: Backend, result: ExecutionCheckResult, limits: TrialLimits
) -> None:
    """The oracle trial (when there is a runnable solution/solve.sh) and the null-agent
    trial, each in a fresh room of `backend`."""
    scratch = Path(tempfile.mkdtemp(prefix="metaeval-exec-"))
    try:
        unsafe = _unsafe_script(task.root, "solution", "solve.sh")
        if unsafe is not None:
            result.oracle.note = f"not run: {unsafe}"
        elif (task.root / "solution" / "solve.sh").is_file():
            (scratch / "oracle").mkdir()
            trial = run_trial(
                task.root, backend, limits=limits, scratch=scratch / "oracle", solve=ORACLE
            )
            result.oracle = _outcome("oracle", trial)
        else:
            result.oracle.note = "not run: no solution/solve.sh"
        (scratch / "null_agent").mkdir()
        trial = run_trial(task.root, backend, limits=limits, scratch=scratch / "null_agent")
        result.null_agent = _outcome("null_agent", trial)
    finally:
        remove_tree(scratch)  # iterative: the phases may leave a tree deeper than rmtree copes with


def _outcome(name: str, trial: TrialResult) -> PhaseOutcome:
    return PhaseOutcome(
        name=name,
        ran=True,
        reward=trial.reward,
        reward_source=trial.reward_source,
        reward_error=trial.reward_error,
        notes=trial.notes,
        solve=trial.solve,
        test=trial.test,
        log=trial.log,
        log_name=ORACLE_LOG if name == "oracle" else NULL_AGENT_LOG,
    )


def _judge(task: LoadedTask, result: ExecutionCheckResult, limits: TrialLimits) -> None:
    """Turn the two runs into findings (capped when the environment was approximated)."""
    finding = _oracle_finding(task, result.oracle, limits)
    if finding is not None and result.approximate and finding.subcategory in MISMATCH_KINDS:
        # A missing module, blocked network or absent path is what the real image would
        # supply: the approximation differs from the environment, the task is not at fault.
        where = (
            f"a local stand-in for {', '.join(result.stand_in)}"
            if result.stand_in
            else "bubblewrap, not the task's image"
        )
        result.mismatch = f"environment mismatch ({where}): {finding.title}"
        result.oracle.note = result.mismatch
        finding = None
    if finding is not None:
        result.findings.append(finding)
    if result.null_agent.passed:
        result.findings.append(_null_agent_finding(task, result.null_agent))
    if result.approximate:
        result.findings = [cap_approximate(f) for f in result.findings]


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


# --------------------------------------------------------------------------- containers


def run_in_container(
    task: LoadedTask, engine: Engine, result: ExecutionCheckResult, limits: TrialLimits
) -> ExecutionCheckResult:
    """Build (or reuse) the task's image and run both trials in fresh containers."""
    result.backend = describe_engine(engine)
    env = task.config.get("environment")
    env = env if isinstance(env, dict) else {}
    image = ensure_image(
        engine,
        task.root,
        env.get("docker_image") if isinstance(env.get("docker_image"), str) else None,
        timeout_s=_number(env.get("build_timeout_sec")) or DEFAULT_BUILD_TIMEOUT_S,
    )
    result.build_log = image.log
    if image.status == "infra":
        result.skipped = f"{engine.name}: {image.reason}"
        return result
    result.stand_in = stand_in_images(engine, _base_images(task, env))
    result.approximate = bool(result.stand_in)
    if image.status == "task":
        result.skipped = f"{engine.name}: the environment does not build"
        finding = _build_finding(task, image)
        if result.stand_in and _RUN_STEP_FAILED.search(image.log):
            # a RUN step ran on the stand-in, not on the real base image
            where = f"a local stand-in for {', '.join(result.stand_in)}"
            result.mismatch = f"environment mismatch ({where}): a RUN step of the build failed"
            lacking = _missing_dependency(image.log)
            if lacking is not None:
                # the stand-in lacks a tool the real image has (pip): an infrastructure skip
                result.skipped = (
                    f"{engine.name}: not run: the build needs `{lacking}`, which {where} "
                    "lacks (the real image is not available here)"
                )
                return result
            finding = cap_approximate(finding)  # anything else is an unconfirmed suspicion
        result.findings.append(finding)
        return result
    assert image.image is not None
    try:
        _run_phases(task, ContainerBackend(engine, image.image), result, limits)
    except ContainerError as exc:
        result.skipped = f"{engine.name}: {exc}"
        result.oracle = PhaseOutcome(name="oracle")
        result.null_agent = PhaseOutcome(name="null_agent")
        return result
    _judge(task, result, limits)
    return result


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


BUILD_LOG = "logs/build.log"
# the step that failed ran a command (podman/buildah and docker/buildkit wordings)
_RUN_STEP_FAILED = re.compile(
    r'building at STEP "RUN|did not complete successfully|returned a non-zero code', re.I
)


def _base_images(task: LoadedTask, env: dict) -> list[str]:
    """The images the task's environment starts from (FROM lines, or docker_image)."""
    dockerfile = task.root / "environment" / "Dockerfile"
    if dockerfile.is_file():
        try:
            data = read_regular(dockerfile, task.root, max_bytes=MENTION_SCAN_BYTES)
        except (OSError, UnsafeFileError):
            return []
        text = data.decode("utf-8", "replace")
        return parse_dockerfile("environment/Dockerfile", text).base_images
    image = env.get("docker_image")
    return [image] if isinstance(image, str) and image else []


_COPY_MISSING = re.compile(r"(COPY|ADD)[^\n]*(no such file or directory|not found)", re.I)


def _build_finding(task: LoadedTask, image: ImageOutcome) -> Finding:
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
    )


def _outside_link(root: Path) -> str | None:
    """Why the task must not run at all: a symlink in it leads outside the task (its
    environment would be built, or its files bound, from another place), or None."""
    for entry in walk_tree(root, ignore_dirs=(".git",)):
        if entry.kind == "outside_link":
            return f"{entry.rel} is a symlink leading outside the task"
    return None


def _unsafe_script(root: Path, dirname: str, name: str) -> str | None:
    """Why `<dirname>/<name>` must not run (it or its directory leads outside), or None."""
    kind, detail = classify(root / dirname, root)
    if kind == "outside_link":
        return f"{dirname}/ is a symlink leading outside the task ({detail})"
    kind, detail = classify(root / dirname / name, root)
    if kind == "outside_link":
        return f"{dirname}/{name} is a symlink leading outside the task ({detail})"
    if kind == "special":
        return f"{dirname}/{name} is not a regular file ({detail})"
    return None


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


# --------------------------------------------------------------------------- findings


def _oracle_finding(task: LoadedTask, oracle: PhaseOutcome, limits: TrialLimits) -> Finding | None:
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
    missing = _missing_dependency(log)
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


def _null_agent_finding(task: LoadedTask, null: PhaseOutcome) -> Finding:
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


def _missing_dependency(log: str) -> str | None:
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
