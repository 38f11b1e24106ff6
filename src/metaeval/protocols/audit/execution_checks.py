"""Execution checks: run a task's oracle and a do-nothing agent as Harbor trials.

Two trials per task, each in a fresh room (`metaeval.tasks.trial.run_trial`, limits from
task.toml through `metaeval.tasks.limits`):

- oracle: `bash /solution/solve.sh` (sees /solution), then `bash /tests/test.sh` (sees
  /tests). A reward below 1, or none at all, means the reference solution does not pass its
  own tests: a finding. When it passes, the tests run once more in the same room without
  the files the oracle created (`oracle_outputs`): tests that still pass may not tell a
  solution from none.
- null agent: only `bash /tests/test.sh`. A reward of 1 or more means the tests pass
  without any work: an EVAL-COVERAGE finding; so, at a lower severity, do single tests
  that pass, read from the verifier's output (`metaeval.tasks.verifier_cases`).

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
cannot get (no engine, an image not held or not pulled, an engine call that fails) is an
infrastructure skip with the reason (`infra_error`: the cell is retried on resume and counted
apart, never as a passed check or a finding); an image (or base image) the engine does not hold is said
so before any engine call (`task_images.missing_image`), naming it. With `pull="missing"` it is
pulled first (`pull="always"`: every image, every time; `metaeval.tasks.images.pull_image`),
and a pull that fails is a skip naming the image and the pull's error. Multi-container (compose) tasks are
skipped. Tasks without an environment run in bubblewrap. A task with an environment runs in
bubblewrap only with `sandbox="bwrap"`, or when no engine works and benchguard_hints.yaml marks
it local: that run only approximates the image, so its findings are capped at Low, confidence
0.3, and a missing module, blocked network or absent path is recorded as an environment mismatch
instead of a finding. The same holds in a container whose base image is a local stand-in for
the one the Dockerfile names (an image labelled `org.metaeval.stand-in-for`, as
scripts/container-base-image.sh makes offline): a RUN step that fails there, or a phase
failure, is capped the same way; a COPY source missing from the build context does not
depend on the base image and stays Critical. A skipped check never counts as passed.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Collection
from pathlib import Path

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.registry import get_agent
from metaeval.protocols.audit.coverage_findings import null_agent_finding, outputs_finding
from metaeval.protocols.audit.execution_findings import (
    MISMATCH_KINDS,
    build_finding,
    cap_approximate,
    oracle_finding,
)
from metaeval.protocols.audit.execution_results import (
    NULL_AGENT_LOG,
    ORACLE_LOG,
    ExecutionCheckResult,
    PhaseOutcome,
    pull_failed_reason,
    unavailable_reason,
)
from metaeval.protocols.audit.oracle_log import missing_dependency
from metaeval.protocols.audit.oracle_outputs import OutputRemoval
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_images import base_images, missing_image, pull_images
from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.sandbox.container import ContainerError, Engine, describe_engine, find_engine
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.images import (
    DEFAULT_BUILD_TIMEOUT_S,
    ImageOutcome,
    build_network,
    ensure_image,
    stand_in_images,
)
from metaeval.tasks.limits import TrialLimits, trial_limits
from metaeval.tasks.rooms import BwrapBackend, ContainerBackend
from metaeval.tasks.safe_files import (
    classify,
    remove_tree,
    walk_tree,
)
from metaeval.tasks.trial import Backend, TrialResult, run_trial
from metaeval.tasks.verifier_cases import case_outcomes

NEEDS_DOCKER = "needs Docker"
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")


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
    pull: str = "never",
) -> ExecutionCheckResult:
    """Run the oracle and the null agent of one task and turn failures into findings.

    `sandbox` ("auto", "docker", "podman", "bwrap") picks the backend: a container engine
    for tasks with an environment (see `metaeval.sandbox.container`), bubblewrap for tasks
    without one. With "bwrap", or a task marked local in the hints and no engine, a task
    with an environment runs in the bubblewrap approximation and its findings are capped
    (see `cap_approximate`). Limits come from task.toml (`metaeval.tasks.limits`);
    `timeout_s`, when given, replaces the time limit of every phase. `host_env` names the
    host variables task.toml's `[verifier.env]` / `[solution.env]` may read as `${NAME}`
    (none by default). `pull` ("never", "missing", "always") says which images the engine
    pulls before a task's build or run.
    """
    result = ExecutionCheckResult(task_id=task.task_id)
    if not (task.root / "tests" / "test.sh").is_file():
        result.skipped = "no tests/test.sh"
        return result
    unsafe = unsafe_script(task.root, "tests", "test.sh")
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
        done = _in_container(task, result, limits, sandbox=sandbox, hints=hints, pull=pull)
        if done is not None:
            return done
    unavailable = harbor_sandbox_unavailable()
    if unavailable is not None:
        result.skipped = unavailable
        return result
    result.backend = "bubblewrap"
    result.approximate = has_environment
    if _run_phases(task, BwrapBackend(), result, limits):
        _judge(task, result, limits)
    return result


def _in_container(
    task: LoadedTask,
    result: ExecutionCheckResult,
    limits: TrialLimits,
    *,
    sandbox: str,
    hints: Hints | None,
    pull: str,
) -> ExecutionCheckResult | None:
    """The result of a task with an environment run by a container engine, or skipped with
    the reason; None when no engine works and the hints mark the task local (it then runs
    in the bubblewrap approximation)."""
    compose = [n for n in COMPOSE_FILES if (task.root / "environment" / n).is_file()]
    engine, why = find_engine(sandbox)
    if engine is not None and not compose:
        # an engine builds environment/ and copies tests/ and solution/ whole: a link
        # out of the task would carry host files into the image or the container
        leaving = _outside_link(task.root)
        if leaving is not None:
            result.skipped = f"not run: {leaving}"
            return result
        return run_in_container(task, engine, result, limits, pull=pull)
    if not (hints is not None and hints.is_local(task.task_id)):
        if compose:  # a kind of task this audit does not run: final, not infrastructure
            result.skipped = (
                f"multi-container environment (environment/{compose[0]}): not run, only "
                "single-image tasks are"
            )
            return result
        return _infra_skip(result, why or "no container engine")
    return None


def _run_phases(
    task: LoadedTask, backend: Backend, result: ExecutionCheckResult, limits: TrialLimits
) -> bool:
    """The oracle trial (when there is a runnable solution/solve.sh) and the null-agent
    trial, each in a fresh room of `backend`; False (the task skipped with the reason, no
    phase kept) when a sandbox could not be set up: infrastructure, never a finding."""
    scratch = Path(tempfile.mkdtemp(prefix="metaeval-exec-"))
    try:
        unsafe = unsafe_script(task.root, "solution", "solve.sh")
        if unsafe is not None:
            result.oracle.note = f"not run: {unsafe}"
        elif (task.root / "solution" / "solve.sh").is_file():
            (scratch / "oracle").mkdir()
            removal = OutputRemoval()
            trial = run_trial(
                task.root,
                backend,
                limits=limits,
                scratch=scratch / "oracle",
                agent=TrialAgent(get_agent("oracle")),
                hooks=removal,
            )
            if trial.sandbox_error:
                return _not_started(result, trial.sandbox_error)
            result.oracle = _outcome("oracle", trial)
            result.outputs_removed = removal.outcome
            if removal.outcome.ran:
                result.removed_files = removal.absolute(removal.created)
            result.oracle_other_changes = removal.other_changes()
        else:
            result.oracle.note = "not run: no solution/solve.sh"
        (scratch / "null_agent").mkdir()
        trial = run_trial(
            task.root,
            backend,
            limits=limits,
            scratch=scratch / "null_agent",
            agent=TrialAgent(get_agent("null")),
        )
        if trial.sandbox_error:
            return _not_started(result, trial.sandbox_error)
        result.null_agent = _outcome("null_agent", trial)
        return True
    finally:
        remove_tree(scratch)  # iterative: the phases may leave a tree deeper than rmtree copes with


def _not_started(
    result: ExecutionCheckResult, reason: str, prefix: str = "the sandbox did not start: "
) -> bool:
    """`result` skipped for `reason` (infrastructure), its phases dropped; returns False."""
    _infra_skip(result, prefix + reason)
    result.oracle = PhaseOutcome(name="oracle")
    result.null_agent = PhaseOutcome(name="null_agent")
    return False


NO_CASES = (
    "no per-test outcomes: the verifier's output has no pytest -rA or -v lines and "
    "/logs/verifier holds no ctrf.json or junit.xml"
)


def _infra_skip(result: ExecutionCheckResult, reason: str) -> ExecutionCheckResult:
    """`result` skipped because this machine could not run it (no engine or sandbox, an image
    not held or not pulled, an engine call that failed): `infra_error`, so the cell is retried
    on resume and counted apart; never a finding, never a passed check."""
    result.skipped = reason
    result.infra_error = True
    return result


def _outcome(name: str, trial: TrialResult) -> PhaseOutcome:
    output = "\n".join(t for t in (trial.test.stdout, trial.test.stderr) if t) if trial.test else ""
    cases = case_outcomes(output, trial.reports) if trial.test is not None else None
    return PhaseOutcome(
        cases=cases,
        cases_note="" if cases is not None or trial.test is None else NO_CASES,
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
    finding = oracle_finding(task, result.oracle, limits)
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
    null = null_agent_finding(task, result.null_agent)
    if null is not None:
        result.findings.append(null)
    _judge_rerun(task, result)
    if result.approximate:
        result.findings = [cap_approximate(f) for f in result.findings]


def _judge_rerun(task: LoadedTask, result: ExecutionCheckResult) -> None:
    """The finding (or the note) of the oracle's tests rerun without its outputs."""
    removed = result.outputs_removed
    if removed is None or not removed.ran:
        return  # its note says why
    if result.null_agent.passed:
        removed.note = "the tests pass without the oracle's files, as the null agent showed"
        return
    found = outputs_finding(task, removed, result.removed_files, result.oracle_other_changes)
    if found is not None:
        result.findings.append(found)
    elif removed.passed:
        removed.note = (
            "the tests still pass without the oracle's files, but the oracle also "
            f"{result.oracle_other_changes[0]}, which they may check: no finding"
        )
    else:
        removed.note = "the tests fail without the oracle's files: they tell them apart"


# --------------------------------------------------------------------------- containers


def run_in_container(
    task: LoadedTask,
    engine: Engine,
    result: ExecutionCheckResult,
    limits: TrialLimits,
    *,
    pull: str = "never",
) -> ExecutionCheckResult:
    """Build (or reuse) the task's image and run both trials in fresh containers (after
    pulling the images `pull` asks for)."""
    env = task.config.get("environment")
    env = env if isinstance(env, dict) else {}
    timeout_s = _number(env.get("build_timeout_sec")) or DEFAULT_BUILD_TIMEOUT_S
    failed = pull_images(engine, task, env, pull, timeout_s=timeout_s)
    if failed is not None:
        return _infra_skip(result, pull_failed_reason(engine.name, *failed))
    missing = missing_image(engine, task, env)
    if missing is not None:  # said before any engine call of this task: no time spent
        return _infra_skip(result, unavailable_reason(engine.name, missing))
    result.backend = describe_engine(engine)
    image = ensure_image(
        engine,
        task.root,
        env.get("docker_image") if isinstance(env.get("docker_image"), str) else None,
        timeout_s=timeout_s,
        network=build_network(task.config),
    )
    result.build_log = image.log
    if image.status == "infra":  # the engine failed, not the task's build
        return _infra_skip(result, f"{engine.name}: {image.reason}")
    result.stand_in = stand_in_images(engine, base_images(task, env))
    result.approximate = bool(result.stand_in)
    if image.status == "task":
        return _build_failed(task, engine, result, image)
    assert image.image is not None
    result.image_id = image.image_id  # both phases run this id, whatever the tag names later
    try:
        backend = ContainerBackend(engine, image.run_ref or image.image)
        ran = _run_phases(task, backend, result, limits)
    except ContainerError as exc:
        _not_started(result, f"{engine.name}: {exc}", prefix="")
        return result
    if ran:
        _judge(task, result, limits)
    return result


def _build_failed(
    task: LoadedTask, engine: Engine, result: ExecutionCheckResult, image: ImageOutcome
) -> ExecutionCheckResult:
    """The task's environment does not build: a finding with the build log, capped when a
    RUN step failed on a local stand-in base image, or a skip when the stand-in lacks a
    tool the real image has."""
    result.skipped = f"{engine.name}: the environment does not build"
    finding = build_finding(task, image)
    if result.stand_in and _RUN_STEP_FAILED.search(image.log):
        # a RUN step ran on the stand-in, not on the real base image
        where = f"a local stand-in for {', '.join(result.stand_in)}"
        result.mismatch = f"environment mismatch ({where}): a RUN step of the build failed"
        lacking = missing_dependency(image.log)
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


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


# the step that failed ran a command (podman/buildah and docker/buildkit wordings)
_RUN_STEP_FAILED = re.compile(
    r'building at STEP "RUN|did not complete successfully|returned a non-zero code', re.I
)


def _outside_link(root: Path) -> str | None:
    """Why the task must not run at all: a symlink in it leads outside the task (its
    environment would be built, or its files bound, from another place), or None."""
    for entry in walk_tree(root, ignore_dirs=(".git",)):
        if entry.kind == "outside_link":
            return f"{entry.rel} is a symlink leading outside the task"
    return None


def unsafe_script(root: Path, dirname: str, name: str) -> str | None:
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
