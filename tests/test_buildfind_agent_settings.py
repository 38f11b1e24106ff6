"""Per-agent settings of a build-and-find config reach the CLI process: effort, endpoint, key,
env and CLI arguments. Each CLI is replaced by a script of the same name that writes the argv
and environment it received (and Gemini's settings file) into the workspace; it runs through
the adapter's real run path, in the real sandbox."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from metaeval.agents.types import Limits, Task
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.agents import effort_setting, make_agent
from metaeval.protocols.buildfind.config import load_config
from metaeval.sandbox.workspace import Workspace

DUMP = """#!/bin/sh
for a in "$@"; do printf '%s\\n' "$a"; done > argv.txt
env > env.txt
cat "$HOME/.gemini/settings.json" > settings.txt 2>/dev/null
exit 0
"""
SECRET = "sk-test-per-agent-key-0001"


def _config(tmp_path: Path, finders: list[dict], builders: list[dict] | None = None) -> Path:
    pack = tmp_path / "pack"
    pack.mkdir(exist_ok=True)
    builders = builders or [{"name": "ref", "agent": "reference:documented"}]
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"pack": str(pack), "builders": builders, "finders": finders}))
    return path


def _binary(tmp_path: Path, name: str) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(DUMP)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def _run(tmp_path: Path, agent) -> tuple[list[str], dict[str, str], str]:
    root = tmp_path / "ws"
    root.mkdir()
    task = Task(id="t", instruction="Answer the questions.", allow_write=True)
    agent.run(task, Workspace(root), Limits(max_steps=3, time_limit_s=60))
    argv = (root / "argv.txt").read_text().splitlines()
    env = dict(
        line.split("=", 1) for line in (root / "env.txt").read_text().splitlines() if "=" in line
    )
    settings = (root / "settings.txt").read_text() if (root / "settings.txt").exists() else ""
    return argv, env, settings


def _spec(tmp_path: Path, finder: dict):
    return load_config(_config(tmp_path, [finder])).finders[0]


def test_codex_gets_reasoning_effort_endpoint_key_env_and_args(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MY_CODEX_KEY", SECRET)
    spec = _spec(
        tmp_path,
        {
            "name": "codex_high",
            "agent": "codex",
            "model": "gpt-5.5",
            "effort": "high",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "MY_CODEX_KEY",
            "env": {"PANEL_TAG": "codex-high"},
            "cli_args": ["-c", "model_verbosity=low"],
        },
    )
    agent = make_agent(spec, role="finder")
    agent.binary = _binary(tmp_path, "codex")
    argv, env, _ = _run(tmp_path, agent)
    assert argv[:4] == [
        "-c",
        "model_reasoning_effort=high",
        "-c",
        "openai_base_url=http://127.0.0.1:9/v1",
    ]
    assert argv[argv.index("--model") + 1] == "gpt-5.5"
    assert argv[-3:-1] == ["-c", "model_verbosity=low"]
    assert env["OPENAI_API_KEY"] == SECRET and env["PANEL_TAG"] == "codex-high"
    assert effort_setting(spec, agent) == "-c model_reasoning_effort=high"


def test_claude_code_gets_effort_and_its_own_base_url(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("THIRD_PARTY_KEY", SECRET)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    spec = _spec(
        tmp_path,
        {
            "name": "glm_low",
            "agent": "claude-code",
            "model": "glm-5",
            "effort": "low",
            "base_url": "http://127.0.0.1:9/anthropic",
            "api_key_env": "THIRD_PARTY_KEY",
        },
    )
    agent = make_agent(spec, role="finder")
    agent.binary = _binary(tmp_path, "claude")
    argv, env, _ = _run(tmp_path, agent)
    assert argv[:2] == ["--effort", "low"]
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/anthropic"
    assert env["ANTHROPIC_API_KEY"] == SECRET
    assert effort_setting(spec, agent) == "--effort low"


def test_gemini_cli_gets_a_thinking_budget_for_its_model(tmp_path) -> None:
    spec = _spec(
        tmp_path,
        {"name": "gem_low", "agent": "gemini-cli", "model": "gemini-3-pro", "effort": "low"},
    )
    agent = make_agent(spec, role="finder")
    agent.binary = _binary(tmp_path, "gemini")
    _, _, settings = _run(tmp_path, agent)
    override = json.loads(settings)["modelConfigs"]["overrides"][0]
    assert override["match"] == {"model": "gemini-3-pro"}
    thinking = override["modelConfig"]["generateContentConfig"]["thinkingConfig"]
    assert thinking == {"thinkingBudget": 1024}


def test_effort_not_taken_by_the_cli_is_an_error_naming_the_field(tmp_path) -> None:
    spec = _spec(tmp_path, {"name": "cc", "agent": "claude-code", "effort": "minimal"})
    with pytest.raises(ConfigError) as err:
        make_agent(spec, role="finder")
    assert "finders.cc.effort" in str(err.value) and "minimal" in str(err.value)


def test_agents_without_an_effort_setting_record_not_applicable(tmp_path) -> None:
    spec = _spec(
        tmp_path, {"name": "loop", "agent": "toolloop", "model": "scripted/x", "effort": "high"}
    )
    agent = make_agent(spec, role="finder")
    assert effort_setting(spec, agent).startswith("not applicable")
    default = _spec(tmp_path, {"name": "cx", "agent": "codex"})
    assert effort_setting(default, make_agent(default, role="finder")) is None


def test_missing_key_variable_fails_the_run_and_names_it(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    spec = _spec(tmp_path, {"name": "cx", "agent": "codex", "api_key_env": "NOT_SET_KEY"})
    agent = make_agent(spec, role="finder")
    agent.binary = _binary(tmp_path, "codex")
    root = tmp_path / "ws"
    root.mkdir()
    task = Task(id="t", instruction="x", allow_write=True)
    result = agent.run(task, Workspace(root), Limits(max_steps=3, time_limit_s=60))
    assert result.status == "error" and "NOT_SET_KEY" in (result.error or "")
    assert not (root / "argv.txt").exists()  # the CLI never started without its key
