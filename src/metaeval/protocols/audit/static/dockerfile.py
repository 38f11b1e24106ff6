"""environment/Dockerfile read through Docker's own parser, and what the image will hold.

The parser is the PyPI package `dockerfile`: Python bindings to the Dockerfile parser of
BuildKit (moby), the code `docker build` itself runs. Line continuations, escape
directives, JSON (exec) form, flags such as `COPY --from=build` and BuildKit heredocs
(`RUN <<EOF`) are split exactly as Docker splits them, which a line-based reading gets wrong
in corner cases. `dockerfile-parse` (pure Python) was the other choice; it reimplements the
syntax with regular expressions, which is the problem this module replaces.

`parse_dockerfile(path, text)` returns a `DockerInfo`: base images (and stage names, so
`FROM build` after `FROM python AS build` is not an image), environment variables, the
working directory, every COPY/ADD with its line, flags and sources, the absolute paths the
image has (WORKDIR, COPY destinations, VOLUME, paths RUN commands name), and the Python
packages RUN commands install (RUN lines go through tree-sitter-bash like the task's
scripts). A Dockerfile the parser rejects gives `DockerInfo(error=...)`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from metaeval.protocols.audit.static.installs import InstallCommand, find_installs_in
from metaeval.protocols.audit.static.shell import parse_script
from metaeval.protocols.audit.static.shell_script import ShellCommand, expand_vars

_OPAQUE_INSTALL = re.compile(
    r"\b(?:poetry install|uv sync|pipenv (?:install|sync)|pdm (?:install|sync)|"
    r"conda env (?:create|update)|mamba env (?:create|update)|setup\.py (?:install|develop))\b"
)
_USER_ADD = re.compile(r"^(?:useradd|adduser)$")


@dataclass
class CopyInstruction:
    """One COPY or ADD: its line, sources as written, destination, and `--from` stage."""

    line: int
    end: int
    instruction: str  # "COPY" or "ADD"
    sources: list[str]
    destination: str
    from_stage: str | None = None
    heredoc: bool = False


@dataclass(frozen=True)
class CopyStep:
    """A COPY/ADD in build order, with the working directory it runs in."""

    copy: CopyInstruction
    workdir: str


@dataclass(frozen=True)
class RunStep:
    """A RUN in build order: its shell statements and its line."""

    statements: list[ShellCommand]
    line: int


@dataclass
class DockerInfo:
    present: bool = False
    file: str = ""
    error: str | None = None  # the parser's or the build's complaint, if any
    error_line: int | None = None
    base_images: list[str] = field(default_factory=list)  # images, not earlier stages
    from_lines: list[tuple[int, str]] = field(default_factory=list)  # (line, image)
    stages: list[str] = field(default_factory=list)  # stage names (`AS name`)
    provided: set[str] = field(default_factory=set)  # absolute paths the image has
    installs: list[tuple[int, InstallCommand]] = field(default_factory=list)  # (line, install)
    copies: list[CopyInstruction] = field(default_factory=list)
    copy_sources: list[str] = field(default_factory=list)  # COPY/ADD sources from the context
    env_vars: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None  # the last WORKDIR of the final stage
    opaque_install: bool = False  # installs a project whose dependencies are not visible
    stage_count: int = 0  # FROM instructions
    steps: list[CopyStep | RunStep] = field(default_factory=list)  # COPY/ADD and RUN in order


_INSTRUCTION_WORDS = (
    "ADD ARG CMD COPY ENTRYPOINT ENV EXPOSE FROM HEALTHCHECK LABEL MAINTAINER ONBUILD RUN "
    "SHELL STOPSIGNAL USER VOLUME WORKDIR"
)
INSTRUCTIONS = frozenset(_INSTRUCTION_WORDS.split())
_NEEDS_ARGS = {"FROM": 1, "COPY": 2, "ADD": 2, "WORKDIR": 1, "ENV": 1, "ARG": 1, "USER": 1}


def _build_error(keyword: str, command) -> str | None:
    """What `docker build` rejects after parsing: unknown instructions, missing arguments."""
    if keyword not in INSTRUCTIONS:
        return f"line {command.start_line}: unknown instruction: {command.original.split()[0]}"
    needed = _NEEDS_ARGS.get(keyword, 0)
    given = len(command.value) + (1 if command.heredocs else 0)
    if given < needed:
        return f"line {command.start_line}: {keyword} requires at least {needed} argument(s)"
    return None


def _unquote(word: str) -> str:
    """A word of a shell-form COPY/ADD/WORKDIR without its quotes (`"src/"` is `src/`)."""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        return word[1:-1]
    return word


def _flag(flags: tuple[str, ...], name: str) -> str | None:
    for flag in flags:
        if flag.startswith(f"--{name}="):
            return flag.split("=", 1)[1]
    return None


def parse_dockerfile(path: str, text: str) -> DockerInfo:
    """Everything the static checks need from one Dockerfile (see the module docstring)."""
    import dockerfile

    info = DockerInfo(present=True, file=path)
    try:
        commands = dockerfile.parse_string(text)
    except dockerfile.GoParseError as exc:
        info.error = str(exc)
        match = re.search(r"line (\d+)", info.error)
        info.error_line = int(match.group(1)) if match else None
        return info
    workdir = "/"
    for command in commands:
        keyword = command.cmd.upper()
        problem = _build_error(keyword, command)
        if problem and info.error is None:
            info.error = problem
            info.error_line = command.start_line
        values = [expand_vars(v, info.env_vars) for v in command.value]
        if keyword in ("COPY", "ADD", "WORKDIR", "VOLUME") and not command.json:
            values = [_unquote(v) for v in values]  # Docker's word processing drops quotes
        workdir = _apply(info, command, keyword, values, workdir)
    return info


def _apply(info: DockerInfo, command, keyword: str, values: list[str], workdir: str) -> str:
    """Record one instruction in `info`; the working directory after it."""
    if keyword == "FROM":
        _from(info, command, values)
        return "/"
    if keyword == "ENV":
        for key, value in zip(values[0::2], values[1::2], strict=False):
            info.env_vars[key] = value
    elif keyword == "ARG":
        for value in values:
            key, sep, default = value.partition("=")
            info.env_vars.setdefault(key, default if sep else "")
    elif keyword == "WORKDIR" and values:
        target = values[0]
        workdir = posixpath.normpath(
            target if target.startswith("/") else posixpath.join(workdir, target)
        )
        info.provided.add(workdir)
        info.workdir = workdir
    elif keyword in ("COPY", "ADD") and values:
        _copy(info, command, keyword, values, workdir)
    elif keyword == "VOLUME":
        info.provided |= {v for v in values if v.startswith("/")}
    elif keyword == "RUN":
        _run(info, command, values, workdir, find_installs_in)
    return workdir


def _from(info: DockerInfo, command, values: list[str]) -> None:
    """A new stage: its base image (unless an earlier stage or scratch) and its name."""
    info.stage_count += 1
    image = values[0] if values else ""
    if image.lower() not in {s.lower() for s in info.stages} and image != "scratch":
        info.base_images.append(image)
        info.from_lines.append((command.start_line, image))
    if len(values) >= 3 and values[1].lower() == "as":
        info.stages.append(values[2])
    info.workdir = None


def _copy(info: DockerInfo, command, keyword: str, values: list[str], workdir: str) -> None:
    """A COPY/ADD: the instruction, its build-context sources, and the path it provides."""
    heredoc = bool(command.heredocs) if hasattr(command, "heredocs") else False
    sources, destination = values[:-1], values[-1]
    if heredoc:
        sources = []
    stage = _flag(command.flags, "from")
    copy = CopyInstruction(
        command.start_line,
        command.end_line,
        keyword,
        sources,
        destination,
        stage,
        heredoc,
    )
    info.copies.append(copy)
    info.steps.append(CopyStep(copy, workdir))
    if stage is None:
        info.copy_sources += sources
    dest = destination if destination.startswith("/") else posixpath.join(workdir, destination)
    info.provided.add(posixpath.normpath(dest))


def _run(info: DockerInfo, command, values: list[str], workdir: str, find_installs_in) -> None:
    script_text = " ".join(values) if command.json else values[0] if values else ""
    heredocs = getattr(command, "heredocs", ()) or ()
    if heredocs and script_text.lstrip().startswith("<<"):  # `RUN <<EOF`: the body is the script
        script_text = "\n".join(getattr(doc, "content", "") for doc in heredocs)
    script = parse_script(
        info.file, script_text, script_path="/", cwd=workdir, variables=dict(info.env_vars)
    )
    info.steps.append(RunStep(script.commands, command.start_line))
    for statement in script.commands:
        for simple in statement.simple:
            words = simple.words
            if not words:
                continue
            for install in find_installs_in([words]):
                info.installs.append((command.start_line, install))
                info.opaque_install |= install.local
            if _USER_ADD.match(words[0]):
                user = next((w for w in reversed(words[1:]) if not w.startswith("-")), "")
                if re.fullmatch(r"[a-z_][\w-]*", user):
                    info.provided.add(f"/home/{user}")
            cwd = simple.cwd or workdir
            for word in words[1:]:
                for token in _absolute_words(word):
                    info.provided.add(posixpath.normpath(token))
            if words[0] in ("mkdir", "git", "touch", "cp", "mv", "ln", "tar", "unzip", "wget"):
                for word in words[1:]:
                    relative = not word.startswith(("-", "/")) and "$" not in word
                    if relative and "://" not in word and cwd:
                        info.provided.add(posixpath.normpath(posixpath.join(cwd, word)))
            for _, target in simple.redirects:
                if target.startswith("/"):
                    info.provided.add(posixpath.normpath(target))
    info.opaque_install |= bool(_OPAQUE_INSTALL.search(script_text))


def _absolute_words(word: str) -> list[str]:
    """Absolute paths in one resolved word: the word itself, or the value of `--opt=/x`."""
    if "://" in word or "$" in word:
        return []
    if word.startswith("/"):
        return [word]
    if "=" in word:
        value = word.split("=", 1)[1]
        if value.startswith("/"):
            return [value]
    return []
