"""Reruns of `audit agent-run` (issue 29, item 1): a changed agent limit is refused by name,
the same settings resume, and `--task` narrows the run without invalidating it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from metaeval.agents.toolloop import ToolLoopAgent
from metaeval.errors import RecordIntegrityError
from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.cells.agent_run import AgentRuns, AgentRunSettings

pytestmark = pytest.mark.bwrap
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"


def _agent() -> ToolLoopAgent:
    write = {"id": "w", "name": "write_file", "arguments": {"path": "/app/output.txt"}}
    write["arguments"]["content"] = "72.5\n"
    submit = {"id": "s", "name": "submit", "arguments": {"answer": "done"}}
    return ToolLoopAgent(
        ScriptedModel([{"tool_calls": [write]}, {"tool_calls": [submit]}], name="scripted/t")
    )


def test_agent_run_reruns(tmp_path):
    bench = tmp_path / "bench"
    shutil.copytree(EXAMPLES / "grade-mean", bench / "grade-mean")
    shutil.copytree(EXAMPLES / "row-count", bench / "row-count")
    out = tmp_path / "out"

    def run(tasks: list[str], max_steps: int = 5) -> dict:
        settings = AgentRunSettings(
            bench_dir=bench,
            out_dir=out,
            agent="toolloop",
            task_filter=tasks,
            max_steps=max_steps,
            progress=False,
        )
        return AgentRuns(settings, agent=_agent()).run()

    first = run(["grade-mean"])
    assert first["ran"] == 1
    before = (out / "agent_runs.jsonl").read_bytes()
    assert run(["grade-mean"])["ran"] == 0  # the same settings resume
    widened = run([])  # every task: the finished one is reused
    assert widened["skipped_completed"] == 1 and widened["ran"] == 1
    assert (out / "agent_runs.jsonl").read_bytes().startswith(before)
    after = (out / "agent_runs.jsonl").read_bytes()
    narrowed = run(["row-count"])  # one task of the run: reused, nothing runs
    assert narrowed["skipped_completed"] == 1 and narrowed["ran"] == 0
    assert (out / "agent_runs.jsonl").read_bytes() == after
    with pytest.raises(RecordIntegrityError, match=r"setting 'max_steps' changed: 5 -> 9"):
        run(["grade-mean"], max_steps=9)
