"""Effort reaches the real CLIs: each pinned CLI runs through its adapter, sandboxed, against
the gateway, and the gateway's record of the model request shows the reasoning setting the CLI
sent (codex: Responses `reasoning.effort`; Claude Code: `output_config`/`thinking`; Gemini CLI:
`generationConfig.thinkingConfig`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.agents.cli import CLI_ADAPTERS
from metaeval.agents.types import Limits, Task
from metaeval.gateway import Gateway
from metaeval.models.scripted import ScriptedModel
from metaeval.sandbox.workspace import Workspace
from test_cli_live import binary_or_skip, tool_responder

pytestmark = [pytest.mark.bwrap, pytest.mark.cli]


def asked_reasoning(name: str, effort: str, tmp_path: Path) -> list[dict]:
    binary_or_skip(name)
    root = tmp_path / f"ws-{effort}"
    root.mkdir()
    (root / "hello.py").write_text("alpha = 1\n")
    model = ScriptedModel(tool_responder([{"text": "done"}]), name="scripted/live")
    with Gateway(model) as gateway:
        adapter = CLI_ADAPTERS[name](gateway=gateway, effort=effort)
        task = Task(id="effort", instruction="Say done.", allow_write=False)
        result = adapter.run(task, Workspace(root), Limits(max_steps=3, time_limit_s=120))
        records = gateway.exchanges.snapshot()
    assert result.status == "ok", result.error
    return [r.get("reasoning", {}) for r in records if r.get("kind") == "completion"]


@pytest.mark.parametrize("effort", ["high", "low"])
def test_codex_sends_the_configured_reasoning_effort(effort, tmp_path) -> None:
    asked = asked_reasoning("codex", effort, tmp_path)
    assert asked and all(a.get("reasoning", {}).get("effort") == effort for a in asked), asked


@pytest.mark.parametrize("effort", ["high", "low"])
def test_claude_code_sends_the_configured_effort(effort, tmp_path) -> None:
    asked = asked_reasoning("claude-code", effort, tmp_path)
    # the main-loop request carries the effort (a title request may not)
    assert any(a.get("output_config", {}).get("effort") == effort for a in asked), asked


def test_gemini_cli_sends_the_thinking_budget(tmp_path) -> None:
    asked = asked_reasoning("gemini-cli", "low", tmp_path)
    assert any(a.get("thinkingConfig", {}).get("thinkingBudget") == 1024 for a in asked), asked
