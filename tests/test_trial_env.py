"""task.toml's `[environment.env]`, `[verifier.env]` and `[solution.env]` in real trials, and
what stays out.

Harbor passes `[solution.env]` to the oracle's solve.sh and `[verifier.env]` to the tests; a
value that is exactly `${NAME}` or `${NAME:-default}` names a host variable. The tasks here
write a reward of 1 only when they see the declared values (written out by hand in their
scripts), so a variable that did not arrive, or arrived in the wrong phase, fails them.
Bubblewrap and Podman rooms both run them (METAEVAL_REQUIRE_BWRAP=1 /
METAEVAL_REQUIRE_CONTAINER=1 turn a missing sandbox into a failure). The hostile cases set a
real secret in this test process's environment and check that no trial, log or record of an
audit run holds it unless the user allowed its name.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.reference import command_agent
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.execution_results import ExecutionCheckResult
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.evaluate import evaluate_task
from metaeval.protocols.improve.pact.protocol import CommandAction, SubmitAction
from metaeval.sandbox.container import Engine, find_engine
from metaeval.sandbox.stdin_env import shell_with_env
from metaeval.tasks.images import ensure_image
from metaeval.tasks.limits import MAX_ENV_VARS, trial_limits
from metaeval.tasks.rooms import BwrapBackend, ContainerBackend
from metaeval.tasks.toml_values import value_problems
from metaeval.tasks.trial import run_trial
from test_hostile_inputs import metaeval_argv
from test_improve_evaluate import ScriptedClient
from test_trial_runner import DOCKERFILE, improve, podman, sandboxed, seen, write_task

__all__ = ["podman", "sandboxed"]  # fixtures used below, imported from the trial tests

ROOMS = [pytest.param("bwrap", marks=pytest.mark.bwrap), "podman"]
NO_INTERNET = "\n[environment]\nallow_internet = false\n"


def room_task(root: Path, room: str, toml: str, **scripts: str | None) -> Path:
    """A task for `room`: with an environment/Dockerfile (and no network) for Podman."""
    if room == "podman":
        return write_task(root, toml + NO_INTERNET, dockerfile=DOCKERFILE, **scripts)
    return write_task(root, toml, **scripts)


@pytest.fixture(params=ROOMS)
def room(request: pytest.FixtureRequest) -> str:
    """Each test runs in both rooms; the fixture of the room fails or skips as it should."""
    request.getfixturevalue("sandboxed" if request.param == "bwrap" else "podman")
    return request.param


def audit(task_dir: Path, room: str, host_env: tuple[str, ...] = ()) -> ExecutionCheckResult:
    task = load_task(task_dir, bench_root=task_dir.parent, hints=Hints())
    result = run_execution_checks(task, hints=Hints(), sandbox=room, host_env=host_env)
    assert result.skipped is None, (result.skipped, result.build_log)
    assert result.backend.startswith("bubblewrap" if room == "bwrap" else "podman")
    return result


# --------------------------------------------------------------------------- the values arrive

GREETING_TOML = "\n[verifier.env]\nGREETING = 'Hello, \"Harbor\" $HOME `date` world'\n"
GREETING_TEST = """#!/bin/bash
echo "greeting=$GREETING"
if [ "$GREETING" = 'Hello, "Harbor" $HOME `date` world' ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""


def test_the_verifier_sees_the_declared_greeting(room: str, tmp_path: Path) -> None:
    task = room_task(tmp_path / "greet", room, GREETING_TOML, test=GREETING_TEST)
    result = audit(task, room)
    # the null agent's tests see it too: they pass without work (an EVAL-COVERAGE finding)
    assert result.oracle.reward == 1 and result.null_agent.reward == 1, result.oracle.log
    assert seen(result.null_agent.log, "greeting") == 'Hello, "Harbor" $HOME `date` world'


def test_without_the_table_the_same_tests_fail(room: str, tmp_path: Path) -> None:
    task = room_task(tmp_path / "plain", room, "", test=GREETING_TEST)
    result = audit(task, room)
    assert result.oracle.reward == 0 and result.null_agent.reward == 0
    assert seen(result.oracle.log, "greeting") == ""


SEPARATE_TOML = """
[solution.env]
SOLUTION_ONLY = "for the oracle"

[verifier.env]
VERIFIER_ONLY = "for the tests"
"""
SEPARATE_SOLVE = """#!/bin/bash
printf '%s|%s' "${SOLUTION_ONLY-unset}" "${VERIFIER_ONLY-unset}" > /app/solve-saw.txt
"""
SEPARATE_TEST = """#!/bin/bash
solve=$(cat /app/solve-saw.txt 2>/dev/null || echo none)
tests="${SOLUTION_ONLY-unset}|${VERIFIER_ONLY-unset}"
echo "solve-saw=$solve"
echo "test-saw=$tests"
if [ "$solve" = "for the oracle|unset" ] && [ "$tests" = "unset|for the tests" ]; then
  echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def test_each_table_reaches_its_own_phase_only(room: str, tmp_path: Path) -> None:
    task = room_task(
        tmp_path / "sep", room, SEPARATE_TOML, test=SEPARATE_TEST, solve=SEPARATE_SOLVE
    )
    result = audit(task, room)
    assert seen(result.oracle.log, "solve-saw") == "for the oracle|unset"
    assert seen(result.oracle.log, "test-saw") == "unset|for the tests"
    assert result.oracle.reward == 1
    # the null agent has no solve step; its tests still get [verifier.env] only
    assert seen(result.null_agent.log, "test-saw") == "unset|for the tests"
    assert result.null_agent.reward == 0


def test_an_agents_solve_step_gets_neither_table(room: str, tmp_path: Path) -> None:
    task_dir = room_task(
        tmp_path / "agent", room, SEPARATE_TOML, test=SEPARATE_TEST, solve=SEPARATE_SOLVE
    )
    task = load_task(task_dir, bench_root=tmp_path, hints=Hints())
    probe = TrialAgent(
        command_agent('echo "agent-saw=${SOLUTION_ONLY-unset}|${VERIFIER_ONLY-unset}"')
    )
    backend = (
        BwrapBackend() if room == "bwrap" else ContainerBackend(_podman(), _image_of(task_dir))
    )
    (tmp_path / "scratch").mkdir()
    trial = run_trial(
        task_dir,
        backend,
        limits=trial_limits(task.config),
        scratch=tmp_path / "scratch",
        agent=probe,
    )
    assert seen(trial.log, "agent-saw") == "unset|unset"
    assert seen(trial.log, "test-saw") == "unset|for the tests"


def _podman() -> Engine:
    engine, problem = find_engine("podman")
    assert engine is not None, problem
    return engine


def _image_of(task_dir: Path) -> str:
    """The task's image (built from its environment/Dockerfile, or found in the cache)."""
    outcome = ensure_image(_podman(), task_dir, None)
    assert outcome.status == "ok" and outcome.image, outcome.log
    return outcome.image


@pytest.mark.bwrap
def test_improves_agent_never_sees_either_table(sandboxed: None, tmp_path: Path) -> None:
    task = write_task(tmp_path / "imp", SEPARATE_TOML, test=SEPARATE_TEST, solve=None)
    probe = CommandAction(command='echo "${SOLUTION_ONLY-unset}|${VERIFIER_ONLY-unset}"')
    client = ScriptedClient([probe, SubmitAction(answer="")])
    outcome = improve(task, client, tmp_path)
    assert client.requests[1].observation.stdout == "unset|unset\n"
    assert seen(outcome.test_log, "test-saw") == "unset|for the tests"


ENVIRONMENT_TOML = """
[environment.env]
SHARED = "for every phase"
OVERRIDDEN = "from the environment"

[verifier.env]
OVERRIDDEN = "from the verifier"
"""
ENVIRONMENT_SOLVE = """#!/bin/bash
printf '%s|%s' "${SHARED-unset}" "${OVERRIDDEN-unset}" > /app/solve-saw.txt
"""
ENVIRONMENT_TEST = """#!/bin/bash
solve=$(cat /app/solve-saw.txt 2>/dev/null || echo none)
tests="${SHARED-unset}|${OVERRIDDEN-unset}"
echo "solve-saw=$solve"
echo "test-saw=$tests"
if [ "$solve" = "for every phase|from the environment" ] \\
  && [ "$tests" = "for every phase|from the verifier" ]; then
  echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def test_the_environment_table_reaches_every_phase_and_a_phase_table_wins(
    room: str, tmp_path: Path
) -> None:
    """Harbor sets `[environment.env]` on the container: the solve step and the tests see it,
    and the tests' own `[verifier.env]` value wins for a name both tables set."""
    task = room_task(
        tmp_path / "envtable",
        room,
        ENVIRONMENT_TOML,
        test=ENVIRONMENT_TEST,
        solve=ENVIRONMENT_SOLVE,
    )
    result = audit(task, room)
    assert seen(result.oracle.log, "solve-saw") == "for every phase|from the environment"
    assert seen(result.oracle.log, "test-saw") == "for every phase|from the verifier"
    assert result.oracle.reward == 1
    assert seen(result.null_agent.log, "test-saw") == "for every phase|from the verifier"


def test_an_agents_solve_step_sees_the_environment_table(room: str, tmp_path: Path) -> None:
    task_dir = room_task(tmp_path / "envagent", room, ENVIRONMENT_TOML, test=ENVIRONMENT_TEST)
    task = load_task(task_dir, bench_root=tmp_path, hints=Hints())
    probe = TrialAgent(command_agent('echo "agent-saw=${SHARED-unset}|${OVERRIDDEN-unset}"'))
    backend = (
        BwrapBackend() if room == "bwrap" else ContainerBackend(_podman(), _image_of(task_dir))
    )
    (tmp_path / "scratch").mkdir()
    trial = run_trial(
        task_dir,
        backend,
        limits=trial_limits(task.config),
        scratch=tmp_path / "scratch",
        agent=probe,
    )
    assert seen(trial.log, "agent-saw") == "for every phase|from the environment"


def test_environment_table_host_references_follow_the_allow_list(tmp_path: Path) -> None:
    config = {"environment": {"env": {"TOKEN": "${HOST_TOKEN:-fallback}", "KEY": "${HOST_KEY}"}}}
    environ = {"HOST_TOKEN": "real-token", "HOST_KEY": "real-key"}
    closed = trial_limits(config, environ=environ)
    assert dict(closed.environment_env.values) == {"TOKEN": "fallback"}
    assert any("KEY needs host variable HOST_KEY" in n for n in closed.environment_env.notes)
    opened = trial_limits(config, host_env=("HOST_KEY",), environ=environ)
    assert dict(opened.environment_env.values) == {"TOKEN": "fallback", "KEY": "real-key"}
    assert opened.with_environment({"KEY": "phase"}) == {"TOKEN": "fallback", "KEY": "phase"}
    assert "real-key" not in repr(opened)


# --------------------------------------------------------------------------- host variables

SECRET_NAME = "AWS_SECRET_ACCESS_KEY"
HOSTILE_TOML = f"""
[solution.env]
{SECRET_NAME} = "${{{SECRET_NAME}}}"

[verifier.env]
KEY = "${{{SECRET_NAME}}}"
FALLBACK = "${{{SECRET_NAME}:-no key given}}"
EMBEDDED = "prefix-${{{SECRET_NAME}}}"
"""
HOSTILE_SOLVE = f"""#!/bin/bash
env
echo "solve-key=${{{SECRET_NAME}-unset}}"
"""
HOSTILE_TEST = """#!/bin/bash
env
echo "key=${KEY-unset}"
echo "fallback=$FALLBACK"
echo "embedded=$EMBEDDED"
echo 0 > /logs/verifier/reward.txt
"""


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh secret-looking value in this process's (the host's) environment."""
    value = "wJalrXUtnFEMI/K7MDENG/" + secrets.token_urlsafe(24)
    monkeypatch.setenv(SECRET_NAME, value)
    return value


def test_a_task_cannot_read_a_host_secret_it_names(room: str, secret: str, tmp_path: Path) -> None:
    task = room_task(
        tmp_path / "greedy", room, HOSTILE_TOML, test=HOSTILE_TEST, solve=HOSTILE_SOLVE
    )
    result = audit(task, room)
    assert seen(result.oracle.log, "solve-key") == "unset"
    assert seen(result.oracle.log, "key") == "unset"
    assert seen(result.oracle.log, "fallback") == "no key given"  # the default, as Harbor
    assert seen(result.oracle.log, "embedded") == "prefix-${AWS_SECRET_ACCESS_KEY}"  # literal
    assert secret not in result.model_dump_json()  # every log, note and phase output
    assert (
        "task.toml: verifier env KEY needs host variable AWS_SECRET_ACCESS_KEY, not passed"
        in result.oracle.log
    )
    solution_note = "solution env AWS_SECRET_ACCESS_KEY needs host variable AWS_SECRET_ACCESS_KEY"
    assert solution_note in result.oracle.log
    assert solution_note not in result.null_agent.log  # no solve step there
    assert any("KEY needs host variable" in n for n in result.null_agent.notes)


def test_an_allowed_host_variable_reaches_the_tests(room: str, secret: str, tmp_path: Path) -> None:
    digest = hashlib.sha256(secret.encode()).hexdigest()
    test = (
        "#!/bin/bash\n"
        f'if [ "$(printf %s "$KEY" | sha256sum | cut -d" " -f1)" = {digest} ]; then echo 1; '
        "else echo 0; fi > /logs/verifier/reward.txt\n"
    )
    toml = f'\n[verifier.env]\nKEY = "${{{SECRET_NAME}}}"\n'
    task = room_task(tmp_path / "allowed", room, toml, test=test, solve=None)
    assert audit(task, room).null_agent.reward == 0  # not allowed: unset
    result = audit(task, room, host_env=(SECRET_NAME,))
    assert result.null_agent.reward == 1
    assert (
        "verifier env KEY = host variable AWS_SECRET_ACCESS_KEY (allowed)" in result.null_agent.log
    )
    assert secret not in result.model_dump_json()


@pytest.mark.bwrap
def test_improves_verifier_reads_a_host_variable_only_when_allowed(
    sandboxed: None, secret: str, tmp_path: Path
) -> None:
    """improve's episodes use the same allow list (`improve run --allow-host-env`): an
    LLM-judge verifier can get its key, a task that merely names a secret cannot."""
    digest = hashlib.sha256(secret.encode()).hexdigest()
    test = (
        "#!/bin/bash\n"
        f'if [ "$(printf %s "$KEY" | sha256sum | cut -d" " -f1)" = {digest} ]; then echo 1; '
        "else echo 0; fi > /logs/verifier/reward.txt\n"
    )
    toml = f'\n[verifier.env]\nKEY = "${{{SECRET_NAME}}}"\n'
    task = write_task(tmp_path / "imp-allowed", toml, test=test, solve=None)

    def episode(host_env: tuple[str, ...]):
        client = ScriptedClient([SubmitAction(answer="")])
        return evaluate_task(
            task,
            client,
            limits=EpisodeLimits(max_steps=3, task_timeout_s=60, command_timeout_s=30),
            work_root=tmp_path / "work",
            host_env=host_env,
        )

    closed = episode(())
    assert closed.reward == 0
    assert "KEY needs host variable AWS_SECRET_ACCESS_KEY, not passed" in closed.test_log
    opened = episode((SECRET_NAME,))
    assert opened.reward == 1
    assert "verifier env KEY = host variable AWS_SECRET_ACCESS_KEY (allowed)" in opened.test_log
    assert secret not in opened.model_dump_json()


def test_improve_run_refuses_an_allowed_name_that_is_no_variable(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from metaeval.cli import app

    manifest = tmp_path / "experiment.json"
    manifest.write_text("{}")
    argv = ["improve", "run", str(manifest), "-o", str(tmp_path / "b")]
    result = CliRunner().invoke(app, [*argv, "--allow-host-env", "AWS-KEY"])
    assert result.exit_code != 0
    assert "--allow-host-env 'AWS-KEY' is not a variable name" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "b").exists()


def _files_holding(root: Path, needle: str) -> list[str]:
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and needle.encode() in path.read_bytes()
    ]


@pytest.mark.bwrap
def test_an_audit_run_records_no_host_value_a_task_asks_for(
    sandboxed: None, secret: str, tmp_path: Path
) -> None:
    """Through the real command line: the records name what was not passed, and hold no
    value of it, whether or not the name looks like a credential (the blob store redacts
    those, so a plainly named one shows a leak the redaction would hide)."""
    plain = "postgres://admin:" + secrets.token_hex(12) + "@db.internal/prod"
    digest = hashlib.sha256(plain.encode()).hexdigest()
    bench = tmp_path / "bench"
    toml = HOSTILE_TOML + 'DB_URL = "${PROJECT_DB_URL}"\n'
    test = HOSTILE_TEST.replace(
        "echo 0 > /logs/verifier/reward.txt",
        f'if [ "$(printf %s "$DB_URL" | sha256sum | cut -d" " -f1)" = {digest} ]; then echo 1; '
        "else echo 0; fi > /logs/verifier/reward.txt",
    )
    write_task(bench / "greedy", toml, test=test, solve=HOSTILE_SOLVE)
    env = {**os.environ, "PROJECT_DB_URL": plain}

    def audit_cli(run: Path, absent: list[str], *extra: str) -> dict:
        argv = ["audit", "run", str(bench), "--static-only", "--sandbox", "bwrap", "-o", str(run)]
        done = subprocess.run(
            [*metaeval_argv(), *argv, *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for value in absent:
            assert value not in done.stdout + done.stderr
            assert _files_holding(run, value) == []
        [cell] = [
            json.loads(line)
            for line in (run / "audits.jsonl").read_text().splitlines()
            if '"execution"' in line
        ]
        return cell["execution"]

    denied = audit_cli(tmp_path / "run-denied", [secret, plain])
    assert denied["oracle"]["reward"] == 0  # DB_URL never arrived
    assert "verifier env DB_URL needs host variable PROJECT_DB_URL, not passed (not allowed)" in (
        " | ".join(denied["null_agent"]["env_notes"])
    )
    # allowed, the value is the task's to use (its `env` prints it into its own log)
    allowed = audit_cli(tmp_path / "run-allowed", [secret], "--allow-host-env", "PROJECT_DB_URL")
    assert allowed["null_agent"]["reward"] == 1  # the allowed value reached the tests
    notes = allowed["oracle"]["env_notes"]
    assert "verifier env DB_URL = host variable PROJECT_DB_URL (allowed)" in notes
    assert any("KEY needs host variable AWS_SECRET_ACCESS_KEY, not passed" in n for n in notes)


@pytest.mark.parametrize(
    "command", [["run", "--static-only"], ["agent-run", "--agent", "toolloop"]]
)
def test_the_cli_refuses_an_allowed_name_that_is_no_variable(
    tmp_path: Path, command: list[str]
) -> None:
    from typer.testing import CliRunner

    from metaeval.cli import app

    bench = tmp_path / "bench"
    write_task(bench / "t", "")
    argv = ["audit", command[0], str(bench), *command[1:], "-o", str(tmp_path / "r")]
    result = CliRunner().invoke(app, [*argv, "--allow-host-env", "AWS KEY"])
    assert result.exit_code != 0
    assert "--allow-host-env 'AWS KEY' is not a variable name" in result.output
    assert "allow_host_env" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


ENGINE_TOML = """
[verifier.env]
CONTAINERS_CONF = "/nonexistent/containers.conf"
LD_PRELOAD = "./not-a-library.so"
"""
ENGINE_TEST = """#!/bin/bash
echo "conf=$CONTAINERS_CONF"
if [ "$CONTAINERS_CONF" = /nonexistent/containers.conf ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
"""


def test_a_tasks_variables_never_steer_the_host_side_process(room: str, tmp_path: Path) -> None:
    """Variables the engine client or the dynamic loader read on the host reach only the
    task's shell: `podman exec` given this CONTAINERS_CONF would not start at all."""
    task = room_task(tmp_path / "steer", room, ENGINE_TOML, test=ENGINE_TEST, solve=None)
    result = audit(task, room)
    assert result.null_agent.reward == 1, result.null_agent.log
    assert seen(result.null_agent.log, "conf") == "/nonexistent/containers.conf"


def test_values_travel_on_stdin_not_on_the_command_line() -> None:
    argv, stdin = shell_with_env("bash", "bash /tests/test.sh", {"KEY": "s3cret value"})
    assert not any("s3cret" in arg for arg in argv)
    assert stdin == b"KEY=s3cret value\0"
    assert shell_with_env("bash", "true", {}) == (["bash", "-c", "true"], None)


# --------------------------------------------------------------------------- malformed tables

MALFORMED_TOML = """
[solution]
env = "SOLUTION_ONLY=yes"

[verifier.env]
GREETING = "Hello"
"1BAD" = "x"
"A-B" = "x"
"" = "x"
COUNT = 3
FLAG = true
LIST = ["a"]
NESTED = { a = "b" }
NUL = "a\\u0000b"
"""
MALFORMED_TEST = """#!/bin/bash
left="${COUNT-u}${FLAG-u}${LIST-u}${NESTED-u}${NUL-u}${SOLUTION_ONLY-u}"
echo "left=$left"
if [ "$GREETING" = Hello ] && [ "$left" = uuuuuu ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""
MALFORMED_SOLVE = 'echo "solve-saw=${SOLUTION_ONLY-unset}"\n'


def test_malformed_entries_are_left_out_with_a_note(room: str, tmp_path: Path) -> None:
    task = room_task(
        tmp_path / "bad", room, MALFORMED_TOML, test=MALFORMED_TEST, solve=MALFORMED_SOLVE
    )
    result = audit(task, room)
    assert result.oracle.reward == 1, result.oracle.log  # GREETING arrived, the rest did not
    assert seen(result.oracle.log, "solve-saw") == "unset"
    log = result.oracle.log
    assert '[solution.env] ignored: "SOLUTION_ONLY=yes" is not a table' in log
    for name in ('"1BAD"', '"A-B"', '""'):
        assert f"verifier env {name} left out: not a valid variable name" in log
    assert "verifier env COUNT left out: the value 3 is not a string" in log
    assert "verifier env FLAG left out: the value true is not a string" in log
    assert 'verifier env LIST left out: the value ["a"] is not a string' in log
    assert "verifier env NUL left out: the value holds a NUL character" in log


@pytest.mark.parametrize(
    ("config", "note"),
    [
        ({"verifier": "fast"}, None),  # not a table: nothing to read (the static checks say so)
        ({"verifier": {"env": 7}}, "[verifier.env] ignored: 7 is not a table"),
        (
            {"verifier": {"env": {f"V{i}": "x" for i in range(MAX_ENV_VARS + 1)}}},
            f"[verifier.env] ignored: {MAX_ENV_VARS + 1} variables (at most {MAX_ENV_VARS})",
        ),
        (
            {"verifier": {"env": {"BIG": "x" * 40_000}}},
            "verifier env BIG left out: the value is 40000 characters long (at most 32768)",
        ),
        (
            {"verifier": {"env": {"X" * 129: "x"}}},
            f'verifier env "{"X" * 56}..." left out: not a valid variable name',
        ),
        (
            {"verifier": {"env": {"\x1b[31mRED\u202e": "x"}}},
            'verifier env "\\u001b[31mRED\\u202e" left out: not a valid variable name',
        ),
        (
            {"verifier": {"env": {"KEY": "${AWS_SECRET_ACCESS_KEY}"}}},
            "verifier env KEY needs host variable AWS_SECRET_ACCESS_KEY, not passed "
            "(allowed but not set): left unset",
        ),
    ],
)
def test_hostile_tables_never_raise(config: dict, note: str | None) -> None:
    limits = trial_limits(config, host_env=["AWS_SECRET_ACCESS_KEY"], environ={})
    assert dict(limits.verifier_env.values) == {}
    assert list(limits.verifier_env.notes) == ([note] if note else [])


def test_limits_never_show_a_resolved_value() -> None:
    limits = trial_limits(
        {"verifier": {"env": {"KEY": "${TOKEN}"}}}, host_env=["TOKEN"], environ={"TOKEN": "tok-9"}
    )
    assert dict(limits.verifier_env.values) == {"KEY": "tok-9"}
    assert "tok-9" not in repr(limits)


def test_the_static_checks_name_a_malformed_solution_table() -> None:
    """The trial leaves such a table out with a note; the audit's static checks report it
    as they report a malformed [verifier.env]."""
    shown = [str(p) for p in value_problems({"solution": {"env": {"SEED": 1}}})]
    assert shown == ["solution.env = {SEED = 1} (expected a table of string values)"]
    assert [str(p) for p in value_problems({"solution": "fast"})] == [
        'solution = "fast" (expected a table)'
    ]
    assert value_problems({"solution": {"env": {"SEED": "1"}}}) == []
