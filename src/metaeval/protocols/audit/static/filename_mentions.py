"""Where a task's files mention file names (for check 1, `filenames.py`).

A file name is a word with a known extension (`filename_vocabulary.EXTENSIONS`). Mentions
are read from free text (the instruction, environment files), from the string literals of
the Python sources of one role and from the resolved words, redirect targets and `$(...)`
substitutions of that role's shell commands. What a role's own scripts write, restore or
patch is theirs, not a file they expect from the agent, so it is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from metaeval.protocols.audit.static.filename_vocabulary import (
    EXTENSIONS,
    IGNORED_DIRS,
    WELL_KNOWN,
)
from metaeval.protocols.audit.static.python_source import PySource, locate
from metaeval.protocols.audit.static.shell_script import ShellCommand
from metaeval.protocols.audit.static.task_context import TaskContext

_EXT_GROUP = "|".join(sorted(EXTENSIONS, key=len, reverse=True))
_FILE = re.compile(
    rf"(?<![\w@$%{{}}.-])(/?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXT_GROUP}))(?![\w-])",
    re.I,
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\b[\w.+-]+@[\w-]+\.[\w.]+", re.I)

# Words that look like file names but are not files the task works with: a traceback's
# frames (`File "/usr/lib/.../base.py", line 283`), Python modules in import statements
# (`from django.db import models`).
_NOT_FILES = re.compile(r'File "[^"\n]+", line \d+|\b(?:from|import)\s+[\w.]+')
_PATCHED = re.compile(r"^(?:'?diff --git a/\S+ b/|\+\+\+ b/)(\S+)", re.M)
_READ_IN_SUBSTITUTION = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)")


@dataclass
class Mentions:
    """Base name -> where it is mentioned, in order of first mention."""

    where: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)  # (file, line, full)

    def add(self, token: str, file: str, line: int) -> None:
        self.where.setdefault(token.rsplit("/", 1)[-1], []).append((file, line, token))

    def names(self) -> list[str]:
        return list(self.where)

    def has(self, name: str) -> bool:
        return name in self.where

    def first(self, name: str) -> tuple[str, int, str]:
        return self.where[name][0]


def _substitutions(text: str) -> str:
    """The text of every `$(...)` in a command: what a verifier reads inside a test."""
    return " ".join(m.group(0)[2:-1] for m in _READ_IN_SUBSTITUTION.finditer(text))


class MentionCollector:
    """Collects file-name mentions of one task, leaving out the task's own files."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.own = {
            p.rsplit("/", 1)[-1].lower() for p in ctx.files if p.startswith(("tests/", "solution/"))
        }

    def keep(self, token: str) -> bool:
        """Whether a file-name word counts: not a harness or system path, not a known name."""
        low = token.lower()
        if low.startswith(IGNORED_DIRS) or "/tests/" in low or "/logs/verifier" in low:
            return False
        base = low.rsplit("/", 1)[-1]
        return base not in WELL_KNOWN and base not in self.own

    def text(self, mentions: Mentions, path: str, lines: list[str], first: int = 1) -> None:
        """Mentions in free text (URLs, traceback frames and import statements blanked)."""
        for offset, line in enumerate(lines):
            if "." not in line:
                continue
            clean = _NOT_FILES.sub(lambda m: " " * len(m.group(0)), _URL.sub(" ", line))
            for match in _FILE.finditer(clean):
                if self.keep(match.group(1)):
                    mentions.add(match.group(1), path, first + offset)

    def role(self, role: str) -> Mentions:
        """Mentions in one role's Python sources and shell scripts, minus what they write."""
        mentions = Mentions()
        for source in self.ctx.python_sources:
            if source.role == role:
                self._python_strings(mentions, source)
        for path, script in self.ctx.shell_scripts.items():
            if self.ctx.files[path].role == role:
                for command in script.commands:
                    self._shell_command(mentions, path, command)
        for name in _written_by(self.ctx, role) & set(mentions.where):
            del mentions.where[name]
        # Sort by (file order, line) so "first mention" is stable.
        order = {p: i for i, p in enumerate(self.ctx.files)}
        for name in mentions.where:
            mentions.where[name].sort(key=lambda m: (order.get(m[0], 0), m[1]))
        return mentions

    def _python_strings(self, mentions: Mentions, source: PySource) -> None:
        """Mentions in the string literals (and f-string parts) of one Python source."""
        lines = self.ctx.lines(source.file)
        for node, value in source.strings(fstring_parts=True):
            if "." not in value:
                continue
            for match in _FILE.finditer(_URL.sub(" ", value.replace("\x00", ""))):
                token = match.group(1)
                if not self.keep(token):
                    continue
                first = source.file_line(node)
                line = locate(lines, first, source.file_end_line(node), token.rsplit("/", 1)[-1])
                mentions.add(token, source.file, line)

    def _shell_command(self, mentions: Mentions, path: str, command: ShellCommand) -> None:
        """Mentions in one shell statement, each file name once."""
        if "." not in command.text:
            return
        lines = self.ctx.lines(path)
        # resolved words: `${1:-data.csv}` is data.csv, `2>/dev/null` is no file;
        # then redirects inside `[ "$(tr -d ' ' < /app/x.txt)" = 6 ]`, which a
        # shell verifier reads its answer with, as the redirect targets say them
        redirects = " ".join(t for simple in command.simple for _, t in simple.redirects)
        seen: set[str] = set()
        for text in (command.resolved, redirects, _substitutions(command.text)):
            for match in _FILE.finditer(_NOT_FILES.sub(" ", _URL.sub(" ", text))):
                token = match.group(1)
                if token in seen or not self.keep(token):
                    continue
                seen.add(token)
                base = token.rsplit("/", 1)[-1]
                mentions.add(token, path, locate(lines, command.line, command.end, base))


def _written_by(ctx: TaskContext, role: str) -> set[str]:
    """Base names the role's own scripts write (`cat > parser.py <<EOF`, `> out.log`),
    restore (`git checkout x.py`) or patch (a diff's `+++ b/x.py`)."""
    written = {
        target.rsplit("/", 1)[-1]
        for path, script in ctx.shell_scripts.items()
        if ctx.files[path].role == role
        for target in [d.target for d in script.heredocs]
        + [t for c in script.commands for sc in c.simple for op, t in sc.redirects if ">" in op]
        if target
    }
    for path, script in ctx.shell_scripts.items():
        if ctx.files[path].role != role:
            continue
        for command in script.commands:
            for sc in command.simple:
                if sc.words[:1] == ["git"] and sc.words[1:2] in (["checkout"], ["restore"]):
                    written |= {w.rsplit("/", 1)[-1] for w in sc.words[2:] if "." in w}
        written |= {m.rsplit("/", 1)[-1] for m in _PATCHED.findall(ctx.files[path].text)}
    return written
