"""Where a task's solution and tests name absolute paths, and which directories they create
(for check 2, `paths.py`).

Python: a string literal that is a whole absolute path, the directory part of an f-string's
literal prefix, the words of a `subprocess`/`os.system` command; arguments of HTTP route calls
(`client.get("/items/1")`) and the right side of `+` are not paths. Shell: the resolved words
and redirect targets of each simple command, except pattern and program arguments
(`sed 's/a/b/'`, `grep`, `awk`, `python -c`). Directories made by `mkdir`, `os.makedirs`,
`Path(...).mkdir`, `python -m venv`, `git init` and `git clone` count as created.
"""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass

from metaeval.protocols.audit.static.python_source import (
    PySource,
    locate,
    path_text,
)
from metaeval.protocols.audit.static.shell_script import SimpleCommand
from metaeval.protocols.audit.static.task_context import TaskContext, absolute_tokens

_FULL_PATH = re.compile(r"/[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+*-]*)*")
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
# Variables naming a directory the tool itself creates when missing (MPLCONFIGDIR, XDG_CACHE_HOME,
# TORCH_HOME, TMPDIR): a path handed to one is not read from the image.
_TOOL_DIR_VARIABLE = re.compile(r"CONFIG|CACHE|HOME$|^TMP|^TEMP", re.I)
_PATTERN_COMMANDS = frozenset({"sed", "grep", "egrep", "fgrep", "awk", "gawk", "perl", "jq", "rg"})


@dataclass
class PathUse:
    """One absolute path named on one line of a task file."""

    file: str
    line: int
    role: str
    path: str


def normal_path(path: str) -> str:
    """The path normalised, cut before its first glob character (to the directory part)."""
    cut = _GLOB.search(path)
    if cut:
        path = path[: cut.start()]
        path = path.rsplit("/", 1)[0] if not path.endswith("/") else path
    path = posixpath.normpath(path) if path else "/"
    return "/" if path in ("", ".", "//") else path


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
            written = _written_path(node, last, source)
            if written.startswith("/"):
                created.add(normal_path(written))
            args = list(node.args) + [k.value for k in node.keywords]
            if last in _ROUTE_CALLS:
                routes |= {id(a) for a in args}
            if _SHELL_CALLS.match(name):
                for arg in args:
                    commands |= {id(n) for n in ast.walk(arg)}
                created |= {normal_path(p) for p in _python_command_creates(node)}
            if last in ("makedirs", "mkdir"):
                created |= _made_directories(node, last, source)
            environ = last == "putenv" or (last == "setdefault" and "environ" in name)
            if environ and len(node.args) == 2:
                routes |= _tool_dir_value(node.args[0], node.args[1])
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            routes.add(id(node.right))
        elif isinstance(node, ast.Subscript):
            routes.add(id(node.slice))  # a key (`W["/policy/conv1/w"]`), not a file
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            if "environ" in _dotted(target.value):
                routes |= _tool_dir_value(target.slice, node.value)
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


def _made_directories(call: ast.Call, last: str, source: PySource) -> set[str]:
    """What `os.makedirs(x)` / `Path(x).mkdir()` creates: its literal paths, and its target
    with names followed (`os.makedirs(BASE)`, BASE = "/srv/x")."""
    target = call.args[0] if call.args else call.func
    if isinstance(call.func, ast.Attribute) and last == "mkdir" and not call.args:
        target = call.func.value
        if isinstance(target, ast.Call) and target.args:
            target = target.args[0]
    made = {
        normal_path(inner.value)
        for inner in ast.walk(target)
        if isinstance(inner, ast.Constant)
        and isinstance(inner.value, str)
        and inner.value.startswith("/")
    }
    followed = path_text(target, source.names)
    if followed.startswith("/"):
        made.add(normal_path(followed))
    return made


_WRITE_METHODS = frozenset({"write_text", "write_bytes", "touch", "mkfifo", "symlink_to"})


def _written_path(call: ast.Call, last: str, source: PySource) -> str:
    """The path a call writes (`open(p, "w")`, `Path(p).write_text(...)`), names followed."""
    if last == "open" and call.args:
        mode = call.args[1] if len(call.args) > 1 else None
        mode = mode or next((k.value for k in call.keywords if k.arg == "mode"), None)
        text = mode.value if isinstance(mode, ast.Constant) else ""
        if isinstance(text, str) and any(c in text for c in "wax"):
            return path_text(call.args[0], source.names)
    if last in _WRITE_METHODS and isinstance(call.func, ast.Attribute):
        return path_text(call.func.value, source.names)
    return ""


def _tool_dir_value(name: ast.AST, value: ast.AST) -> set[int]:
    """The value node of an environment setting that names a tool's own directory."""
    text = name.value if isinstance(name, ast.Constant) else None
    return {id(value)} if isinstance(text, str) and _TOOL_DIR_VARIABLE.search(text) else set()


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
    created |= {normal_path(p) for p in created_by(words, simple.cwd)}
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


def collect_path_uses(ctx: TaskContext) -> tuple[list[PathUse], set[str]]:
    """Every absolute path the task's Python sources and shell scripts name (in file order),
    and the directories they create."""
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
    # `/C=US/ST=State/CN=localhost` is an X.509 subject (`openssl -subj`), not a path.
    return [u for u in uses if "=" not in u.path.split("/")[1]], created


def shared_path_uses(ctx: TaskContext) -> tuple[list[PathUse], set[str]]:
    """`collect_path_uses` once per task (the path checks share it)."""
    cached = ctx.shared.get("path_uses")
    if cached is None:
        cached = ctx.shared["path_uses"] = collect_path_uses(ctx)
    return cached
