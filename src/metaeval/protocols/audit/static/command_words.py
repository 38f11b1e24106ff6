"""The words of shell commands: simple commands of a command line, wrappers (`sudo`, `env`,
`VAR=value`) stripped."""

from __future__ import annotations

import re

from metaeval.protocols.audit.static.shell import parse_script

_WRAPPERS = frozenset({"sudo", "env", "exec", "time", "RUN", "nohup", "command", "xargs"})


def strip_wrappers(words: list[str]) -> list[str]:
    """Drop leading `VAR=value`, `sudo`, `env`, `exec`, `time` ... from a command's words."""
    index = 0
    while index < len(words) and (
        re.match(r"^[A-Za-z_]\w*=", words[index]) or words[index] in _WRAPPERS
    ):
        index += 1
    return words[index:]


def shell_words(command: str) -> list[list[str]]:
    """The simple commands of a command line, each as its resolved words (tree-sitter)."""
    script = parse_script("-", command, script_path="/", cwd=None)
    out: list[list[str]] = []
    for statement in script.commands:
        for words in statement.words:
            words = strip_wrappers(words)
            if words:
                out.append(words)
    return out
