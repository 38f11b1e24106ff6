"""A SUT config's `tool_menu` for CLI lanes, mapped to each CLI's own allow-list (issue 40).

AIE Bench runs Claude Code "restricted to bash-only tool use" and Gemini CLI with six tools:
bash, read, write, edit, glob and grep. A CLI lane's menu is written in those six names and
handed to the CLI's own mechanism, which enforces it (the tools left out are not offered):

| menu  | Claude Code 2.1 (`--tools`) | Gemini CLI (settings.json `tools.core`) |
| ----- | --------------------------- | --------------------------------------- |
| bash  | Bash                        | run_shell_command                       |
| read  | Read                        | read_file                               |
| write | Write                       | write_file                              |
| edit  | Edit                        | replace                                 |
| glob  | (none)                      | glob                                    |
| grep  | (none)                      | grep_search                             |

Claude Code 2.1 has no Glob or Grep tool (it searches through Bash), so a menu naming them is
refused rather than silently widened or narrowed. Codex has no per-tool allow-list, so any
menu is refused for it. A refusal names the SUT config and `tool_menu`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metaeval.errors import ConfigError

MENU_NAMES = ("bash", "read", "write", "edit", "glob", "grep")
CLI_TOOLS: dict[str, dict[str, str]] = {
    "claude-code": {"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit"},
    "gemini-cli": {
        "bash": "run_shell_command",
        "read": "read_file",
        "write": "write_file",
        "edit": "replace",
        "glob": "glob",
        "grep": "grep_search",
    },
}
"""Each CLI's own name for a menu tool; a CLI that cannot enforce a menu is absent."""


def cli_tool_names(lane: str, menu: Sequence[str], sut_config: str | None) -> list[str]:
    """The CLI's names for `menu`; ConfigError (file, `tool_menu`) for a name outside the
    menu vocabulary, a tool the CLI does not have, or a CLI that cannot enforce a menu."""

    def refuse(message: str) -> ConfigError:
        return ConfigError(message, file=sut_config, field="tool_menu")

    unknown = [t for t in menu if t not in MENU_NAMES]
    if unknown:
        raise refuse(
            f"unknown tool(s) {', '.join(unknown)} for a CLI lane "
            f"(a CLI lane's menu names: {', '.join(MENU_NAMES)})"
        )
    names = CLI_TOOLS.get(lane)
    if names is None:
        raise refuse(
            f"the lane '{lane}' has no per-tool allow-list, so it cannot enforce a tool menu; "
            "leave tool_menu empty for this lane"
        )
    missing = [t for t in menu if t not in names]
    if missing:
        raise refuse(
            f"{lane} has no tool for {', '.join(missing)} (it offers {', '.join(names)}); "
            "remove it from tool_menu"
        )
    return [names[t] for t in menu]


def restrict_cli(adapter: Any, menu: Sequence[str], sut_config: str | None) -> None:
    """Give the CLI adapter the menu in its own terms (`adapter.allowed_tools`), which its
    command line or settings then carry."""
    adapter.allowed_tools = cli_tool_names(adapter.name, menu, sut_config)
