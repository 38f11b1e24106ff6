"""Protocol pieces with a real agent CLI on a gateway the protocol starts itself: an agent spec
``CLI:MODEL`` (a metaeval model), the improve protocol's CLI meta-agent lane whose edit lands
in the trial worktree, and doctor's per-CLI rows."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from metaeval.agents.cli.binaries import resolve_binary
from metaeval.agents.registry import get_agent
from metaeval.agents.types import Limits
from metaeval.models.registry import register_provider
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest

pytestmark = [pytest.mark.bwrap, pytest.mark.cli]

NEW_PROMPT = 'SYSTEM_PROMPT = "Read the task, then act."\n'


def edit_script(request: ModelRequest) -> dict[str, Any]:
    """A meta-agent model that reads target_agent/prompts.py and rewrites it (Claude Code
    refuses to Write over a file it has not Read)."""
    usage = {"input_tokens": 60, "output_tokens": 6}
    if not request.tools:
        return {"text": "Prompt edit", "usage": usage}
    done = sum(1 for m in request.messages if m.role == "tool")
    instruction = next(m.content for m in request.messages if m.role == "user")
    path = instruction.split("WORKTREE=", 1)[1].split()[0] + "/target_agent/prompts.py"
    if done == 0:
        call = {"id": "r1", "name": "Read", "arguments": {"file_path": path}}
    elif done == 1:
        call = {
            "id": "w1",
            "name": "Write",
            "arguments": {"file_path": path, "content": NEW_PROMPT},
        }
    else:
        return {"text": "Shortened the system prompt.", "usage": usage}
    return {"tool_calls": [call], "usage": usage}


register_provider(
    "gwtest",
    lambda model_id, name, **options: ScriptedModel(edit_script, name=name),
    cacheable=False,
)


def test_cli_model_spec_serves_a_metaeval_model_through_a_gateway():
    agent = get_agent("codex:gwtest/x")
    assert (agent.name, agent.served_model, agent.model) == ("codex", "gwtest/x", None)
    native = get_agent("claude-code", model="claude-sonnet-4-5")  # the CLI's own model name
    assert (native.served_model, native.model) == (None, "claude-sonnet-4-5")


def git(cwd, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_improve_cli_meta_agent_lane_edit_lands_in_the_worktree(tmp_path):
    if resolve_binary("claude") is None:
        pytest.fail("claude not installed (run `make clis`)")
    from metaeval.protocols.improve.meta_agents import make_meta_agent

    worktree = tmp_path / "trial-001"
    (worktree / "target_agent").mkdir(parents=True)
    (worktree / "target_agent" / "prompts.py").write_text('SYSTEM_PROMPT = "old"\n')
    git(worktree, "init", "-q")
    git(worktree, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    git(worktree, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "baseline")
    (worktree / ".aie_bench_recursive").mkdir()
    instruction = f"Improve the target agent's prompt. WORKTREE={worktree.resolve()} only."
    (worktree / ".aie_bench_recursive" / "optimizer_instruction.md").write_text(instruction)

    meta = make_meta_agent({"agent": "claude-code:gwtest/meta"})
    contract_input = {"trial": 1, "parent": {"id": "baseline"}}
    output = meta.propose(contract_input, worktree, Limits(max_steps=4, time_limit_s=120))

    assert output.status == "ok", output.error
    assert output.summary == "Shortened the system prompt."
    assert output.usage["input_tokens"] == 180 and output.usage["output_tokens"] == 18
    assert (worktree / "target_agent" / "prompts.py").read_text() == NEW_PROMPT
    diff = git(worktree, "diff")
    assert '-SYSTEM_PROMPT = "old"' in diff and '+SYSTEM_PROMPT = "Read the task' in diff
    assert any(e.get("type") == "tool_call" and e.get("kind") == "write" for e in output.trace)


def test_doctor_rows_name_the_pinned_versions():
    from metaeval.agents.cli.doctor import agent_cli_checks, live_check

    rows = {name: (ok, detail) for name, ok, detail in agent_cli_checks(live=False)}
    assert rows["claude-code (optional)"][1].startswith("2.1.197 (Claude Code) at ")
    assert rows["codex (optional)"][1].startswith("codex-cli 0.169.0 at ")
    assert rows["gemini-cli (optional)"][1].startswith("0.61.0 at ")
    assert rows["mini-swe-agent (optional)"][1].startswith("mini-swe-agent 2.4.6 at ")
    ok, detail = live_check("codex")
    assert ok, detail
    assert "live check via gateway: ok, 1 model call(s)" in detail


def finder_script(request: ModelRequest) -> dict[str, Any]:
    """A finder model: one directory listing with the CLI's own tool, then option A for every
    question id the prompt names."""
    import json
    import re

    usage = {"input_tokens": 80, "output_tokens": 8}
    if not request.tools:
        return {"text": "Answering questions", "usage": usage}
    if not any(m.role == "tool" for m in request.messages):
        names = {t.name for t in request.tools}
        if "exec_command" in names:
            call = {"id": "l1", "name": "exec_command", "arguments": {"cmd": "ls -R"}}
        else:
            call = {"id": "l1", "name": "list_directory", "arguments": {"dir_path": "."}}
        return {"tool_calls": [call], "usage": usage}
    prompt = "\n".join(m.content for m in request.messages if m.role == "user")
    qids = sorted(set(re.findall(r"\b(q\d{2})\b", prompt)))
    answers = {
        q: {"answer": "A", "evidence_files": [], "evidence_symbols": [], "rationale": "listing"}
        for q in qids
    }
    return {"text": json.dumps(answers), "usage": usage}


register_provider(
    "gwfind",
    lambda model_id, name, **options: ScriptedModel(finder_script, name=name),
    cacheable=False,
)


PACK = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"


def builder_script(request: ModelRequest) -> dict[str, Any]:
    """A builder model: Claude Code writes the documented reference of kvstore-wal file by
    file (Write, absolute paths under its working directory), then says it is done."""
    import re

    usage = {"input_tokens": 90, "output_tokens": 9}
    if not request.tools:
        return {"text": "Building kvwal", "usage": usage}
    system = "\n".join(m.content for m in request.messages if m.role == "system")
    cwd = re.search(r"[Ww]orking directory: (\S+)", system).group(1)
    source = PACK / "kvstore-wal" / "reference" / "documented"
    files = sorted(p for p in source.rglob("*") if p.is_file())
    done = sum(1 for m in request.messages if m.role == "tool")
    if done >= len(files):
        return {"text": "Built kvwal.", "usage": usage}
    rel = files[done].relative_to(source).as_posix()
    args = {"file_path": f"{cwd}/{rel}", "content": files[done].read_text()}
    return {"tool_calls": [{"id": f"w{done}", "name": "Write", "arguments": args}], "usage": usage}


register_provider(
    "gwbuild",
    lambda model_id, name, **options: ScriptedModel(builder_script, name=name),
    cacheable=False,
)


def test_buildfind_with_real_cli_builder_and_finders_on_gateways(tmp_path):
    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.finalize import run_and_finalize

    for binary in ("claude", "codex", "gemini"):
        if resolve_binary(binary) is None:
            pytest.fail(f"{binary} not installed (run `make clis`)")
    pack = PACK
    config = tmp_path / "bf.yaml"
    config.write_text(
        f"pack: {pack}\n"
        "tasks: [kvstore-wal]\n"
        "builders:\n"
        "  - {name: documented, agent: 'reference:documented', effort: low, family: reference}\n"
        "  - {name: claude-b, agent: 'claude-code:gwbuild/k', effort: low, family: anthropic}\n"
        "finders:\n"
        "  - {name: codex-f, agent: 'codex:gwfind/a', effort: low, family: openai}\n"
        "  - {name: gemini-f, agent: gemini-cli, model: gwfind/b, effort: low, family: google}\n"
        "r_build: 1\nr_find: 1\nseed0: 7\ncontrols: []\nbase_finders: [codex-f, gemini-f]\n"
    )
    run_dir = tmp_path / "run"
    counts, summary = run_and_finalize(load_config(config), run_dir, None)
    assert counts["builds_ran"] == 2 and counts["finds_ran"] == 4
    import json

    builds = [json.loads(line) for line in (run_dir / "builds.jsonl").read_text().splitlines()]
    claude = next(b for b in builds if b["builder"] == "claude-b")
    assert claude["status"] == "ok" and claude["compile_pass"], claude
    assert claude["usage"]["input_tokens"] == 90 * 6  # 5 writes + the final answer

    finds = [json.loads(line) for line in (run_dir / "finds.jsonl").read_text().splitlines()]
    assert sorted(f["finder"] for f in finds) == ["codex-f", "codex-f", "gemini-f", "gemini-f"]
    for find in finds:
        assert find["status"] == "ok", find
        assert find["answers"] and all(a["answer"] for a in find["answers"].values())
        assert find["answers_problem"] in (None, ""), find["answers_problem"]
        assert find["n_unanswered"] == 0 and find["n_correct"] >= 0
        assert find["usage"]["input_tokens"] == 160  # two scripted calls of 80, gateway-counted
        assert find["compile_pass"]
        assert find["novel_retrieval_bytes"] > 0  # the listing the CLI delivered to the model
    assert summary["rows"] > 0
