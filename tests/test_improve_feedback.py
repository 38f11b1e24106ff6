"""What a meta-agent is given and within which limits (issue 28, items 5 and 6).

Real runs of the scripted demo experiment (real git, real bwrap evaluations): the second
trial's input carries its parent's per-task optimize results and the test logs of its failed
tasks, and nothing of the held-out split; the SUT config's `timeout_s` ends a meta-agent that
overruns; `tool_menu` restricts what a toolloop meta-agent is offered; a lane that cannot
honour a menu refuses it, naming the field.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from improve_experiment import experiment, ledger
from metaeval.agents.toolloop import ToolLoopAgent
from metaeval.errors import ConfigError
from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.improve.meta_agents import AgentMetaAgent, ScriptedMetaAgent
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.scripted_steps import improve

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "improve-suites" / "terminal"


def held_out_numbers(data: Any, path: str = "") -> list[str]:
    """Paths of numbers under any key that names the held-out split."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            here = f"{path}.{key}"
            if "held" in key.lower() and isinstance(value, (int, float, dict, list)):
                found.append(here)
            found += held_out_numbers(value, here)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += held_out_numbers(value, f"{path}[{index}]")
    return found


@pytest.mark.bwrap
def test_second_trial_gets_parent_results_and_failed_logs_and_nothing_held_out(tmp_path):
    seen = tmp_path / "seen-context"

    def look(worktree: Path, _input: dict) -> str:
        shutil.copytree(worktree / ".aie_bench_recursive", seen)
        prompts = worktree / "target_agent" / "prompts.py"
        prompts.write_text(prompts.read_text() + "\n# looked\n")
        return "look at the feedback"

    manifest = experiment(tmp_path, budget=2)
    run_experiment(manifest, meta_agent=ScriptedMetaAgent([improve(SUITE), look]))
    bundle = tmp_path / "runs" / "improve-demo"
    first, _ = ledger(bundle)
    assert first["decision"] == "promoted"
    parent_eval = json.loads(
        (bundle / "trials" / "001" / "artifacts" / "candidates" / "evaluation.json").read_text()
    )
    given = json.loads((bundle / "trials" / "002" / "optimizer_input.json").read_text())
    results = given["parent_results"]
    assert results["parent_id"] == "trial-001" and given["parent"]["id"] == "trial-001"
    # the parent's per-task optimize results, as evaluated
    assert results["optimize"]["tasks"] == [
        {k: t[k] for k in ("task_id", "status", "reward", "reason")}
        for t in parent_eval["optimize"]["tasks"]
    ]
    failed = [t["task_id"] for t in parent_eval["optimize"]["tasks"] if t["status"] == "failed"]
    assert failed and [log["task_id"] for log in results["failed_task_logs"]] == failed
    for log in results["failed_task_logs"]:
        row = next(t for t in parent_eval["optimize"]["tasks"] if t["task_id"] == log["task_id"])
        kept = (bundle / row["test_log"]).read_text()  # the bundle keeps the whole log
        assert log["raw_bytes"] == len(kept.encode()) >= log["delivered_bytes"] > 0
        assert "reward" in log["excerpt"] and kept.endswith(log["excerpt"])
        # the same excerpt in the bundle's feedback and in the meta-agent's context
        assert (bundle / "trials" / "002" / log["file"]).read_text() == log["excerpt"]
        assert (seen / log["file"]).read_text() == log["excerpt"]
    # and the tails of the target's transcripts of those tasks
    assert [t["task_id"] for t in results["failed_task_transcripts"]] == failed
    for item in results["failed_task_transcripts"]:
        assert item["raw_bytes"] >= item["delivered_bytes"] > 0
        assert '"observation"' in item["excerpt"]
        assert (seen / item["file"]).read_text() == item["excerpt"]
        assert (bundle / "trials" / "002" / item["file"]).read_text() == item["excerpt"]
    assert json.loads((seen / "feedback" / "parent_results.json").read_text()) == results
    context = (seen / "optimizer_context.md").read_text()
    assert f"- {failed[0]}: failed" in context and f"feedback/logs/{failed[0]}.log" in context

    # nothing of the held-out split: no score, no held-out task, in anything it was given
    held_tasks = json.loads((bundle / "resolved_manifest.json").read_text())["suites"]
    held_tasks = set(held_tasks["held_out"]["tasks"]) - set(held_tasks["optimize"]["tasks"])
    assert held_tasks and first["held_out_score"] is not None
    assert held_out_numbers(given) == []
    texts = [(bundle / "trials" / "002" / "optimizer_input.json").read_text()]
    texts += [p.read_text() for p in seen.rglob("*") if p.is_file()]
    for text in texts:
        assert "held_out_score" not in text
        for task in held_tasks:
            assert task not in text
    assert given["feedback"][0]["held_out_gate"] == "passed"


def sleeper(worktree: Path, _input: dict) -> str:
    time.sleep(4)
    prompts = worktree / "target_agent" / "prompts.py"
    prompts.write_text(prompts.read_text() + "\nlate = True\n")
    return "too late"


@pytest.mark.bwrap
@pytest.mark.parametrize("grace", [30.0, 0.5])
def test_meta_agent_over_its_timeout_makes_the_trial_invalid(tmp_path, monkeypatch, grace):
    """Finished late (its transcript kept) or abandoned: a timeout either way."""
    monkeypatch.setattr("metaeval.protocols.improve.proposal.PROPOSAL_GRACE_S", grace)
    manifest = experiment(tmp_path, budget=1, timeout_s=1)
    started = time.monotonic()
    run_experiment(manifest, meta_agent=ScriptedMetaAgent([sleeper]))
    bundle = tmp_path / "runs" / "improve-demo"
    (entry,) = ledger(bundle)
    assert entry["decision"] == "invalid" and entry["failure_class"] == "meta_agent_failure"
    assert entry["meta_agent"]["status"] == "timeout" and entry["candidate_commit"] is None
    decision = json.loads((bundle / "trials" / "001" / "selection_decision.json").read_text())
    (reason,) = decision["reasons"]
    assert reason["code"] == "meta_agent_timeout"
    assert "time limit of 1 s (SUT config timeout_s)" in reason["detail"]
    assert (bundle / "trials" / "001" / "candidate.patch").read_text() == ""
    trace = (bundle / "trials" / "001" / "optimizer_trace.jsonl").read_text()
    if grace > 4:
        assert "took 4." in reason["detail"] and "too late" in trace
    else:  # not waited for: the trial ended before the meta-agent did
        assert "did not finish" in reason["detail"] and trace == ""
        assert time.monotonic() - started < 60
    limits = json.loads((bundle / "resolved_manifest.json").read_text())["meta_agent_limits"]
    assert limits == {"timeout_s": 1, "max_steps": 40, "tool_menu": "full", "launch_profile": None}


def call(name: str, args: dict, ident: str) -> dict:
    return {
        "tool_calls": [
            {"id": ident, "name": name, "arguments": args, "arguments_json": json.dumps(args)}
        ]
    }


PEEK = (
    "cat ../../../baseline_evaluation.json ../../../trial_ledger.jsonl; "
    "find / -name 'baseline_evaluation.json' -o -name 'evaluation.json' 2>/dev/null "
    "| xargs -r cat; echo peeked"
)


@pytest.mark.bwrap
def test_bash_only_tool_menu_offers_the_toolloop_meta_agent_bash_and_submit(tmp_path):
    model = ScriptedModel(
        [
            call("read_file", {"path": "target_agent/prompts.py"}, "r1"),
            # the bundle around the worktree holds held-out scores: not visible to its bash
            call("bash", {"command": PEEK}, "p1"),
            call("bash", {"command": "echo '# bash-only' >> target_agent/prompts.py"}, "b1"),
            call("submit", {"answer": "append a comment with bash"}, "s1"),
        ]
    )
    manifest = experiment(tmp_path, budget=1, tool_menu=["bash"], max_steps=4)
    run_experiment(manifest, meta_agent=AgentMetaAgent(ToolLoopAgent(model)))
    assert model.requests and all(
        [t.name for t in r.tools] == ["bash", "submit"] for r in model.requests
    )
    bundle = tmp_path / "runs" / "improve-demo"
    trace = (bundle / "trials" / "001" / "optimizer_trace.jsonl").read_text()
    assert "tool not offered: read_file" in trace  # named anyway: refused, not run
    events = [json.loads(line) for line in trace.splitlines()]
    (peek,) = [e["text"] for e in events if e.get("call_id") == "p1"]
    assert "peeked" in peek and "held_out" not in peek and "score" not in peek
    assert "No such file" in peek
    assert "# bash-only" in (bundle / "trials" / "001" / "candidate.patch").read_text()
    resolved = json.loads((bundle / "resolved_manifest.json").read_text())
    assert resolved["meta_agent_limits"]["tool_menu"] == ["bash"]
    assert resolved["meta_agent_limits"]["max_steps"] == 4 == len(model.requests)


def test_a_lane_that_cannot_honour_a_tool_menu_refuses_it(tmp_path):
    manifest = experiment(tmp_path, budget=1, tool_menu=["bash"])
    sut = tmp_path / "examples" / "improve" / "suts" / "scripted_sut.json"
    with pytest.raises(ConfigError) as error:
        run_experiment(manifest)  # the SUT's own scripted lane
    assert error.value.field == "tool_menu" and str(sut) in str(error.value)
    assert "cannot honour a tool menu" in str(error.value)
    assert not (tmp_path / "runs" / "improve-demo").exists()  # refused before anything ran

    data = json.loads(sut.read_text())
    data["tool_menu"] = ["bash", "edit"]
    sut.write_text(json.dumps(data))
    agent = AgentMetaAgent(ToolLoopAgent(ScriptedModel([])))
    with pytest.raises(ConfigError, match="unknown tool.*edit") as error:
        run_experiment(manifest, meta_agent=agent)
    assert error.value.field == "tool_menu"


@pytest.mark.bwrap
def test_the_sut_configs_max_steps_ends_the_meta_agent(tmp_path):
    edit = "echo '# step' >> target_agent/prompts.py"
    model = ScriptedModel([call("bash", {"command": edit}, f"b{n}") for n in range(3)])
    manifest = experiment(tmp_path, budget=1, tool_menu=["bash"], max_steps=2)
    run_experiment(manifest, meta_agent=AgentMetaAgent(ToolLoopAgent(model)))
    assert len(model.requests) == 2
    bundle = tmp_path / "runs" / "improve-demo"
    (entry,) = ledger(bundle)
    assert entry["decision"] == "invalid" and entry["meta_agent"]["status"] == "timeout"
    decision = json.loads((bundle / "trials" / "001" / "selection_decision.json").read_text())
    assert [(r["code"], r["detail"]) for r in decision["reasons"]] == [
        ("meta_agent_timeout", "step limit of 2 reached")
    ]


def test_an_errors_held_out_part_is_not_in_the_feedback():
    from metaeval.protocols.improve.feedback import meta_error
    from metaeval.protocols.improve.loop import NodeEval

    def suite(status: str, task: str) -> dict:
        return {"tasks": [{"task_id": task, "status": status, "reason": f"{task} went wrong"}]}

    unrun = NodeEval(
        status="framework_failure",
        optimize=suite("passed", "opt-task"),
        held_out=suite("infra_error", "secret-held-task"),
        error="the harness could not run 1 task(s): secret-held-task: secret-held-task went wrong",
    )
    assert "secret-held-task" not in (meta_error(unrun) or "")
    broke = NodeEval(
        status="broken",
        optimize=suite("failed", "opt-task"),
        held_out=suite("target_error", "secret-held-task"),
        error="target agent failed to serve (1 task(s); first: secret-held-task went wrong)",
    )
    assert meta_error(broke) == "the candidate failed to serve (on no optimize task)"
    opt_unrun = NodeEval(
        status="framework_failure",
        optimize=suite("infra_error", "opt-task"),
        held_out=suite("passed", "secret-held-task"),
        error="x",
    )
    assert "opt-task: opt-task went wrong" in (meta_error(opt_unrun) or "")


def test_a_long_failed_log_is_delivered_as_its_redacted_tail_with_both_sizes(tmp_path, monkeypatch):
    from metaeval.protocols.improve.feedback import LOG_EXCERPT_BYTES, parent_results
    from metaeval.protocols.improve.records import SuiteSummary

    secret = "hunter2-" + "x" * 20
    monkeypatch.setenv("TARGET_API_KEY", secret)
    log = "noise line\n" * 3000 + f"token {secret}\nAssertionError: expected 3, got 2\n"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "t.test.log").write_text(log)
    optimize = {
        "score": 0.0,
        "passed": 0,
        "failed": 1,
        "tasks": [
            {
                "task_id": "t",
                "status": "failed",
                "reward": 0.0,
                "reason": "submitted; reward 0",
                "test_log": "logs/t.test.log",
                "test_log_bytes": len(log),
            }
        ],
    }
    got, texts = parent_results(tmp_path, "baseline", SuiteSummary.model_validate(optimize))
    results = got.model_dump()
    (item,) = results["failed_task_logs"]
    assert item["raw_bytes"] == len(log) > LOG_EXCERPT_BYTES >= item["delivered_bytes"]
    assert item["excerpt"].endswith("AssertionError: expected 3, got 2\n")
    assert secret not in item["excerpt"] and "[REDACTED]" in item["excerpt"]
    assert texts == {"logs/t.log": item["excerpt"]}
    assert results["optimize"]["tasks"] == [
        {"task_id": "t", "status": "failed", "reward": 0.0, "reason": "submitted; reward 0"}
    ]


def test_a_cli_meta_agent_lane_without_an_allow_list_refuses_a_tool_menu():
    """Codex has no per-tool allow-list: its lane refuses a menu (the CLIs that have one
    take it: tests/test_improve_lane_tools.py)."""
    from metaeval.protocols.improve.meta_agents import apply_tool_menu, make_meta_agent

    meta = make_meta_agent({"agent": "codex:gwtest/meta"})
    with pytest.raises(ConfigError, match="cannot enforce a tool menu") as error:
        apply_tool_menu(meta, ["bash"], "suts/codex.json")
    assert error.value.field == "tool_menu" and "suts/codex.json" in str(error.value)
    apply_tool_menu(meta, [], "suts/codex.json")  # no menu: the lane's own tools


@pytest.mark.bwrap
def test_a_resume_with_other_meta_agent_limits_is_refused_naming_them(tmp_path):
    from metaeval.errors import RecordIntegrityError

    manifest = experiment(tmp_path, budget=1)
    steps = [improve(SUITE)]
    run_experiment(manifest, meta_agent=ScriptedMetaAgent(steps))
    sut = tmp_path / "examples" / "improve" / "suts" / "scripted_sut.json"
    sut.write_text(json.dumps({**json.loads(sut.read_text()), "timeout_s": 30}))
    with pytest.raises(RecordIntegrityError, match="setting 'meta_agent_limits' changed") as error:
        run_experiment(manifest, meta_agent=ScriptedMetaAgent(steps))
    assert '"timeout_s":60' in str(error.value) and '"timeout_s":30' in str(error.value)
    assert len(ledger(tmp_path / "runs" / "improve-demo")) == 1
