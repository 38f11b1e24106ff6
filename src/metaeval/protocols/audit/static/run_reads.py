"""RUN steps that read a copied file the build context lacks (part of check 8).

A RUN command reading a file under a directory COPY put in the image, that the build context
does not have and nothing before created, fails the build: ENV-PATH, Critical. Also which
directories a single-stage Dockerfile copies from its context (`copied_directories`).
"""

from __future__ import annotations

import posixpath
import re

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.build_context import environment_listing
from metaeval.protocols.audit.static.command_words import strip_wrappers
from metaeval.protocols.audit.static.dockerfile import CopyInstruction, CopyStep
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.mounted import file_reads, under_created
from metaeval.protocols.audit.static.shell_script import SimpleCommand
from metaeval.protocols.audit.static.task_context import TaskContext

# Commands that create nothing beyond what their arguments name: after one of anything else
# (a build script, a compiler, git, curl, tar ...) any file may exist, and no read is judged.
_INERT = frozenset(
    [
        "apt-get",
        "apt",
        "apk",
        "yum",
        "dnf",
        "microdnf",
        "pip",
        "pip3",
        "chmod",
        "chown",
        "chgrp",
        "mkdir",
        "rm",
        "ln",
        "echo",
        "printf",
        "useradd",
        "adduser",
        "groupadd",
        "addgroup",
        "export",
        "cd",
        "true",
        "set",
        "ls",
        "cat",
        "test",
        "[",
        "update-ca-certificates",
        "locale-gen",
        "sed",
        "cp",
        "mv",
        "install",
        "touch",
        "rmdir",
    ]
)


def check_run_reads(ctx: TaskContext) -> list[Finding]:
    """ENV-PATH Critical: a RUN command reads a file under a directory COPY put in the image
    (`COPY scripts/ /app/scripts/` then `RUN chmod +x /app/scripts/x.sh`) that the build
    context does not have, and nothing before created it: the build fails there.

    Judged only where a failure fails the build: single-stage Dockerfiles, the last statement
    of a RUN (or every one after `set -e`), no `||` fallback or pipe, and only until a RUN
    runs anything that may create files (see `_INERT`)."""
    docker = ctx.docker
    if not docker.present or docker.error or docker.stage_count != 1:
        return []
    if not docker.file.startswith("environment/"):
        return []
    listing = environment_listing(ctx)
    context_dir = posixpath.dirname(docker.file)[len("environment") :].lstrip("/")
    copied: list[tuple[str, str]] = []  # (image directory, context directory)
    created: set[str] = set()
    findings: list[Finding] = []
    for step in docker.steps:
        if isinstance(step, CopyStep):
            copied += _copied_dirs(step.copy, step.workdir, context_dir, listing)
            created |= _copied_files(step.copy, step.workdir, context_dir, listing)
            continue
        statements, where = step.statements, step.line
        strict = bool(statements) and re.match(r"set\s+-\w*e", statements[0].text) is not None
        for index, statement in enumerate(statements):
            judged = (strict or index == len(statements) - 1) and not re.search(
                r"\|", statement.text
            )
            for simple in statement.simple:
                if judged:
                    for read in file_reads(simple):
                        path = _absolute(read, simple.cwd)
                        if path is None or under_created(path, created):
                            continue
                        missing = _missing_in_context(path, copied, listing)
                        if missing is not None:
                            findings.append(_run_read_finding(ctx, where, path, missing, simple))
                            return findings  # the build stops at the first failing read
                created |= _creates(simple)
                name = _command_name(simple)
                if name not in _INERT and not _inert_python(simple):
                    return findings  # anything may exist from here on
    return findings


def _copied_dirs(
    copy: CopyInstruction, workdir: str, context_dir: str, listing: list[str]
) -> list[tuple[str, str]]:
    """(image directory, context directory) pairs a COPY fills with a directory's contents."""
    if copy.instruction != "COPY" or copy.from_stage is not None or copy.heredoc:
        return []
    dest = copy.destination
    dest = posixpath.normpath(dest if dest.startswith("/") else posixpath.join(workdir, dest))
    pairs = []
    for source in copy.sources:
        if any(ch in source for ch in "*?[$") or "://" in source:
            continue
        joined = posixpath.normpath(posixpath.join(context_dir, source.lstrip("/")))
        if joined.startswith(".."):
            continue
        if joined == "." or any(n.startswith(joined + "/") for n in listing):
            pairs.append((dest, "" if joined == "." else joined))
    return pairs


def _copied_files(
    copy: CopyInstruction, workdir: str, context_dir: str, listing: list[str]
) -> set[str]:
    """Image paths a COPY/ADD of single files writes (directory sources are in `copied`;
    a source this check cannot read, such as a wildcard or an ADD URL, creates its whole
    destination)."""
    dest = copy.destination
    dest = posixpath.normpath(dest if dest.startswith("/") else posixpath.join(workdir, dest))
    if copy.instruction == "ADD":
        return {dest}  # ADD unpacks local archives: anything may appear under dest
    made: set[str] = set()
    for source in copy.sources:
        if any(ch in source for ch in "*?[$") or "://" in source or copy.from_stage is not None:
            made.add(dest)
            continue
        joined = posixpath.normpath(posixpath.join(context_dir, source.lstrip("/")))
        if joined == "." or any(n.startswith(joined + "/") for n in listing):
            continue  # a directory: mapped by `_copied_dirs`
        name = joined.rsplit("/", 1)[-1]
        many = copy.destination.endswith("/") or len(copy.sources) > 1
        made.add(posixpath.join(dest, name) if many else dest)
    if copy.heredoc:
        made.add(dest)
    return made


def _missing_in_context(path: str, copied: list[tuple[str, str]], listing: list[str]) -> str | None:
    """The context path `path` would come from when no COPY supplies it, else None."""
    candidates = []
    for image_dir, context in copied:
        if not path.startswith(image_dir.rstrip("/") + "/"):
            continue
        rel = path[len(image_dir.rstrip("/")) + 1 :]
        source = posixpath.normpath(posixpath.join(context, rel)) if context else rel
        if source in listing or any(n.startswith(source + "/") for n in listing):
            return None
        candidates.append(source)
    return candidates[0] if candidates else None


def _absolute(word: str, cwd: str | None) -> str | None:
    if any(ch in word for ch in "$`*?[{~"):
        return None
    if word.startswith("/"):
        return posixpath.normpath(word)
    if cwd is None:
        return None
    return posixpath.normpath(posixpath.join(cwd, word))


def _command_name(simple: SimpleCommand) -> str:
    words = strip_wrappers(simple.words)
    return words[0].rsplit("/", 1)[-1] if words else ""


def _inert_python(simple: SimpleCommand) -> bool:
    """`python3 -m pip ...` / `python3 -m venv DIR` create only packages or the venv."""
    words = strip_wrappers(simple.words)
    return (
        len(words) >= 3
        and re.match(r"^python[\d.]*$", words[0].rsplit("/", 1)[-1]) is not None
        and words[1] == "-m"
        and words[2] in ("pip", "venv")
    )


def _creates(simple: SimpleCommand) -> set[str]:
    made = {posixpath.normpath(t) for _, t in simple.redirects if t.startswith("/")}
    words = strip_wrappers(simple.words)
    if words and words[0].rsplit("/", 1)[-1] in ("mkdir", "touch", "cp", "mv", "install", "ln"):
        args = [_absolute(w, simple.cwd) for w in words[1:] if not w.startswith("-")]
        made |= {a for a in args if a is not None}
    return made


def _run_read_finding(
    ctx: TaskContext, line: int, path: str, source: str, simple: SimpleCommand
) -> Finding:
    docker = ctx.docker
    command = " ".join(strip_wrappers(simple.words))[:120]
    return make_finding(
        ctx,
        subcategory="ENV-PATH",
        severity="Critical",
        finding_type="Bug",
        title=f"{docker.file} reads `{path}`, which the build context does not provide",
        description=(
            f"`{command}` runs during the build and needs {path}. That directory of the image "
            f"is copied from the build context, which has no environment/{source}, and no "
            "earlier step creates it, so the command fails and the image cannot be built."
        ),
        recommendation=(
            f"Add environment/{source} to the task, or remove {path} from the RUN command."
        ),
        confidence=0.85,
        evidence=[evidence_line(ctx, docker.file, line)],
    )


def copied_directories(ctx: TaskContext) -> list[tuple[str, str]]:
    """(image directory, context directory) for every directory a single-stage Dockerfile
    copies from its build context ("" for the whole context), leaving out directories a
    later RUN step mentions (it may add files there)."""
    docker = ctx.docker
    if not docker.present or docker.error or docker.stage_count != 1:
        return []
    if not docker.file.startswith("environment/"):
        return []
    listing = environment_listing(ctx)
    context_dir = posixpath.dirname(docker.file)[len("environment") :].lstrip("/")
    pairs: list[tuple[str, str]] = []
    for step in docker.steps:
        if isinstance(step, CopyStep):
            pairs += _copied_dirs(step.copy, step.workdir, context_dir, listing)
            continue
        text = " ".join(statement.text for statement in step.statements)
        pairs = [
            (image_dir, source)
            for image_dir, source in pairs
            if image_dir not in text and image_dir.rstrip("/").rsplit("/", 1)[-1] not in text
        ]
    return pairs
