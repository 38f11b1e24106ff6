"""Files the instruction's own commands write against the files the tests demand.

An instruction often hands the agent commands to run (a fenced `bash`/`sh` block, lines
starting with `$ `, an inline code span that redirects to a file). Those commands are parsed like the task's scripts, from the working
directory, and the files they write are collected: redirect targets (`>`, `>>`, `&>`), `tee`
arguments, the destination of `cp`/`mv`/`install`, `touch`, and the value of `-o`/`--output`.

INST-CONTRADICT (Bug, High, 0.7) when such a file A and an absolute path B the tests use are
the same deliverable placed differently, and nothing tells or makes anyone write B:

- A and B have the same extension and share either their directory (another name) or their
  base name (another directory);
- the tests never name A (not even by base name) and do not write B themselves;
- the instruction never names B's base name (it may ask for B in its prose), and no file of
  the task or its environment names it (then the image or a step provides it).

An agent that does exactly what the instruction says writes A and fails tests that read B.
That B is absent at run time is assumed (the task's image may hold paths no task file
names), so the finding is an absence claim: `assumed`, kept at Low by the tier rule, until a
run in the task's environment logs B as missing (the null agent's tests, or a failed
oracle), which makes it `executed` at High (`dedupe.merge_check_findings`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.path_uses import PathUse, shared_path_uses
from metaeval.protocols.audit.static.shell import parse_script
from metaeval.protocols.audit.static.shell_script import SimpleCommand
from metaeval.protocols.audit.static.task_context import TaskContext
from metaeval.protocols.audit.static.verifier_inputs import tests_write

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_SHELL_LANGUAGES = frozenset({"", "bash", "sh", "shell", "console", "zsh", "terminal"})
_PROMPT = re.compile(r"^\s*\$\s+(?=\S)")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_INLINE_REDIRECT = re.compile(r"\s(?:>>?|\|\s*tee)\s+[\w./-]+")
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_OUTPUT_FLAGS = frozenset({"-o", "--output", "--out", "--output-file", "--outfile"})
_VERIFIER_ONLY = ("/tests", "/solution", "/logs", "/oracle", "/tmp", "/dev", "/proc")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


@dataclass(frozen=True)
class InstructedWrite:
    """A file one of the instruction's commands writes, and the instruction line."""

    path: str
    line: int


def check_instruction_commands(ctx: TaskContext) -> list[Finding]:
    instruction = ctx.instruction
    if instruction is None:
        return []
    writes = instructed_writes(instruction.text, ctx.workdir)
    if not writes:
        return []
    uses, _ = shared_path_uses(ctx)
    tests_text = "\n".join(f.text for f in ctx.role_files("tests"))
    findings: list[Finding] = []
    reported: set[str] = set()
    for write in writes:
        demanded = [
            u
            for u in uses
            if u.role == "tests"
            and u.path not in reported
            and _same_deliverable(write.path, u.path)
            and _unprovided(ctx, u.path, write.path)
        ]
        if not demanded:
            continue
        rest = tests_text
        for use in demanded:
            rest = rest.replace(use.path, "")
        if names(rest, posixpath.basename(write.path)):
            continue  # the tests read what the instruction writes (or may)
        reported.update(u.path for u in demanded)
        findings.append(_finding(ctx, instruction.path, write, demanded))
    return findings


def instructed_writes(text: str, workdir: str) -> list[InstructedWrite]:
    """The absolute files the shell commands of an instruction write, in text order."""
    found: dict[str, InstructedWrite] = {}
    for first, block in _command_blocks(text):
        script = parse_script("instruction.md", block, script_path="/instruction.sh", cwd=workdir)
        for command in script.commands:
            for simple in command.simple:
                for path in _written(simple):
                    found.setdefault(path, InstructedWrite(path, first + command.line - 1))
    return list(found.values())


def _command_blocks(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each fenced shell block, each `$ ` prompt line and each inline
    code span that redirects its output to a file (`jq ... > /app/out.json`)."""
    blocks: list[tuple[int, str]] = []
    lines = text.splitlines()
    fence: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence, start, body = match.group(1), number + 1, []
            if match.group(2).lower() not in _SHELL_LANGUAGES:
                fence = "skip:" + fence
            continue
        if fence is not None:
            if line.strip().startswith(fence.removeprefix("skip:")):
                if not fence.startswith("skip:"):
                    blocks.append((start, "\n".join(_PROMPT.sub("", b) for b in body)))
                fence = None
            else:
                body.append(line)
            continue
        if _PROMPT.match(line):
            blocks.append((number, _PROMPT.sub("", line)))
            continue
        blocks += [(number, m) for m in _INLINE.findall(line) if _INLINE_REDIRECT.search(m)]
    return blocks


def _written(simple: SimpleCommand) -> list[str]:
    """Absolute files one command writes (relative ones resolved against its directory)."""
    targets = [t for op, t in simple.redirects if op in _WRITE_REDIRECTS]
    words = simple.words
    args = [w for w in words[1:] if not w.startswith("-")]
    name = simple.name
    if name == "tee" or name == "touch":
        targets += args
    elif name in ("cp", "mv", "install") and len(args) >= 2:
        targets.append(args[-1])
    for index, word in enumerate(words[:-1]):
        if word in _OUTPUT_FLAGS:
            targets.append(words[index + 1])
        elif word.split("=", 1)[0] in _OUTPUT_FLAGS and "=" in word:
            targets.append(word.split("=", 1)[1])
    paths: list[str] = []
    for target in targets:
        if "$" in target or "*" in target or not _EXTENSION.search(target):
            continue
        if not target.startswith("/"):
            if simple.cwd is None:
                continue
            target = posixpath.join(simple.cwd, target)
        path = posixpath.normpath(target)
        if not any(path == r or path.startswith(r + "/") for r in _VERIFIER_ONLY):
            paths.append(path)
    return paths


def _same_deliverable(written: str, demanded: str) -> bool:
    if written == demanded or not _extension(demanded):
        return False
    if any(demanded == r or demanded.startswith(r + "/") for r in _VERIFIER_ONLY):
        return False
    if _extension(written) != _extension(demanded):
        return False
    same_dir = posixpath.dirname(written) == posixpath.dirname(demanded)
    return same_dir or posixpath.basename(written) == posixpath.basename(demanded)


def names(text: str, name: str) -> bool:
    """Whether `text` names the file `name` as a whole word (not `word_counts.csv` for
    `counts.csv`)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def _extension(path: str) -> str:
    match = _EXTENSION.search(path)
    return match.group().lower() if match else ""


def _unprovided(ctx: TaskContext, path: str, written: str) -> bool:
    """Nothing tells the agent to write `path` (for a file of the written name, its
    directory is never named), no file of the environment names it, and the tests do not
    write it themselves."""
    name = posixpath.basename(path)
    told = ctx.instruction.text if ctx.instruction is not None else ""
    if name == posixpath.basename(written):
        folder = posixpath.dirname(path)
        relative = posixpath.relpath(folder, ctx.workdir)
        if folder in told or (not relative.startswith("..") and names(told, relative)):
            return False
    elif names(told, name):
        return False
    if any(names(f.text, name) for f in ctx.files.values() if f.role == "environment"):
        return False
    return name not in ctx.task_basenames and not tests_write(ctx, path)


def _finding(
    ctx: TaskContext, instruction: str, write: InstructedWrite, demanded: list[PathUse]
) -> Finding:
    paths = ", ".join(dict.fromkeys(f"`{u.path}`" for u in demanded))
    evidence = [evidence_line(ctx, instruction, write.line)]
    evidence += [evidence_line(ctx, u.file, u.line) for u in demanded]
    return make_finding(
        ctx,
        subcategory="INST-CONTRADICT",
        severity="High",
        finding_type="Bug",
        title=f"The instruction's commands write `{write.path}`; the tests demand {paths}",
        description=(
            f"A command the instruction gives writes `{write.path}`, while the tests read "
            f"{paths}, which the instruction never names and no file of the task provides. "
            "An agent that follows the instruction exactly fails the tests."
        ),
        recommendation="Make the instruction's command and the tests name the same file.",
        confidence=0.7,
        evidence=dedupe_evidence(evidence),
        claim="absence",
    )
