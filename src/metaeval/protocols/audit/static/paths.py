"""Check 2: absolute paths in the solution or tests that the environment never provides.

Referenced paths: string literals in Python (a whole literal that is an absolute path, the
literal prefix of an f-string, the words of a `subprocess`/`os.system` command) and the
resolved words and redirect targets of shell commands, as tree-sitter-bash reads them
(`"$(dirname "$0")/x.py"` is /tests/x.py; sed/grep/awk patterns and `-c` programs are not
paths; comments and data heredocs are excluded). A path needs two
segments or a file extension (`/home/alice/x`, `/input.csv`), which keeps `a /b` arithmetic
and `/pattern/` regexes out.

Provided paths:

- Harbor's own mounts and the working directory: /app, /tests, /solution, /logs (verifier,
  agent), /tmp, and `[environment] workdir`;
- system directories of any Linux image: /usr, /bin, /sbin, /lib*, /etc, /dev, /proc, /sys,
  /var, /run, /root, /boot; the bare directories /home, /opt, /mnt, /srv, /media (but not
  what is under them);
- everything the Dockerfile names (WORKDIR, COPY/ADD destinations, VOLUME, any absolute path
  in RUN/ENV such as `mkdir -p /data` or `git clone ... /opt/tool`), plus their parent
  directories, and `/home/<user>` for `useradd`/`adduser`;
- absolute paths in the instruction (the agent is told to create them) and directories the
  task's own scripts create (`mkdir`, `os.makedirs`, `Path(...).mkdir`).

A path below none of these is reported, grouped by its top two segments (one root cause per
missing directory, e.g. `/data` or `/home/alice`), as ENV-PATH: High when the tests use it
(every agent fails), Medium when only the reference solution does. Confidence 0.7 with a
Dockerfile on a plain base image (python, debian, ubuntu, ...), 0.6 when the task has no
environment. When the base image (FROM, or a prebuilt `docker_image`) is one whose contents
are unknown (a SWE-bench image may well hold /opt/miniconda3 and /testbed), the path is only
a suspicion: Low, Warning, 0.3, until a container run confirms it. Path-shaped values that
the task's own data files hold (`/orders/7` in a request log) are data, not paths. In test files
that talk HTTP, extensionless paths are taken for URL routes and skipped.
"""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.python_source import PySource, locate
from metaeval.protocols.audit.static.shell_script import SimpleCommand
from metaeval.protocols.audit.static.task_context import TaskContext, absolute_tokens

UNKNOWN_IMAGE_CONFIDENCE = 0.3
HARBOR_PATHS = ("/app", "/tests", "/solution", "/logs", "/tmp", "/installed-agent", "/oracle")
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/dev",
    "/proc",
    "/sys",
    "/var",
    "/run",
    "/root",
    "/boot",
)
BARE_DIRS = frozenset({"/", "/home", "/opt", "/mnt", "/srv", "/media"})

_FULL_PATH = re.compile(r"/[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+*-]*)*")
_HAS_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_GLOB = re.compile(r"[*?\[{\x00]")
_ROUTE_CALLS = frozenset(
    {
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "head",
        "options",
        "request",
        "route",
        "urljoin",
        "url_for",
        "websocket",
        "add_url_rule",
        "add_api_route",
        "path",
        "re_path",
        "mount",
        "fetch",
        "goto",
        "navigate",
    }
)
_SHELL_CALLS = re.compile(
    r"^(?:subprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)|os\.system|os\.popen)$"
)
_HTTP_HINT = re.compile(
    r"https?://|\bimport (?:requests|httpx|aiohttp|urllib)|\bfrom (?:requests|httpx|fastapi|flask|starlette)\b|\bcurl\b"
)
_PATTERN_COMMANDS = frozenset({"sed", "grep", "egrep", "fgrep", "awk", "gawk", "perl", "jq", "rg"})
_MKDIR_PY = re.compile(r"\b(?:makedirs|mkdir)\s*\(")


@dataclass
class PathUse:
    file: str
    line: int
    role: str
    path: str


def _normal(path: str) -> str:
    cut = _GLOB.search(path)
    if cut:
        path = path[: cut.start()]
        path = path.rsplit("/", 1)[0] if not path.endswith("/") else path
    path = posixpath.normpath(path) if path else "/"
    return "/" if path in ("", ".", "//") else path


def _enough(path: str) -> bool:
    segments = [s for s in path.split("/") if s]
    return len(segments) >= 2 or (len(segments) == 1 and bool(_HAS_EXT.search(segments[0])))


def _dotted(func: ast.AST) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _python_uses(ctx: TaskContext, source: PySource) -> tuple[list[PathUse], set[str]]:
    """Path uses in one Python source, and directories it creates."""
    uses: list[PathUse] = []
    created: set[str] = set()
    lines = ctx.lines(source.file)
    routes: set[int] = set()
    commands: set[int] = set()
    for node in source.nodes:
        if type(node) is ast.Call:
            name = _dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            args = list(node.args) + [k.value for k in node.keywords]
            if last in _ROUTE_CALLS:
                routes |= {id(a) for a in args}
            if _SHELL_CALLS.match(name):
                for arg in args:
                    commands |= {id(n) for n in ast.walk(arg)}
                created |= {_normal(p) for p in _python_command_creates(node)}
            if last in ("makedirs", "mkdir"):
                target = node.args[0] if node.args else node.func
                if isinstance(node.func, ast.Attribute) and last == "mkdir" and not node.args:
                    target = node.func.value
                    if isinstance(target, ast.Call) and target.args:
                        target = target.args[0]
                for inner in ast.walk(target):
                    if (
                        isinstance(inner, ast.Constant)
                        and isinstance(inner.value, str)
                        and inner.value.startswith("/")
                    ):
                        created.add(_normal(inner.value))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            routes.add(id(node.right))
    for node, value in source.strings():
        if id(node) in routes:
            continue
        if id(node) in commands:
            candidates = absolute_tokens(value)
        elif value.endswith("\x00"):  # f-string literal prefix: its directory part
            prefix = value[:-1]
            candidates = (
                [prefix.rsplit("/", 1)[0]] if prefix.startswith("/") and "/" in prefix[1:] else []
            )
        elif _FULL_PATH.fullmatch(value):
            candidates = [value]
        else:
            continue
        for path in candidates:
            if not path.startswith("/"):
                continue
            first_line = source.file_line(node)
            last_line = source.file_end_line(node)
            line = (
                locate(lines, first_line, last_line, path) if last_line > first_line else first_line
            )
            uses.append(PathUse(source.file, line, source.role, path))
    return uses, created


def _python_command_creates(call: ast.Call) -> list[str]:
    """Paths a `subprocess.run(["mkdir", "/server"])` / `os.system("mkdir -p /x")` creates."""
    if not call.args:
        return []
    first = call.args[0]
    if isinstance(first, (ast.List, ast.Tuple)):
        words = [
            e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
        return created_by(words) if len(words) == len(first.elts) else []
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        made: list[str] = []
        for part in re.split(r"&&|;|\|\|", first.value):
            made += created_by(part.split())
        return made
    return []


def _shell_uses(simple: SimpleCommand) -> tuple[list[str], set[str]]:
    """Absolute paths one simple command names (resolved words and redirect targets), and
    the directories it creates. Pattern and program arguments (`sed 's/a/b/'`, `grep`,
    `awk`, `python -c`) are not paths."""
    words = simple.words
    created: set[str] = set()
    if not words:
        return [p for _, p in simple.redirects if p.startswith("/")], created
    name = simple.name
    skip: set[int] = set()
    if name in _PATTERN_COMMANDS:
        for index, word in enumerate(words[1:], 1):
            if word in ("-e", "--expression", "-f"):
                skip.add(index + 1)
            elif not word.startswith("-"):
                skip.add(index)
                break
    for index, word in enumerate(words):
        if word in ("-c", "-e") and index + 1 < len(words) and name not in _PATTERN_COMMANDS:
            skip.add(index + 1)  # inline program text (`python -c`, `bash -c`, `perl -e`)
    found: list[str] = []
    for index, word in enumerate(words):
        if index in skip or "://" in word or "$" in word:
            continue
        value = word
        if not value.startswith("/") and "=" in value:
            value = value.split("=", 1)[1]
        if value.startswith("/") and " " not in value:
            found.append(value)
    created |= {_normal(p) for p in created_by(words, simple.cwd)}
    found += [p for _, p in simple.redirects if p.startswith("/") and "$" not in p]
    return found, created


def created_by(words: list[str], cwd: str | None = None) -> list[str]:
    """Directories one command creates, with their parents: `mkdir /jail`, `python3 -m venv
    /opt/py310`, `git init /repo` (and its .git; a bare `git init` makes the working
    directory's), `git clone URL /dst`. (A file a command writes, `cp x /srv/y`, still
    needs its directory, so it is not counted.)"""
    if not words:
        return []
    name = words[0].rsplit("/", 1)[-1]
    args = [w for w in words[1:] if not w.startswith("-")]
    absolute = [a for a in args if a.startswith("/") and "$" not in a]
    made: list[str] = []
    if name == "mkdir" or (name == "install" and "-d" in words):
        made += absolute
    elif (
        name.startswith("python")
        and "venv" in words[1:3]
        and absolute
        or name in ("virtualenv", "uv")
        and absolute
        and (name == "virtualenv" or "venv" in args)
    ):
        made.append(absolute[-1])
    elif name == "git" and args[:1] == ["init"]:
        target = absolute[-1] if absolute else cwd
        if target:
            made += [target, posixpath.join(target, ".git")]
    elif name == "git" and args[:1] == ["clone"] and len(args) >= 3 and args[-1] in absolute:
        made.append(args[-1])
    return made


def check_absolute_paths(ctx: TaskContext) -> list[Finding]:
    uses: list[PathUse] = []
    created: set[str] = set()
    for source in ctx.python_sources:
        found, made = _python_uses(ctx, source)
        uses += found
        created |= made
    for path, script in ctx.shell_scripts.items():
        role = ctx.files[path].role
        for command in script.commands:
            if "/" not in command.text:
                continue
            for simple in command.simple:
                tokens, made = _shell_uses(simple)
                created |= made
                for token in tokens:
                    line = locate(ctx.lines(path), command.line, command.end, token)
                    uses.append(PathUse(path, line, role, token))
    if not uses:
        return []

    provided: set[str] = set(HARBOR_PATHS) | set(SYSTEM_PATHS) | created
    for path in ctx.docker.provided:
        path = _normal(path)
        provided.add(path)
        parent = posixpath.dirname(path)
        if parent != "/":
            provided.add(parent)
    workdir = ctx.environment_section.get("workdir")
    if isinstance(workdir, str) and workdir.startswith("/"):
        provided.add(_normal(workdir))
    if ctx.instruction is not None:
        for token in absolute_tokens(ctx.instruction.text):
            token = _normal(token)
            provided.add(token)
            if posixpath.dirname(token) != "/":
                provided.add(posixpath.dirname(token))
    provided.discard("/")
    # A path-shaped value that the task's own data holds (`/orders/7` in a request log the
    # tests summarise) is data the tests compare against, not a file they open.
    data_text = "\n".join(
        f.text
        for f in ctx.role_files("environment")
        if not f.path.rsplit("/", 1)[-1].startswith(("Dockerfile", "docker-compose", "compose"))
    )

    http_files = {f.path for f in ctx.role_files("tests") if _HTTP_HINT.search(f.text)}
    missing: dict[str, list[PathUse]] = {}
    for use in uses:
        path = _normal(use.path)
        if not _enough(path) or path in BARE_DIRS:
            continue
        if any(path == p or path.startswith(p + "/") or p.startswith(path + "/") for p in provided):
            continue
        if use.file in http_files and not _HAS_EXT.search(path):
            continue
        if data_text and use.path in data_text:
            continue
        segments = [s for s in path.split("/") if s]
        root = "/" + segments[0]
        if root in BARE_DIRS and len(segments) > 2:  # /home/alice, /mnt/data
            root += "/" + segments[1]
        missing.setdefault(root, []).append(use)
    if not missing:
        return []

    unknown_base = ctx.unknown_base_image
    if unknown_base:
        # An image nobody here can look into may well hold the path: a suspicion, no more,
        # until a container run confirms it.
        confidence, runtime = (
            UNKNOWN_IMAGE_CONFIDENCE,
            f"the base image `{unknown_base}` may provide it (not confirmed by a container run)",
        )
    elif ctx.docker.present:
        confidence, runtime = 0.7, "environment/Dockerfile never creates or copies it"
    else:
        confidence, runtime = 0.6, "the task defines no environment that would create it"
    findings: list[Finding] = []
    for root, group in missing.items():
        in_tests = any(u.role == "tests" for u in group)
        paths = list(dict.fromkeys(u.path for u in group))
        shown = ", ".join(f"`{p}`" for p in paths[:4]) + (" ..." if len(paths) > 4 else "")
        file_list = list(dict.fromkeys(u.file for u in group))
        files = ", ".join(file_list) + (" uses" if len(file_list) == 1 else " use")
        impact = (
            "The tests look for it at run time, so they fail for every agent, including a "
            "correct one."
            if in_tests
            else "The reference solution depends on it, so the task was never shown to be "
            "solvable in its own environment."
        )
        findings.append(
            make_finding(
                ctx,
                subcategory="ENV-PATH",
                severity="Low" if unknown_base else ("High" if in_tests else "Medium"),
                finding_type="Bug" if confidence >= 0.55 else "Warning",
                title=f"Hard-coded path {paths[0]} is not provided by the environment",
                description=(
                    f"{files} {shown} under `{root}`, but {runtime}, the instruction "
                    "does not ask for it, and Harbor mounts only /app (the working directory), "
                    f"/tests, /solution and /logs. {impact}"
                ),
                recommendation=(
                    f"Use a path the runtime has (e.g. under /app or /tests), or create/copy "
                    f"`{root}` in environment/Dockerfile (`COPY ... {root}/` or `RUN mkdir -p "
                    f"{root}`)."
                ),
                confidence=confidence,
                evidence=dedupe_evidence(evidence_line(ctx, u.file, u.line) for u in group),
                unseen=(
                    f"the image `{unknown_base}` could not be inspected; it may hold `{root}`"
                    if unknown_base
                    else None
                ),
            )
        )
    return findings
