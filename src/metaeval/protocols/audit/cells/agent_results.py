"""The agent-results folder of one task: what an agent run leaves for the execution tier.

What its record holds (`attempt_record`, with the run's class from `classify`), and
``program.diff`` (a unified diff of /app from start to end: the agent's program),
``result.json`` (the run's record without its blob references), ``transcript.md`` (a digest of
the transcript, one line per step) and ``tests.log`` (the verifier's output). The audit loads
the folder as ``agent/...`` files (`metaeval audit run --tier execution --agent-results`).
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from metaeval.agents.types import AgentResult, Limits, TranscriptEvent
from metaeval.records import RunDir
from metaeval.tasks.safe_files import read_regular, walk_tree
from metaeval.tasks.trial import TrialResult

DIFF_FILE_BYTES = 256 * 1024  # a file larger than this shows in the diff by size only


def documents(record: dict[str, Any], diff: str, summary: str, log: str) -> dict[str, str]:
    """The files of a task's agent-results folder (name -> text)."""
    shown = {k: v for k, v in record.items() if not k.endswith("_blob") and k != "attempt"}
    return {
        "program.diff": diff or "(no changes under /app)\n",
        "result.json": json.dumps(shown, indent=2, sort_keys=True) + "\n",
        "transcript.md": summary or "(no transcript)\n",
        "tests.log": log,
    }


def write_documents(run: RunDir, task_id: str, files: dict[str, str]) -> None:
    """Write a task's agent-results folder (each file atomically)."""
    for name, text in files.items():
        run.write_document(f"{task_id}/{name}", text)


def tree_diff(before: Path, after: Path) -> str:
    """A unified diff (``a/`` before, ``b/`` after) of two trees' regular files; binary,
    large or unreadable files and entries that are not regular files are named, not shown."""
    old, new = _tree_files(before), _tree_files(after)
    parts: list[str] = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        a_text, b_text = _diffable(a), _diffable(b)
        if a_text is None or b_text is None:
            what = "added" if a is None else "removed" if b is None else "changed"
            now = b if b is not None else a
            assert now is not None  # rel is a key of old or of new
            kind = now if isinstance(now, str) else f"binary, {len(now)} bytes"
            parts.append(f"Not shown: {rel} {what} ({kind})\n")
            continue
        lines = difflib.unified_diff(
            a_text.splitlines(keepends=True),
            b_text.splitlines(keepends=True),
            fromfile="/dev/null" if a is None else f"a/{rel}",
            tofile="/dev/null" if b is None else f"b/{rel}",
        )
        for line in lines:
            parts.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(parts)


def _tree_files(root: Path) -> dict[str, bytes | str]:
    """rel -> content (bytes) of regular files, or a description of any other entry."""
    found: dict[str, bytes | str] = {}
    if not root.is_dir():
        return found
    for entry in walk_tree(root, ignore_dirs=()):
        if entry.kind == "file":
            try:
                size = os.lstat(entry.path).st_size
                found[entry.rel] = (
                    read_regular(entry.path, root, max_bytes=DIFF_FILE_BYTES)
                    if size <= DIFF_FILE_BYTES
                    else f"large file, {size} bytes"
                )
            except OSError as exc:
                found[entry.rel] = f"unreadable ({exc})"
        elif entry.kind == "link":
            found[entry.rel] = f"symlink to {entry.detail}"
        elif entry.kind != "dir":
            found[entry.rel] = entry.describe()
    return found


def _diffable(content: bytes | str | None) -> str | None:
    if content is None:
        return ""
    if isinstance(content, str) or b"\0" in content[:8192]:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


SUMMARY_TEXT_CHARS = 300


def transcript_summary(events: list[TranscriptEvent], submission: str | None) -> str:
    """A readable digest of a transcript: one line per step, long texts shortened."""
    lines = ["# Agent transcript (summary)", ""]
    step = 0
    for event in events:
        if event.type == "tool_call":
            step += 1
            args = event.arguments_json or json.dumps(event.arguments, sort_keys=True)
            lines.append(f"{step}. {event.tool} [{event.kind}] {_short(args)}")
        elif event.type == "tool_result":
            size = event.raw_bytes if event.raw_bytes is not None else len(event.text.encode())
            lines.append(f"   -> {size} bytes: {_short(event.text)}")
        elif event.type == "assistant" and event.text.strip():
            lines.append(f"assistant: {_short(event.text)}")
        elif event.type in ("error", "info") and event.text.strip():
            lines.append(f"{event.type}: {_short(event.text)}")
    if submission:
        lines += ["", f"final answer: {_short(submission)}"]
    return "\n".join(lines) + "\n"


def _short(text: str, limit: int = SUMMARY_TEXT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def attempt_record(
    run: RunDir, result: AgentResult, trial: TrialResult, limits: Limits, diff: str
) -> dict[str, Any]:
    """The record of one agent attempt but its task, agent and attempt id: the agent's
    outcome, the tests' reward, usage and effort; the diff, transcript and tests log go to
    blobs."""
    test, log = trial.test, trial.log
    assert test is not None  # run_trial always runs the tests after the solve step
    reward, reward_source, reward_error = trial.reward, trial.reward_source, trial.reward_error
    return {
        "status": result.status,
        "classification": classify(result),
        "stop_reason": result.stop_reason,
        "infra_error": result.infra_error,
        "error": result.error,
        "reward": reward,
        "reward_source": reward_source,
        "reward_error": reward_error,
        "passed": reward is not None and reward >= 1,
        "tests": {
            "returncode": test.returncode,
            "timed_out": test.timed_out,
            "duration_s": test.duration_s,
        },
        "time_limit_s": limits.time_limit_s,
        "usage": result.usage.model_dump(),
        "cli_usage": result.cli_usage.model_dump() if result.cli_usage else None,
        "cost_usd": result.cost_usd,
        "steps": result.steps,
        "wall_clock_s": round(result.wall_clock_s, 3),
        "files_produced": result.files_produced,
        "effort": result.effort.model_dump(),
        "model_calls": len(result.model_calls),
        "diff_blob": run.blobs.put(diff),
        "transcript_blob": run.blobs.put(
            json.dumps([e.model_dump(mode="json") for e in result.transcript])
        ),
        "tests_log_blob": run.blobs.put(log),
    }


def classify(result: AgentResult) -> str:
    """The agent run's outcome class: ok, timeout, out_of_memory, crashed (killed by a
    signal or no result at all), error, or infra_error."""
    if result.infra_error:
        return "infra_error"
    if result.status == "timeout":
        return "timeout"
    if result.stop_reason == "out_of_memory":
        return "out_of_memory"
    if result.status == "ok":
        return "ok"
    error = result.error or ""
    if "without reporting a result" in error or "signal" in error:
        return "crashed"
    return "error"
