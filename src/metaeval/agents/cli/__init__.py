"""Adapters that run third-party coding-agent CLIs as metaeval agents.

Each adapter has a pure parser for its CLI's output (``parse_*``) and an `Agent`
implementation that runs the CLI in a workspace. `CLI_ADAPTERS` maps registry names to the
adapter classes.
"""

from __future__ import annotations

from metaeval.agents.cli.base import CLIAdapter
from metaeval.agents.cli.claude_code import ClaudeCodeAdapter, parse_claude_stream
from metaeval.agents.cli.codex import CodexAdapter
from metaeval.agents.cli.codex_stream import parse_codex_stream
from metaeval.agents.cli.gemini_cli import GeminiCliAdapter
from metaeval.agents.cli.gemini_stream import parse_gemini_json, parse_gemini_stream
from metaeval.agents.cli.mini_swe_agent import MiniSweAgentAdapter
from metaeval.agents.cli.mini_trajectory import parse_mini_trajectory
from metaeval.agents.cli.stream import ParsedStream
from metaeval.agents.shell_commands import (
    classify_shell_command,
    shell_read_span,
    strip_line_numbers,
)

CLI_ADAPTERS: dict[str, type[CLIAdapter]] = {
    ClaudeCodeAdapter.name: ClaudeCodeAdapter,
    CodexAdapter.name: CodexAdapter,
    GeminiCliAdapter.name: GeminiCliAdapter,
    MiniSweAgentAdapter.name: MiniSweAgentAdapter,
}

__all__ = [
    "CLI_ADAPTERS",
    "CLIAdapter",
    "ClaudeCodeAdapter",
    "CodexAdapter",
    "GeminiCliAdapter",
    "MiniSweAgentAdapter",
    "ParsedStream",
    "classify_shell_command",
    "parse_claude_stream",
    "parse_codex_stream",
    "parse_gemini_json",
    "parse_gemini_stream",
    "parse_mini_trajectory",
    "shell_read_span",
    "strip_line_numbers",
]
