"""evaluate_task / evaluate_suite with in-process scripted clients on the bundled suites.

Episodes run in the real bubblewrap sandbox (tests marked `bwrap` skip only when
harbor_sandbox_unavailable() says it cannot run here; METAEVAL_REQUIRE_BWRAP=1 makes them
fail instead). The score arithmetic tests need no sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.evaluate import evaluate_task
from metaeval.protocols.improve.pact.protocol import (
    ActRequest,
    ActResponse,
    CommandAction,
    ResetRequest,
    ResetResponse,
    SubmitAction,
    WriteFileAction,
)
from metaeval.protocols.improve.suite_eval import SuiteResult, evaluate_suite, run_suite
from metaeval.protocols.improve.suites import SuiteConfig
from metaeval.protocols.improve.task_outcome import TaskOutcome, opaque_task_id
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable

SUITES = Path(__file__).resolve().parents[1] / "examples" / "improve-suites"
TERMINAL = SUITES / "terminal"
FC = SUITES / "function-calling"
COUNT_TASK = TERMINAL / "count-error-lines"
SOLVE_COUNT = "awk '$3 == \"ERROR\"' /app/app.log | wc -l > /app/error_count.txt"
LCM_TASK = FC / "multiple-lcm"
LCM_ANSWER = json.dumps([{"name": "math.lcm", "arguments": {"a": 18, "b": 24}}])


class ScriptedClient:
    """A target agent that plays a fixed list of actions, then submits.

    An Exception in the list is raised from act instead; a float sleeps that many seconds
    before answering (a slow or hung agent).
    """

    def __init__(
        self,
        actions: list[Any],
        *,
        reset_error: Exception | None = None,
        reset_delay_s: float = 0.0,
    ) -> None:
        self.actions = list(actions)
        self.reset_error = reset_error
        self.reset_delay_s = reset_delay_s
        self.resets: list[ResetRequest] = []
        self.requests: list[ActRequest] = []

    def reset(self, request: ResetRequest) -> ResetResponse:
        self.resets.append(request)
        time.sleep(self.reset_delay_s)
        if self.reset_error is not None:
            raise self.reset_error
        return ResetResponse(episode_id=request.episode_id)

    def act(self, request: ActRequest) -> ActResponse:
        self.requests.append(request)
        action = self.actions.pop(0) if self.actions else SubmitAction(answer="done")
        while isinstance(action, float):
            time.sleep(action)
            action = self.actions.pop(0) if self.actions else SubmitAction()
        if isinstance(action, Exception):
            raise action
        return ActResponse(
            episode_id=request.episode_id,
            action=action,
            usage={"input_tokens": 100, "output_tokens": 10},
        )


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


def run(task: Path, client: ScriptedClient, tmp_path: Path, **kwargs: Any) -> TaskOutcome:
    """One episode; the bounds `max_steps`, `task_timeout_s`, `command_timeout_s` given as
    keywords override this file's defaults (10 steps, 60 s, 20 s)."""
    bounds = {"max_steps": 10, "task_timeout_s": 60, "command_timeout_s": 20}
    bounds |= {k: kwargs.pop(k) for k in list(kwargs) if k in bounds}
    kwargs.setdefault("work_root", tmp_path / "work")
    return evaluate_task(task, client, limits=EpisodeLimits(**bounds), **kwargs)


# --------------------------------------------------------------------------- one task


@pytest.mark.bwrap
def test_solving_commands_pass(tmp_path: Path, sandboxed: None) -> None:
    client = ScriptedClient(
        [CommandAction(command="head -n 2 /app/app.log"), CommandAction(command=SOLVE_COUNT)]
    )
    outcome = run(COUNT_TASK, client, tmp_path)
    assert outcome.status == "passed", outcome.reason + outcome.test_log
    assert outcome.reward == 1.0 and outcome.submitted and outcome.answer == "done"
    assert outcome.steps == 3
    assert outcome.usage == {"input_tokens": 300, "output_tokens": 30}
    assert outcome.reason == "submitted; reward 1"
    # the agent saw its instruction and then each command's result
    [reset] = client.resets
    # the target is told an opaque id, never the task's name (it could look answers up by it)
    assert reset.task_id.startswith("task-") and "count" not in reset.task_id
    assert reset.task_id == opaque_task_id("count-error-lines") and reset.max_steps == 10
    assert not reset.episode_id.startswith("count")
    assert reset.instruction == (COUNT_TASK / "instruction.md").read_text()
    kinds = [r.observation.kind for r in client.requests]
    assert kinds == ["initial", "command_result", "command_result"]
    first = client.requests[1].observation
    assert first.exit_code == 0 and first.step == 1 and first.stdout.count("\n") == 2
    assert [step["action"]["type"] for step in outcome.trace] == ["command", "command", "submit"]
    assert outcome.trace[0]["observation"]["kind"] == "initial"
    assert "reward: 1" in outcome.test_log
    assert not list((tmp_path / "work").iterdir())  # scratch removed


@pytest.mark.bwrap
def test_solving_write_file_passes_a_function_calling_task(tmp_path: Path, sandboxed: None) -> None:
    client = ScriptedClient([WriteFileAction(path="/app/result.json", content=LCM_ANSWER)])
    outcome = run(LCM_TASK, client, tmp_path)
    assert outcome.status == "passed", outcome.test_log
    assert client.requests[1].observation.kind == "file_written"
    assert (
        client.requests[1].observation.message
        == f"wrote {len(LCM_ANSWER)} bytes to /app/result.json"
    )


@pytest.mark.bwrap
def test_no_op_submit_fails(tmp_path: Path, sandboxed: None) -> None:
    outcome = run(LCM_TASK, ScriptedClient([SubmitAction()]), tmp_path)
    assert outcome.status == "failed" and outcome.reward == 0.0
    assert outcome.steps == 1 and outcome.submitted
    assert "FAIL" in outcome.test_log and "no result file at /app/result.json" in outcome.test_log


@pytest.mark.bwrap
def test_wrong_answer_fails_with_the_checker_reason(tmp_path: Path, sandboxed: None) -> None:
    wrong = json.dumps([{"name": "math.gcd", "arguments": {"a": 18, "b": 24}}])
    outcome = run(
        LCM_TASK, ScriptedClient([WriteFileAction(path="result.json", content=wrong)]), tmp_path
    )
    assert outcome.status == "failed"
    assert "function 'math.gcd' is not the expected 'math.lcm'" in outcome.test_log


@pytest.mark.bwrap
def test_client_raising_in_act_is_a_target_error(tmp_path: Path, sandboxed: None) -> None:
    client = ScriptedClient([CommandAction(command="true"), ConnectionError("server died")])
    outcome = run(COUNT_TASK, client, tmp_path)
    assert outcome.status == "target_error"
    assert outcome.reason == "act failed at step 2: ConnectionError: server died"
    assert outcome.reward is None and outcome.test_log == ""  # no tests for a broken candidate
    assert outcome.steps == 1


@pytest.mark.bwrap
def test_client_raising_in_reset_is_a_target_error(tmp_path: Path, sandboxed: None) -> None:
    client = ScriptedClient([], reset_error=RuntimeError("cannot launch"))
    outcome = run(COUNT_TASK, client, tmp_path)
    assert outcome.status == "target_error"
    assert outcome.reason == "reset failed: RuntimeError: cannot launch"
    assert client.requests == []


@pytest.mark.bwrap
def test_malformed_act_response_is_a_target_error(tmp_path: Path, sandboxed: None) -> None:
    class Malformed(ScriptedClient):
        def act(self, request: ActRequest) -> Any:
            return {"episode_id": request.episode_id, "action": {"type": "dance"}}

    outcome = run(COUNT_TASK, Malformed([]), tmp_path)
    assert outcome.status == "target_error"
    assert outcome.reason.startswith("act returned a malformed response at step 1: action")


@pytest.mark.bwrap
def test_write_file_cannot_escape_app(tmp_path: Path, sandboxed: None) -> None:
    escapes = [
        "../escape.txt",
        "/app/../escape.txt",
        "/etc/escape.txt",
        str(tmp_path / "escape.txt"),
        "/app",
        "link/escape.txt",  # symlink to /tmp made inside the sandbox
        "up/escape.txt",  # symlink to .. made inside the sandbox
        "abs",  # an absolute symlink as the target itself
    ]
    client = ScriptedClient(
        [CommandAction(command="ln -s /tmp link && ln -s .. up && ln -s /app/app.log abs")]
        + [WriteFileAction(path=p, content="pwned\n") for p in escapes]
        + [WriteFileAction(path="/app/sub/dir/ok.txt", content="fine\n")]
    )
    outcome = run(COUNT_TASK, client, tmp_path, max_steps=20, keep_work=True)
    observations = [r.observation for r in client.requests[2 : 2 + len(escapes)]]
    assert [o.kind for o in observations] == ["error"] * len(escapes)
    assert all(o.message.startswith("refused: ") for o in observations)
    assert "outside /app" in observations[2].message
    assert "symlink" in observations[5].message and "symlink" in observations[7].message
    last = client.requests[2 + len(escapes)].observation
    assert last.kind == "file_written" and last.message == "wrote 5 bytes to /app/sub/dir/ok.txt"
    assert outcome.status == "failed"
    # nothing was written outside the work directory
    [scratch] = list((tmp_path / "work").iterdir())
    app = scratch / "app"
    assert (app / "sub" / "dir" / "ok.txt").read_text() == "fine\n"
    assert (app / "app.log").read_text() == (COUNT_TASK / "environment" / "app.log").read_text()
    written = [p for p in tmp_path.rglob("escape.txt")]
    assert written == []
    assert not Path("/etc/escape.txt").exists()


@pytest.mark.bwrap
def test_agent_sees_neither_tests_nor_solution_and_cannot_forge_the_reward(
    tmp_path: Path, sandboxed: None
) -> None:
    client = ScriptedClient(
        [
            CommandAction(command="ls /tests /solution"),
            CommandAction(
                command="echo 1 > /logs/verifier/reward.txt && cat /logs/verifier/reward.txt"
            ),
            CommandAction(
                command="python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\""
                " 2>/dev/null && echo online || echo offline"
            ),
        ]
    )
    outcome = run(COUNT_TASK, client, tmp_path)
    listing = client.requests[1].observation
    assert listing.exit_code != 0 and "No such file or directory" in listing.stderr
    assert client.requests[2].observation.stdout == "1\n"  # a scratch dir, not the verifier's
    assert client.requests[3].observation.stdout == "offline\n"  # no network for the agent
    assert outcome.status == "failed" and outcome.reward == 0.0


@pytest.mark.bwrap
def test_step_limit_still_runs_the_tests(tmp_path: Path, sandboxed: None) -> None:
    client = ScriptedClient(
        [CommandAction(command=SOLVE_COUNT)] + [CommandAction(command="true")] * 5
    )
    outcome = run(COUNT_TASK, client, tmp_path, max_steps=3)
    assert outcome.status == "passed" and not outcome.submitted
    assert outcome.steps == 3 and len(client.requests) == 3
    assert outcome.reason == "step limit (3) reached without submit; reward 1"
    assert outcome.trace[-1]["action"] is None  # the last result, never shown to the agent
    assert outcome.trace[-1]["observation"]["kind"] == "command_result"


@pytest.mark.bwrap
def test_command_timeout_is_reported_to_the_agent(tmp_path: Path, sandboxed: None) -> None:
    client = ScriptedClient([CommandAction(command="echo start; sleep 30", timeout_s=100)])
    started = time.monotonic()
    outcome = run(COUNT_TASK, client, tmp_path, command_timeout_s=1)
    assert time.monotonic() - started < 25  # the command/episode would take 30 s
    observation = client.requests[1].observation
    assert observation.timed_out and observation.exit_code is None
    assert observation.stdout == "start\n"
    assert observation.message == "command timed out after 1 s"
    assert outcome.status == "failed"


@pytest.mark.bwrap
def test_episode_time_limit_never_hangs_and_still_runs_the_tests(
    tmp_path: Path, sandboxed: None
) -> None:
    client = ScriptedClient([CommandAction(command=SOLVE_COUNT), 30.0])
    started = time.monotonic()
    outcome = run(COUNT_TASK, client, tmp_path, task_timeout_s=2)
    assert time.monotonic() - started < 25  # the command/episode would take 30 s
    assert outcome.status == "passed"  # the work was done before the agent hung
    assert outcome.reason == "episode time limit (2 s) reached without submit; reward 1"


@pytest.mark.bwrap
def test_hung_reset_is_a_target_error(tmp_path: Path, sandboxed: None) -> None:
    started = time.monotonic()
    outcome = run(COUNT_TASK, ScriptedClient([], reset_delay_s=30), tmp_path, task_timeout_s=1)
    assert time.monotonic() - started < 25  # the reset would take 30 s
    assert outcome.status == "target_error"
    assert "reset did not answer within the episode time limit" in outcome.reason


def test_sandbox_unavailable_is_an_infra_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(bwrap_mod.FORCE_FALLBACK_ENV, "1")
    client = ScriptedClient([CommandAction(command=SOLVE_COUNT)])
    outcome = run(COUNT_TASK, client, tmp_path)
    assert outcome.status == "infra_error"
    assert outcome.reason.startswith("sandbox unavailable: ")
    assert client.resets == []  # the candidate was never contacted


def test_incomplete_task_is_an_infra_error(tmp_path: Path) -> None:
    task = tmp_path / "broken"
    shutil.copytree(COUNT_TASK, task)
    (task / "tests" / "test.sh").unlink()
    client = ScriptedClient([])
    outcome = run(task, client, tmp_path)
    assert outcome.status == "infra_error"
    if harbor_sandbox_unavailable() is None:
        assert outcome.reason == "task is incomplete: no tests/test.sh"
    assert client.resets == []


def test_non_positive_limits_are_rejected(tmp_path: Path) -> None:
    for bound in ("max_steps", "task_timeout_s", "command_timeout_s", "verifier_timeout_s"):
        with pytest.raises(ValueError, match=bound):
            EpisodeLimits(**{bound: 0})
    with pytest.raises(ValueError, match="max_steps"):
        run(COUNT_TASK, ScriptedClient([]), tmp_path, max_steps=0)


# --------------------------------------------------------------------------- suites


def outcome(status: str) -> TaskOutcome:
    return TaskOutcome(task_id=status, status=status)  # type: ignore[arg-type]


def test_score_counts_every_task_of_the_suite() -> None:
    """passed / total: an infra or target error is never dropped from the denominator."""
    statuses = ["passed"] * 3 + ["failed"] + ["infra_error"] * 2 + ["target_error"]
    result = SuiteResult.from_outcomes([outcome(s) for s in statuses], name="s")
    assert (result.passed, result.failed) == (3, 1)
    assert (result.infra_errors, result.target_errors) == (2, 1)
    assert result.score == 3 / 7
    assert result.total == 7 and result.scored == 4
    assert result.broken


def test_score_of_an_unrun_suite_is_zero_and_of_an_empty_one_none() -> None:
    result = SuiteResult.from_outcomes([outcome("infra_error")])
    assert result.score == 0.0 and not result.broken
    assert SuiteResult.from_outcomes([]).score is None


@pytest.mark.bwrap
def test_evaluate_suite_counts_and_keeps_task_order(tmp_path: Path, sandboxed: None) -> None:
    broken_task = tmp_path / "no-tests"
    shutil.copytree(COUNT_TASK, broken_task)
    shutil.rmtree(broken_task / "tests")
    tasks = [COUNT_TASK, LCM_TASK, TERMINAL / "checksum-file", FC / "parallel-bmi", broken_task]
    scripts = iter(
        [
            ScriptedClient([CommandAction(command=SOLVE_COUNT)]),  # passed
            ScriptedClient([SubmitAction()]),  # failed
            ScriptedClient([RuntimeError("crashed")]),  # target error
            None,  # the factory raises: target error
            ScriptedClient([]),  # infra error (the task has no tests)
        ]
    )
    lock = threading.Lock()

    def factory() -> ScriptedClient:
        # one worker: clients are made in task order
        with lock:
            client = next(scripts)
        if client is None:
            raise ConnectionRefusedError("no server")
        return client

    seen: list[str] = []
    result = evaluate_suite(
        tasks,
        factory,
        concurrency=1,
        limits=EpisodeLimits(max_steps=5, task_timeout_s=30, command_timeout_s=10),
        work_root=tmp_path / "work",
        name="mixed",
        on_outcome=lambda o: seen.append(o.task_id),
    )
    assert [o.task_id for o in result.outcomes] == [t.name for t in tasks]
    assert [o.status for o in result.outcomes] == [
        "passed",
        "failed",
        "target_error",
        "target_error",
        "infra_error",
    ]
    assert result.outcomes[3].reason == (
        "the client could not be created: ConnectionRefusedError: no server"
    )
    assert (result.passed, result.failed, result.target_errors, result.infra_errors) == (
        1,
        1,
        2,
        1,
    )
    assert result.score == 1 / 5 and result.broken and result.name == "mixed"
    assert sorted(seen) == sorted(t.name for t in tasks)


@pytest.mark.bwrap
def test_run_suite_with_concurrency(tmp_path: Path, sandboxed: None) -> None:
    config = SuiteConfig(
        name="fc-held-out",
        tasks_dir=FC,
        split_id="held_out",
        concurrency=3,
        max_steps_per_task=2,
        task_timeout_s=30,
        command_timeout_s=10,
    )
    result = run_suite(config, lambda: ScriptedClient([]), work_root=tmp_path / "work")
    assert result.total == 5 and result.failed == 5 and result.score == 0.0
    assert not result.broken
    assert [o.task_id for o in result.outcomes] == [
        "simple-book-search",
        "simple-set-thermostat",
        "multiple-cancel-order",
        "multiple-delete-branch",
        "parallel-stock-prices",
    ]


@pytest.mark.bwrap
def test_refused_reset_is_a_target_error(tmp_path: Path, sandboxed: None) -> None:
    class Refusing(ScriptedClient):
        def reset(self, request: ResetRequest) -> Any:
            return {"episode_id": request.episode_id, "ok": False}

    outcome = run(COUNT_TASK, Refusing([]), tmp_path)
    assert outcome.status == "target_error" and outcome.reason == "reset was refused (ok: false)"
