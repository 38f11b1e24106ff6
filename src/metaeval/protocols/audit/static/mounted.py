"""Scripts that read files of their own mounted directory which the task does not ship.

Harbor mounts the task's `tests/` at /tests for the verifier and `solution/` at /solution for
the oracle, exactly as they are in the task. So when `tests/test.sh` runs
`python3 /tests/check.py`, or `solution/solve.sh` copies `"$ROOT/files/x.go"` with ROOT being
its own directory, the file must be in the task: if it is not, every run of that script fails
(every agent scores 0, or the reference solution cannot pass). The shell parser resolves the
usual ways of naming the script's directory (`$(dirname "$0")`, `${BASH_SOURCE[0]}`,
`$(cd ... && pwd)`), so only words it resolved completely are judged.

Only reads are judged: the sources of `cp`/`mv`/`install`/`rsync`, the files of `cat`,
`sed`, `diff`, `cmp`, `chmod`, `source`, and the script an interpreter (`bash`, `sh`,
`python3` ...) runs. A path the same script creates first (a redirection, a copy or move
destination, `mkdir`, `touch`) or tests for (`[ -f X ]`) is not judged, nor is a statement
whose failure is ignored (`|| true`; in a solution any `||` fallback).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.command_words import strip_wrappers
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.shell_script import ShellScript, SimpleCommand
from metaeval.protocols.audit.static.task_context import TaskContext, skipped_path
from metaeval.tasks.safe_files import walk_tree

MOUNTS = {"tests": "/tests/", "solution": "/solution/"}
_COPIERS = frozenset({"cp", "mv", "install", "rsync"})
_READERS = frozenset({"cat", "diff", "cmp", "source", ".", "head", "tail", "wc"})
_INTERPRETERS = re.compile(r"^(?:bash|sh|zsh|dash|python[\d.]*|node|ruby|perl)$")
_MAKERS = frozenset({"mkdir", "touch", "cp", "mv", "install", "rsync", "tee", "ln"})
_UNRESOLVED = re.compile(r"[$`*?\[\]{}~]")


def check_mounted_files(ctx: TaskContext) -> list[Finding]:
    """ENV-PATH High: a tests/ or solution/ script reads a file of its own mount that the
    task does not contain."""
    findings: list[Finding] = []
    listings: dict[str, set[str]] = {}
    for path, script in ctx.shell_scripts.items():
        role = ctx.files[path].role
        mount = MOUNTS.get(role)
        if mount is None:
            continue
        candidates = [
            (command, target)
            for command in script.commands
            for simple in command.simple
            if any(mount in word for word in simple.words)
            for target in file_reads(simple)
            if target.startswith(mount) and not _UNRESOLVED.search(target)
        ]
        if not candidates:
            continue
        if role not in listings:
            listings[role] = _role_listing(ctx, role)
        created = _created_paths(script)
        probed = _probed_paths(script)
        seen: set[str] = set()
        for command, target in candidates:
            target = posixpath.normpath(target)
            if target in seen or _tolerated(command.text, role) or _guarded(target, probed):
                continue
            if _ships(target[1:], listings[role]) or under_created(target, created):
                continue
            seen.add(target)
            findings.append(_finding(ctx, path, command.line, target, role))
    return findings


_IGNORED_FAILURE = re.compile(r"\|\|\s*(?:true|:|exit\s+0)\b|\|\|\s*:")


def _tolerated(text: str, role: str) -> bool:
    """Whether a failure of this statement is ignored. In a solution any `||` fallback counts;
    in tests an `|| echo 0 > reward.txt` still fails every agent, so only `|| true` does."""
    if role == "solution":
        return "||" in text
    return bool(_IGNORED_FAILURE.search(text))


_FILE_TEST = re.compile(r"(?:^|[\s;&|(])-[efsrdxL]\s+(\"[^\"]*\"|'[^']*'|[^\s;&|)\]]+)")


def _probed_paths(script: ShellScript) -> set[str]:
    """Paths the script tests for (`[ -f X ]`, `[[ -e X ]]`, `test -s X`): reading them is
    guarded. A probe whose path cannot be resolved guards every path of the same file name."""
    probed: set[str] = set()
    for command in script.commands:
        if not any(token in command.text for token in ("[", "test ")):
            continue
        for match in _FILE_TEST.finditer(command.text):
            word = script.expand(match.group(1).strip("\"'"))
            if _UNRESOLVED.search(word):
                probed.add("*/" + word.rstrip("/").rsplit("/", 1)[-1])
            elif word.startswith("/"):
                probed.add(posixpath.normpath(word))
    return probed


def _guarded(target: str, probed: set[str]) -> bool:
    return target in probed or "*/" + target.rsplit("/", 1)[-1] in probed


def file_reads(simple: SimpleCommand) -> list[str]:
    """The file arguments `simple` reads (resolved words; options left out)."""
    words = _runner_stripped(strip_wrappers(simple.words))
    if not words:
        return []
    name = words[0].rsplit("/", 1)[-1]
    args = [w for w in words[1:] if not w.startswith("-")]
    if name in ("pytest", "py.test"):
        return args
    if name in _COPIERS:
        return args[:-1]
    if name in _READERS:
        return args
    if name == "chmod":
        return args[1:]
    if name == "sed":
        has_script_option = any(w in ("-e", "--expression", "-f") for w in words[1:])
        return args if has_script_option else args[1:]
    if _INTERPRETERS.match(name):
        if any(w in ("-c", "-m") for w in words[1:]):
            return []  # inline code or a module, not a script file
        return args[:1]
    return []


_RUNNERS = frozenset({"uv", "uvx", "poetry", "pipenv", "pdm"})
_RUN_TARGET = re.compile(r"^(?:pytest|py\.test|python[\d.]*|bash|sh)$")


def _runner_stripped(words: list[str]) -> list[str]:
    """`uv run [--with X] pytest ...` as `pytest ...` (likewise uvx, poetry, pipenv, pdm)."""
    if not words or words[0].rsplit("/", 1)[-1] not in _RUNNERS:
        return words
    for index, word in enumerate(words[1:], start=1):
        if _RUN_TARGET.match(word.rsplit("/", 1)[-1]):
            return words[index:]
    return []


def _created_paths(script: ShellScript) -> set[str]:
    """Absolute paths the script writes or creates (redirections, copy destinations, mkdir)."""
    made: set[str] = set()
    for command in script.commands:
        for simple in command.simple:
            made |= {posixpath.normpath(t) for _, t in simple.redirects if t.startswith("/")}
            words = strip_wrappers(simple.words)
            if not words or words[0].rsplit("/", 1)[-1] not in _MAKERS:
                continue
            args = [w for w in words[1:] if not w.startswith("-") and w.startswith("/")]
            if words[0].rsplit("/", 1)[-1] in _COPIERS:
                args = args[-1:]
            made |= {posixpath.normpath(a) for a in args}
    return made


def under_created(target: str, created: set[str]) -> bool:
    return any(target == p or target.startswith(p.rstrip("/") + "/") for p in created)


def _ships(rel: str, listing: set[str]) -> bool:
    """True when `rel` is a file of the task or a directory holding some."""
    if rel in listing:
        return True
    prefix = rel.rstrip("/") + "/"
    return any(name.startswith(prefix) for name in listing)


def _role_listing(ctx: TaskContext, role: str) -> set[str]:
    """Task-relative paths of every file under `role`/ (loaded, skipped, or on disk)."""
    names = {p for p in ctx.files if p.startswith(role + "/")}
    names |= {
        p for p in (skipped_path(s) for s in ctx.task.skipped_files) if p.startswith(role + "/")
    }
    directory = Path(ctx.task.root) / role
    if directory.is_dir():
        for entry in walk_tree(directory, boundary=ctx.task.root):
            if entry.kind != "dir":
                names.add(f"{role}/{entry.rel}")
    return names


def _finding(ctx: TaskContext, path: str, line: int, target: str, role: str) -> Finding:
    if role == "tests":
        harm = "the verifier fails before it can score anything, so every agent gets 0"
        fix = f"Add {target[1:]} to the task, or correct the path in {path}."
    else:
        harm = "the reference solution fails, so the task has no working oracle"
        fix = f"Add {target[1:]} to the task, or correct the path in {path}."
    return make_finding(
        ctx,
        subcategory="ENV-PATH",
        severity="High",
        finding_type="Bug",
        title=f"{path} reads `{target}`, which the task does not ship",
        description=(
            f"{path} reads {target}. Harbor mounts the task's {role}/ directory at "
            f"/{role} as it is, and it holds no {target[1:]}; nothing in the script creates "
            f"it first. When the script runs, {harm}."
        ),
        recommendation=fix,
        confidence=0.8,
        evidence=[evidence_line(ctx, path, line)],
        claim="absence",
    )
