"""The oracle and the null agent as ordinary agents (issue 42 item 1): built by name from the
agent registry, run by `run_trial` through the same path as any agent (`TrialAgent`), in real
bubblewrap (METAEVAL_REQUIRE_BWRAP=1 turns a missing sandbox into a failure).

The task's solve.sh writes an answer only with the value of its `[solution.env]`, and the
tests give a reward of 1 only for that answer, so an oracle that was not shown /solution, or
not given the table, scores 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.reference import command_agent
from metaeval.agents.registry import agent_names, get_agent
from metaeval.agents.types import Limits, Task
from metaeval.errors import ConfigError
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import BwrapBackend
from metaeval.tasks.task_workspace import TaskRootWorkspace
from metaeval.tasks.trial import TrialResult, run_trial
from test_hostile_inputs import metaeval_argv

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"

TOML = 'version = "1.0"\n[solution.env]\nANSWER_WORD = "lantern"\n'
SOLVE = '#!/bin/bash\nprintf "%s\\n" "$ANSWER_WORD" > /app/answer.txt\necho "solved"\n'
TEST = (
    "#!/bin/bash\n"
    'if [ "$(cat /app/answer.txt 2>/dev/null)" = lantern ]; then r=1; else r=0; fi\n'
    "echo $r > /logs/verifier/reward.txt\n"
)


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


def write_task(root: Path) -> Path:
    for rel, text in {
        "task.toml": TOML,
        "instruction.md": "Write the answer word to /app/answer.txt.\n",
        "solution/solve.sh": SOLVE,
        "tests/test.sh": TEST,
        "environment/seed.txt": "seeded\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def trial(task: Path, scratch: Path, agent: TrialAgent) -> TrialResult:
    scratch.mkdir()
    limits = trial_limits(tomllib.loads((task / "task.toml").read_text()))
    return run_trial(task, BwrapBackend(), limits=limits, scratch=scratch, agent=agent)


def test_both_are_registered_by_name() -> None:
    assert {"oracle", "null"} <= set(agent_names())
    assert get_agent("oracle").name == "oracle" and get_agent("null").name == "null"
    with pytest.raises(ConfigError, match="oracle, null"):
        get_agent("orcale")


@pytest.mark.bwrap
def test_the_oracle_solves_through_the_ordinary_agent_path(sandboxed: None, tmp_path: Path) -> None:
    task = write_task(tmp_path / "task")
    oracle = TrialAgent(get_agent("oracle"))
    result = trial(task, tmp_path / "scratch", oracle)
    assert result.reward == 1.0, result.log
    assert result.solve is not None and result.solve.ok and result.solve.stdout == "solved\n"
    assert "$ bash /solution/solve.sh" in result.log
    ran = oracle.result
    assert ran is not None and (ran.status, ran.stop_reason) == ("ok", "submitted")
    assert ran.files_produced == ["answer.txt"]  # seed.txt was there before it ran
    assert [e.tool for e in ran.transcript if e.type == "tool_call"] == ["bash", "submit"]


@pytest.mark.bwrap
def test_the_null_agent_runs_nothing_and_scores_what_the_tests_give_for_no_work(
    sandboxed: None, tmp_path: Path
) -> None:
    task = write_task(tmp_path / "task")
    null = TrialAgent(get_agent("null"))
    result = trial(task, tmp_path / "scratch", null)
    assert result.reward == 0.0, result.log
    assert result.solve is None and result.log.count("\n$ ") + result.log.startswith("$ ") == 1
    assert "$ bash /tests/test.sh" in result.log  # the tests' command is the only one
    assert null.result is not None and null.result.status == "ok"
    assert null.result.files_produced == [] and null.result.steps == 1


@pytest.mark.bwrap
def test_only_the_agent_that_asks_sees_the_solution_and_its_table(
    sandboxed: None, tmp_path: Path
) -> None:
    task = write_task(tmp_path / "task")
    probe = 'test -e /solution/solve.sh && echo "saw=yes|${ANSWER_WORD-unset}" || echo saw=no'
    plain = trial(task, tmp_path / "plain", TrialAgent(command_agent(probe)))
    assert plain.solve is not None and plain.solve.stdout == "saw=no\n", plain.log
    seeing = get_agent("scripted", actions=[("bash", {"command": probe})], sees_solution=True)
    shown = trial(task, tmp_path / "shown", TrialAgent(seeing))
    assert shown.solve is not None and shown.solve.stdout == "saw=yes|lantern\n", shown.log


@pytest.mark.bwrap
def test_a_trial_gives_the_agent_the_tasks_instruction_and_phase_time_limit(
    sandboxed: None, tmp_path: Path
) -> None:
    task = write_task(tmp_path / "task")
    with (task / "task.toml").open("a") as toml:
        toml.write("[agent]\ntimeout_sec = 42.0\n")
    seen: list[Task] = []

    def actions(given: Task) -> list:
        seen.append(given)
        return [("submit", {"answer": given.instruction})]

    bound = TrialAgent(get_agent("scripted", actions=actions))
    trial(task, tmp_path / "scratch", bound)
    assert seen[0].instruction == "Write the answer word to /app/answer.txt.\n"
    assert bound.result is not None and bound.result.time_limit_s == 42.0
    assert bound.result.submission == seen[0].instruction


@pytest.mark.bwrap
def test_the_oracle_runs_in_any_environment_without_a_solution_and_says_so(
    sandboxed: None, tmp_path: Path
) -> None:
    """An ordinary agent: given a task root with no /solution, its command fails and the
    run still ends with its transcript (nothing special-cased)."""
    (tmp_path / "app").mkdir()
    (tmp_path / "logs").mkdir()
    env = TaskRootWorkspace(tmp_path / "app", tmp_path / "logs")
    ran = get_agent("oracle").run(Task(id="t", instruction=""), env, Limits(time_limit_s=60))
    assert ran.status == "ok" and ran.files_produced == []
    results = [e.text for e in ran.transcript if e.type == "tool_result"]
    assert results[0].startswith("[exit code 127]") and "solve.sh" in results[0], results


@pytest.mark.bwrap
def test_audit_agent_run_takes_the_oracle_and_the_null_agent_by_name(
    sandboxed: None, tmp_path: Path
) -> None:
    """`metaeval audit agent-run --agent oracle|null`: the example task's reference solution
    passes its tests, doing nothing does not, and the oracle's program is what solve.sh wrote."""
    bench = tmp_path / "bench"
    shutil.copytree(EXAMPLES / "grade-mean", bench / "grade-mean")
    rewards = {}
    for name in ("oracle", "null"):
        out = tmp_path / name
        argv = [*metaeval_argv(), "audit", "agent-run", str(bench), "--agent", name]
        done = subprocess.run([*argv, "-o", str(out)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = (out / "agent_runs.jsonl").read_text().splitlines()
        (record,) = [json.loads(line) for line in lines if line.strip()]
        assert record["status"] == "ok", record
        rewards[name] = record["reward"]
        diff = (out / "grade-mean" / "program.diff").read_text()
        assert ("+++ b/output.txt" in diff) == (name == "oracle"), diff
    assert rewards == {"oracle": 1.0, "null": 0.0}
