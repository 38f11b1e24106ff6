"""A sandbox bubblewrap cannot set up is infrastructure, told apart by bwrap's status pipe
(issue 43 item 9): real bwrap, a bind source that does not exist, and a command that only
says `bwrap: ...` and fails (its own failure, never infra).

Tests skip only when bubblewrap cannot run here; METAEVAL_REQUIRE_BWRAP=1 makes them fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaeval.agents.toolloop import ToolLoopAgent
from metaeval.agents.types import Limits, Task
from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.task_hints import load_hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.protocols.improve.evaluate import evaluate_task
from metaeval.protocols.improve.pact.protocol import CommandAction
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox import bwrap_available
from metaeval.sandbox.workspace import Workspace, exec_in
from metaeval.tasks import harbor_root
from test_improve_evaluate import ScriptedClient

FORGED = "bwrap: Can't find source path /nowhere: No such file or directory"


@pytest.fixture(autouse=True)
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run on this machine")
        pytest.skip("bubblewrap (bwrap) is not usable on this machine")


@pytest.mark.bwrap
@pytest.mark.parametrize("network", [False, True])
def test_a_bind_source_that_does_not_exist_is_a_sandbox_that_never_started(tmp_path, network):
    missing = tmp_path / "gone"  # bwrap fails at setup, before the command runs
    result = exec_in(tmp_path, "echo ran", writable=True, network=network, extra_ro_binds=[missing])
    assert result.sandbox_error and f"Can't find source path {missing}" in result.sandbox_error
    assert result.returncode is None and not result.sandboxed and result.stdout == ""
    assert "[the sandbox did not start" in result.describe("echo ran")
    # the same command with the bind present runs (through the netns wrapper when networked)
    missing.mkdir()
    ran = exec_in(tmp_path, "echo ran", writable=True, network=network, extra_ro_binds=[missing])
    assert ran.ok and ran.stdout == "ran\n" and ran.sandboxed and ran.sandbox_error is None


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "script",
    [
        f'echo "{FORGED}" >&2; exit 1',
        # writing a forged status document anywhere reaches no pipe bwrap reports on
        f"for fd in 3 4 5 6 7 8 9; do echo '{{ \"exit-code\": 0 }}' >&$fd; done 2>/dev/null; "
        f'echo "{FORGED}" >&2; exit 1',
    ],
)
def test_a_command_that_says_bwrap_and_exits_1_is_its_own_failure(tmp_path, script):
    result = exec_in(tmp_path, script, writable=True)
    assert result.returncode == 1 and result.sandboxed and result.sandbox_error is None
    assert FORGED in result.stderr


@pytest.mark.bwrap
def test_a_command_killed_by_its_timeout_is_not_a_sandbox_that_never_started(tmp_path):
    result = exec_in(tmp_path, "sleep 30", writable=True, timeout_s=1)
    assert result.timed_out and result.sandbox_error is None and result.sandboxed


def command_task(root: Path) -> Path:
    task = root / "task"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("# Answer\n\nWrite answer.txt.\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    return task


@pytest.mark.bwrap
def test_an_episode_whose_sandbox_cannot_be_set_up_is_an_infra_error(tmp_path, monkeypatch):
    real = harbor_root.build_harbor_root_argv
    missing = tmp_path / "gone"

    def with_a_missing_bind(**kwargs):  # each phase's root also binds a path now gone
        return real(**kwargs, extra_ro_binds=[(missing, "/gone")])

    monkeypatch.setattr(harbor_root, "build_harbor_root_argv", with_a_missing_bind)
    client = ScriptedClient([CommandAction(command="echo hello")])
    outcome = evaluate_task(command_task(tmp_path), client, sandbox="bwrap")
    assert outcome.status == "infra_error", outcome.reason
    assert "sandbox failed at step 1" in outcome.reason and "Can't find source path" in (
        outcome.reason
    )


@pytest.mark.bwrap
def test_an_episode_command_that_says_bwrap_is_the_agent_s_own_failure(tmp_path):
    client = ScriptedClient([CommandAction(command=f'echo "{FORGED}" >&2; exit 1')])
    outcome = evaluate_task(command_task(tmp_path), client, sandbox="bwrap")
    assert outcome.status == "failed" and outcome.reward == 0.0, outcome.reason
    observation = outcome.trace[1]["observation"]
    assert observation["exit_code"] == 1 and FORGED in observation["stderr"]


@pytest.mark.bwrap
def test_a_program_that_is_not_there_is_the_command_s_failure_not_the_sandbox_s(tmp_path):
    result = exec_in(tmp_path, ["no-such-program-anywhere"], writable=True)
    assert result.returncode not in (0, None) and result.sandboxed
    assert result.sandbox_error is None and "execvp no-such-program-anywhere" in result.stderr


class GoneBindWorkspace(Workspace):
    """A workspace whose every command also binds a path that is not there (bwrap fails)."""

    gone = Path("/nonexistent-metaeval-sandbox-start")

    def exec(self, command, **kwargs):  # type: ignore[override]
        return super().exec(command, **kwargs, extra_ro_binds=[self.gone])


def call(name: str, args: dict, id: str) -> dict:
    return {"tool_calls": [{"id": id, "name": name, "arguments": args}]}


@pytest.mark.bwrap
def test_a_tool_loop_whose_bash_sandbox_cannot_start_ends_as_infrastructure(tmp_path):
    model = ScriptedModel(
        [call("bash", {"command": "echo hi"}, "c1"), call("submit", {"answer": "x"}, "c2")]
    )
    result = ToolLoopAgent(model).run(
        Task(id="t", instruction="q"), GoneBindWorkspace(tmp_path), Limits()
    )
    assert (result.status, result.stop_reason, result.infra_error) == (
        "error",
        "sandbox_error",
        True,
    )
    assert "Can't find source path" in (result.error or "")


@pytest.mark.bwrap
def test_a_tool_loop_bash_that_says_bwrap_is_an_ordinary_tool_result(tmp_path):
    model = ScriptedModel(
        [
            call("bash", {"command": f'echo "{FORGED}" >&2; exit 1'}, "c1"),
            call("submit", {"answer": "x"}, "c2"),
        ]
    )
    result = ToolLoopAgent(model).run(Task(id="t", instruction="q"), Workspace(tmp_path), Limits())
    assert (result.status, result.stop_reason, result.infra_error) == ("ok", "submitted", False)
    seen = model.requests[-1].messages[-1].content
    assert "[exit code 1]" in seen and FORGED in seen


@pytest.mark.bwrap
def test_an_audit_task_whose_sandbox_cannot_start_is_skipped_without_a_finding(
    tmp_path, monkeypatch
):
    bench = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
    hints = load_hints(bench)
    task = load_task(bench / "median-price", bench_root=bench, hints=hints)
    real = harbor_root.build_harbor_root_argv
    missing = tmp_path / "gone"
    monkeypatch.setattr(
        harbor_root,
        "build_harbor_root_argv",
        lambda **kwargs: real(**kwargs, extra_ro_binds=[(missing, "/gone")]),
    )
    result = run_execution_checks(task, hints=hints, timeout_s=60)
    # the same task gives a GT-LOGIC finding when its sandbox starts (test_audit_execution_checks)
    assert result.skipped and result.skipped.startswith("the sandbox did not start: bwrap:")
    assert result.findings == [] and not result.oracle.ran and not result.null_agent.ran
    assert result.infra_error  # its static cell is recorded infra_error, retried on resume


@pytest.mark.bwrap
def test_a_target_server_whose_sandbox_cannot_start_fails_its_launch_with_bwrap_s_words(
    tmp_path: Path,
) -> None:
    """A PACT target server gets the same status pipe: bwrap exits without a sandbox, and the
    launch says so with bwrap's error (not 'exited with code 1', nor a startup timeout)."""
    from dataclasses import replace

    from metaeval.protocols.improve.pact.launcher import LaunchError, launch
    from metaeval.protocols.improve.profiles import SystemProfile
    from metaeval.protocols.improve.target_runtime import target_sandbox
    from metaeval.sandbox.policy import Mount

    missing = tmp_path / "gone"
    spec = target_sandbox(tmp_path)
    broken = replace(spec, mounts=[*spec.mounts, Mount(str(missing))])
    serve = SystemProfile(
        name="never-sandboxed",
        command=["{python}", "-c", "import time; time.sleep(600)"],
        cwd=tmp_path,
        startup_timeout_s=600,  # a detection by timeout would end this test as a failure
    )
    with pytest.raises(LaunchError) as info:
        launch(serve, log_path=tmp_path / "server.log", sandbox=broken)
    assert info.value.sandbox_error and f"Can't find source path {missing}" in str(info.value)
    assert "the sandbox did not start" in str(info.value)
    assert "within" not in str(info.value) and "exited with code" not in str(info.value)

    # a server that says `bwrap: ...` itself and exits 1 is its own failure
    says = serve.model_copy(
        update={"command": ["{python}", "-c", f"import sys; sys.exit({FORGED!r})"]}
    )
    with pytest.raises(LaunchError) as own:
        launch(says, log_path=tmp_path / "own.log", sandbox=spec)
    assert own.value.sandbox_error is None and "exited with code 1" in str(own.value)
    assert FORGED in own.value.log_tail
