"""A parsed shell script: its statements, simple commands, heredocs and variables.

What `shell.parse_script` returns, and the two small rules the checks share with it:
expanding `$VAR` references with known values, and where a task file lives at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class SimpleCommand:
    """One simple command: resolved words (redirections removed) and where it runs."""

    words: list[str]
    line: int
    cwd: str | None
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator, target)

    @property
    def name(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""


@dataclass
class ShellCommand:
    """One statement of a script: its text, lines, and the simple commands inside."""

    file: str
    line: int  # first line, 1-based
    end: int  # last line
    text: str
    simple: list[SimpleCommand] = field(default_factory=list)

    @property
    def words(self) -> list[list[str]]:
        return [c.words for c in self.simple if c.words]

    @property
    def resolved(self) -> str:
        """The statement as the shell will see it: resolved words and redirect targets."""
        parts: list[str] = []
        for command in self.simple:
            parts += command.words
            parts += [target for _, target in command.redirects]
        return " ".join(parts)


@dataclass
class Heredoc:
    file: str
    command_line: int  # the line that opens the heredoc
    first_body_line: int  # 1-based line of the first body line
    body: list[str]
    kind: str  # "python", "shell" or "data"
    target: str = ""  # the file the heredoc is written to (`cat > X <<EOF`), if any


@dataclass
class ShellScript:
    file: str
    commands: list[ShellCommand] = field(default_factory=list)
    heredocs: list[Heredoc] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)

    def expand(self, text: str) -> str:
        """Expand `$VAR`, `${VAR}` and `${VAR:-default}` with the script's own assignments."""
        return expand_vars(text, self.variables)


_VAR_REF = re.compile(r"\$\{([A-Za-z_]\w*|\d)(?::?[-=]([^}]*))?\}|\$([A-Za-z_]\w*)")


def expand_vars(text: str, variables: dict[str, str], rounds: int = 3) -> str:
    """Expand variable references in free text (used for Dockerfile lines and old callers)."""
    if "$" not in text:
        return text

    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in variables:
            return variables[name]
        if match.group(2) is not None:
            return match.group(2)
        return match.group(0)

    for _ in range(rounds):
        new = _VAR_REF.sub(repl, text)
        if new == text:
            break
        text = new
    return text


def runtime_path(task_path: str) -> str:
    """Where a task file is at run time: tests/x -> /tests/x, solution/x -> /solution/x."""
    head = task_path.split("/", 1)[0]
    if head in ("tests", "solution"):
        return "/" + task_path
    return "/app/" + task_path.rsplit("/", 1)[-1]
