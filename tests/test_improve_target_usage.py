"""The target's tokens and cost per evaluation, per trial and in total (issue 28, item 4).

The toolloop target runs on `openai/usage-stub`, a fake OpenAI provider on 127.0.0.1 that
reports `usage` as the Chat Completions API does (prompt_tokens: the words of the messages it
received; completion_tokens: the words of its reply). The harness's gateway serves the target
its model and counts what the provider reported; the expected numbers are recomputed here
from the request bodies the provider received.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from metaeval.protocols.improve.init_target import init_target
from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent
from metaeval.protocols.improve.node_eval import NodeEval, target_usage
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.scripted_steps import neutral

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import OpenAIStub  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "examples" / "improve" / "profiles" / "toolloop_target.json"
TASK_TEST = (
    "#!/bin/bash\n"
    'if [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1; else echo 0; fi'
    " > /logs/verifier/reward.txt\n"
)


def reply(messages: list[dict]) -> str:
    """Write the file, then submit."""
    if any("write_file" in str(m.get("content")) for m in messages if m.get("role") == "assistant"):
        return json.dumps({"type": "submit", "answer": "done"})
    return json.dumps({"type": "write_file", "path": "/app/out.txt", "content": "hello"})


def counted(body: dict) -> tuple[int, int]:
    """(prompt, completion) tokens the stub reported for one request body."""
    messages = body["messages"]
    prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
    return prompt, len(reply(messages).split())


def experiment(tmp_path: Path) -> Path:
    """The toolloop target on the stub model, one write-a-file task, budget 1."""
    init_target("toolloop", tmp_path / "target")
    task = tmp_path / "suite" / "write-hello"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n')
    (task / "instruction.md").write_text("Put the word hello in a new file.\n")
    (task / "tests" / "test.sh").write_text(TASK_TEST)
    (tmp_path / "suite" / "suite.json").write_text(
        json.dumps({"name": "usage", "splits": {"optimize": ["write-hello"]}})
    )
    (tmp_path / "suite_optimize.json").write_text(
        json.dumps({"name": "usage-optimize", "tasks_dir": "suite", "split_id": "optimize"})
    )
    (tmp_path / "profile.json").write_text(PROFILE.read_text())
    sut = {
        "name": "scripted",
        "contract": "edit/1",
        "meta_agent": {"agent": "scripted"},
        "sum_profile": "profile.json",
    }
    (tmp_path / "sut.json").write_text(json.dumps(sut))
    manifest = {
        "mode": "recursive_search",
        "sut": {"sut_config": "sut.json"},
        "sum": {"model": "openai/usage-stub"},
        "baseline": {"id": "baseline", "repo": "target", "base_commit": "HEAD"},
        "evaluation": {"optimize": {"suite_config": "suite_optimize.json"}},
        "trial_budget": 1,
        "target_budget": {"max_steps_per_task": 4, "task_timeout_s": 60},
        "output": "bundle",
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


@pytest.mark.bwrap
def test_the_targets_tokens_are_counted_per_trial_and_in_total(tmp_path, monkeypatch):
    with OpenAIStub(reply, model="usage-stub") as stub:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-usage-test")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        summary = run_experiment(experiment(tmp_path), meta_agent=ScriptedMetaAgent([neutral]))
    bodies = stub.chat_requests()
    # one task, write_file then submit: two model calls per evaluation
    assert len(bodies) == 4
    per_call = [counted(b) for b in bodies]
    bundle = tmp_path / "bundle"
    baseline = json.loads((bundle / "baseline_evaluation.json").read_text())
    assert baseline["optimize"]["score"] == 1.0
    assert baseline["target_usage"] == {
        "source": "gateway",
        "calls": 2,
        "input_tokens": per_call[0][0] + per_call[1][0],
        "output_tokens": per_call[0][1] + per_call[1][1],
        "cost_usd": None,  # an unpriced model: unknown, never 0
    }
    (entry,) = [
        json.loads(line) for line in (bundle / "trial_ledger.jsonl").read_text().splitlines()
    ]
    assert entry["target"]["calls"] == 2
    assert entry["target"]["input_tokens"] == per_call[2][0] + per_call[3][0]
    assert entry["target"]["output_tokens"] == per_call[2][1] + per_call[3][1]
    tokens = summary.target_tokens.model_dump()
    assert tokens == {
        "input_tokens": sum(p for p, _ in per_call),
        "output_tokens": sum(c for _, c in per_call),
    }
    assert summary.target_cost_usd is None and summary.target_usage_sources == ["gateway"]
    lineage = json.loads((bundle / "lineage_summary.json").read_text())["summary"]
    assert lineage["target_tokens"] == tokens
    # the report says it too, with who counted
    report = (bundle / "report.md").read_text()
    assert (
        f"Target cost: unknown, {tokens['input_tokens']} input and "
        f"{tokens['output_tokens']} output tokens (counted by: gateway)"
    ) in report.replace("**", "")


def test_without_a_gateway_the_targets_own_report_is_summed_and_labelled():
    row = {"task_id": "a", "status": "passed", "usage": {"input_tokens": 7, "output_tokens": 3}}
    node = NodeEval(
        status="evaluated",
        optimize={
            "tasks": [row, {"task_id": "b", "status": "failed", "usage": {"input_tokens": 5}}]
        },
        held_out={
            "tasks": [{"task_id": "c", "status": "failed", "usage": {"output_tokens": 2, "x": -1}}]
        },
    )
    assert target_usage(None, node).model_dump() == {
        "source": "target_reported",
        "input_tokens": 12,
        "output_tokens": 5,
        "cost_usd": None,
    }
    # a local model costs nothing, whatever the target reports
    assert target_usage(None, node, free=True).cost_usd == 0.0
    idle = NodeEval(
        status="evaluated",
        optimize={"tasks": [{"task_id": "a", "status": "failed", "usage": {}}]},
    )
    assert target_usage(None, idle).cost_usd == 0.0  # no model call: nothing spent
