"""Test inputs that neither the image nor the reference solution provides.

Real tasks keep their inputs in a directory the Dockerfile copies from the build context
(`COPY fixtures ./fixtures`), and their tests read them (`APP / "fixtures" / "x.json"`). When
the tests read a file of such a directory that the build context lacks, and nothing else in the
task names that file (not the instruction, not the reference solution, not the environment's
own scripts, not a write in the tests), then no run can have it: the reference solution fails
too, so the task is broken whatever the agent does.

Only directories copied from a subdirectory of the context count (`COPY . /app` puts the
agent's own outputs under the same directory, which must not be mistaken for inputs). A test
about missing input reads a missing file on purpose: paths and test functions whose name or
docstring speak of missing, nonexistent or invalid input are not judged. Python
paths are resolved from string constants, `Path(...)`, `/` and `os.path.join` chains and
module-level names bound to them.
"""

from __future__ import annotations

import ast
import posixpath
import re

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.build_context import environment_listing
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.python_source import PySource
from metaeval.protocols.audit.static.run_reads import copied_directories
from metaeval.protocols.audit.static.task_context import TaskContext

_PATH_CALLS = frozenset({"Path", "PurePath", "PurePosixPath", "PosixPath"})
# a test about a missing input reads a missing file on purpose
_ON_PURPOSE = re.compile(
    r"missing|nonexist|non_exist|not_exist|not exist|absent|no_such|no such|bogus|invalid|"
    r"does_not|doesnt|fake|unknown|not_found|not found",
    re.I,
)
_WRITES = re.compile(
    r"write|dump|touch|save|mkdir|copy|shutil|open\([^)]*['\"][wa]|mode\s*=|>",
)


def check_test_fixtures(ctx: TaskContext) -> list[Finding]:
    """ENV-PATH Medium: tests read a file under a directory the image copies from the build
    context, which the context lacks and nothing else in the task names."""
    copied = [(d, s) for d, s in copied_directories(ctx) if s]
    if not copied:
        return []
    listing = set(environment_listing(ctx))
    others = _other_text(ctx)
    findings: list[Finding] = []
    seen: set[str] = set()
    for source in ctx.python_sources:
        if source.role != "tests":
            continue
        purposeful = _purposeful_nodes(source)
        for node, path in _resolved_paths(source):
            if path in seen or id(node) in purposeful or _ON_PURPOSE.search(path):
                continue
            context_path = _context_path(path, copied)
            if context_path is None or _in_listing(context_path, listing):
                continue
            name = path.rsplit("/", 1)[-1]
            if "." not in name or name in others or _written_in_tests(ctx, name):
                continue
            seen.add(path)
            findings.append(_finding(ctx, source, node, path, context_path))
    return findings


def _purposeful_nodes(source: PySource) -> set[int]:
    """Nodes inside test functions about missing input (by name or docstring)."""
    nodes: set[int] = set()
    for node in source.nodes:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        about = node.name + " " + (ast.get_docstring(node) or "")
        if _ON_PURPOSE.search(about):
            nodes |= {id(n) for n in ast.walk(node)}
    return nodes


def _resolved_paths(source: PySource) -> list[tuple[ast.AST, str]]:
    """(node, absolute path) for path expressions in `source`, outermost first."""
    names: dict[str, str] = {}
    for statement in source.tree.body:
        if type(statement) is ast.Assign and len(statement.targets) == 1:
            target = statement.targets[0]
            if type(target) is ast.Name:
                value = _value(statement.value, names)
                if value is not None:
                    names[target.id] = value
    found: list[tuple[ast.AST, str]] = []
    inner: set[int] = set()
    for node in source.nodes:
        if type(node) is ast.BinOp and type(node.op) is ast.Div or type(node) is ast.Call:
            if id(node) in inner:
                continue
            value = _value(node, names)
            if value is not None and value.startswith("/"):
                found.append((node, posixpath.normpath(value)))
                inner |= {id(n) for n in ast.walk(node)}
    return found


def _value(node: ast.AST, names: dict[str, str]) -> str | None:
    """The string a path expression evaluates to, when it is made of constants."""
    if type(node) is ast.Constant:
        return node.value if isinstance(node.value, str) else None
    if type(node) is ast.Name:
        return names.get(node.id)
    if type(node) is ast.BinOp and type(node.op) is ast.Div:
        left = _value(node.left, names)
        right = _value(node.right, names)
        if left is None or right is None:
            return None
        return posixpath.join(left, right)
    if type(node) is ast.Call:
        func = node.func
        name = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
        args = node.args
        if node.keywords:
            return None
        if name in _PATH_CALLS and len(args) == 1:
            return _value(args[0], names)
        if name == "join" and type(func) is ast.Attribute and args:
            parts = [p for a in args if (p := _value(a, names)) is not None]
            if len(parts) < len(args):
                return None
            return posixpath.join(*parts)
    return None


def _context_path(path: str, copied: list[tuple[str, str]]) -> str | None:
    for image_dir, context in copied:
        prefix = image_dir.rstrip("/") + "/"
        if path.startswith(prefix):
            return posixpath.normpath(posixpath.join(context, path[len(prefix) :]))
    return None


def _in_listing(context_path: str, listing: set[str]) -> bool:
    if context_path in listing:
        return True
    prefix = context_path + "/"
    return any(name.startswith(prefix) for name in listing)


def _other_text(ctx: TaskContext) -> str:
    """Everything but the tests: the instruction, solution, environment and other files."""
    return "\n".join(f.text for f in ctx.task.files if f.role != "tests")


def _written_in_tests(ctx: TaskContext, name: str) -> bool:
    for f in ctx.role_files("tests"):
        for line in ctx.lines(f.path):
            if name in line and _WRITES.search(line):
                return True
    return False


def _finding(
    ctx: TaskContext, source: PySource, node: ast.AST, path: str, context_path: str
) -> Finding:
    directory = posixpath.dirname(path)
    return make_finding(
        ctx,
        subcategory="ENV-PATH",
        severity="Medium",
        finding_type="Bug",
        title=f"Tests read `{path}`, which neither the image nor the solution provides",
        description=(
            f"{source.file} reads {path}. The image's {directory} is copied from the build "
            f"context, which has no environment/{context_path}; no other file of the task "
            "(instruction, reference solution, environment scripts) names it and the tests "
            "do not write it. Tests that need it fail for every agent and for the reference "
            "solution."
        ),
        recommendation=(
            f"Add environment/{context_path} to the task, or correct the path in {source.file}."
        ),
        confidence=0.6,
        evidence=[evidence_line(ctx, source.file, source.file_line(node))],
        claim="absence",
    )
