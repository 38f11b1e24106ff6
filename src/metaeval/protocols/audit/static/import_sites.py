"""Which modules a Python source imports (for check 3, `imports.py`).

Absolute `import` / `from ... import` statements and `importlib.import_module("x")` /
`__import__("x")` with a literal name, in source order. Imports guarded by `try/except
ImportError` (or a fallback in the handler) and `if TYPE_CHECKING:` are optional and left
out; relative imports are local. A script's PEP 723 inline metadata (`# /// script`) names
what `uv run` installs for it.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass

from metaeval.protocols.audit.static.installs import requirement_name
from metaeval.protocols.audit.static.python_source import PySource

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass
class ImportSite:
    """One import of a module, on one line of a task file."""

    file: str
    line: int
    role: str
    module: str  # as written, e.g. "sklearn.linear_model"


def _guards_import(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for name in names:
        if isinstance(name, ast.Name) and name.id in _IMPORT_ERRORS:
            return True
        if isinstance(name, ast.Attribute) and name.attr in _IMPORT_ERRORS:
            return True
    return False


def import_sites(source: PySource) -> list[ImportSite]:
    """Unguarded absolute imports of a module, in source order."""
    sites: list[ImportSite] = []
    dynamic = "import_module" in source.text or "__import__" in source.text
    _visit(source, source.tree.body, False, dynamic, sites)
    return sites


def _visit(
    source: PySource,
    statements: list[ast.stmt],
    guarded: bool,
    dynamic: bool,
    sites: list[ImportSite],
) -> None:
    """Add the import sites of `statements` (and the blocks nested in them) to `sites`."""
    for stmt in statements:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if not guarded:
                sites += _static_sites(source, stmt)
            continue
        blocks = _nested_blocks(stmt, guarded)
        if blocks is not None:
            for body, inner_guarded in blocks:
                _visit(source, body, inner_guarded, dynamic, sites)
        elif not guarded and dynamic:
            sites += _dynamic_sites(source, stmt)


def _static_sites(source: PySource, stmt: ast.Import | ast.ImportFrom) -> list[ImportSite]:
    """`import a, b` (each module) and `from a import x` (not relative imports)."""
    line = source.file_line(stmt)
    if isinstance(stmt, ast.Import):
        return [ImportSite(source.file, line, source.role, alias.name) for alias in stmt.names]
    if stmt.level == 0 and stmt.module:
        return [ImportSite(source.file, line, source.role, stmt.module)]
    return []


def _nested_blocks(stmt: ast.stmt, guarded: bool) -> list[tuple[list[ast.stmt], bool]] | None:
    """The statement blocks inside a compound statement, each with whether an import in it
    is optional; None for a simple statement."""
    if isinstance(stmt, (ast.Try, ast.TryStar)):
        protected = guarded or any(_guards_import(h) for h in stmt.handlers)
        # `except ImportError: import y` is a fallback: guarded too
        handlers = [(h.body, guarded or _guards_import(h)) for h in stmt.handlers]
        return [
            (stmt.body, protected),
            *handlers,
            (stmt.orelse, guarded),
            (stmt.finalbody, guarded),
        ]
    if isinstance(stmt, ast.If):
        test = ast.unparse(stmt.test) if isinstance(stmt.test, (ast.Name, ast.Attribute)) else ""
        return [(stmt.body, guarded or test.endswith("TYPE_CHECKING")), (stmt.orelse, guarded)]
    if isinstance(stmt, ast.Match):
        return [(case.body, guarded) for case in stmt.cases]
    if hasattr(stmt, "body"):  # def, class, for, while, with
        return [(stmt.body, guarded), (getattr(stmt, "orelse", []), guarded)]
    return None


def _dynamic_sites(source: PySource, stmt: ast.stmt) -> list[ImportSite]:
    """`importlib.import_module("x")` / `__import__("x")` with a literal name."""
    sites: list[ImportSite] = []
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                sites.append(
                    ImportSite(source.file, source.file_line(node), source.role, node.args[0].value)
                )
    return sites


_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def pep723_dependencies(text: str) -> list[str]:
    """Distribution names of a script's inline metadata block (PEP 723, `# /// script`)."""
    if "# /// script" not in text:
        return []
    for match in _PEP723.finditer(text if text.endswith("\n") else text + "\n"):
        if match.group("type") != "script":
            continue
        body = "".join(
            line[2:] if line.startswith("# ") else line[1:]
            for line in match.group("content").splitlines(keepends=True)
        )
        try:
            data = tomllib.loads(body)
        except tomllib.TOMLDecodeError:
            return []
        deps = data.get("dependencies")
        if not isinstance(deps, list):
            return []
        return [n for d in deps if isinstance(d, str) and (n := requirement_name(d))]
    return []
