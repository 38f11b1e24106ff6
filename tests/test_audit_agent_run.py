"""The audit's execution tier with a real agent CLI: Claude Code (pinned by `make clis`) solves a
Harbor task in its bubblewrap root through a gateway the protocol starts itself, the task's
tests score what it left in /app, and its program, transcript summary, reward and token usage
reach the auditor's prompt. Also: a CLI that hangs or crashes is classified and recorded and
the audit goes on; a SIGKILLed agent-run resumes without repeating a finished task; bad input
exits with a clear error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agent_run_models  # noqa: F401  (registers the gwsolve and gwhang providers)
from metaeval.agents.cli import CLI_ADAPTERS
from metaeval.agents.cli.binaries import resolve_binary
from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.cells.agent_run import AgentRuns, AgentRunSettings
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings

pytestmark = [pytest.mark.bwrap, pytest.mark.cli]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    if resolve_binary("claude") is None:
        pytest.fail("claude not installed (run `make clis`)")
    root = tmp_path / "bench"
    root.mkdir()
    shutil.copytree(EXAMPLES / "grade-mean", root / "grade-mean")
    return root


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def auditor(seen: list) -> ScriptedModel:
    def respond(request):
        seen.append(request)
        return "[]"

    return ScriptedModel(respond, name="scripted/auditor")


def audit_prompts(run_dir: Path) -> list[str]:
    """The prompts the audit recorded: each model cell's model-call blob holds the request
    body the provider sent (raw_request), its messages the prompt."""
    from metaeval.records.blobs import BlobStore

    blobs = BlobStore(run_dir / "blobs")
    prompts = []
    for cell in records(run_dir / "audits.jsonl"):
        if cell.get("model_calls_blob"):
            for line in blobs.get(cell["model_calls_blob"]).decode().splitlines():
                messages = json.loads(line)["raw_request"]["messages"]
                prompts.append("\n".join(m["content"] for m in messages))
    return prompts


def test_audit_execution_tier_with_claude_code_agent_end_to_end(bench, tmp_path):
    """The auditor is a real OpenAI-compatible client talking to a stub server on 127.0.0.1,
    so the prompt is read back from the audit's own records."""
    from metaeval.models.registry import get_model
    from openai_stub import OpenAIStub

    with OpenAIStub(lambda messages: "[]") as stub:
        model = get_model("openai/stub", base_url=stub.base_url, api_key="sk-test")
        settings = AuditSettings(
            bench_dir=bench,
            run_dir=tmp_path / "audit",
            models=["openai/stub"],
            tier="execution",
            agent="claude-code:gwsolve/solver",
            execution_checks=False,
            progress=False,
        )
        summary = AuditRun(settings, models={"openai/stub": model}).run()
        assert summary["audit_failures"] == [] and summary["infra_errors"] == 0

        results = tmp_path / "audit" / "agent_results"
        (run,) = records(results / "agent_runs.jsonl")
        assert run["task_id"] == "grade-mean" and run["classification"] == "ok", run
        # the agent's files landed in /app and the task's own tests scored them
        assert run["files_produced"] == ["output.txt", "result.json"]
        assert run["reward"] == 1.0 and run["passed"] and run["tests"]["returncode"] == 0
        # token usage as the gateway counted it: 70 input tokens per model call
        assert run["usage"]["input_tokens"] == 70 * run["model_calls"] == 280
        assert run["usage"] == run["cli_usage"]
        folder = results / "grade-mean"
        diff = (folder / "program.diff").read_text()
        assert "+++ b/output.txt\n@@ -0,0 +1 @@\n+72.5\n" in diff
        assert '+{"mean": 72.5}' in diff and "grades.csv" not in diff  # unchanged: no hunk
        log = (folder / "tests.log").read_text()
        assert "PASS" in log and "reward: 1 (from /logs/verifier/reward.txt)" in log
        transcript = (folder / "transcript.md").read_text()
        assert "1. Bash [read]" in transcript and "cat /app/grades.csv" in transcript
        assert re.search(r"memory: cgroup v[12] memory cap 4096 MiB", transcript)
        assert agent_run_models.FINAL_TEXT in transcript

        # the recorded prompt carries the agent's program, its result and the reward
        (prompt,) = audit_prompts(tmp_path / "audit")
        assert "agent/program.diff" in prompt and "+72.5" in prompt
        assert '"reward": 1.0' in prompt and '"classification": "ok"' in prompt
        assert "agent/transcript.md" in prompt and "agent/tests.log" in prompt
        assert '"input_tokens": 280' in prompt
        assert len(stub.chat_requests()) == 1

        # re-running resumes: neither the agent nor the auditor runs again
        again = AuditRun(settings, models={"openai/stub": model}).run()
        assert again["ran"] == 0 and len(stub.chat_requests()) == 1
        assert len(records(results / "agent_runs.jsonl")) == 1


def test_codex_agent_run_writes_through_its_shell_and_is_scored(bench, tmp_path):
    if resolve_binary("codex") is None:
        pytest.fail("codex not installed (run `make clis`)")
    out = tmp_path / "codex"
    settings = AgentRunSettings(bench_dir=bench, out_dir=out, agent="codex:gwshell/c")
    settings.progress = False
    summary = AgentRuns(settings).run()
    assert summary["classifications"] == {"ok": 1} and summary["passed"] == 1, summary
    (run,) = records(out / "agent_runs.jsonl")
    assert run["reward"] == 1.0 and run["files_produced"] == ["output.txt"]
    assert run["usage"]["input_tokens"] == 70 * run["model_calls"] > 0
    diff = (out / "grade-mean" / "program.diff").read_text()
    assert diff == "--- /dev/null\n+++ b/output.txt\n@@ -0,0 +1 @@\n+72.5\n"
    assert "printf '72.5" in (out / "grade-mean" / "transcript.md").read_text()


def test_hanging_and_crashing_cli_are_classified_recorded_and_the_audit_continues(bench, tmp_path):
    hung = tmp_path / "hung"
    started = time.monotonic()
    summary = AgentRuns(
        AgentRunSettings(
            bench_dir=bench,
            out_dir=hung,
            agent="claude-code:gwhang/slow",
            time_limit_s=10,
            progress=False,
        )
    ).run()
    assert time.monotonic() - started < 60
    assert summary["classifications"] == {"timeout": 1} and summary["infra_errors"] == 0
    (run,) = records(hung / "agent_runs.jsonl")
    assert run["status"] == "timeout" and run["infra_error"] is False
    assert run["error"] == "claude-code timed out after 10s"
    # the tests still ran, on the untouched /app
    assert run["reward"] == 0.0 and run["tests"]["returncode"] == 0
    assert (
        "FAIL: /app/output.txt was not written" in (hung / "grade-mean" / "tests.log").read_text()
    )
    assert (hung / "grade-mean" / "program.diff").read_text() == "(no changes under /app)\n"

    crashed = tmp_path / "crashed"
    broken = CLI_ADAPTERS["claude-code"](model="gwsolve/x", extra_args=["--no-such-flag"])
    settings = AgentRunSettings(bench_dir=bench, out_dir=crashed, agent="claude-code:bad-flag")
    settings.progress = False
    AgentRuns(settings, agent=broken).run()
    (run,) = records(crashed / "agent_runs.jsonl")
    assert run["classification"] == "crashed" and run["status"] == "error", run
    assert "no-such-flag" in run["error"] and run["infra_error"] is False

    # the audit reads the failed attempt like any other
    seen: list = []
    audit = AuditRun(
        AuditSettings(
            bench_dir=bench,
            run_dir=tmp_path / "audit",
            models=["scripted/auditor"],
            tier="execution",
            agent_results=hung,
            execution_checks=False,
            progress=False,
        ),
        models={"scripted/auditor": auditor(seen)},
    ).run()
    assert audit["audit_failures"] == [] and audit["infra_errors"] == 0
    prompt = "\n".join(m.content for m in seen[0].messages)
    assert '"classification": "timeout"' in prompt and "(no changes under /app)" in prompt


def test_cli_over_its_cgroup_memory_cap_is_classified_out_of_memory(bench, tmp_path):
    """Claude Code (node) under a 32 MiB cgroup cap: the kernel's OOM killer ends it, and the
    run says so; the default cap (4096 MiB) is what the other tests here run under."""
    out = tmp_path / "oom"
    settings = AgentRunSettings(
        bench_dir=bench, out_dir=out, agent="claude-code:gwsolve/m", memory_cgroup_mb=32
    )
    settings.progress = False
    summary = AgentRuns(settings).run()
    assert summary["classifications"] == {"out_of_memory": 1}, summary
    (run,) = records(out / "agent_runs.jsonl")
    assert run["status"] == "error" and run["stop_reason"] == "out_of_memory"
    assert (
        run["error"] == "claude-code was killed for using more than its memory cap (32 MiB, cgroup)"
    )
    assert run["infra_error"] is False and run["reward"] == 0.0  # its tests still ran
    summary_text = (out / "grade-mean" / "transcript.md").read_text()
    assert re.search(r"memory: cgroup v[12] memory cap 32 MiB", summary_text)


def test_provider_outage_is_an_infra_error_retried_on_resume(bench, tmp_path):
    out = tmp_path / "flaky"
    settings = AgentRunSettings(bench_dir=bench, out_dir=out, agent="claude-code:gwflaky/f")
    settings.progress = False
    agent_run_models.FLAKY["down"] = True
    try:
        first = AgentRuns(settings).run()
    finally:
        agent_run_models.FLAKY["down"] = False
    assert first["classifications"] == {"infra_error": 1} and first["infra_errors"] == 1
    (failed,) = records(out / "agent_runs.jsonl")
    assert failed["infra_error"] is True and "provider outage" in failed["error"]
    assert json.loads((out / "grade-mean" / "result.json").read_text())["infra_error"] is True

    again = AgentRuns(settings).run()  # the provider is back: the task runs again
    assert again["skipped_completed"] == 0 and again["ran"] == 1
    assert again["classifications"] == {"ok": 1} and again["passed"] == 1
    assert [r["classification"] for r in records(out / "agent_runs.jsonl")] == ["infra_error", "ok"]


LAUNCHER = (
    "import sys; sys.path.insert(0, {tests!r}); import agent_run_models; "
    "from metaeval.cli import main; sys.argv = ['metaeval'] + {args!r}; main()"
)


def run_cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    code = LAUNCHER.format(tests=str(TESTS_DIR), args=args)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )


def test_sigkilled_agent_run_resumes_without_repeating_a_finished_task(bench, tmp_path):
    shutil.copytree(bench / "grade-mean", bench / "grade-mean-2")
    out = tmp_path / "agents"
    args = ["audit", "agent-run", str(bench), "--agent", "claude-code:gwsolve/k", "-o", str(out)]
    code = LAUNCHER.format(tests=str(TESTS_DIR), args=args)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
    log = out / "agent_runs.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = records(log)
    assert len(first) == 1 and first[0]["classification"] == "ok"

    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    assert "resumed: 1 finished agent run(s) reused" in done.stdout
    assert "2 tasks: 2 passed their tests" in done.stdout
    after = records(log)
    assert len(after) == 2 and after[0] == first[0]  # the finished task was not run again
    assert {r["task_id"] for r in after} == {"grade-mean", "grade-mean-2"}
    assert not (out / ".work").exists()  # the killed run's scratch is gone


def test_bad_agent_run_input_exits_with_a_clear_error(tmp_path):
    missing = run_cli(["audit", "agent-run", str(tmp_path / "nope"), "--agent", "codex"])
    assert missing.returncode != 0 and "Traceback" not in missing.stderr + missing.stdout
    assert "benchmark directory not found" in missing.stderr and "nope" in missing.stderr
    bench = tmp_path / "bench"
    shutil.copytree(EXAMPLES / "grade-mean", bench / "grade-mean")
    unknown = run_cli(["audit", "agent-run", str(bench), "--agent", "nosuch-cli"])
    assert unknown.returncode != 0 and "unknown agent 'nosuch-cli'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    tier = run_cli(["audit", "run", str(bench), "--agent", "codex:gwsolve/x", "--static-only"])
    assert tier.returncode != 0 and "--agent needs --tier execution" in tier.stderr


def test_toolloop_agent_sees_app_paths_in_the_task_root(tmp_path):
    """The built-in agent in the same root: its file tools take /app paths (as the instruction
    names them) and its bash runs at /app, with no /tests or /solution to peek at."""
    from metaeval.agents.toolloop import ToolLoopAgent

    bench = tmp_path / "bench"
    shutil.copytree(EXAMPLES / "grade-mean", bench / "grade-mean")

    def call(name: str, **arguments) -> dict:
        return {"tool_calls": [{"id": name, "name": name, "arguments": arguments}]}

    model = ScriptedModel(
        [
            call("read_file", path="/app/grades.csv"),
            call("bash", command="pwd; ls /tests /solution 2>&1 | head -2"),
            call("write_file", path="/app/output.txt", content="72.5\n"),
            call("submit", answer="done"),
        ],
        name="scripted/toolloop",
    )
    out = tmp_path / "toolloop"
    settings = AgentRunSettings(bench_dir=bench, out_dir=out, agent="toolloop")
    settings.progress = False
    AgentRuns(settings, agent=ToolLoopAgent(model)).run()
    (run,) = records(out / "agent_runs.jsonl")
    assert run["classification"] == "ok" and run["reward"] == 1.0, run
    summary = (out / "grade-mean" / "transcript.md").read_text()
    assert "ana,81" in summary  # read_file found /app/grades.csv
    assert "/app ls: cannot access '/tests'" in summary and "'/solution'" in summary
    shutil.copytree(EXAMPLES / "grade-mean", bench / "blobs")
    clash = run_cli(
        ["audit", "agent-run", str(bench), "--agent", "codex:gwsolve/x", "-o", str(tmp_path / "x")]
    )
    assert clash.returncode != 0 and "task id 'blobs' collides with a run directory" in clash.stderr
    assert "Traceback" not in clash.stderr
