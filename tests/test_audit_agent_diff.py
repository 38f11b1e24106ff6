"""The agent's program as the auditor sees it: `tree_diff` of /app before and after, on what an
agent (or a hostile task) may leave there, and the transcript summary and classification."""

from __future__ import annotations

import os
from pathlib import Path

from metaeval.agents.types import AgentResult, TranscriptEvent
from metaeval.protocols.audit.cells.agent_results import classify, transcript_summary, tree_diff


def test_tree_diff_shows_text_changes_and_names_what_it_does_not_read(tmp_path: Path):
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        (root / "src").mkdir(parents=True)
        (root / "same.txt").write_text("unchanged\n")
    (before / "src" / "main.py").write_text("x = 1\nprint(x)\n")
    (after / "src" / "main.py").write_text("x = 2\nprint(x)\n")
    (before / "gone.txt").write_text("bye\n")
    (after / "new.txt").write_text("no newline")
    (after / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    (after / "big.log").write_text("y" * (300 * 1024))
    os.symlink("/etc/passwd", after / "leak")  # an agent pointing at a host file
    os.symlink("same.txt", after / "alias")
    os.mkfifo(after / "pipe")

    diff = tree_diff(before, after)
    assert "--- a/src/main.py\n+++ b/src/main.py\n" in diff and "-x = 1\n+x = 2\n" in diff
    assert "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in diff
    assert "+++ b/new.txt\n@@ -0,0 +1 @@\n+no newline\n\\ No newline at end of file\n" in diff
    assert "Not shown: blob.bin added (binary, 30 bytes)" in diff
    assert f"Not shown: big.log added (large file, {300 * 1024} bytes)" in diff
    assert "Not shown: leak added (symlink leading outside (/etc/passwd))" in diff
    assert "Not shown: alias added (symlink to same.txt)" in diff
    assert "Not shown: pipe added (not a regular file (FIFO), not opened)" in diff
    assert "same.txt" not in diff.replace("symlink to same.txt", "")
    assert "root:" not in diff  # the host file behind the link was never read


def test_tree_diff_of_identical_trees_is_empty(tmp_path: Path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.txt").write_text("same\n")
    assert tree_diff(tmp_path / "a", tmp_path / "b") == ""


def test_transcript_summary_and_classification():
    events = [
        TranscriptEvent(type="tool_call", tool="Bash", kind="read", arguments={"command": "cat f"}),
        TranscriptEvent(type="tool_result", text="z" * 1000, raw_bytes=1000),
        TranscriptEvent(type="assistant", text="done  \n now"),
    ]
    text = transcript_summary(events, "final words")
    lines = text.splitlines()
    assert lines[2] == '1. Bash [read] {"command": "cat f"}'
    assert lines[3].startswith("   -> 1000 bytes: zzz") and lines[3].endswith("...")
    assert len(lines[3]) == len("   -> 1000 bytes: ") + 300
    assert lines[4] == "assistant: done now" and lines[-1] == "final answer: final words"

    assert classify(AgentResult(status="ok")) == "ok"
    assert classify(AgentResult(status="timeout", error="x timed out")) == "timeout"
    assert classify(AgentResult(status="error", infra_error=True)) == "infra_error"
    assert classify(AgentResult(status="error", stop_reason="out_of_memory")) == "out_of_memory"
    crashed = AgentResult(
        status="error", error="codex exited with code 1 without reporting a result"
    )
    assert classify(crashed) == "crashed"
    assert classify(AgentResult(status="error", error="model refused")) == "error"
