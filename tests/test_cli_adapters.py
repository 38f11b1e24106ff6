"""CLI agent adapters: stream parsers against hand-written fixtures, argv, and run().

Every expected value below was worked out by hand from the fixture files in
tests/fixtures/cli_streams/ (see the README there: written from documented formats, not
recorded live).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from metaeval.agents.cli import (
    CLI_ADAPTERS,
    ClaudeCodeAdapter,
    CodexAdapter,
    GeminiCliAdapter,
    MiniSweAgentAdapter,
    classify_shell_command,
    parse_claude_stream,
    parse_codex_stream,
    parse_gemini_json,
    parse_gemini_stream,
    parse_mini_trajectory,
    shell_read_span,
    strip_line_numbers,
)
from metaeval.agents.effort import compute_effort
from metaeval.agents.types import Limits, Span, Task
from metaeval.models.types import Usage

FIXTURES = Path(__file__).parent / "fixtures" / "cli_streams"


@pytest.fixture(autouse=True)
def no_project_clis(tmp_path_factory, monkeypatch):
    """Fake CLIs on PATH, not the pinned ones `make clis` installed, and homes under tmp."""
    monkeypatch.setenv("METAEVAL_TOOLS_DIR", str(tmp_path_factory.mktemp("no-tools")))
    monkeypatch.setenv("METAEVAL_AGENT_HOMES", str(tmp_path_factory.mktemp("homes")))


APP = "/work/ws/src/app.py"
FILE = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a + b\n"


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def shape(transcript):
    return [(e.type, e.tool, e.kind, e.call_id) for e in transcript]


def by_call(transcript, call_id, type_):
    [event] = [e for e in transcript if e.call_id == call_id and e.type == type_]
    return event


# ---------------------------------------------------------------------------------------------
# Claude Code


def test_claude_transcript_sequence():
    parsed = parse_claude_stream(lines("claude_success.jsonl"))
    assert shape(parsed.transcript) == [
        ("system", None, None, None),
        ("assistant", None, None, None),
        ("tool_call", "Read", "read", "toolu_01"),
        ("tool_result", "Read", None, "toolu_01"),
        ("tool_call", "Grep", "search", "toolu_02"),
        ("tool_result", "Grep", None, "toolu_02"),
        ("tool_call", "Read", "read", "toolu_03"),
        ("tool_result", "Read", None, "toolu_03"),
        ("tool_call", "Bash", "exec", "toolu_04"),
        ("tool_result", "Bash", None, "toolu_04"),
        ("tool_call", "Write", "write", "toolu_05"),
        ("tool_result", "Write", None, "toolu_05"),
        ("error", None, None, None),  # line 13 is truncated JSON
        ("info", None, None, None),  # thinking block
        ("assistant", None, None, None),
    ]
    t = parsed.transcript
    assert t[1].text == "I'll look at the module first."
    assert t[2].arguments == {"file_path": APP}
    assert t[2].id == "toolu_01" and t[3].id == "toolu_01:result"
    assert t[5].text == "Found 1 file\nsrc/app.py"  # list-of-blocks content joined
    assert t[9].text == "4"
    assert t[14].text == "The bug is in sub(): it returns a + b."
    # every event id is distinct, so the observation layer skips nothing by mistake
    ids = [e.id for e in t if e.id is not None]
    assert len(ids) == len(set(ids))


def test_claude_read_results_are_stripped_of_line_numbers_with_spans():
    parsed = parse_claude_stream(lines("claude_success.jsonl"))
    first = by_call(parsed.transcript, "toolu_01", "tool_result")
    assert first.text == FILE  # "     1\t..." prefixes gone; numbered empty line 6 = final newline
    assert first.span == Span(path=APP, start_line=1)
    second = by_call(parsed.transcript, "toolu_03", "tool_result")  # newer "4\t..." style
    assert second.text == "def sub(a, b):\n    return a + b"
    assert second.span == Span(path=APP, start_line=4)
    grep = by_call(parsed.transcript, "toolu_02", "tool_result")
    assert grep.span is None


def test_claude_result_event_totals_cost_and_final_text():
    parsed = parse_claude_stream(lines("claude_success.jsonl"))
    # result usage: input 40 + cache_creation 300 + cache_read 5000; output 150
    assert parsed.usage == Usage(
        input_tokens=5340, output_tokens=150, cache_read_tokens=5000, cache_write_tokens=300
    )
    assert parsed.cost_usd == 0.0123
    assert parsed.num_turns == 6
    assert parsed.session_id == "5b1c2d3e-0000-4000-8000-00000000c1a0"
    assert parsed.final_text == "The bug is in sub(): it returns a + b."
    assert parsed.reported_success is True
    assert parsed.error is None


def test_claude_usage_without_result_counts_each_message_id_once():
    parsed = parse_claude_stream(lines("claude_success.jsonl")[:-1])  # cut before "result"
    # msg_01 appears in two events (10+200+1000 in, 30 out) and is counted once;
    # msg_02 12+0+1300/20, msg_03 5+100+1400/25, msg_04 4+0+1500/30, msg_05 5+0+1600/25,
    # msg_07 4+0+1700/20; msg_06 is the malformed line and carries nothing.
    assert parsed.usage == Usage(
        input_tokens=1210 + 1312 + 1505 + 1504 + 1605 + 1704,
        output_tokens=30 + 20 + 25 + 30 + 25 + 20,
        cache_read_tokens=1000 + 1300 + 1400 + 1500 + 1600 + 1700,
        cache_write_tokens=300,
    )
    assert parsed.reported_success is None
    assert parsed.cost_usd is None
    assert parsed.final_text == "The bug is in sub(): it returns a + b."  # last text said

    cut = parse_claude_stream(lines("claude_max_turns.jsonl")[:-1])
    # msg_a (twice: 100+0+50 in, 10 out) once, msg_b 20+150+0 in, 5 out
    assert cut.usage == Usage(
        input_tokens=150 + 170, output_tokens=15, cache_read_tokens=150, cache_write_tokens=50
    )


def test_claude_malformed_line_is_an_error_event_and_parsing_continues():
    parsed = parse_claude_stream(lines("claude_success.jsonl"))
    [error] = [e for e in parsed.transcript if e.type == "error"]
    assert error.text.startswith("line 13: malformed JSON")
    assert parsed.transcript[-1].type == "assistant"  # lines 14 and 15 still parsed


def test_claude_error_max_turns_is_reported_failure():
    parsed = parse_claude_stream(lines("claude_max_turns.jsonl"))
    assert parsed.reported_success is False
    assert parsed.error == "error_max_turns"
    assert parsed.final_text is None
    assert parsed.num_turns == 2
    assert parsed.cost_usd == 0.0021
    assert shape(parsed.transcript) == [
        ("system", None, None, None),
        ("assistant", None, None, None),
        ("tool_call", "LS", "read", "toolu_a1"),
        ("tool_result", "LS", None, "toolu_a1"),
        ("tool_call", "Glob", "search", "toolu_b1"),
        ("tool_result", "Glob", None, "toolu_b1"),
        ("error", None, None, None),
    ]


def test_claude_is_error_result_and_unknown_event():
    stream = [
        '{"type":"system","subtype":"compact_boundary"}',
        '{"type":"stream_event","event":{"type":"ping"}}',
        '{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key"}',
    ]
    parsed = parse_claude_stream(stream)
    assert [e.type for e in parsed.transcript] == ["info", "info", "error"]
    assert parsed.reported_success is False
    assert parsed.error == "error: Invalid API key"


# ---------------------------------------------------------------------------------------------
# Codex


def test_codex_transcript_kinds_spans_and_usage():
    parsed = parse_codex_stream(lines("codex_success.jsonl"))
    assert shape(parsed.transcript) == [
        ("system", None, None, None),
        ("info", None, None, None),  # reasoning
        ("tool_call", "shell", "search", "item_1"),  # rg
        ("tool_result", "shell", None, "item_1"),
        ("tool_call", "shell", "read", "item_2"),  # sed -n
        ("tool_result", "shell", None, "item_2"),
        ("tool_call", "shell", "read", "item_3"),  # nl -ba | sed -n
        ("tool_result", "shell", None, "item_3"),
        ("tool_call", "shell", "exec", "item_4"),  # pytest
        ("tool_result", "shell", None, "item_4"),
        ("tool_call", "apply_patch", "write", "item_5"),
        ("tool_result", "apply_patch", None, "item_5"),
        ("info", None, None, None),  # the patch's status: the adapter's words, not retrieved
        ("info", None, None, None),  # unknown "session.heartbeat"
        ("info", None, None, None),  # todo_list
        ("assistant", None, None, None),
    ]
    t = parsed.transcript
    assert t[2].arguments == {"command": 'rg -n "def sub" src'}  # bash -lc unwrapped
    assert t[3].text == "src/app.py:4:def sub(a, b):\n" and t[3].span is None
    assert t[5].text == FILE and t[5].span == Span(path="src/app.py", start_line=1)
    assert t[7].text == "def sub(a, b):\n    return a + b\n"  # nl prefixes stripped
    assert t[7].span == Span(path="src/app.py", start_line=4)
    assert t[9].text == "F\n1 failed in 0.01s\n" and t[9].span is None
    assert t[11].text == "" and t[12].text == "completed: update src/app.py"
    assert "session.heartbeat" in t[13].text
    assert parsed.usage == Usage(input_tokens=24763, output_tokens=122, cache_read_tokens=24448)
    assert parsed.final_text == "Fixed sub() in src/app.py: it returned a + b."
    assert parsed.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert parsed.reported_success is True
    assert parsed.cost_usd is None


def test_codex_turn_failed_is_an_error():
    parsed = parse_codex_stream(lines("codex_turn_failed.jsonl"))
    assert parsed.reported_success is False
    assert parsed.error == "stream disconnected before completion: rate limit reached"
    assert [e.type for e in parsed.transcript] == ["system", "error", "error"]
    assert parsed.transcript[1].text == "Reconnecting... 1/5"
    assert parsed.usage == Usage()


def test_codex_error_alone_is_not_fatal_if_the_turn_completes():
    stream = [
        '{"type":"error","message":"Reconnecting... 1/5"}',
        '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"hi"}}',
        '{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":0,'
        '"output_tokens":1}}',
    ]
    parsed = parse_codex_stream(stream)
    assert parsed.reported_success is True
    assert parsed.final_text == "hi"


def test_codex_legacy_msg_format():
    parsed = parse_codex_stream(lines("codex_legacy.jsonl"))
    assert shape(parsed.transcript) == [
        ("info", None, None, None),  # config summary line
        ("user", None, None, None),  # {"prompt": ...}
        ("info", None, None, None),  # task_started
        ("info", None, None, None),  # agent_reasoning
        ("tool_call", "shell", "read", "call_a"),
        ("tool_result", "shell", None, "call_a"),
        ("assistant", None, None, None),
    ]
    result = by_call(parsed.transcript, "call_a", "tool_result")
    assert result.text == FILE and result.span == Span(path="src/app.py", start_line=1)
    assert parsed.usage == Usage(
        input_tokens=3000, output_tokens=200, cache_read_tokens=1000, reasoning_tokens=120
    )
    assert parsed.final_text == "sub() returns a + b; it should return a - b."
    assert parsed.reported_success is True


# ---------------------------------------------------------------------------------------------
# Gemini CLI


def test_gemini_stream_transcript_and_usage():
    parsed = parse_gemini_stream(lines("gemini_stream.jsonl"))
    read_id = "read_file-1760097601500-0"
    search_id = "search_file_content-1760097602000-0"
    shell_id = "run_shell_command-1760097603000-0"
    assert shape(parsed.transcript) == [
        ("system", None, None, None),
        ("user", None, None, None),
        ("assistant", None, None, None),
        ("tool_call", "read_file", "read", read_id),
        ("tool_result", "read_file", None, read_id),
        ("tool_call", "search_file_content", "search", search_id),
        ("tool_result", "search_file_content", None, search_id),
        ("error", None, None, None),  # line 9 is not JSON
        ("tool_call", "run_shell_command", "exec", shell_id),
        ("tool_result", "run_shell_command", None, shell_id),
        ("assistant", None, None, None),
    ]
    t = parsed.transcript
    assert t[2].text == "I'll read the file."  # two delta chunks joined
    assert t[3].arguments == {"absolute_path": APP}
    assert t[4].text == ""  # the stream carries the display string, empty for read_file
    assert t[6].text == "Found 1 match"
    assert t[7].text.startswith("line 9: malformed JSON")
    assert t[9].text == "1 failed\nshell_execution_error: Command exited with code 1"
    assert [e.t for e in t] == [0.0, 0.01, 1.0, 1.5, 1.6, 2.0, 2.1, None, 3.0, 4.0, 5.0]
    assert parsed.final_text == "The bug is in sub(): it returns a + b."
    # total 5200 - prompt 5000 - candidates 150 = 50 inferred thought tokens
    assert parsed.usage == Usage(
        input_tokens=5000, output_tokens=200, cache_read_tokens=1200, reasoning_tokens=50
    )
    assert parsed.session_id == "gem-sess-1"
    assert parsed.reported_success is True


def test_gemini_error_result():
    parsed = parse_gemini_stream(lines("gemini_error.jsonl"))
    assert [e.type for e in parsed.transcript] == ["system", "user", "info", "error", "error"]
    assert parsed.transcript[2].text == "warning: Retrying after 429"
    assert parsed.reported_success is False
    assert parsed.error == "FatalError: Quota exceeded"
    assert parsed.final_text is None


def test_gemini_json_output_format():
    data = json.loads((FIXTURES / "gemini_output.json").read_text())
    expected = Usage(
        input_tokens=5000 + 300,
        output_tokens=150 + 100 + 20 + 10,
        cache_read_tokens=1200,
        reasoning_tokens=100 + 10,
    )
    for parsed in (parse_gemini_json(data), parse_gemini_stream(lines("gemini_output.json"))):
        assert parsed.usage == expected
        assert parsed.final_text == "The bug is in sub(): it returns a + b."
        assert parsed.session_id == "gem-sess-3"
        assert parsed.reported_success is True
        assert [e.type for e in parsed.transcript] == ["assistant"]
    failed = parse_gemini_json(
        {"session_id": "s", "error": {"type": "Error", "message": "no auth"}}
    )
    assert failed.reported_success is False and failed.error == "Error: no auth"


# ---------------------------------------------------------------------------------------------
# mini-swe-agent


def test_mini_v1_trajectory():
    parsed = parse_mini_trajectory(json.loads((FIXTURES / "mini_traj_v1.json").read_text()))
    assert shape(parsed.transcript) == [
        ("system", None, None, None),
        ("user", None, None, None),
        ("assistant", None, None, None),
        ("tool_call", "bash", "read", "message2:action0"),
        ("tool_result", "bash", None, "message2:action0"),
        ("assistant", None, None, None),  # two bash blocks: a format error, no action
        ("user", None, None, None),  # the format-error message is not a tool result
        ("assistant", None, None, None),
        ("tool_call", "bash", "search", "message6:action0"),
        ("tool_result", "bash", None, "message6:action0"),
        ("assistant", None, None, None),
        ("tool_call", "bash", "write", "message8:action0"),  # sed -i
        ("tool_result", "bash", None, "message8:action0"),
        ("assistant", None, None, None),
        ("tool_call", "bash", "submit", "message10:action0"),
        ("tool_result", "bash", None, "message10:action0"),
    ]
    t = parsed.transcript
    assert t[3].arguments == {"command": "nl -ba src/app.py | sed -n '1,5p'"}
    assert t[4].text == FILE  # <output> extracted, nl prefixes stripped
    assert t[4].span == Span(path="src/app.py", start_line=1)
    assert t[9].text == "src/app.py:4:def sub(a, b):\n" and t[9].span is None
    assert t[12].text == ""
    submission = "diff --git a/src/app.py b/src/app.py\n-    return a + b\n+    return a - b\n"
    assert t[15].text == submission
    assert parsed.final_text == submission
    assert parsed.cost_usd == 0.0421
    assert parsed.num_turns == 5
    assert parsed.usage == Usage()  # v1 trajectories record no tokens
    assert parsed.reported_success is True


def test_mini_v2_toolcall_trajectory():
    parsed = parse_mini_trajectory(json.loads((FIXTURES / "mini_traj_v2.json").read_text()))
    assert shape(parsed.transcript) == [
        ("system", None, None, None),
        ("user", None, None, None),
        ("assistant", None, None, None),
        ("tool_call", "bash", "read", "call_1"),
        ("tool_result", "bash", None, "call_1"),
        ("tool_call", "bash", "submit", "call_2"),
        ("info", None, None, None),  # the exit message
    ]
    t = parsed.transcript
    assert t[3].arguments_json == '{"command": "cat src/app.py"}'
    assert t[4].text == FILE and t[4].span == Span(path="src/app.py", start_line=1)
    assert t[4].raw_bytes == len(FILE.encode())
    assert [e.t for e in t] == [0.0, 0.0, 2.5, 2.5, 2.6, 5.0, 5.2]
    assert parsed.usage == Usage(
        input_tokens=1000 + 1200, output_tokens=50 + 30, cache_read_tokens=1000, reasoning_tokens=30
    )
    assert parsed.cost_usd == 0.0184
    assert parsed.num_turns == 2
    assert parsed.final_text == ""
    assert parsed.reported_success is True


def test_mini_limits_exceeded_is_an_error():
    data = json.loads((FIXTURES / "mini_traj_v1.json").read_text())
    data["info"]["exit_status"] = "LimitsExceeded"
    data["info"]["submission"] = ""
    parsed = parse_mini_trajectory(data)
    assert parsed.reported_success is False
    assert parsed.error == "LimitsExceeded"
    assert parsed.transcript[-1].type == "error"


# ---------------------------------------------------------------------------------------------
# Shared helpers


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("cat src/app.py", "read"),
        ("bash -lc 'sed -n 1,20p a.py'", "read"),
        (["bash", "-lc", "ls -la"], "read"),
        ("cd src && head -n 5 app.py", "read"),
        ("rg -n foo", "search"),
        ("grep -rn foo . 2>/dev/null", "search"),
        ("find . -name '*.py'", "search"),
        ("git grep foo", "search"),
        ("sed -i 's/a/b/' f.py", "write"),
        ("cat <<'EOF' > new.py\nprint(1)\nEOF", "write"),
        ("echo hi >> notes.txt", "write"),
        ("python -m pytest -q", "exec"),
        ("FOO=1 python x.py", "exec"),
        ("git diff", "exec"),
        ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "submit"),
    ],
)
def test_classify_shell_command(command, kind):
    assert classify_shell_command(command) == kind


def test_strip_line_numbers():
    assert strip_line_numbers("     1\ta\n     2\tb\n     3\t") == (1, "a\nb\n")
    assert strip_line_numbers("7\tx\n8\ty") == (7, "x\ny")
    assert strip_line_numbers("1\u2192x\n2\u2192y\n") == (1, "x\ny\n")
    # a harness note appended after the file ends the file's lines
    assert strip_line_numbers("1\tx\n\n<system-reminder>note</system-reminder>") == (1, "x\n")
    assert strip_line_numbers("1\tx\n3\ty") is None  # not consecutive
    assert strip_line_numbers("no numbers here") is None


def test_shell_read_span():
    assert shell_read_span("sed -n '3,4p' a.py", "c\nd\n") == (
        Span(path="a.py", start_line=3),
        "c\nd\n",
    )
    assert shell_read_span("cat a.py | sed -n '2,3p'", "b\nc\n") == (
        Span(path="a.py", start_line=2),
        "b\nc\n",
    )
    assert shell_read_span("cat -n a.py | head -n 2", "     1\ta\n     2\tb\n") == (
        Span(path="a.py", start_line=1),
        "a\nb\n",
    )
    assert shell_read_span("cat a.py b.py", "x\n") is None  # two files
    assert shell_read_span("grep -n x a.py", "1:x\n") is None  # not a plain read
    assert shell_read_span("cat a.py && ls", "x\n") is None
    assert shell_read_span("cat a.py", "") is None


# ---------------------------------------------------------------------------------------------
# Adapters: argv


class Ws:
    """A stand-in workspace: runs argv with subprocess in `path` (no sandbox)."""

    def __init__(self, path: Path, read_only: bool = False):
        self.path = path
        self.read_only = read_only
        self.calls: list[dict] = []

    def exec(
        self, command, timeout_s=None, memory_mb=None, network=False, env=None, stdin=None, **binds
    ):
        self.calls.append({"command": command, "timeout_s": timeout_s, "network": network})
        try:
            proc = subprocess.run(
                command,
                cwd=self.path,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )
        except subprocess.TimeoutExpired:
            return Result(returncode=-9, stdout="", stderr="", timed_out=True)
        return Result(returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    sandboxed: bool = False


class CannedWs(Ws):
    """A stand-in workspace whose exec returns a fixed result."""

    def __init__(self, path: Path, result: Result):
        super().__init__(path)
        self.result = result

    def exec(
        self, command, timeout_s=None, memory_mb=None, network=False, env=None, stdin=None, **binds
    ):
        self.calls.append({"command": command, "timeout_s": timeout_s, "network": network})
        return self.result


READ_TASK = Task(id="t1", instruction="Find the bug in src/app.py")
WRITE_TASK = Task(id="t2", instruction="Fix the bug in src/app.py", allow_write=True)
LIMITS = Limits(max_steps=7, time_limit_s=30)


def test_build_argv_claude(tmp_path):
    ws = Ws(tmp_path)
    assert ClaudeCodeAdapter(model="sonnet").build_argv(WRITE_TASK, ws, LIMITS) == [
        "claude",
        "-p",
        "Fix the bug in src/app.py",
        "--output-format",
        "stream-json",
        "--verbose",
        "--max-turns",
        "7",
        "--model",
        "sonnet",
        "--permission-mode",
        "bypassPermissions",
    ]
    argv = ClaudeCodeAdapter(extra_args=["--add-dir", "/x"]).build_argv(READ_TASK, ws, LIMITS)
    assert argv[-4:] == ["--permission-mode", "default", "--add-dir", "/x"]
    assert "--model" not in argv


def test_build_argv_codex(tmp_path, monkeypatch):
    import metaeval.sandbox.bwrap as bwrap

    ws = Ws(tmp_path)
    quiet = list(CodexAdapter.quiet_args)
    monkeypatch.setattr(bwrap, "use_bwrap", lambda: False)
    assert CodexAdapter(model="gpt-5-codex").build_argv(READ_TASK, ws, LIMITS) == [
        "codex",
        *quiet,
        "exec",
        "--json",
        "--model",
        "gpt-5-codex",
        "--sandbox",
        "read-only",
        "--skip-git-repo-check",
        "Find the bug in src/app.py",
    ]
    assert CodexAdapter(binary="/opt/codex").build_argv(WRITE_TASK, ws, LIMITS) == [
        "/opt/codex",
        *quiet,
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
        "Fix the bug in src/app.py",
    ]
    # inside metaeval's sandbox codex's own (which cannot nest in bwrap) is bypassed
    monkeypatch.setattr(bwrap, "use_bwrap", lambda: True)
    argv = CodexAdapter().build_argv(WRITE_TASK, ws, LIMITS)
    assert "--dangerously-bypass-approvals-and-sandbox" in argv and "--sandbox" not in argv


def test_build_argv_gemini(tmp_path):
    ws = Ws(tmp_path)
    assert GeminiCliAdapter(model="gemini-2.5-pro").build_argv(WRITE_TASK, ws, LIMITS) == [
        "gemini",
        "-p",
        "Fix the bug in src/app.py",
        "--output-format",
        "stream-json",
        "--skip-trust",
        "--model",
        "gemini-2.5-pro",
        "--yolo",
    ]
    assert GeminiCliAdapter().build_argv(READ_TASK, ws, LIMITS) == [
        "gemini",
        "-p",
        "Find the bug in src/app.py",
        "--output-format",
        "stream-json",
        "--skip-trust",
    ]


def test_build_argv_mini(tmp_path):
    adapter = MiniSweAgentAdapter(model="my-litellm-model")
    adapter._local.home = tmp_path / "home"
    argv = adapter.build_argv(WRITE_TASK, Ws(tmp_path), LIMITS)
    traj = argv[argv.index("-o") + 1]
    assert argv == [
        "mini",
        "-t",
        "Fix the bug in src/app.py",
        "--yolo",
        "--exit-immediately",
        "-o",
        traj,
        "-c",
        "mini_textbased.yaml",
        "-c",
        "model.model_class=litellm_textbased",
        "-m",
        "my-litellm-model",
    ]
    # the trajectory goes to the run's private home, never into the workspace
    assert traj.startswith(str(tmp_path / "home" / ".metaeval-mini-")) and traj.endswith(".json")
    # a metaeval model name (provider/model) is served through a gateway instead
    served = MiniSweAgentAdapter(model="scripted/x")
    assert served.served_model == "scripted/x" and served.model is None


def test_registry():
    registry = dict(CLI_ADAPTERS)
    assert registry == {
        "claude-code": ClaudeCodeAdapter,
        "codex": CodexAdapter,
        "gemini-cli": GeminiCliAdapter,
        "mini-swe-agent": MiniSweAgentAdapter,
    }
    for name, cls in CLI_ADAPTERS.items():
        assert cls.name == name


# ---------------------------------------------------------------------------------------------
# Adapters: run()


@pytest.mark.parametrize(
    ("adapter", "message"),
    [
        (
            ClaudeCodeAdapter(),
            "claude not found in TOOLS or on PATH (install Claude Code with `make clis` to use agent claude-code)",
        ),
        (
            CodexAdapter(),
            "codex not found in TOOLS or on PATH (install the Codex CLI with `make clis` to use agent codex)",
        ),
        (
            GeminiCliAdapter(),
            "gemini not found in TOOLS or on PATH (install Gemini CLI with `make clis` to use agent gemini-cli)",
        ),
        (
            MiniSweAgentAdapter(),
            "mini not found in TOOLS or on PATH (install mini-swe-agent with pip install 'metaeval[mini]' to use agent mini-swe-agent)",
        ),
    ],
)
def test_run_with_missing_binary_is_a_clear_error(adapter, message, tmp_path, monkeypatch):
    from metaeval.agents.cli.binaries import tools_dir

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sys, "executable", str(empty / "python"))
    ws = Ws(tmp_path)
    result = adapter.run(READ_TASK, ws, LIMITS)
    assert result.status == "error"
    tools = str(tools_dir() / "node_modules" / ".bin")
    assert result.error == message.replace("TOOLS", tools)
    assert ws.calls == []


def fake_binary(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(FILE)
    return Ws(root)


def test_run_claude_happy_path(fake_bin, workspace):
    fixture = FIXTURES / "claude_success.jsonl"
    fake_binary(fake_bin, "claude", f"#!/bin/sh\ncat '{fixture}'\necho 'sub() adds' > notes.txt\n")
    result = ClaudeCodeAdapter().run(WRITE_TASK, workspace, LIMITS)
    assert result.status == "ok", result.error
    assert result.error is None
    assert result.usage == Usage(
        input_tokens=5340, output_tokens=150, cache_read_tokens=5000, cache_write_tokens=300
    )
    assert result.cost_usd == 0.0123
    assert result.steps == 6
    assert result.submission == "The bug is in sub(): it returns a + b."
    assert result.files_produced == ["notes.txt"]
    assert len(result.transcript) == 15
    # the CLI gets what is left of the 30-s limit after setting up its run (a few ms here)
    assert 29 < workspace.calls[0]["timeout_s"] <= 30
    assert result.time_limit_s == 30 and result.overrun_s == 0
    assert workspace.calls[0]["network"] is True
    # effort: distinct results (the second Read re-delivers lines 4-5 of the first: 0 new bytes)
    retrieved = len(FILE) + len("Found 1 file\nsrc/app.py") + len("4")
    retrieved += len("File created successfully at: /work/ws/notes.txt")
    asked = len('{"file_path":"/work/ws/src/app.py"}')
    asked += len('{"path":"src","pattern":"def sub"}')
    asked += len('{"file_path":"/work/ws/src/app.py","limit":2,"offset":4}')
    assert result.effort.novel_retrieval_bytes == retrieved
    assert result.effort.novel_tool_call_bytes == asked


def test_run_claude_error_result(tmp_path):
    stdout = (FIXTURES / "claude_max_turns.jsonl").read_text()
    ws = CannedWs(tmp_path, Result(returncode=0, stdout=stdout, stderr=""))
    result = ClaudeCodeAdapter(binary="/bin/sh").run(READ_TASK, ws, LIMITS)
    assert result.status == "error"
    assert result.error == "error_max_turns"
    assert result.steps == 2


def test_run_timeout_keeps_partial_transcript(tmp_path):
    partial = "\n".join(lines("claude_success.jsonl")[:4])
    ws = CannedWs(tmp_path, Result(returncode=-9, stdout=partial, stderr="", timed_out=True))
    result = ClaudeCodeAdapter(binary="/bin/sh").run(READ_TASK, ws, LIMITS)
    assert result.status == "timeout"
    assert result.error == "claude-code timed out after 30s"
    assert result.time_limit_s == 30 and 0 < result.wall_clock_s < 5
    assert [e.type for e in result.transcript] == [
        "system",
        "assistant",
        "tool_call",
        "tool_result",
    ]
    assert result.usage.output_tokens == 30  # msg_01, counted once


def test_setting_up_a_run_spends_from_its_time_limit(fake_bin, workspace):
    """Time spent before the CLI starts (here a 2-s `prepare`) counts against the 4-s limit:
    the CLI is killed at the limit counted from the call, not 4 s after it started."""
    import time

    fake_binary(fake_bin, "claude", "#!/bin/sh\nexec sleep 30\n")

    class SlowToPrepare(ClaudeCodeAdapter):
        def prepare(self, task, workspace):
            time.sleep(2)

    began = time.monotonic()
    result = SlowToPrepare().run(READ_TASK, workspace, Limits(time_limit_s=4))
    elapsed = time.monotonic() - began
    assert result.status == "timeout" and result.error == "claude-code timed out after 4s"
    assert 1.5 < workspace.calls[0]["timeout_s"] <= 2.0  # what was left of the limit
    assert 4 <= result.wall_clock_s <= elapsed < 4 + 3.0
    assert result.time_limit_s == 4 and result.overrun_s < 3.0


def test_run_without_final_event_reports_exit_code_and_stderr(tmp_path):
    ws = CannedWs(tmp_path, Result(returncode=1, stdout="", stderr="Error: no API key\n"))
    result = GeminiCliAdapter(binary="/bin/sh").run(READ_TASK, ws, LIMITS)
    assert result.status == "error"
    assert result.error == (
        "gemini-cli exited with code 1 without reporting a result; stderr: Error: no API key"
    )


def test_run_never_raises(tmp_path):
    class Broken(Ws):
        def exec(self, *args, **kwargs):
            raise RuntimeError("sandbox exploded")

    result = CodexAdapter(binary="/bin/sh").run(READ_TASK, Broken(tmp_path), LIMITS)
    assert result.status == "error"
    assert result.error == "codex: RuntimeError: sandbox exploded"


def test_run_codex_and_gemini_happy_paths(fake_bin, workspace):
    fake_binary(fake_bin, "codex", f"#!/bin/sh\ncat '{FIXTURES / 'codex_success.jsonl'}'\n")
    fake_binary(fake_bin, "gemini", f"#!/bin/sh\ncat '{FIXTURES / 'gemini_stream.jsonl'}'\n")
    codex = CodexAdapter().run(READ_TASK, workspace, LIMITS)
    assert codex.status == "ok", codex.error
    assert codex.usage == Usage(input_tokens=24763, output_tokens=122, cache_read_tokens=24448)
    assert codex.steps == 5  # no turn count reported: the number of tool calls
    assert codex.files_produced == []
    assert codex.submission == "Fixed sub() in src/app.py: it returned a + b."
    gemini = GeminiCliAdapter().run(READ_TASK, workspace, LIMITS)
    assert gemini.status == "ok", gemini.error
    assert gemini.steps == 3
    assert gemini.usage.reasoning_tokens == 50


def test_run_mini_reads_and_removes_its_trajectory(fake_bin, workspace):
    fixture = FIXTURES / "mini_traj_v1.json"
    fake_binary(
        fake_bin,
        "mini",
        f"#!{os.path.realpath(sys.executable)}\n"  # not a PATH lookup: CI's PATH has no python
        "import os, shutil, sys\n"
        "assert os.environ.get('MSWEA_CONFIGURED') == 'true'\n"
        "args = sys.argv[1:]\n"
        f"shutil.copy({str(fixture)!r}, args[args.index('-o') + 1])\n"
        "open('fixed.txt', 'w').write('ok')\n",
    )
    result = MiniSweAgentAdapter().run(WRITE_TASK, workspace, LIMITS)
    assert result.status == "ok", result.error
    assert result.files_produced == ["fixed.txt"]  # the trajectory file is not listed
    assert result.cost_usd == 0.0421
    assert result.steps == 5
    assert result.submission.startswith("diff --git a/src/app.py")
    assert not list(workspace.path.glob(".metaeval-mini-*"))  # removed after reading
    assert compute_effort(result.transcript) == result.effort


def test_run_mini_without_trajectory_is_an_error(fake_bin, workspace):
    fake_binary(fake_bin, "mini", "#!/bin/sh\necho 'boom' >&2\nexit 2\n")
    result = MiniSweAgentAdapter().run(READ_TASK, workspace, LIMITS)
    assert result.status == "error"
    assert result.error.startswith("mini-swe-agent wrote no trajectory file at ")


# ---------------------------------------------------------------------------------------------
# Shapes seen from the real programs (Claude Code 2.1.197, Gemini CLI 0.61.0, Codex 0.169.0,
# mini-swe-agent 2.4.6), trimmed to the fields the parsers read


def test_claude_bash_is_classified_by_command_and_gets_a_span_from_stdout():
    stream = [
        '{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"c0",'
        '"name":"Bash","input":{"command":"cat hello.txt","description":"read"}}],'
        '"usage":{"input_tokens":100,"output_tokens":7}}}',
        '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"c0",'
        '"type":"tool_result","content":"line one\\nline two","is_error":false}]},'
        '"tool_use_result":{"stdout":"line one\\nline two","stderr":"","interrupted":false}}',
        '{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"c1",'
        '"name":"Bash","input":{"command":"grep -rn two ."}}],"usage":{"input_tokens":1}}}',
        '{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":2,'
        '"usage":{"input_tokens":101,"output_tokens":12},"modelUsage":{"claude-x":'
        '{"inputTokens":101,"outputTokens":12,"cacheReadInputTokens":0,'
        '"cacheCreationInputTokens":0},"claude-haiku":{"inputTokens":11,"outputTokens":2}}}',
    ]
    parsed = parse_claude_stream(stream)
    calls = [e for e in parsed.transcript if e.type == "tool_call"]
    assert [c.kind for c in calls] == ["read", "search"]
    result = next(e for e in parsed.transcript if e.type == "tool_result")
    # the Bash tool trims the final newline; the file's lines are whole
    assert result.text == "line one\nline two\n"
    assert result.span == Span(path="hello.txt", start_line=1)
    # modelUsage holds every request (the title request included); usage does not
    assert parsed.usage == Usage(input_tokens=112, output_tokens=14)


def test_gemini_flat_model_stats_and_shell_spans():
    stream = [
        '{"type":"tool_use","tool_name":"run_shell_command","tool_id":"run_shell_command__c0",'
        '"parameters":{"command":"cat hello.txt"}}',
        '{"type":"tool_result","tool_id":"run_shell_command__c0","status":"success",'
        '"output":"line one\\nline two"}',
        '{"type":"result","status":"success","stats":{"total_tokens":278,"input_tokens":256,'
        '"output_tokens":22,"cached":0,"input":256,"tool_calls":1,"models":{"a":'
        '{"total_tokens":65,"input_tokens":55,"output_tokens":10,"cached":0,"input":55},'
        '"b":{"total_tokens":213,"input_tokens":201,"output_tokens":12,"cached":0,"input":201}}}}',
    ]
    parsed = parse_gemini_stream(stream)
    assert parsed.usage == Usage(input_tokens=256, output_tokens=22)
    call, result = parsed.transcript[0], parsed.transcript[1]
    assert call.kind == "read"
    assert result.span == Span(path="hello.txt", start_line=1)
    assert result.text == "line one\nline two\n"


def test_gemini_empty_results_are_filled_from_what_the_gateway_delivered():
    from metaeval.agents.cli.gemini_stream import fill_gemini_results

    stream = [
        '{"type":"tool_use","tool_name":"read_file","tool_id":"read_file__call_0",'
        '"parameters":{"file_path":"hello.py"}}',
        '{"type":"tool_result","tool_id":"read_file__call_0","status":"success","output":""}',
    ]
    transcript = parse_gemini_stream(stream).transcript
    filled = fill_gemini_results(transcript, {"call_0": "a = 1\n"})
    assert filled[1].text == "a = 1\n" and filled[1].span == Span(path="hello.py", start_line=1)
    assert fill_gemini_results(transcript, {})[1].text == ""  # nothing delivered: unchanged


def test_codex_counts_cache_writes():
    stream = [
        '{"type":"turn.completed","usage":{"input_tokens":201,"cached_input_tokens":50,'
        '"cache_write_input_tokens":30,"output_tokens":12,"reasoning_output_tokens":0}}'
    ]
    assert parse_codex_stream(stream).usage == Usage(
        input_tokens=201, output_tokens=12, cache_read_tokens=50, cache_write_tokens=30
    )


def test_mini_v2_json_observation_raw_output_and_format_error_usage():
    data = {
        "info": {"exit_status": "Submitted", "submission": ""},
        "messages": [
            {
                "role": "assistant",
                "content": "```mswea_bash_command\ncat a.txt\n```",
                "extra": {"response": {"usage": {"prompt_tokens": 100, "completion_tokens": 5}}},
            },
            {
                "role": "user",
                "content": '{"returncode": 0, "output": "x\\ny\\n"}',
                "extra": {"raw_output": "x\ny\n"},
            },
            {
                "role": "user",
                "content": "Please always provide EXACTLY ONE action",
                "extra": {"response": {"usage": {"prompt_tokens": 120, "completion_tokens": 9}}},
            },
        ],
    }
    parsed = parse_mini_trajectory(data)
    result = next(e for e in parsed.transcript if e.type == "tool_result")
    assert result.text == "x\ny\n" and result.span == Span(path="a.txt", start_line=1)
    assert parsed.usage == Usage(input_tokens=220, output_tokens=14)
