"""A CLI lane's tool menu (issue 40): the paper's tool names mapped to each CLI's own
allow-list, and refused where the CLI cannot enforce it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from metaeval.agents.cli.binaries import resolve_binary
from metaeval.agents.types import Limits, Task
from metaeval.errors import ConfigError
from metaeval.protocols.improve.meta_agents import apply_tool_menu, make_meta_agent
from metaeval.sandbox.workspace import Workspace

SUT = "suts/lane.json"


def lane(agent: str, menu: list[str]):
    meta = make_meta_agent({"agent": agent, "model": None, "options": {}})
    apply_tool_menu(meta, menu, SUT)
    return meta.agent


def test_a_bash_only_claude_code_lane_passes_its_own_tools_flag(tmp_path):
    adapter = lane("claude-code", ["bash"])
    task = Task(id="t", instruction="improve the target", allow_write=True)
    argv = adapter.build_argv(task, Workspace(tmp_path), Limits(max_steps=3))
    assert argv[argv.index("--tools") + 1] == "Bash"


def test_the_gemini_lane_menu_goes_to_its_core_tools_allow_list(tmp_path):
    six = ["bash", "read", "write", "edit", "glob", "grep"]
    adapter = lane("gemini-cli", six)
    adapter.prepare_home(tmp_path, Task(id="t", instruction="x"), on_gateway=False)
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["tools"]["core"] == [
        "run_shell_command",
        "read_file",
        "write_file",
        "replace",
        "glob",
        "grep_search",
    ]
    # without a menu nothing is restricted
    plain = make_meta_agent({"agent": "gemini-cli", "model": None, "options": {}}).agent
    plain.prepare_home(tmp_path / "plain", Task(id="t", instruction="x"), on_gateway=False)
    assert "tools" not in json.loads((tmp_path / "plain/.gemini/settings.json").read_text())


@pytest.mark.parametrize(
    ("agent", "menu", "words"),
    [
        ("codex", ["bash"], "no per-tool allow-list"),
        ("claude-code", ["bash", "grep"], "claude-code has no tool for grep"),
        ("gemini-cli", ["shell"], "unknown tool(s) shell"),
    ],
)
def test_a_menu_a_cli_cannot_enforce_is_refused_naming_the_field(agent, menu, words):
    with pytest.raises(ConfigError) as caught:
        lane(agent, menu)
    assert caught.value.file == SUT and caught.value.field == "tool_menu"
    assert words in str(caught.value)


@pytest.mark.cli
def test_the_real_claude_code_offers_only_bash_under_the_menu(tmp_path):
    """The real CLI's first event lists the tools it offers the model; it is started against
    a closed port on 127.0.0.1 (no network) and stopped after that event."""
    adapter = lane("claude-code", ["bash"])
    binary = resolve_binary("claude")
    assert binary is not None, "claude not installed (make clis; METAEVAL_TOOLS_DIR)"
    task = Task(id="t", instruction="say hi", allow_write=True)
    argv = adapter.build_argv(task, Workspace(tmp_path), Limits(max_steps=1))
    argv[0] = str(binary)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "ANTHROPIC_API_KEY": "placeholder",
        **adapter.quiet_env,
    }
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    assert first["type"] == "system" and first["subtype"] == "init"
    assert first["tools"] == ["Bash"]
